"""Dynamic quorum (KIP-853) in the Raft core, driven by hand: replica keys, voter changes and their
refusals, and the voter history that follows the log. The simulation (tests/simulation/
test_membership.py) covers the same under faults."""
import pytest
from test_raft_core import CID, drain, make_leader, reply_to

from quorum.errors import Errors, NotLeaderError
from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import encode_batch
from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.log.voter_set import Endpoint, ReplicaKey, Voter, VoterSet, raft_state_records
from quorum.raft.core import RaftCore
from quorum.raft.membership import VoterChangeError
from quorum.raft.messages import FetchRequest, VoteRequest, VoteResponse
from quorum.raft.settings import RaftSettings
from quorum.raft.voter_history import VoterHistory, read_raft_state
from quorum.snapshot.memory_store import MemorySnapshotStore

S = RaftSettings()


def dynamic_voters(*ids):
    return VoterSet(Voter(ReplicaKey(i, f"d{i}"), (Endpoint("CONTROLLER", "127.0.0.1", 9000 + i),)) for i in ids)


def bootstrapped(node_id, voters, now=0):
    """A node formatted with --initial-controllers: a bootstrap snapshot (0, 0) holding the voters."""
    store = MemorySnapshotStore(verify=lambda sid, data: None)
    store.add(OffsetAndEpoch(0, 0), encode_batch(0, 0, 0, raft_state_records(voters, 1), control=True))
    return RaftCore(node_id, VoterSet(), CID, MemoryLog(), ElectionState.empty(), now, S, snapshots=store,
                    directory_id=f"d{node_id}")


def sole_leader():
    """Node 1, the only voter of a dynamic quorum, elected and its first records committed."""
    core = bootstrapped(1, dynamic_voters(1))
    core.tick(0)
    drain(core, 0)
    assert core.is_leader and core.high_watermark == core.log.end_offset
    return core


def fetch(core, node, directory, offset, now, corr=50):
    core.receive(node, corr, FetchRequest(CID, core.epoch, node, offset, core.log.last_epoch, 0, 1 << 20,
                                          directory), now)
    return reply_to(drain(core, now)[1], corr)


def test_the_bootstrap_voters_are_written_into_the_log_by_the_first_leader():
    core = sole_leader()
    assert core.voter_history.latest == dynamic_voters(1) and core.voter_history.kraft_version == 1
    assert core.voter_history.latest_offset is not None and core.voter_history.latest_offset >= 0
    # a node with an empty log learns them from the log, as an observer fetching from 0 does
    (control,) = [b for b in core.log.control_batches()]
    h = VoterHistory(VoterSet())
    h.note_batch(control)
    assert h.latest == dynamic_voters(1) and h.kraft_version == 1


def test_adding_a_voter_needs_a_caught_up_observer_and_one_change_at_a_time():
    core = sole_leader()
    new = dynamic_voters(2)[2]
    with pytest.raises(VoterChangeError) as e:
        core.add_voter(new, 10)
    assert e.value.error is Errors.REQUEST_TIMED_OUT and "caught-up observer" in e.value.message
    fetch(core, 2, "d2", core.log.end_offset, 10)
    offset = core.add_voter(new, 10)
    drain(core, 10)
    assert core.voters == {1, 2} and core.voter_change_pending and core.high_watermark <= offset
    with pytest.raises(VoterChangeError) as e:  # the first is not committed: it needs node 2 now
        core.remove_voter(ReplicaKey(2, "d2"), 11)
    assert e.value.error is Errors.REQUEST_TIMED_OUT and "one change at a time" in e.value.message
    fetch(core, 2, "d2", core.log.end_offset, 12)
    assert core.high_watermark == core.log.end_offset and not core.voter_change_pending
    with pytest.raises(VoterChangeError) as e:
        core.add_voter(Voter(ReplicaKey(2, "other")), 13)
    assert e.value.error is Errors.DUPLICATE_VOTER
    with pytest.raises(VoterChangeError) as e:
        core.remove_voter(ReplicaKey(2, "other"), 13)
    assert e.value.error is Errors.VOTER_NOT_FOUND and "2:d2" in e.value.message


def test_the_last_voter_cannot_be_removed_and_a_static_quorum_cannot_change():
    core = sole_leader()
    with pytest.raises(VoterChangeError) as e:
        core.remove_voter(ReplicaKey(1, "d1"), 5)
    assert e.value.error is Errors.INVALID_REQUEST and "last voter" in e.value.message
    static, _now = make_leader()
    with pytest.raises(VoterChangeError) as e:
        static.add_voter(Voter(ReplicaKey(4, "d4")), 5)
    assert e.value.error is Errors.UNSUPPORTED_VERSION


def test_only_the_leader_changes_voters():
    core = bootstrapped(2, dynamic_voters(1, 2, 3))
    with pytest.raises(NotLeaderError):
        core.add_voter(Voter(ReplicaKey(4, "d4")), 0)


