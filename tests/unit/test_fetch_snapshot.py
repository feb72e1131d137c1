"""FetchSnapshot in the sans-I/O core (leader and follower sides) and the file snapshot store.

The simulation (tests/simulation) runs these paths under faults; here each rule is pinned alone:
what a leader answers below its log start, how a follower downloads, verifies and installs, and
that a bad download changes nothing.
"""
from __future__ import annotations

import pytest
from test_raft_core import CID, drain, make_leader, reply_to

from quorum.errors import Errors
from quorum.log.api import OffsetAndEpoch
from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.raft.core import RaftCore
from quorum.raft.messages import FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse
from quorum.raft.settings import RaftSettings
from quorum.snapshot.api import SnapshotError
from quorum.snapshot.memory_store import MemorySnapshotStore, seal

SNAP = OffsetAndEpoch(1, 1)  # the leader's snapshot of its LeaderChange record
CONTENT = seal(b"state after offset 0" * 10)


def leader_with_snapshot():
    core, now = make_leader()
    core.receive(2, 9, FetchRequest(CID, 1, 2, 1, 1, 0), now)  # node 2 holds the LeaderChange: committed
    drain(core, now)
    assert core.high_watermark == 1
    core.snapshots.add(SNAP, CONTENT)
    core.advance_log_start(SNAP, now)
    assert core.log.start_offset == 1
    return core, now


def test_a_fetch_below_the_log_start_is_answered_with_the_snapshot_id():
    core, now = leader_with_snapshot()
    core.receive(3, 5, FetchRequest(CID, 1, 3, 0, 0, 0), now)
    resp = reply_to(drain(core, now)[1], 5)[0]
    assert resp.snapshot_id == SNAP and resp.records == b"" and resp.log_start_offset == 1
    # At the start, with the start's epoch, the log is fetched as usual.
    core.receive(3, 6, FetchRequest(CID, 1, 3, 1, 1, 0), now)
    resp = reply_to(drain(core, now)[1], 6)[0]
    assert resp.snapshot_id is None and resp.diverging is None


def test_the_leader_serves_chunks_and_refuses_bad_positions_and_unknown_snapshots():
    core, now = leader_with_snapshot()
    core.receive(3, 5, FetchSnapshotRequest(CID, 1, 3, SNAP, 0, 64), now)
    first = reply_to(drain(core, now)[1], 5)[0]
    assert (first.error, first.size, first.position, first.data) == (Errors.NONE, len(CONTENT), 0, CONTENT[:64])
    core.receive(3, 6, FetchSnapshotRequest(CID, 1, 3, SNAP, len(CONTENT) + 1, 64), now)
    assert reply_to(drain(core, now)[1], 6)[0].error is Errors.POSITION_OUT_OF_RANGE
    core.receive(3, 7, FetchSnapshotRequest(CID, 1, 3, OffsetAndEpoch(7, 1), 0, 64), now)
    assert reply_to(drain(core, now)[1], 7)[0].error is Errors.SNAPSHOT_NOT_FOUND
    core.receive(3, 8, FetchSnapshotRequest(CID, 0, 3, SNAP, 0, 64), now)
    assert reply_to(drain(core, now)[1], 8)[0].error is Errors.FENCED_LEADER_EPOCH


def follower(log=None):
    store = MemorySnapshotStore()
    core = RaftCore(2, (1, 2, 3), CID, log or MemoryLog(), ElectionState(1, 1, None), 0, RaftSettings(),
                    snapshots=store)
    return core, store


def next_request(core, now, kind):
    core.tick(now)
    _, sent = drain(core, now)
    return next(o for o in sent if isinstance(o.message, kind))


def download(core, now, content, chunk=50):
    fetch = next_request(core, now, FetchRequest)
    core.receive(1, fetch.corr, FetchResponse(Errors.NONE, 1, 1, 1, 1, snapshot_id=SNAP), now)
    while True:
        req = next_request(core, now, FetchSnapshotRequest)
        pos = req.message.position
        core.receive(1, req.corr, FetchSnapshotResponse(Errors.NONE, 1, 1, SNAP, len(content), pos,
                                                        content[pos:pos + chunk]), now)
        if pos + chunk >= len(content):
            return


