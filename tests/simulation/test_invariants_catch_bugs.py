"""The simulation must fail when the core is wrong: break it on purpose and watch it notice."""
import pytest

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