def two_voter_leader():
    core = sole_leader()
    fetch(core, 2, "d2", core.log.end_offset, 10)
    core.add_voter(dynamic_voters(2)[2], 10)
    drain(core, 10)
    fetch(core, 2, "d2", core.log.end_offset, 11)
    assert core.voters == {1, 2} and not core.voter_change_pending
    return core


def test_a_fetch_under_a_voters_id_from_another_directory_does_not_count():
    core = two_voter_leader()
    core.propose([b"x"], 20)
    drain(core, 20)
    hw = core.high_watermark
    fetch(core, 2, "wiped-and-formatted-again", core.log.end_offset, 21)
    assert core.high_watermark == hw  # an observer's fetch: the voter's disk is not there
    assert any(o.directory_id == "wiped-and-formatted-again" for o in core.describe_quorum(21).observers)
    fetch(core, 2, "d2", core.log.end_offset, 22)
    assert core.high_watermark == core.log.end_offset


def test_a_vote_meant_for_another_directory_is_refused():
    core = bootstrapped(2, dynamic_voters(1, 2, 3))
    core.receive(1, 7, VoteRequest(CID, 1, 1, 0, 0, False, "d1", "not-my-directory"), 0)
    (resp,) = reply_to(drain(core)[1], 7)
    assert resp.error is Errors.INVALID_VOTER_KEY and not resp.granted and core.epoch == 0
    core.receive(1, 8, VoteRequest(CID, 1, 1, 0, 0, False, "not-the-voters-directory", "d2"), 0)
    (resp,) = reply_to(drain(core)[1], 8)
    assert resp.error is Errors.INCONSISTENT_VOTER_SET and not resp.granted
    core.receive(1, 9, VoteRequest(CID, 1, 1, 0, 0, False, "d1", "d2"), 0)
    (resp,) = reply_to(drain(core)[1], 9)
    assert resp.error is Errors.NONE and resp.granted


def test_a_leader_that_removes_itself_leads_until_the_removal_commits_then_resigns():
    core = two_voter_leader()
    core.remove_voter(ReplicaKey(1, "d1"), 30)
    drain(core, 30)
    assert core.is_leader and not core.is_voter and core.voter_change_pending
    fetch(core, 2, "d2", core.log.end_offset, 31)  # node 2 alone is the majority of {2}
    assert core.state_name == "Resigned" and not core._campaigns
    assert core.voter_history.latest == VoterSet([dynamic_voters(2)[2]])


def test_voter_history_follows_truncation_start_and_snapshots():
    h = VoterHistory(VoterSet.static([1, 2, 3]))
    a, b = dynamic_voters(1, 2, 3), dynamic_voters(1, 2, 3, 4)
    h.note(-1, a)
    h.note(10, b)
    assert h.latest == b and h.at(9) == a and h.at(10) == b and h.at(-5) == h.static
    h.truncate(10)  # the record at 10 was not committed and a new leader cut it
    assert h.latest == a and h.latest_offset == -1
    h.note(12, b)
    h.note(20, a)
    h.trim(15)  # the log starts at 15: the set in force there (from 12) stays
    assert h.offsets == (12, 20) and h.at(15) == b
    h.reset(30, b, 1)
    assert h.latest == b and h.offsets == (29,) and h.kraft_version == 1


def test_snapshots_carry_the_voter_set_at_their_end():
    core = two_voter_leader()
    end = core.high_watermark
    records = core.snapshot_raft_records(end)
    store = MemorySnapshotStore(verify=lambda sid, data: None)
    store.add(OffsetAndEpoch(end, core.epoch), encode_batch(0, 0, 0, records, control=True) + b"state")
    assert read_raft_state(store, OffsetAndEpoch(end, core.epoch)) == (core.voter_history.latest, 1)
    store.add(OffsetAndEpoch(1, 1), b"[not a batch]")
    assert read_raft_state(store, OffsetAndEpoch(1, 1)) == (None, 0)
    static, _ = make_leader()
    assert static.snapshot_raft_records(static.high_watermark) == []


def test_a_controller_checkpoint_carries_the_voters_in_its_first_batch(tmp_path):
    from quorum.metadata.image import MetadataImage
    from quorum.snapshot.checkpoint import read_checkpoint
    from quorum.snapshot.file_store import FileSnapshotStore
    from quorum.snapshot.files import SnapshotId, write_snapshot

    voters = dynamic_voters(1, 2, 3)
    cid = "AAAAAAAAAAAAAAAAAAAAAA"
    write_snapshot(tmp_path, MetadataImage(), SnapshotId(0, 0), cid, raft_state_records(voters, 1))
    write_snapshot(tmp_path, MetadataImage(), SnapshotId(5, 1), cid)  # a static quorum's: none
    store = FileSnapshotStore(tmp_path, cid)
    assert store.ids() == [OffsetAndEpoch(0, 0), OffsetAndEpoch(5, 1)]  # both verify
    assert read_raft_state(store, OffsetAndEpoch(0, 0)) == (voters, 1)
    assert read_raft_state(store, OffsetAndEpoch(5, 1)) == (None, 0)
    header, _image = read_checkpoint(tmp_path / SnapshotId(0, 0).name)
    assert header["cluster_id"] == cid


