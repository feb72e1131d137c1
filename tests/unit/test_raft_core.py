"""RaftCore driven by hand, one message at a time, asserting the whole outcome of each step.

Node 1 is the core under test; nodes 2 and 3 are played by the test.
"""
import pytest

from quorum.errors import Errors, NotLeaderError
from quorum.log.api import OffsetAndEpoch
from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.raft.core import RaftCore
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.settings import RaftSettings
from quorum.snapshot.memory_store import MemorySnapshotStore

CID = "test-cluster-000000000"
S = RaftSettings()


def make(election=ElectionState.empty(), log=None, node_id=1, voters=(1, 2, 3), now=0, settings=S):
    return RaftCore(node_id, voters, CID, log or MemoryLog(), election, now, settings, snapshots=MemorySnapshotStore())


def drain(core, now=0):
    """Carry out every Ready like a driver; return (persisted states, sent messages)."""
    states, sent = [], []
    while core.has_ready():
        rd = core.ready()
        if rd.election_state is not None:
            states.append(rd.election_state)
        if rd.flush:
            core.log.flush()
        sent.extend(rd.messages)
        core.advance(rd, now)
    return states, sent


def reply_to(sent, corr):
    return [o.message for o in sent if o.corr == corr]


def vote(epoch, candidate, last_epoch=0, last_offset=0, pre=False, cluster=CID):
    return VoteRequest(cluster, epoch, candidate, last_epoch, last_offset, pre)


def make_leader(now=0, settings=S):
    """Node 1 wins epoch 1 with node 2's vote and appends its LeaderChange record."""
    core = make(settings=settings)
    drain(core)
    now = S.election_timeout_ms * 2
    core.tick(now)
    assert core.state_name == "Prospective"
    _, sent = drain(core, now)
    prevotes = [o for o in sent if isinstance(o.message, VoteRequest)]
    assert {o.dest for o in prevotes} == {2, 3} and all(o.message.pre_vote for o in prevotes)
    core.receive(2, prevotes[0].corr if prevotes[0].dest == 2 else prevotes[1].corr,
                 VoteResponse(Errors.NONE, 0, None, True, True), now)
    assert core.state_name == "Candidate" and core.epoch == 1
    states, sent = drain(core, now)
    assert states == [ElectionState(1, None, 1)]  # voted for itself, on disk before asking
    votes = {o.dest: o.corr for o in sent if isinstance(o.message, VoteRequest)}
    core.receive(2, votes[2], VoteResponse(Errors.NONE, 1, None, True, False), now)
    assert core.is_leader and core.log.end_offset == 1  # the LeaderChange control record
    drain(core, now)
    return core, now


def test_vote_is_granted_once_per_epoch_and_persisted_before_the_answer():
    core = make()
    drain(core)
    core.receive(2, 7, vote(1, 2), 10)
    rd = core.ready()
    assert rd.election_state == ElectionState(1, None, 2)
    assert [m.message for m in rd.messages] == [VoteResponse(Errors.NONE, 1, None, True, False)]
    core.advance(rd, 10)
    assert core.state_name == "Voted"
    core.receive(3, 8, vote(1, 3), 11)
    states, sent = drain(core, 11)
    assert states == [] and reply_to(sent, 8) == [VoteResponse(Errors.NONE, 1, None, False, False)]
    core.receive(2, 9, vote(1, 2), 12)  # the same candidate asking again gets the same answer
    assert reply_to(drain(core, 12)[1], 9)[0].granted


def test_vote_refused_to_a_candidate_with_a_shorter_log_but_epoch_still_moves():
    log = MemoryLog()
    log.append_as_leader([b"x", b"y"], 1, 0)
    log.flush()
    core = make(ElectionState(1, 3, None), log)
    drain(core)
    core.receive(2, 1, vote(2, 2, last_epoch=1, last_offset=1), 5)
    states, sent = drain(core, 5)
    assert reply_to(sent, 1)[0].granted is False
    assert states == [ElectionState(2, None, None)] and core.state_name == "Unattached"