def test_a_follower_downloads_in_chunks_verifies_installs_and_fetches_after_it():
    log = MemoryLog()
    log.append_as_leader([b"stale"], 0, 0)  # an old record that the leader no longer has
    log.flush()
    core, store = follower(log)
    download(core, 10, CONTENT)
    assert store.ids() == [SNAP] and store.snapshots[SNAP] == CONTENT and store.installed == [SNAP]
    assert (core.log.start_offset, core.log.end_offset, core.log.last_epoch) == (1, 1, 1)
    assert core.high_watermark == 1 and core.snapshots_installed == 1
    fetch = next_request(core, 10, FetchRequest)
    assert (fetch.message.fetch_offset, fetch.message.last_fetched_epoch) == (1, 1)


def test_a_download_that_does_not_verify_is_refused_and_changes_nothing():
    core, store = follower()
    damaged = bytearray(CONTENT)
    damaged[3] ^= 0xFF
    download(core, 10, bytes(damaged))
    assert store.ids() == [] and store.download is None and core.snapshot_failures == 1
    assert (core.log.start_offset, core.log.end_offset, core.high_watermark) == (0, 0, 0)
    # It asks again (after a pause) and takes a good copy.
    download(core, 10 + RaftSettings().fetch_timeout_ms // 4 + 1, CONTENT)
    assert store.ids() == [SNAP] and core.log.start_offset == 1


def test_a_snapshot_deleted_mid_download_restarts_with_a_fetch():
    core, store = follower()
    fetch = next_request(core, 0, FetchRequest)
    core.receive(1, fetch.corr, FetchResponse(Errors.NONE, 1, 1, 1, 1, snapshot_id=SNAP), 0)
    req = next_request(core, 0, FetchSnapshotRequest)
    core.receive(1, req.corr, FetchSnapshotResponse(Errors.SNAPSHOT_NOT_FOUND, 1, 1, SNAP), 0)
    assert store.download is None
    assert next_request(core, 0, FetchRequest).message.fetch_offset == 0


def test_file_store_download_is_all_or_nothing(tmp_path):
    from quorum.metadata.image import MetadataImage
    from quorum.snapshot.checkpoint import read_checkpoint
    from quorum.snapshot.file_store import FileSnapshotStore
    from quorum.snapshot.files import SnapshotId, remove_temporaries, write_snapshot

    src, dst = tmp_path / "leader", tmp_path / "follower"
    src.mkdir()
    dst.mkdir()
    sid = OffsetAndEpoch(5, 2)
    write_snapshot(src, MetadataImage.EMPTY, SnapshotId(5, 2), "cluster-a")
    leader, store = FileSnapshotStore(src, "cluster-a"), FileSnapshotStore(dst, "cluster-a")
    assert leader.ids() == [sid]
    size = leader.size(sid)
    store.begin_download(sid)
    store.append_download(leader.read(sid, 0, 10))
    assert store.ids() == [] and len(list(dst.iterdir())) == 1  # only the temporary file
    remove_temporaries(dst)  # what a restart does after a crash mid-download
    assert list(dst.iterdir()) == []
    store.begin_download(sid)
    store.append_download(leader.read(sid, 0, size))
    assert store.finish_download() == sid and store.ids() == [sid]
    assert read_checkpoint(store.path(sid))[0]["end_offset"] == 5

    foreign = FileSnapshotStore(tmp_path / "other", "cluster-b")
    (tmp_path / "other").mkdir()
    foreign.begin_download(sid)
    foreign.append_download(leader.read(sid, 0, size))
    with pytest.raises(SnapshotError, match="cluster-a"):
        foreign.finish_download()
    assert list((tmp_path / "other").iterdir()) == []  # nothing half-installed

    damaged = bytearray(store.path(sid).read_bytes())
    damaged[-5] ^= 0xFF
    store.path(sid).write_bytes(bytes(damaged))
    again = FileSnapshotStore(dst, "cluster-a")
    assert again.ids() == [] and (dst / (store.path(sid).name + ".corrupt")).exists()
