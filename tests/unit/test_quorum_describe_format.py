"""How ``sparkraft quorum describe`` turns a QuorumInfo into Kafka's fields and tables."""
from __future__ import annotations

from quorum.log.voter_set import Endpoint
from quorum.raft.messages import ReplicaDescription
from quorum.rpc.raft_client import QuorumInfo
from sparkraft.commands.quorum import (
    REPLICATION_KEYS,
    STATUS_KEYS,
    format_replication,
    format_status,
    replication_rows,
    status_fields,
)

INFO = QuorumInfo(
    cluster_id="AAAAAAAAAAAAAAAAAAAAAA", leader_id=2, leader_epoch=7, high_watermark=95,
    voters=(ReplicaDescription(1, 90, 1_000_500, 1_000_000, "BBBBBBBBBBBBBBBBBBBBBQ",
                               (Endpoint("CONTROLLER", "h1", 9093),)),
            ReplicaDescription(2, 100, 1_001_000, 1_001_000),
            ReplicaDescription(3, 100, 1_000_900, 1_000_900)),
    observers=(ReplicaDescription(101, 40, None, None, "CCCCCCCCCCCCCCCCCCCCCQ"),))


def test_status_fields_follow_kafkas_tool():
    fields = status_fields(INFO)
    assert tuple(fields) == STATUS_KEYS
    assert fields["LeaderId"] == 2 and fields["LeaderEpoch"] == 7 and fields["HighWatermark"] == 95
    assert fields["MaxFollowerLag"] == 10  # leader's end - the most lagging voter's end
    assert fields["MaxFollowerLagTimeMs"] == 1_000  # leader caught-up time - laggard's
    assert fields["CurrentVoters"] == [
        {"id": 1, "directoryId": "BBBBBBBBBBBBBBBBBBBBBQ", "endpoints": ["CONTROLLER://h1:9093"]},
        {"id": 2, "directoryId": "AAAAAAAAAAAAAAAAAAAAAA", "endpoints": []},  # a static voter: Kafka's zero UUID
        {"id": 3, "directoryId": "AAAAAAAAAAAAAAAAAAAAAA", "endpoints": []}]
    assert fields["CurrentObservers"] == [{"id": 101, "directoryId": "CCCCCCCCCCCCCCCCCCCCCQ"}]


def test_no_lag_and_unknown_times():
    caught_up = QuorumInfo("c", 1, 1, 5, (ReplicaDescription(1, 5, 10, 10), ReplicaDescription(2, 5, 9, 9)), ())
    assert status_fields(caught_up)["MaxFollowerLag"] == 0
    assert status_fields(caught_up)["MaxFollowerLagTimeMs"] == 0
    never = QuorumInfo("c", 1, 1, 5, (ReplicaDescription(1, 5, 10, 10), ReplicaDescription(2, 0, None, None)), ())
    assert status_fields(never)["MaxFollowerLag"] == 5
    assert status_fields(never)["MaxFollowerLagTimeMs"] == -1


def test_replication_rows_leader_first_then_followers_then_observers():
    rows = replication_rows(INFO)
    assert all(tuple(r) == REPLICATION_KEYS for r in rows)
    assert [(r["NodeId"], r["Status"], r["Lag"]) for r in rows] == [
        (2, "Leader", 0), (1, "Follower", 10), (3, "Follower", 0), (101, "Observer", 60)]
    assert rows[1]["DirectoryId"] == "BBBBBBBBBBBBBBBBBBBBBQ" and rows[-1]["DirectoryId"] == "CCCCCCCCCCCCCCCCCCCCCQ"
    assert rows[-1]["LastFetchTimestamp"] == -1 and rows[-1]["LastCaughtUpTimestamp"] == -1


def test_text_forms_are_aligned():
    status = format_status(INFO).splitlines()
    assert status[0] == "ClusterId:              AAAAAAAAAAAAAAAAAAAAAA"
    assert status[6].startswith('CurrentVoters:          [{"id": 1, "directoryId": "BBBBBBBBBBBBBBBBBBBBBQ", '
                                '"endpoints": ["CONTROLLER://h1:9093"]}, {"id": 2, ')
    table = format_replication(INFO).splitlines()
    assert table[0].split() == list(REPLICATION_KEYS)
    # every column starts at the same position on every line
    starts = [table[0].index(k) for k in REPLICATION_KEYS]
    for line in table[1:]:
        for start in starts[1:]:
            assert line[start - 1] == " " and line[start] != " "