def test_pre_vote_changes_nothing():
    core = make(ElectionState(3, None, None))
    drain(core)
    core.receive(2, 1, vote(4, 2, pre=True), 5)
    states, sent = drain(core, 5)
    assert states == [] and core.epoch == 3 and core.state_name == "Unattached"
    assert reply_to(sent, 1) == [VoteResponse(Errors.NONE, 3, None, True, True)]


def test_follower_with_a_live_leader_refuses_pre_votes():
    core = make(ElectionState(1, 2, None))
    _, sent = drain(core)
    fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
    core.receive(2, fetch.corr, FetchResponse(Errors.NONE, 1, 2, 0, 0), 2)
    drain(core, 2)
    core.receive(3, 99, vote(2, 3, pre=True), 3)
    assert reply_to(drain(core, 3)[1], 99)[0].granted is False


def test_a_leader_that_refuses_connections_is_given_up_well_before_the_fetch_timeout():
    """A SIGKILLed leader's port refuses at once: after three failed Fetches in a row the follower
    grants pre-votes and campaigns within half an election timeout, not after the fetch timeout."""
    core = make(ElectionState(1, 2, None))
    _, sent = drain(core)
    fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
    core.receive(2, fetch.corr, FetchResponse(Errors.NONE, 1, 2, 0, 0), 2)
    now = 2
    for failure in range(3):
        _, sent = drain(core, now)
        fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
        core.receive(3, 90 + failure, vote(2, 3, pre=True), now)
        granted = reply_to(drain(core, now)[1], 90 + failure)[0].granted
        assert granted is False, f"pre-vote granted after only {failure} failures"
        core.request_failed(2, fetch.corr, now)
        now += S.retry_backoff_ms
        core.tick(now)
    assert core.state_name == "Follower"
    core.receive(3, 99, vote(2, 3, pre=True), now)
    assert reply_to(drain(core, now)[1], 99)[0].granted is True
    core.tick(now + S.election_timeout_ms // 2)
    assert core.state_name == "Prospective", "campaigns within half an election timeout"
    assert now + S.election_timeout_ms // 2 < S.fetch_timeout_ms


def test_an_answering_leader_resets_the_failure_count():
    core = make(ElectionState(1, 2, None))
    now = 0
    for round_ in range(4):  # two failures, an answer, two failures...: never three in a row
        _, sent = drain(core, now)
        fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
        if round_ == 2:
            core.receive(2, fetch.corr, FetchResponse(Errors.NONE, 1, 2, 0, 0), now)
        else:
            core.request_failed(2, fetch.corr, now)
        now += S.retry_backoff_ms
        core.tick(now)
    core.tick(now + S.election_timeout_ms)
    assert core.state_name == "Follower"


def test_a_request_from_another_cluster_is_refused_and_changes_nothing():
    core = make(ElectionState(1, None, None))
    drain(core)
    core.receive(2, 1, vote(5, 2, cluster="another-cluster-00000000"), 3)
    states, sent = drain(core, 3)
    assert states == [] and core.epoch == 1
    assert reply_to(sent, 1)[0].error is Errors.INCONSISTENT_CLUSTER_ID


def test_a_voter_that_is_not_in_the_voter_set_gets_no_vote():
    core = make()
    drain(core)
    core.receive(9, 1, vote(1, 9), 3)
    states, sent = drain(core, 3)
    assert states == [] and reply_to(sent, 1)[0].error is Errors.INCONSISTENT_VOTER_SET


def test_leader_commits_only_after_a_majority_holds_its_leader_change():
    core, now = make_leader()
    assert core.high_watermark == 0
    # Observer 101 catching up does not count towards the majority.
    core.receive(101, 1, FetchRequest(CID, 1, 101, 1, 1, 0), now)
    drain(core, now)
    assert core.high_watermark == 0
    core.receive(2, 2, FetchRequest(CID, 1, 2, 1, 1, 0), now)
    _, sent = drain(core, now)
    assert core.high_watermark == 1
    assert reply_to(sent, 2)[0].high_watermark == 1


def test_leader_counts_its_own_offset_only_once_flushed():
    core, now = make_leader()
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 0), now)
    drain(core, now)
    last = core.propose([b"a"], now)
    assert last == 1
    core.tick(now)
    rd = core.ready()
    assert rd.flush and core.log.flushed_offset == 1
    # Follower 2 already has offset 1 (it fetched it); without our flush no commit.
    core.receive(2, 2, FetchRequest(CID, 1, 2, 2, 1, 0), now)
    assert core.high_watermark == 1
    core.log.flush()
    core.advance(rd, now)
    assert core.high_watermark == 2


