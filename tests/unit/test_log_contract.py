"""The ReplicatedLog contract: MemoryLog and FileLog must behave the same.

FileLog runs with segments of a few hundred bytes, so most tests cross segment
boundaries. ``restart`` is each log's crash: MemoryLog forgets what was not
flushed, FileLog is closed and reopened from its directory.
"""
from __future__ import annotations

import pytest

from quorum.log import batch as batchcodec
from quorum.log.api import LogError, OffsetAndEpoch, ReplicatedLog
from quorum.log.batch import CorruptBatchError
from quorum.log.file_log import FileLog
from quorum.log.memory_log import MemoryLog

SEGMENT_BYTES = 200


class MemoryLogs:
    def open(self) -> ReplicatedLog:
        return MemoryLog()

    def restart(self, log: MemoryLog) -> ReplicatedLog:
        log.crash()
        return log


class FileLogs:
    def __init__(self, tmp_path):
        self.dir = tmp_path / "__cluster_metadata-0"
        self.opened: list[FileLog] = []

    def open(self) -> ReplicatedLog:
        log = FileLog(self.dir, segment_bytes=SEGMENT_BYTES)
        self.opened.append(log)
        return log

    def restart(self, log: FileLog) -> ReplicatedLog:
        log.close()
        return self.open()


@pytest.fixture(params=["memory", "file"])
def logs(request, tmp_path):
    factory = MemoryLogs() if request.param == "memory" else FileLogs(tmp_path)
    yield factory
    for log in getattr(factory, "opened", []):
        log.close()


@pytest.fixture
def log(logs):
    return logs.open()


def fill(log: ReplicatedLog, epochs_and_sizes) -> list:
    """Append one batch per (epoch, record count)."""
    out = []
    for epoch, n in epochs_and_sizes:
        base = log.end_offset
        out.append(log.append_as_leader([b"r%d" % (base + i) + b"." * 20 for i in range(n)], epoch, 1000 + base))
    return out


def state(log: ReplicatedLog):
    """Everything observable about a log, to check that a refused call changed nothing."""
    return (log.start_offset, log.end_offset, log.flushed_offset, log.last_epoch,
            log.read(0, 1 << 30), [log.end_offset_for_epoch(e) for e in range(8)])


# -- empty log ---------------------------------------------------------------------------------
def test_empty_log(log):
    assert (log.start_offset, log.end_offset, log.flushed_offset, log.last_epoch) == (0, 0, 0, 0)
    assert log.read(0, 100) == b""
    assert list(log.batches(0, 10)) == []
    assert log.end_offset_for_epoch(3) == OffsetAndEpoch(0, 0)
    log.truncate_to(0)
    assert log.end_offset == 0


# -- appends -----------------------------------------------------------------------------------
def test_append_as_leader_assigns_contiguous_offsets(log):
    b1, b2, b3 = fill(log, [(1, 3), (1, 1), (2, 4)])
    assert [(b.base_offset, b.end_offset, b.epoch) for b in (b1, b2, b3)] == [(0, 3, 1), (3, 4, 1), (4, 8, 2)]
    assert (log.end_offset, log.last_epoch) == (8, 2)
    assert list(log.batches(0, 8)) == [b1, b2, b3]


def test_append_as_leader_keeps_control_flag_and_time(log):
    b = log.append_as_leader([b"leader-change"], 4, 12345, control=True)
    (got,) = log.batches(0, 1)
    assert got == b and got.control and got.append_time_ms == 12345


def test_append_as_leader_refuses_a_lower_epoch(log):
    fill(log, [(3, 2)])
    before = state(log)
    with pytest.raises(LogError):
        log.append_as_leader([b"x"], 2, 0)
    assert state(log) == before


def test_append_as_follower_copies_bytes_exactly(log):
    leader = MemoryLog()
    fill(leader, [(1, 2), (1, 3), (2, 1), (5, 6)])
    data = leader.read(0, 1 << 30)
    assert log.append_as_follower(data[:0]) == 0  # nothing fetched, nothing done
    assert log.append_as_follower(leader.read(0, 1)) == 2  # one batch at a time...
    assert log.append_as_follower(leader.read(2, 1 << 30)) == 12  # ...or many
    assert log.read(0, 1 << 30) == data
    assert list(log.batches(0, 12)) == list(leader.batches(0, 12))
    assert log.last_epoch == 5


