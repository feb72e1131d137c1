"""The simulation must fail when the core is wrong: break it on purpose and watch it notice."""

import pytest

from quorum.log.api import OffsetAndEpoch
from quorum.raft.core import RaftCore
from quorum.sim.invariants import InvariantViolation
from quorum.sim.scenarios import chaos


def _violations(seeds, run=chaos, **options):
    """How many of ``seeds`` end in an invariant violation (or a scenario's own assertion)."""
    found = 0
    for seed in seeds:
        try:
            run(seed, **options)
        except (InvariantViolation, AssertionError):
            found += 1
    return found


def test_granting_votes_to_stale_candidates_is_caught(monkeypatch):
    monkeypatch.setattr(RaftCore, "_log_up_to_date", lambda self, epoch, offset: True)
    assert _violations(range(60)) > 0


def test_counting_observers_in_the_high_watermark_is_caught(monkeypatch):
    from quorum.raft import progress

    original = progress.LeaderProgress.update_replica

    def count_everyone(self, key, is_voter, fetch_offset, leader_end, now_ms):
        if key.id not in self.voters and key.id >= 0:
            self.voters[key.id] = progress.ReplicaState(key.id)
        return original(self, key, True, fetch_offset, leader_end, now_ms)

    monkeypatch.setattr(progress.LeaderProgress, "update_replica", count_everyone)
    assert _violations(range(60)) > 0


def test_a_follower_acknowledging_before_it_flushes_is_caught(monkeypatch):
    # Sending before flushing is for leaders only: a follower's next Fetch acknowledges its log.
    import dataclasses

    original = RaftCore.ready
    monkeypatch.setattr(RaftCore, "ready", lambda self: dataclasses.replace(
        rd := original(self), flush_after_send=rd.flush))
    assert _violations(range(40), crash_before_flush=0.05) > 0


def test_a_leader_counting_records_it_has_not_flushed_is_caught(monkeypatch):
    # Sending before flushing is safe only because the leader's own unflushed records do not count.
    from quorum.log.memory_log import MemoryLog

    monkeypatch.setattr(MemoryLog, "flushed_offset", property(lambda self: self.end_offset))
    assert _violations(range(40), crash_before_flush=0.05) > 0


def test_sending_before_flushing_is_safe_for_a_leader():
    # The same seeds with the real core: a leader crashing between its send and its flush loses
    # nothing that was committed.
    assert _violations(range(40), crash_before_flush=0.05) == 0


def _snapshot_violations(seeds):
    from quorum.sim.scenarios import catch_up_by_snapshot

    return _violations(seeds, run=catch_up_by_snapshot)


def test_installing_a_snapshot_without_resetting_the_log_is_caught(monkeypatch):
    # The log keeps its old end and start: the wiped node's log start is no snapshot of its own.
    from quorum.log.memory_log import MemoryLog

    monkeypatch.setattr(MemoryLog, "reset_to", lambda self, snapshot: None)
    assert _snapshot_violations(range(5)) == 5


def test_a_snapshot_one_record_short_is_caught(monkeypatch):
    from quorum.sim import cluster

    original = cluster.encode_snapshot
    monkeypatch.setattr(cluster, "encode_snapshot", lambda records, raft=(): original(records[:-1], raft))
    assert _snapshot_violations(range(5)) == 5


def test_a_leader_serving_a_stale_snapshot_is_caught(monkeypatch):
    # Answering a fetch below the log start with the oldest snapshot instead of the newest is fine;
    # with one that does not reach the log start, the fetcher could never continue.
    from quorum.snapshot.memory_store import MemorySnapshotStore

    monkeypatch.setattr(MemorySnapshotStore, "latest", lambda self: OffsetAndEpoch(1, 1))
    assert _snapshot_violations(range(5)) == 5


def _byzantine_violations(seeds):
    from quorum.sim.scenarios import byzantine_peer

    found = 0
    for seed in seeds:
        try:
            byzantine_peer(seed)
        except Exception:  # an invariant, a stalled quorum, or an epoch the log cannot even encode
            found += 1
    return found


