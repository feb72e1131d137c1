"""The simulation must fail when the core is wrong: break it on purpose and watch it notice."""
import pytest

from quorum.log.api import OffsetAndEpoch
from quorum.raft.core import RaftCore
from quorum.sim.cluster import InvariantViolation
from quorum.sim.scenarios import chaos


def _violations(seeds):
    found = 0
    for seed in seeds:
        try:
            chaos(seed)
        except (InvariantViolation, AssertionError):
            found += 1
    return found


def test_granting_votes_to_stale_candidates_is_caught(monkeypatch):
    monkeypatch.setattr(RaftCore, "_log_up_to_date", lambda self, epoch, offset: True)
    assert _violations(range(60)) > 0


def test_counting_observers_in_the_high_watermark_is_caught(monkeypatch):
    from quorum.raft import progress

    original = progress.LeaderProgress.update_replica

    def count_everyone(self, replica_id, fetch_offset, leader_end, now_ms):
        if replica_id not in self.voters and replica_id >= 0:
            self.voters[replica_id] = progress.ReplicaState(replica_id)
        return original(self, replica_id, fetch_offset, leader_end, now_ms)

    monkeypatch.setattr(progress.LeaderProgress, "update_replica", count_everyone)
    assert _violations(range(60)) > 0


def _snapshot_violations(seeds):
    from quorum.sim.scenarios import catch_up_by_snapshot

    found = 0
    for seed in seeds:
        try:
            catch_up_by_snapshot(seed)
        except (InvariantViolation, AssertionError):
            found += 1
    return found


def test_installing_a_snapshot_without_resetting_the_log_is_caught(monkeypatch):
    # The log keeps its old end and start: the wiped node's log start is no snapshot of its own.
    from quorum.log.memory_log import MemoryLog

    monkeypatch.setattr(MemoryLog, "reset_to", lambda self, snapshot: None)
    assert _snapshot_violations(range(5)) == 5


def test_a_snapshot_one_record_short_is_caught(monkeypatch):
    from quorum.sim import cluster

    original = cluster.encode_snapshot
    monkeypatch.setattr(cluster, "encode_snapshot", lambda records: original(records[:-1]))
    assert _snapshot_violations(range(5)) == 5


def test_a_leader_serving_a_stale_snapshot_is_caught(monkeypatch):
    # Answering a fetch below the log start with the oldest snapshot instead of the newest is fine;
    # with one that does not reach the log start, the fetcher could never continue.
    from quorum.snapshot.memory_store import MemorySnapshotStore

    monkeypatch.setattr(MemorySnapshotStore, "latest", lambda self: OffsetAndEpoch(1, 1))
    assert _snapshot_violations(range(5)) == 5