def _follower_case(log, mangle):
    """A follower holding one batch, and the leader's next three batches mangled."""
    leader = MemoryLog()
    fill(leader, [(1, 2), (2, 2)])
    log.append_as_follower(leader.read(0, 1))
    fill(leader, [(2, 3), (3, 1)])
    before = state(log)
    return before, mangle(leader.read(2, 1 << 30))


@pytest.mark.parametrize("mangle", [
    lambda d: d[:-1] + bytes([d[-1] ^ 0xFF]),  # bad CRC in the last batch
    lambda d: d[:-3],  # torn tail
    lambda d: d + b"\x00" * 40,  # trailing garbage
], ids=["bad-crc", "torn-tail", "trailing-garbage"])
def test_append_as_follower_refuses_corrupt_data_and_changes_nothing(log, mangle):
    before, data = _follower_case(log, mangle)
    with pytest.raises(CorruptBatchError):
        log.append_as_follower(data)
    assert state(log) == before


def test_append_as_follower_refuses_a_gap_and_changes_nothing(log):
    fill(log, [(1, 2)])
    before = state(log)
    with pytest.raises(LogError):
        log.append_as_follower(batchcodec.encode_batch(3, 1, 0, [b"x"]))
    good = batchcodec.encode_batch(2, 1, 0, [b"x"])
    with pytest.raises(LogError):  # second batch leaves a gap: the first is not kept either
        log.append_as_follower(good + batchcodec.encode_batch(4, 1, 0, [b"y"]))
    assert state(log) == before


def test_append_as_follower_refuses_a_lower_epoch_and_changes_nothing(log):
    fill(log, [(4, 2)])
    before = state(log)
    with pytest.raises(LogError):
        log.append_as_follower(batchcodec.encode_batch(2, 3, 0, [b"x"]))
    with pytest.raises(LogError):
        log.append_as_follower(batchcodec.encode_batch(2, 5, 0, [b"x"]) + batchcodec.encode_batch(3, 4, 0, [b"y"]))
    assert state(log) == before


# -- reads -------------------------------------------------------------------------------------
def test_read_returns_whole_batches_from_the_one_holding_the_offset(log):
    batches = fill(log, [(1, 3), (1, 2), (2, 4), (2, 1)])
    everything = log.read(0, 1 << 30)
    assert batchcodec.decode(everything) == batches
    for offset in range(log.end_offset):
        got = batchcodec.decode(log.read(offset, 1 << 30))
        assert got[0].base_offset <= offset < got[0].end_offset
        assert got[-1].end_offset == log.end_offset
    assert log.read(log.end_offset, 100) == b""
    assert log.read(log.end_offset + 5, 100) == b""


def test_read_honours_max_bytes_but_returns_at_least_one_batch(log):
    batches = fill(log, [(1, 3), (1, 2), (2, 4), (2, 1)])
    sizes = [len(batchcodec.encode(b)) for b in batches]
    assert batchcodec.decode(log.read(0, 1)) == batches[:1]
    assert batchcodec.decode(log.read(0, 0)) == batches[:1]
    assert batchcodec.decode(log.read(3, sizes[1] + sizes[2])) == batches[1:3]
    assert batchcodec.decode(log.read(3, sizes[1] + sizes[2] - 1)) == batches[1:2]
    assert batchcodec.decode(log.read(9, 1)) == batches[3:]


def test_read_below_the_start_is_an_error(log):
    fill(log, [(1, 1)])
    with pytest.raises(LogError):
        log.read(-1, 100)


def test_a_batch_larger_than_max_bytes_and_segment_bytes_is_still_read(log):
    big = log.append_as_leader([b"x" * 500, b"y" * 500], 1, 0)
    small = log.append_as_leader([b"z"], 1, 0)
    assert batchcodec.decode(log.read(1, 10)) == [big]
    assert batchcodec.decode(log.read(0, 1 << 20)) == [big, small]


