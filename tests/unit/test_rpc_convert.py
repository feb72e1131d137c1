"""Every Raft message survives dataclass -> protobuf -> bytes -> protobuf -> dataclass unchanged,
including the wire's conventions: -1 for "none", Kafka error codes, optional sub-messages."""
from __future__ import annotations

import pytest

from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import raft_pb2 as pb
from quorum.log.api import OffsetAndEpoch
from quorum.log.voter_set import Endpoint
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    QuorumDescription,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)
from quorum.rpc import convert

CID = "AAAAAAAAAAAAAAAAAAAAAA"

MESSAGES = [
    VoteRequest(CID, 5, 2, 4, 120),
    VoteRequest(CID, 6, 3, 0, 0, pre_vote=True),
    VoteRequest(CID, 6, 3, 0, 0, False, "cand-dir-AAAAAAAAAAAAA", "voter-dir-BBBBBBBBBBBB"),  # KIP-853 keys
    VoteResponse(Errors.NONE, 5, None, True),
    VoteResponse(Errors.NONE, 5, 1, False, pre_vote=True),
    VoteResponse(Errors.INCONSISTENT_CLUSTER_ID, 7, 0, False),  # node 0 is a valid leader id
    BeginQuorumEpochRequest(CID, 3, 1),
    BeginQuorumEpochRequest(CID, 3, 1, "voter-dir-BBBBBBBBBBBB"),
    BeginQuorumEpochResponse(Errors.NONE, 3, 1),
    BeginQuorumEpochResponse(Errors.FENCED_LEADER_EPOCH, 4, None),
    EndQuorumEpochRequest(CID, 3, 1),
    EndQuorumEpochRequest(CID, 3, 1, (3, 2)),
    EndQuorumEpochRequest(CID, 3, 1, (3, 2), ("kx3ZaHNxQ1-7s2m9dE5PFw", None)),
    EndQuorumEpochResponse(Errors.NONE, 3, None),
    EndQuorumEpochResponse(Errors.INCONSISTENT_VOTER_SET, 3, 2),
    FetchRequest(CID, 2, 3, 1000, 2),
    FetchRequest(CID, 2, -1, 0, 0, max_wait_ms=0, max_bytes=1024),  # anonymous observer
    FetchRequest(CID, 2, 3, 1000, 2, replica_directory_id="replica-dir-CCCCCCCCCC"),
    FetchResponse(Errors.NONE, 2, 1),
    FetchResponse(Errors.NONE, 2, 1, high_watermark=0, log_start_offset=10, records=b"\x00\x01batch"),
    FetchResponse(Errors.NONE, 2, 1, high_watermark=55, diverging=OffsetAndEpoch(40, 1)),
    FetchResponse(Errors.NONE, 2, 1, high_watermark=55, snapshot_id=OffsetAndEpoch(0, 0)),
    FetchResponse(Errors.NOT_LEADER_OR_FOLLOWER, 3, None),
    FetchResponse(Errors.UNKNOWN_LEADER_EPOCH, 3, 2, high_watermark=None, log_start_offset=0),
    FetchSnapshotRequest(CID, 4, 2, OffsetAndEpoch(900, 3), 8 << 20, 1024),
    FetchSnapshotRequest(CID, 4, -1, OffsetAndEpoch(900, 3), 0),
    FetchSnapshotRequest(CID, 4, 2, OffsetAndEpoch(900, 3), 0, replica_directory_id="replica-dir-CCCCCCCCCC"),
    FetchSnapshotResponse(Errors.NONE, 4, 1, OffsetAndEpoch(900, 3), 12345, 1024, b"chunk"),
    FetchSnapshotResponse(Errors.SNAPSHOT_NOT_FOUND, 4, 1, OffsetAndEpoch(900, 3), position=7),
    FetchSnapshotResponse(Errors.NOT_LEADER_OR_FOLLOWER, 5, None),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip_through_bytes(msg):
    proto = convert.to_proto(msg)
    wire = proto.SerializeToString()
    back = type(proto).FromString(wire)
    assert convert.from_proto(back) == msg


def test_every_message_type_is_covered():
    covered = {type(m) for m in MESSAGES}
    assert covered == {VoteRequest, VoteResponse, BeginQuorumEpochRequest, BeginQuorumEpochResponse,
                       EndQuorumEpochRequest, EndQuorumEpochResponse, FetchRequest, FetchResponse,
                       FetchSnapshotRequest, FetchSnapshotResponse}


def test_wire_conventions():
    assert convert.to_proto(VoteResponse(Errors.NONE, 1, None, False)).leader_id == -1
    assert convert.to_proto(FetchResponse(Errors.NONE, 1, 2)).high_watermark == -1
    assert convert.to_proto(FetchResponse(Errors.FENCED_LEADER_EPOCH, 1, 2)).error == 74
    m = convert.to_proto(FetchResponse(Errors.NONE, 1, 2))
    assert not m.HasField("diverging") and not m.HasField("snapshot_id")
    assert convert.to_proto(VoteRequest(CID, 1, 1, 0, 0), dest=3).voter_id == 3
    # an error code this version does not know is not fatal
    assert convert.from_proto(pb.VoteResponse(error=9999, epoch=1, leader_id=-1)).error is Errors.UNKNOWN_SERVER_ERROR


def test_request_source():
    assert convert.request_source(VoteRequest(CID, 1, 2, 0, 0)) == 2
    assert convert.request_source(BeginQuorumEpochRequest(CID, 1, 3)) == 3
    assert convert.request_source(EndQuorumEpochRequest(CID, 1, 1)) == 1
    assert convert.request_source(FetchRequest(CID, 1, -1, 0, 0)) == -1
    with pytest.raises(TypeError):
        convert.request_source(VoteResponse(Errors.NONE, 1, None, False))


def test_describe_quorum_round_trip():
    desc = QuorumDescription(1, 4, 120,
                             voters=(ReplicaDescription(1, 120, 1_700_000_000_000, 1_700_000_000_000),
                                     ReplicaDescription(2, 100, 1_700_000_000_100, None),
                                     ReplicaDescription(3, 0, None, None, "dir-of-three-AAAAAAAAA",
                                                        (Endpoint("CONTROLLER", "::1", 9093),))),
                             observers=(ReplicaDescription(101, 50, 1_700_000_000_200, 1_700_000_000_000),))
    m = pb.DescribeQuorumResponse.FromString(convert.describe_response(desc, CID).SerializeToString())
    assert m.error == 0 and m.cluster_id == CID
    assert convert.description_from_proto(m) == desc
    assert m.current_voters[2].last_fetch_timestamp == -1


def test_describe_and_append_errors_carry_the_leader():
    m = convert.describe_error(Errors.NOT_LEADER_OR_FOLLOWER, "not the leader", CID, leader_id=2, epoch=5,
                               leader_endpoint="127.0.0.1:9094")
    assert (m.error, m.leader_id, m.leader_epoch, m.leader_endpoint) == (6, 2, 5, "127.0.0.1:9094")
    m = convert.describe_error(Errors.NOT_LEADER_OR_FOLLOWER, "no leader", CID)
    assert (m.leader_id, m.leader_endpoint) == (-1, "")
    a = convert.append_error(Errors.NOT_LEADER_OR_FOLLOWER, "x", leader_id=3, epoch=2, leader_endpoint="h:1")
    assert (a.error, a.leader_id, a.epoch, a.leader_endpoint, a.base_offset) == (6, 3, 2, "h:1", -1)
    ok = convert.append_response(10, 12, 2, 1)
    assert (ok.error, ok.base_offset, ok.last_offset, ok.epoch, ok.leader_id) == (0, 10, 12, 2, 1)


def test_format_endpoint():
    assert convert.format_endpoint("127.0.0.1", 9093) == "127.0.0.1:9093"
    assert convert.format_endpoint("::1", 9093) == "[::1]:9093"


def test_not_a_message():
    with pytest.raises(TypeError):
        convert.to_proto(object())
    with pytest.raises(TypeError):
        convert.from_proto(pb.AppendRequest())