def test_only_a_leader_sends_before_it_flushes():
    # Leader: the fetch it was holding is answered with the new record before its own fsync.
    core, now = make_leader()
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 0), now)
    drain(core, now)
    core.receive(2, 2, FetchRequest(CID, 1, 2, 1, 1, 500), now)  # caught up: held as a long poll
    core.propose([b"a"], now)
    core.tick(now)
    rd = core.ready()
    assert rd.flush and rd.flush_after_send and reply_to(rd.messages, 2)[0].records
    core.log.flush()
    core.advance(rd, now)
    # Follower: its next Fetch acknowledges what it appended, so it must flush first.
    follower = make(ElectionState(1, 2, None))
    _, sent = drain(follower)
    fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
    leader_log = MemoryLog()
    leader_log.append_as_leader([b"x"], 1, 0)
    follower.receive(2, fetch.corr, FetchResponse(Errors.NONE, 1, 2, 0, 0, records=leader_log.read(0, 1 << 20)), 1)
    rd = follower.ready()
    assert rd.flush and not rd.flush_after_send
    assert any(isinstance(o.message, FetchRequest) for o in rd.messages)


def test_follower_truncates_to_the_diverging_epoch_and_refuses_to_cut_below_its_high_watermark():
    log = MemoryLog()
    log.append_as_leader([b"a"], 1, 0)
    log.append_as_leader([b"b", b"c"], 2, 0)
    log.flush()
    core = make(ElectionState(3, 2, None), log)
    _, sent = drain(core)
    fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (3, 2)
    core.receive(2, fetch.corr, FetchResponse(Errors.NONE, 3, 2, 1, 0, diverging=OffsetAndEpoch(1, 1)), 2)
    assert core.log.end_offset == 1 and core.log.last_epoch == 1
    _, sent = drain(core, 2)
    fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
    core.receive(2, fetch.corr, FetchResponse(Errors.NONE, 3, 2, 1, 0), 2)
    assert core.high_watermark == 1
    # Now claim offset 0 diverged: below our high watermark 1, which Raft forbids. Refused and
    # reported, never obeyed, never raised out of the core.
    _, sent = drain(core, 2)
    fetch = next(o for o in sent if isinstance(o.message, FetchRequest))
    core.receive(2, fetch.corr, FetchResponse(Errors.NONE, 3, 2, 1, 0, diverging=OffsetAndEpoch(0, 0)), 3)
    assert core.log.end_offset == 1 and core.high_watermark == 1
    assert [v[0] for v in core.ready().violations] == [2]


def test_leader_answers_a_diverged_fetch_with_where_to_cut():
    core, now = make_leader()
    core.receive(2, 5, FetchRequest(CID, 1, 2, 4, 0, 0), now)  # claims 4 records of epoch 0
    resp = reply_to(drain(core, now)[1], 5)[0]
    assert resp.diverging == OffsetAndEpoch(0, 0) and resp.records == b""


def test_fetch_with_a_stale_epoch_is_fenced():
    core, now = make_leader()
    core.receive(2, 5, FetchRequest(CID, 0, 2, 0, 0, 0), now)
    resp = reply_to(drain(core, now)[1], 5)[0]
    assert resp.error is Errors.FENCED_LEADER_EPOCH and resp.epoch == 1 and resp.leader_id == 1