def test_batches_yields_those_overlapping_the_range(log):
    b = fill(log, [(1, 3), (1, 2), (2, 4), (2, 1)])  # offsets [0,3) [3,5) [5,9) [9,10)
    assert list(log.batches(0, 10)) == b
    assert list(log.batches(2, 4)) == b[0:2]
    assert list(log.batches(3, 5)) == b[1:2]
    assert list(log.batches(4, 6)) == b[1:3]
    assert list(log.batches(9, 100)) == b[3:]
    assert list(log.batches(10, 20)) == []
    assert list(log.batches(5, 5)) == []


# -- truncation --------------------------------------------------------------------------------
def test_truncate_rounds_down_to_a_batch_boundary(log):
    b = fill(log, [(1, 3), (1, 2), (2, 4), (3, 1)])  # offsets [0,3) [3,5) [5,9) [9,10)
    log.truncate_to(20)
    assert log.end_offset == 10
    log.truncate_to(7)  # mid-batch: the whole straddling batch goes
    assert (log.end_offset, log.last_epoch) == (5, 1)
    assert list(log.batches(0, 100)) == b[:2]
    log.truncate_to(3)  # exactly at a boundary
    assert list(log.batches(0, 100)) == b[:1]
    nxt = log.append_as_leader([b"again"], 2, 0)
    assert nxt.base_offset == 3 and log.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    log.truncate_to(0)
    assert (log.end_offset, log.last_epoch, log.read(0, 100)) == (0, 0, b"")
    assert log.append_as_leader([b"fresh"], 1, 0).base_offset == 0


def test_truncate_lowers_the_flushed_offset(log):
    fill(log, [(1, 3), (1, 2)])
    log.flush()
    log.truncate_to(4)
    assert (log.end_offset, log.flushed_offset) == (3, 3)


# -- epochs ------------------------------------------------------------------------------------
def test_end_offset_for_epoch_follows_kafka(log):
    fill(log, [(2, 3), (2, 2), (4, 3), (5, 1), (5, 2), (9, 1)])  # epoch 2 at 0, 4 at 5, 5 at 8, 9 at 11
    expected = {0: (0, 0), 1: (0, 0),  # below the first epoch: nothing
                2: (5, 2), 3: (5, 2), 4: (8, 4), 5: (11, 5), 6: (11, 5), 8: (11, 5),
                9: (12, 9), 10: (12, 9), 100: (12, 9)}  # the last epoch ends at the log end
    for epoch, (offset, found) in expected.items():
        assert log.end_offset_for_epoch(epoch) == OffsetAndEpoch(offset, found), epoch
    log.truncate_to(9)
    assert log.end_offset_for_epoch(9) == OffsetAndEpoch(9, 5)
    assert log.last_epoch == 5


# -- flushing and restarting -------------------------------------------------------------------
def test_flush_makes_everything_appended_durable(log):
    fill(log, [(1, 2)])
    assert (log.end_offset, log.flushed_offset) == (2, 0)
    log.flush()
    assert log.flushed_offset == 2
    fill(log, [(1, 3)])
    assert (log.end_offset, log.flushed_offset) == (5, 2)
    log.flush()
    log.flush()
    assert log.flushed_offset == 5


def test_restart_keeps_the_flushed_prefix(logs, log):
    flushed = fill(log, [(1, 2), (2, 3), (2, 1)])
    log.flush()
    fill(log, [(3, 4)])
    log = logs.restart(log)
    assert log.end_offset >= 6
    assert log.flushed_offset == log.end_offset
    assert list(log.batches(0, 6)) == flushed
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(6, 2)
    assert log.append_as_leader([b"after"], 3, 0).base_offset == log.end_offset - 1


