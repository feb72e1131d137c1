"""What each method number of the wire carries: the gRPC services' own protobuf messages (Raft's,
and the Controller's), so both transports share one schema and one converter."""
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

# The Controller service's methods, by number: fixed once given (a client and a server of different
# versions agree on them). Which of them clients send on the wire is the request registry's say
# (quorum/controller/registry.py, RequestRow.wire); a test checks every registry method has one.
CONTROLLER_NUMBERS: dict[str, int] = {
    "RegisterBroker": 32, "BrokerHeartbeat": 33, "UnregisterBroker": 34, "CreateTopics": 35, "DeleteTopics": 36,
    "CreatePartitions": 37, "ElectLeaders": 38, "AlterPartition": 39, "AlterPartitionReassignments": 40,
    "ListPartitionReassignments": 41, "IncrementalAlterConfigs": 42, "DescribeConfigs": 43, "ListTopics": 44,
    "DescribeTopics": 45, "DescribeCluster": 46, "UpdateFeatures": 47, "DescribeFeatures": 48,
    "AlterClientQuotas": 49, "DescribeClientQuotas": 50, "AllocateProducerIds": 51, "CreateAcls": 52,
    "DeleteAcls": 53, "DescribeAcls": 54, "AlterUserScramCredentials": 55, "DescribeUserScramCredentials": 56,
    "DescribeMigration": 57, "FinalizeMigration": 58,
}

METHODS: dict[int, Method] = {m.number: m for m in (
    HELLO,
    Method(1, "Vote", pb.VoteRequest, pb.VoteResponse),
    Method(2, "BeginQuorumEpoch", pb.BeginQuorumEpochRequest, pb.BeginQuorumEpochResponse),
    Method(3, "EndQuorumEpoch", pb.EndQuorumEpochRequest, pb.EndQuorumEpochResponse),
    Method(4, "Fetch", pb.FetchRequest, pb.FetchResponse),
    Method(5, "FetchSnapshot", pb.FetchSnapshotRequest, pb.FetchSnapshotResponse),
    Method(6, "Append", pb.AppendRequest, pb.AppendResponse),
    # A Controller request a broker forwards for its client, in an envelope naming that client.
    Method(31, "Forward", cpb.ForwardedRequest, cpb.ForwardedResponse),
    *(Method(number, name, getattr(cpb, f"{name}Request"), getattr(cpb, f"{name}Response"))
      for name, number in CONTROLLER_NUMBERS.items()),
)}

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS.values()}