def test_empty_fetch_is_held_until_data_arrives():
    core, now = make_leader()
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 500), now)
    _, sent = drain(core, now)
    assert reply_to(sent, 1) == []  # this fetch committed: held the high watermark's linger...
    core.tick(now + S.high_watermark_linger_ms)
    assert reply_to(drain(core, now + 1)[1], 1)[0].high_watermark == 1  # ...then answered with it
    core.receive(2, 2, FetchRequest(CID, 1, 2, 1, 1, 500), now + 1)
    assert reply_to(drain(core, now + 1)[1], 2) == []  # nothing new: held
    core.propose([b"x"], now + 2)
    resp = reply_to(drain(core, now + 2)[1], 2)
    assert resp and resp[0].records  # answered with the new record


def test_a_voter_learns_a_moved_high_watermark_from_the_next_records_or_after_the_linger():
    """A voter's fetch that moves the high watermark is held, not answered at once: the next
    records carry the new high watermark (one answer instead of two), and without any the fetch
    is answered when the linger ends."""
    core, now = make_leader()
    core.receive(3, 7, FetchRequest(CID, 1, 3, 1, 1, 500), now)  # commits offset 0
    assert core.high_watermark == 1 and reply_to(drain(core, now)[1], 7) == []
    core.tick(now + S.high_watermark_linger_ms - 1)
    assert reply_to(drain(core, now)[1], 7) == []
    core.tick(now + S.high_watermark_linger_ms)  # nothing else came: answered when the linger ends
    (answer,) = reply_to(drain(core, now + S.high_watermark_linger_ms)[1], 7)
    assert answer.high_watermark == 1 and not answer.records
    now += S.high_watermark_linger_ms
    core.propose([b"next"], now)
    core.receive(3, 8, FetchRequest(CID, 1, 3, 1, 1, 500), now)
    drain(core, now)
    core.receive(3, 9, FetchRequest(CID, 1, 3, 2, 1, 500), now)  # commits offset 1: held again
    core.receive(2, 1, FetchRequest(CID, 1, 2, 2, 1, 500), now)
    assert core.high_watermark == 2 and reply_to(drain(core, now)[1], 9) == []
    core.propose([b"after"], now)  # records before the linger ends carry the new high watermark
    sent = drain(core, now)[1]
    answers = reply_to(sent, 9) + reply_to(sent, 1)
    assert len(answers) == 2 and all(a.records and a.high_watermark == 2 for a in answers)


def test_without_a_linger_a_moved_high_watermark_is_answered_at_once_as_kafka_does():
    core, now = make_leader(settings=RaftSettings(high_watermark_linger_ms=0))
    core.receive(3, 7, FetchRequest(CID, 1, 3, 1, 1, 500), now)
    assert [r.high_watermark for r in reply_to(drain(core, now)[1], 7)] == [1]


def test_an_observer_learns_a_moved_high_watermark_at_once():
    """Brokers are observers: their read-your-writes waits for the high watermark, so they are
    not held for the linger."""
    core, now = make_leader()
    core.receive(101, 5, FetchRequest(CID, 1, 101, 1, 1, 500), now)  # parked at the end
    assert reply_to(drain(core, now)[1], 5) == []
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 500), now)  # node 2 commits offset 0
    sent = drain(core, now)[1]
    assert [r.high_watermark for r in reply_to(sent, 5)] == [1] and reply_to(sent, 1) == []


def test_a_fetch_that_knows_an_older_high_watermark_is_answered_at_once():
    """KIP-1166: an observer's fetch at the end of the log, sent before the high watermark moved
    and arriving after, is answered at once with the new one instead of being held."""
    core, now = make_leader()
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 500), now)
    drain(core, now)
    assert core.high_watermark == 1
    # an observer that has the whole log (offset 1) but knows high watermark 0
    core.receive(101, 2, FetchRequest(CID, 1, 101, 1, 1, 500, high_watermark=0), now + 1)
    resp = reply_to(drain(core, now + 1)[1], 2)
    assert resp and resp[0].high_watermark == 1 and not resp[0].records
    # knowing the current one, or not saying (the core's own followers): held as before
    core.receive(101, 3, FetchRequest(CID, 1, 101, 1, 1, 500, high_watermark=1), now + 2)
    core.receive(3, 4, FetchRequest(CID, 1, 3, 1, 1, 500), now + 2)
    sent = drain(core, now + 2)[1]
    assert reply_to(sent, 3) == [] and reply_to(sent, 4) == []