# -- the log start (snapshots) --------------------------------------------------------------------
def test_advance_start_lets_records_go_and_survives_a_restart(logs):
    log = logs.open()
    batches = fill(log, [(1, 3), (1, 3), (2, 3), (2, 3), (3, 3)])
    log.flush()
    snap = OffsetAndEpoch(batches[2].end_offset, 2)  # 9: a snapshot holds offsets 0..8
    segments_before = sorted(p.name for p in log.directory.glob("*.log")) if isinstance(log, FileLog) else []
    log.advance_start(snap)
    if isinstance(log, FileLog):  # segments wholly below the start are gone, the rest stay
        after = sorted(p.name for p in log.directory.glob("*.log"))
        assert len(after) < len(segments_before) and after == segments_before[-len(after):]
        assert int(after[0][:20]) <= 9
    assert (log.start_offset, log.start_epoch, log.end_offset) == (9, 2, 15)
    with pytest.raises(LogError):
        log.read(3, 100)
    assert [b.base_offset for b in log.batches(0, 100)][-2:] == [9, 12]
    assert batchcodec.decode(log.read(9, 1 << 20))[0].base_offset == 9
    assert log.end_offset_for_epoch(2) == OffsetAndEpoch(12, 2)
    assert log.end_offset_for_epoch(1).offset <= 9  # older than the start: at most the start
    with pytest.raises(LogError):
        log.truncate_to(5)  # below the snapshot: refused, nothing changes
    assert log.end_offset == 15
    log.advance_start(OffsetAndEpoch(6, 1))  # backwards: ignored
    assert log.start_offset == 9
    with pytest.raises(LogError):
        log.advance_start(OffsetAndEpoch(99, 3))  # past the end: use reset_to
    log.truncate_to(12)
    log.append_as_leader([b"x"], 4, 0)
    log.flush()
    if isinstance(log, FileLog):
        log = logs.restart(log)
        log.advance_start(snap)  # what the node does at open, from its oldest snapshot
    assert (log.start_offset, log.start_epoch, log.end_offset, log.last_epoch) == (9, 2, 13, 4)
    assert [b.base_offset for b in log.batches(9, 100)] == [9, 12]


def test_reset_to_starts_empty_at_the_snapshot(logs):
    log = logs.open()
    fill(log, [(1, 3), (2, 3)])
    log.flush()
    log.reset_to(OffsetAndEpoch(40, 5))
    assert (log.start_offset, log.end_offset, log.last_epoch, log.flushed_offset) == (40, 40, 5, 40)
    assert log.read(40, 100) == b"" and list(log.batches(0, 100)) == []
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(40, 5)
    log.append_as_leader([b"a", b"b"], 6, 0)
    log.flush()
    assert log.end_offset == 42
    if isinstance(log, FileLog):
        log = logs.restart(log)
        log.advance_start(OffsetAndEpoch(40, 5))
    assert (log.start_offset, log.end_offset, log.last_epoch) == (40, 42, 6)
    assert log.end_offset_for_epoch(5) == OffsetAndEpoch(40, 5)
    assert [b.records for b in log.batches(0, 100)] == [(b"a", b"b")]


def test_control_batches_follow_appends_truncation_start_and_restart(logs):
    log = logs.open()
    log.append_as_leader([b"c0"], 1, 0, control=True)  # 0
    fill(log, [(1, 3)])  # 1..3
    log.append_as_leader([b"c4", b"c5"], 2, 0, control=True)  # 4, 5
    fill(log, [(2, 3)])  # 6..8
    log.append_as_leader([b"c9"], 3, 0, control=True)  # 9
    log.flush()
    assert [(b.base_offset, b.records) for b in log.control_batches()] == [(0, (b"c0",)), (4, (b"c4", b"c5")),
                                                                          (9, (b"c9",))]
    log.truncate_to(9)
    assert [b.base_offset for b in log.control_batches()] == [0, 4]
    log.advance_start(OffsetAndEpoch(5, 2))  # inside the batch at 4..5: it still ends after the start
    assert [b.base_offset for b in log.control_batches()] == [4]
    log.advance_start(OffsetAndEpoch(6, 2))  # the batch at 4..5 is below the start now
    assert list(log.control_batches()) == []
    log.append_as_leader([b"c9"], 3, 0, control=True)
    log.flush()
    log = logs.restart(log)
    if isinstance(log, FileLog):
        log.advance_start(OffsetAndEpoch(6, 2))
    assert [(b.base_offset, b.records, b.control) for b in log.control_batches()] == [(9, (b"c9",), True)]
    log.reset_to(OffsetAndEpoch(20, 3))
    assert list(log.control_batches()) == []