def test_believing_the_sender_a_message_names_is_caught(monkeypatch):
    """Without the check that a message's claimed sender is its authenticated sender, the
    Byzantine peer's forged Fetches count towards the high watermark (commits a majority does not
    hold) and its forged EndQuorumEpochs move epochs."""
    from quorum.raft import core

    monkeypatch.setattr(core, "_claimed_sender", lambda msg: -1)
    assert _byzantine_violations(range(40)) > 0


def test_epochs_without_a_bound_are_caught(monkeypatch):
    from quorum.raft import core, limits

    monkeypatch.setattr(limits, "MAX_EPOCH_JUMP", 1 << 40)
    monkeypatch.setattr(limits, "MAX_EPOCH", 1 << 62)
    monkeypatch.setattr(core, "_claimed_sender", lambda msg: -1)
    assert _byzantine_violations(range(40)) > 0


# -- dynamic quorum (KIP-853) -------------------------------------------------------------------
def _membership_violations(seeds):
    from quorum.sim.scenarios import membership_chaos

    return _violations(seeds, run=membership_chaos)


def test_a_second_voter_change_while_one_is_pending_is_caught(monkeypatch):
    from quorum.raft.membership import Membership
    monkeypatch.setattr(Membership, "voter_change_pending", property(lambda self: False))
    assert _membership_violations(range(30)) > 0


def test_a_leader_counting_the_old_voter_set_is_caught(monkeypatch):
    # The new voter set takes effect when it is appended, not when it commits: a leader that keeps
    # counting fetches under the old set commits records that the new majority does not hold.
    from quorum.raft import progress
    original = progress.LeaderProgress.set_voters

    def only_the_first(self, voters, now_ms):
        if not self.voters:
            original(self, voters, now_ms)

    monkeypatch.setattr(progress.LeaderProgress, "set_voters", only_the_first)
    assert _membership_violations(range(10)) > 0


def test_voting_for_a_node_outside_the_voter_set_is_caught(monkeypatch):
    from quorum.raft.core import RaftCore
    monkeypatch.setattr(RaftCore, "_in_recent_voter_sets", lambda self, key: True)
    assert _membership_violations(range(30)) > 0


def test_a_controller_taking_any_scram_iteration_count_is_caught(monkeypatch):
    """The SCRAM invariants (quorum/metadata/invariants.py) see a credential Kafka would refuse."""
    from quorum.controller import api, scram_control
    from quorum.controller.local import LocalController
    from quorum.metadata.invariants import violations

    monkeypatch.setattr(scram_control, "check_iterations", lambda iterations: None)
    c = LocalController()
    c.request(api.AlterUserScramCredentialsRequest(upsertions=(
        api.ScramCredentialUpsertion("alice", "SCRAM-SHA-256", 10, b"salt", bytes(32)),)))
    assert violations(c.core.image) == ["SCRAM credential of 'alice': 10 iterations"]


def test_a_deadline_that_stays_due_is_caught_as_a_livelock(monkeypatch):
    """A core whose next deadline never moves past now would spin a real node's event loop (an
    injected fault in the leader's progress once made check-quorum's deadline do exactly that)."""
    original = RaftCore._next_deadline

    def stuck_when_leading(self):
        return 0 if self.is_leader else original(self)

    monkeypatch.setattr(RaftCore, "_next_deadline", stuck_when_leading)
    with pytest.raises(InvariantViolation, match="livelock"):
        chaos(0)


def test_a_node_taking_its_own_log_end_for_what_a_leader_committed_is_caught(monkeypatch):
    # A controller is "loaded" (it checks logins and ACLs) once it has replayed what a leader first
    # told it was committed; taking its own log end instead counts records no quorum holds.
    original = RaftCore._maybe_finish_rejoin

    def own_log_end(self, leader_hw):
        if self.first_leader_high_watermark is None and leader_hw is not None:
            self.first_leader_high_watermark = self.log.end_offset
        original(self, leader_hw)

    monkeypatch.setattr(RaftCore, "_maybe_finish_rejoin", own_log_end)
    assert _violations(range(60)) > 0