def test_update_voter_writes_new_endpoints_and_nothing_when_they_are_the_same():
    core = sole_leader()
    end = core.log.end_offset
    same = dynamic_voters(1)[1]
    assert core.update_voter(same, 5) < end and core.log.end_offset == end  # nothing to write
    moved = Voter(ReplicaKey(1, "d1"), (Endpoint("CONTROLLER", "10.0.0.7", 19093),))
    offset = core.update_voter(moved, 6)
    drain(core, 6)
    assert offset == end and core.voter_history.latest[1] == moved and core.high_watermark == core.log.end_offset
    with pytest.raises(VoterChangeError) as e:
        core.update_voter(Voter(ReplicaKey(1, "other"), moved.endpoints), 7)
    assert e.value.error is Errors.VOTER_NOT_FOUND
    with pytest.raises(VoterChangeError) as e:
        core.update_voter(Voter(ReplicaKey(1, "d1")), 7)
    assert e.value.error is Errors.INVALID_REQUEST and "no endpoint" in e.value.message


def static_leader():
    """Node 1 (directory d1) leads a static quorum of 1, 2, 3 (with endpoints, as a node passes them)
    and node 2 (d2) has fetched, so its LeaderChange is committed; node 3 has not fetched yet."""
    endpoints = {i: (Endpoint("CONTROLLER", "127.0.0.1", 9000 + i),) for i in (1, 2, 3)}
    core = RaftCore(1, VoterSet.static((1, 2, 3), endpoints), CID, MemoryLog(), ElectionState.empty(), 0, S,
                    snapshots=MemorySnapshotStore(), directory_id="d1")
    now = S.election_timeout_ms * 2
    core.tick(now)
    for pre_vote in (True, False):
        sent = [o for o in drain(core, now)[1] if isinstance(o.message, VoteRequest) and o.dest == 2]
        core.receive(2, sent[0].corr, VoteResponse(Errors.NONE, core.epoch, None, True, pre_vote), now)
    assert core.is_leader
    drain(core, now)
    fetch(core, 2, "d2", core.log.end_offset, now)
    assert core.high_watermark == core.log.end_offset
    return core, now


def test_upgrading_a_static_quorum_writes_its_voters_with_the_directory_ids_they_fetched_with():
    core, now = static_leader()
    with pytest.raises(VoterChangeError) as e:
        core.upgrade_kraft_version(2, now)
    assert e.value.error is Errors.INVALID_UPDATE_VERSION and "supports only versions 0-1" in e.value.message
    end = core.log.end_offset
    with pytest.raises(VoterChangeError) as e:  # node 3 never said which directory it is
        core.upgrade_kraft_version(1, now)
    assert e.value.error is Errors.INVALID_UPDATE_VERSION and "voter 3 has not fetched" in e.value.message
    fetch(core, 3, "d3", core.log.end_offset, now + 1)
    core.upgrade_kraft_version(1, now + 1, validate_only=True)
    assert core.log.end_offset == end and core.voter_history.kraft_version == 0  # validated, nothing written

    offset = core.upgrade_kraft_version(1, now + 2)
    drain(core, now + 2)
    h = core.voter_history
    assert h.kraft_version == 1 and h.latest_offset == offset
    assert h.latest == VoterSet(Voter(ReplicaKey(i, f"d{i}"), (Endpoint("CONTROLLER", "127.0.0.1", 9000 + i),))
                                for i in (1, 2, 3))
    with pytest.raises(VoterChangeError) as e:  # dynamic now, but one change at a time
        core.add_voter(Voter(ReplicaKey(4, "d4")), now + 3)
    assert e.value.error is Errors.REQUEST_TIMED_OUT
    fetch(core, 2, "d2", core.log.end_offset, now + 4)
    assert not core.voter_change_pending
    assert core.upgrade_kraft_version(1, now + 5) < offset  # already there: nothing written
    with pytest.raises(VoterChangeError) as e:
        core.upgrade_kraft_version(0, now + 5)
    assert e.value.error is Errors.INVALID_UPDATE_VERSION and "cannot go back" in e.value.message
    # a snapshot now carries the voter set, and a fetch from node 3 under another directory is an observer's
    assert read_raft_state_of(core.snapshot_raft_records(core.log.end_offset)) == (h.latest, 1)
    fetch(core, 3, "elsewhere", core.log.end_offset, now + 6)
    assert ReplicaKey(3, "elsewhere") in core.role.progress.observers


def read_raft_state_of(records):
    from quorum.log.raft_state import raft_state_of

    return raft_state_of(encode_batch(0, 0, 0, records, control=True))


def test_end_quorum_epoch_hurries_a_successor_only_under_its_own_directory():
    from quorum.raft.messages import EndQuorumEpochRequest

    for named, hurried in (("d2", True), ("another-disk", False), (None, True)):
        core = bootstrapped(2, dynamic_voters(1, 2, 3))
        core.receive(1, 7, EndQuorumEpochRequest(CID, 1, 1, (2, 3), (named, "d3")), 10)
        drain(core, 10)
        assert (core.state_name == "Prospective") is hurried, named  # the first successor campaigns at once