def test_proposals_linger_into_one_batch_while_a_batch_is_in_flight():
    core, now = make_leader()
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 0), now)
    drain(core, now)
    core.propose([b"first"], now)  # pipeline idle: appended at once
    assert core.log.end_offset == 2
    for i in range(5):
        core.propose([f"p{i}".encode()], now + 1)
    assert core.log.end_offset == 2  # lingering
    core.tick(now + 1 + S.append_linger_ms)
    assert core.log.end_offset == 7
    assert [len(b.records) for b in core.log.batches(0, 7)] == [1, 1, 5]


def test_propose_on_a_follower_names_the_leader():
    core = make(ElectionState(4, 3, None))
    with pytest.raises(NotLeaderError) as e:
        core.propose([b"x"], 0)
    assert e.value.leader_id == 3 and e.value.epoch == 4


def test_leader_without_a_majority_of_fetchers_resigns():
    core, now = make_leader()
    core.tick(now + S.check_quorum_timeout_ms + 1)
    assert core.state_name == "Resigned"
    _, sent = drain(core, now + S.check_quorum_timeout_ms + 1)
    assert {o.dest for o in sent if isinstance(o.message, EndQuorumEpochRequest)} == {2, 3}


def test_graceful_resignation_names_the_most_caught_up_successor_first():
    core, now = make_leader()
    core.receive(3, 1, FetchRequest(CID, 1, 3, 1, 1, 0), now)
    drain(core, now)
    core.resign(now)
    _, sent = drain(core, now)
    ends = [o.message for o in sent if isinstance(o.message, EndQuorumEpochRequest)]
    assert ends and ends[0].preferred_successors == (3, 2)
    with pytest.raises(NotLeaderError):
        core.propose([b"x"], now)


def test_first_successor_campaigns_at_once_after_end_quorum_epoch():
    core = make(ElectionState(1, 2, None))
    drain(core)
    core.receive(2, 1, EndQuorumEpochRequest(CID, 1, 2, (1, 3)), 10)
    assert core.state_name == "Prospective"  # no election timeout to wait out


def test_restart_as_the_old_leader_does_not_lead_that_epoch_again():
    core = make(ElectionState(5, 1, 1))
    assert core.state_name == "Resigned" and core.epoch == 5 and not core.is_leader


def test_begin_quorum_epoch_makes_a_follower_and_a_stale_one_is_fenced():
    core = make(ElectionState(2, None, None))
    drain(core)
    core.receive(3, 1, BeginQuorumEpochRequest(CID, 3, 3), 0)
    assert core.state_name == "Follower" and core.leader_id == 3 and core.epoch == 3
    core.receive(2, 2, BeginQuorumEpochRequest(CID, 2, 2), 0)
    _, sent = drain(core, 0)
    assert reply_to(sent, 2)[0].error is Errors.FENCED_LEADER_EPOCH and core.leader_id == 3


def test_rejoining_voter_neither_votes_nor_campaigns_until_caught_up():
    core = make(ElectionState(0, rejoining=True))
    drain(core)
    core.receive(2, 1, vote(1, 2), 0)
    assert reply_to(drain(core, 0)[1], 1)[0].granted is False
    core.tick(10 * S.election_timeout_ms)
    assert core.state_name in ("Unattached", "Follower")  # never Prospective or Candidate
    assert core.rejoining


