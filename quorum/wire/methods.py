"""What each method number of the wire carries: the gRPC services' own protobuf messages, so both
transports share one schema and one converter. Raft's methods are here; the Controller service's
are its requests' (each request's number is in its registry row, quorum/controller/registry.py),
joined to these in quorum/rpc/wire_methods.py, which servers and clients use."""
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

RAFT_METHODS: dict[int, Method] = {m.number: m for m in (
    HELLO,
    Method(1, "Vote", pb.VoteRequest, pb.VoteResponse),
    Method(2, "BeginQuorumEpoch", pb.BeginQuorumEpochRequest, pb.BeginQuorumEpochResponse),
    Method(3, "EndQuorumEpoch", pb.EndQuorumEpochRequest, pb.EndQuorumEpochResponse),
    Method(4, "Fetch", pb.FetchRequest, pb.FetchResponse),
    Method(5, "FetchSnapshot", pb.FetchSnapshotRequest, pb.FetchSnapshotResponse),
    Method(6, "Append", pb.AppendRequest, pb.AppendResponse),
    # A Controller request a broker forwards for its client, in an envelope naming that client.
    Method(31, "Forward", cpb.ForwardedRequest, cpb.ForwardedResponse),
)}
FIRST_CONTROLLER_NUMBER = 32  # the Controller service's requests are numbered from here (to 255)
