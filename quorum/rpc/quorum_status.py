"""DescribeQuorum's answer as Kafka's ``kafka-metadata-quorum`` tool shows it: the ``--status``
object and the ``--replication`` rows (``sparkraft quorum describe``, the demo, the console).

Timestamps are wall-clock ms, -1 when unknown; an unknown directory id (a static voter's) is Kafka's
zero UUID, as Kafka prints them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.log.voter_set import ZERO_UUID
from quorum.rpc.convert import format_listener

if TYPE_CHECKING:
    from quorum.rpc.raft_client import QuorumInfo

STATUS_KEYS = ("ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
               "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers")
REPLICATION_KEYS = ("NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                    "Status")


def _ts(ms) -> int:
    return -1 if ms is None else ms


def status_fields(info: "QuorumInfo") -> dict:
    """The --status object, computed as Kafka's tool does (lag against the leader's log end)."""
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    laggard = min(info.voters, key=lambda v: v.log_end_offset, default=None)
    if leader is None or laggard is None:
        max_lag, max_lag_ms = 0, -1
    else:
        max_lag = leader.log_end_offset - laggard.log_end_offset
        if laggard.replica_id == leader.replica_id or max_lag == 0:
            max_lag_ms = 0
        elif leader.last_caught_up_ms is not None and laggard.last_caught_up_ms is not None:
            max_lag_ms = leader.last_caught_up_ms - laggard.last_caught_up_ms
        else:
            max_lag_ms = -1
    return {
        "ClusterId": info.cluster_id,
        "LeaderId": info.leader_id,
        "LeaderEpoch": info.leader_epoch,
        "HighWatermark": info.high_watermark,
        "MaxFollowerLag": max_lag,
        "MaxFollowerLagTimeMs": max_lag_ms,
        "CurrentVoters": [{"id": v.replica_id, "directoryId": v.directory_id or ZERO_UUID,
                           "endpoints": [format_listener(e) for e in v.endpoints]} for v in info.voters],
        "CurrentObservers": [{"id": o.replica_id, "directoryId": o.directory_id or ZERO_UUID}
                             for o in info.observers],
    }


def replication_rows(info: "QuorumInfo") -> list[dict]:
    """The --replication rows: the leader first, then the other voters, then observers."""
    leader_end = next((v.log_end_offset for v in info.voters if v.replica_id == info.leader_id), 0)

    def row(r, status: str) -> dict:
        return {"NodeId": r.replica_id, "DirectoryId": r.directory_id or ZERO_UUID, "LogEndOffset": r.log_end_offset,
                "Lag": max(0, leader_end - r.log_end_offset),
                "LastFetchTimestamp": _ts(r.last_fetch_ms), "LastCaughtUpTimestamp": _ts(r.last_caught_up_ms),
                "Status": status}

    voters = sorted(info.voters, key=lambda v: (v.replica_id != info.leader_id, v.replica_id))
    return ([row(v, "Leader" if v.replica_id == info.leader_id else "Follower") for v in voters]
            + [row(o, "Observer") for o in info.observers])