def test_a_begin_quorum_epoch_naming_another_leader_of_our_epoch_is_refused_not_raised():
    """A misbehaving peer must never take the leader down (it used to raise RaftSafetyError)."""
    core, now = make_leader()
    core.receive(3, 9, BeginQuorumEpochRequest(CID, 1, 2), now)
    resp = reply_to(drain(core, now)[1], 9)[0]
    assert resp.error is Errors.INVALID_REQUEST
    assert core.state_name == "Leader" and core.epoch == 1
    # a response naming another leader of our epoch: ignored, reported
    core.receive(3, 10, BeginQuorumEpochRequest(CID, 1, 3), now)
    rd = core.ready()
    assert [peer for peer, _ in rd.violations] == [3] and "leader of epoch 1" in rd.violations[0][1]
    assert core.state_name == "Leader"


def test_votes_for_epochs_no_election_can_reach_are_refused_and_change_nothing():
    core = make(ElectionState(5, None, None))
    drain(core)
    for corr, req in enumerate([vote(2 ** 31 - 1, 2, 4), vote(2 ** 31, 2), vote(-1, 2),
                                vote(5 + 10_001, 2, 5), vote(7, 2, last_epoch=9)], start=10):
        core.receive(2, corr, req, 1)
        states, sent = drain(core, 1)
        (resp,) = reply_to(sent, corr)
        assert resp.error is Errors.INVALID_REQUEST and not resp.granted, req
        assert states == [] and core.epoch == 5
    # a real election's next epoch is fine
    core.receive(2, 20, vote(6, 2, 0, 0), 1)
    (resp,) = reply_to(drain(core, 1)[1], 20)
    assert resp.granted and core.epoch == 6


