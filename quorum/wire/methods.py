"""What each method number of the wire carries: the gRPC services' own protobuf messages (Raft's,
and the Controller's broker requests), so both transports share one schema and one converter."""
from __future__ import annotations

from dataclasses import dataclass

from quorum.gen.sparkraft.v1 import controller_pb2 as cpb
from quorum.gen.sparkraft.v1 import raft_pb2 as pb


@dataclass(frozen=True, slots=True)
class Method:
    number: int
    name: str  # the gRPC method of the same request
    request: type
    response: type


HELLO = Method(0, "Hello", pb.WireHello, pb.WireHello)

METHODS: dict[int, Method] = {m.number: m for m in (
    HELLO,
    Method(1, "Vote", pb.VoteRequest, pb.VoteResponse),
    Method(2, "BeginQuorumEpoch", pb.BeginQuorumEpochRequest, pb.BeginQuorumEpochResponse),
    Method(3, "EndQuorumEpoch", pb.EndQuorumEpochRequest, pb.EndQuorumEpochResponse),
    Method(4, "Fetch", pb.FetchRequest, pb.FetchResponse),
    Method(5, "FetchSnapshot", pb.FetchSnapshotRequest, pb.FetchSnapshotResponse),
    Method(6, "Append", pb.AppendRequest, pb.AppendResponse),
    # The Controller service's broker path (a heartbeat every broker.heartbeat.interval.ms per broker).
    Method(32, "RegisterBroker", cpb.RegisterBrokerRequest, cpb.RegisterBrokerResponse),
    Method(33, "BrokerHeartbeat", cpb.BrokerHeartbeatRequest, cpb.BrokerHeartbeatResponse),
)}

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS.values()}