def test_observers_expire_when_idle_and_are_never_more_than_the_cap():
    from quorum.log.voter_set import ReplicaKey, VoterSet
    from quorum.raft.progress import LeaderProgress

    p = LeaderProgress(ReplicaKey(1), VoterSet.static((1, 2, 3)), 0, now_ms=0, observer_idle_timeout_ms=1000,
                       max_observers=50)
    for i in range(100_000):  # made-up replica ids (with directory ids), as a flood would send them
        p.update_replica(ReplicaKey(1000 + i, f"dir{i}"), False, 0, 10, now_ms=i // 1000)
    assert len(p.observers) == 50 and {k.id for k in p.observers} == set(range(1000 + 99_950, 1000 + 100_000))
    p.update_replica(ReplicaKey(7, "dir7"), False, 5, 10, now_ms=500)  # a real observer keeps fetching
    p.expire_observers(now_ms=1200)
    assert set(p.observers) == {ReplicaKey(7, "dir7")}
    p.expire_observers(now_ms=1501)
    assert p.observers == {}
    assert len(p.describe(1, 1501).observers) == 0


def test_observers_without_a_directory_id_are_kept_seconds_and_a_thousand_at_most():
    """A Fetch's replica id is the client's to choose: an observer that names no directory id (as
    made-up ones do) is forgotten after ANONYMOUS_IDLE_TIMEOUT_MS idle, and never more than
    MAX_ANONYMOUS_OBSERVERS are kept, while one with a directory id (a Kafka broker) stays for the
    observer timeout (Kafka's five minutes)."""
    from quorum.log.voter_set import ReplicaKey, VoterSet
    from quorum.raft.progress import ANONYMOUS_IDLE_TIMEOUT_MS, MAX_ANONYMOUS_OBSERVERS, LeaderProgress

    p = LeaderProgress(ReplicaKey(1), VoterSet.static((1, 2, 3)), 0, now_ms=0)
    p.update_replica(ReplicaKey(101, "AAAAAAAAAAAAAAAAAAAAAQ"), False, 0, 10, now_ms=0)
    for i in range(300):
        p.update_replica(ReplicaKey(5000 + i), False, 0, 10, now_ms=0)
    assert len(p.describe(1, 0).observers) == 301
    p.expire_observers(now_ms=ANONYMOUS_IDLE_TIMEOUT_MS + 1)
    assert [o.replica_id for o in p.describe(1, ANONYMOUS_IDLE_TIMEOUT_MS + 1).observers] == [101]
    for i in range(5 * MAX_ANONYMOUS_OBSERVERS):
        p.update_replica(ReplicaKey(9000 + i), False, 0, 10, now_ms=ANONYMOUS_IDLE_TIMEOUT_MS + 2)
    assert len(p.anonymous_observers) == MAX_ANONYMOUS_OBSERVERS
    assert ReplicaKey(101, "AAAAAAAAAAAAAAAAAAAAAQ") in p.observers


def test_a_voter_that_never_fetched_is_described_as_such_yet_has_check_quorums_grace():
    """A new leader's DescribeQuorum says a voter it has not heard from never fetched (describe waits
    on that; it said the leader's start time, so describe printed an all-zero directory id as
    settled), while check-quorum still counts the voter alive from the leader's start."""
    from quorum.log.voter_set import ReplicaKey, VoterSet
    from quorum.raft.progress import LeaderProgress

    p = LeaderProgress(ReplicaKey(1), VoterSet.static((1, 2, 3)), 0, now_ms=1000)
    described = {v.replica_id: v for v in p.describe(1, 1000).voters}
    assert described[2].last_fetch_ms is None and described[3].last_fetch_ms is None
    assert p.has_quorum_since(1000) and not p.has_quorum_since(1001)
    p.update_replica(ReplicaKey(2, "d2"), True, 0, 1, now_ms=1500)
    described = {v.replica_id: v for v in p.describe(1, 1500).voters}
    assert (described[2].last_fetch_ms, described[2].directory_id) == (1500, "d2")
    assert described[3].last_fetch_ms is None
    assert p.has_quorum_since(1400)


def test_a_transition_the_table_lacks_raises_and_changes_nothing():
    from quorum.raft.errors import RaftSafetyError
    from quorum.raft.roles import Candidate, Leader

    core = make()
    before = core.role
    with pytest.raises(RaftSafetyError, match="no transition from Unattached to Candidate"):
        core._become(Candidate(before.epoch + 1, 0))
    assert core.role is before
    leader, _ = make_leader()
    with pytest.raises(RaftSafetyError, match="epoch would go back"):
        leader._become(Candidate(leader.epoch - 1, 0))
    assert isinstance(leader.role, Leader)


def test_wrong_calls_from_the_driver_are_usage_errors_that_change_nothing():
    from quorum.raft.errors import RaftUsageError

    core, _ = make_leader()
    end = core.log.end_offset
    with pytest.raises(RaftUsageError):
        core.propose([], 0)
    with pytest.raises(RaftUsageError):
        core.advance_log_start(OffsetAndEpoch(end, core.epoch), 0)
    assert core.log.end_offset == end and core.is_leader


def test_a_fetch_asking_for_the_whole_log_gets_at_most_fetch_max_bytes():
    """Whatever max_bytes a fetcher names (a hostile observer asked for 2^31-1 from offset 0 and got
    the whole log, 45 MB per answer), the leader reads at most its fetch_max_bytes (and always one
    whole batch, so a fetcher cannot stall), as Kafka's leader reads at most its 8 MiB."""
    from dataclasses import replace

    settings = replace(S, fetch_max_bytes=4096)
    core, now = make_leader(settings=settings)
    core.receive(2, 1, FetchRequest(CID, 1, 2, 1, 1, 0), now)
    drain(core, now)
    for i in range(40):  # 40 batches of 1 KiB records: 40+ KiB of log
        now += settings.append_linger_ms
        core.propose([bytes([i]) * 1024], now)
        core.tick(now)  # the linger is over: the batch is appended on its own
        drain(core, now)
    assert core.log.end_offset >= 40
    core.receive(101, 9, FetchRequest(CID, 1, 101, 0, 0, 0, max_bytes=2**31 - 1), now)
    (answer,) = reply_to(drain(core, now)[1], 9)
    batch = len(core.log.read(1, 1))  # one batch of one 1 KiB record
    assert answer.error == Errors.NONE and 4096 - batch < len(answer.records) <= 4096, len(answer.records)
    core.receive(101, 10, FetchRequest(CID, 1, 101, 0, 0, 0, max_bytes=1), now)
    (answer,) = reply_to(drain(core, now)[1], 10)
    assert len(answer.records) > 0, "one whole batch, however small max_bytes"
