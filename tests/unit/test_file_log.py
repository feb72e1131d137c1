"""FileLog on disk: segment rolling, recovery of what a crash or bad disk leaves, reopening.

A "crash between write and fsync" is simulated by leaving partial or garbage bytes
at the tail of a segment file and reopening, as the page cache would after a power cut.
"""
from __future__ import annotations

import logging
import os

import pytest

from quorum.log import batch as batchcodec
from quorum.log.errors import StorageError
from quorum.log.file_log import FileLog, segment_name

SEGMENT_BYTES = 300


@pytest.fixture
def log_dir(tmp_path):
    return tmp_path / "__cluster_metadata-0"


@pytest.fixture
def opened():
    logs = []

    def open_log(path, segment_bytes=SEGMENT_BYTES, **kwargs):
        log = FileLog(path, segment_bytes=segment_bytes, **kwargs)
        logs.append(log)
        return log

    yield open_log
    for log in logs:
        log.close()


def fill(log, n_batches, epoch=1, records=3):
    return [log.append_as_leader([b"%d-%d" % (log.end_offset, i) + b"." * 30 for i in range(records)],
                                 epoch, 0) for _ in range(n_batches)]


def segments(path):
    return sorted(p.name for p in path.iterdir() if p.name.endswith(".log"))


def reopen(log, opened):
    log.close()
    return opened(log.directory)


def batches_end(path):
    """Where the whole batches of a segment file end (preallocated zeros may follow)."""
    end = 0
    try:
        for h in batchcodec.scan(path.read_bytes()):
            end = h.position + h.size
    except batchcodec.CorruptBatchError:
        pass
    return end


def test_segments_roll_and_are_named_by_base_offset(log_dir, opened):
    log = opened(log_dir)
    batches = fill(log, 10)
    log.close()  # the active segment is trimmed to its batches; rolled ones were when they rolled
    names = segments(log_dir)
    assert len(names) > 2
    assert names[0] == segment_name(0) == "00000000000000000000.log"
    bases = {b.base_offset for b in batches}
    for name in names:
        size = (log_dir / name).stat().st_size
        assert size <= SEGMENT_BYTES
        first = batchcodec.decode((log_dir / name).read_bytes())[0]
        assert int(name[:20]) == first.base_offset and first.base_offset in bases


def test_reopen_after_roll_keeps_everything(log_dir, opened):
    log = opened(log_dir)
    batches = fill(log, 6, epoch=1) + fill(log, 6, epoch=3)
    log.flush()
    data = log.read(0, 1 << 30)
    log = reopen(log, opened)
    assert (log.end_offset, log.flushed_offset, log.last_epoch) == (36, 36, 3)
    assert log.read(0, 1 << 30) == data
    assert list(log.batches(0, 36)) == batches
    assert log.end_offset_for_epoch(2).offset == 18
    assert log.append_as_leader([b"next"], 3, 0).base_offset == 36


def test_restart_without_close_keeps_what_was_flushed(log_dir, opened):
    log = opened(log_dir)
    batches = fill(log, 7)
    log.flush()
    again = opened(log_dir)  # as after a crash: the old process never closed its files
    assert list(again.batches(0, 100)) == batches


@pytest.mark.parametrize("torn", ["file cut short", "last bytes still zero"])
def test_torn_tail_is_cut_at_the_last_whole_batch(log_dir, opened, caplog, torn):
    """A crash mid-write leaves a short file, or (in preallocated room) a batch whose last bytes
    never left the page cache and read back as zeros."""
    log = opened(log_dir)
    batches = fill(log, 4)
    log.flush()
    last = log_dir / segments(log_dir)[-1]
    size = batches_end(last)
    if torn == "file cut short":
        os.truncate(last, size - 5)
    else:
        with open(last, "r+b") as f:
            f.seek(size - 5)
            f.write(bytes(5))
    with caplog.at_level(logging.WARNING, logger="quorum.log.file_log"):
        log = reopen(log, opened)
    assert list(log.batches(0, 100)) == batches[:-1]
    assert log.end_offset == log.flushed_offset == batches[-1].base_offset
    assert last.stat().st_size == size - len(batchcodec.encode(batches[-1]))
    assert str(last) in caplog.text
    assert log.append_as_leader([b"x"], 1, 0).base_offset == batches[-1].base_offset


def test_garbage_after_the_last_batch_is_cut(log_dir, opened, caplog):
    """A crash between write and fsync: the tail holds bytes that are no batch."""
    log = opened(log_dir)
    batches = fill(log, 5)
    log.flush()
    last = log_dir / segments(log_dir)[-1]
    size = batches_end(last)
    with open(last, "r+b") as f:  # over the preallocated room after the batches
        f.seek(size)
        f.write(b"\x00" * 50 + b"\x01" + os.urandom(49))
    with caplog.at_level(logging.WARNING, logger="quorum.log.file_log"):
        log = opened(log_dir)  # as after the crash: the old process never closed (trimmed) its files
    assert list(log.batches(0, 100)) == batches
    assert last.stat().st_size == size
    assert f"offset {log.end_offset}" in caplog.text and f"byte {size}" in caplog.text


PREALLOCATED = dict(segment_bytes=1 << 20, preallocate_bytes=64 << 10)


def test_the_active_segment_is_preallocated_ahead_and_trimmed_when_done(log_dir, opened):
    log = opened(log_dir, **PREALLOCATED)
    fill(log, 3)
    first = log_dir / segment_name(0)
    assert first.stat().st_size == 64 << 10  # one step ahead of 3 small batches
    assert batches_end(first) < 1000 and first.read_bytes()[batches_end(first):] == bytes((64 << 10) - batches_end(first))
    log.append_as_leader([b"x" * 100_000], 1, 0)  # past the room: allocated further, up to at least its end
    assert first.stat().st_size == 128 << 10 > batches_end(first)  # a whole step further
    log.append_as_leader([b"y" * 1000_000], 1, 0)  # does not fit: a new segment; the first is trimmed
    assert first.stat().st_size == batches_end(first)
    second = log_dir / segments(log_dir)[-1]
    log.append_as_leader([b"z"], 1, 0)
    assert second.stat().st_size == 1 << 20 > batches_end(second)  # never past the segment size
    log.close()
    assert second.stat().st_size == batches_end(second)


def test_a_crash_leaves_preallocated_zeros_which_a_reopen_keeps_as_room(log_dir, opened, caplog):
    log = opened(log_dir, **PREALLOCATED)
    batches = fill(log, 5)
    log.flush()
    path = log_dir / segment_name(0)
    with caplog.at_level(logging.WARNING, logger="quorum.log.file_log"):
        again = opened(log_dir, **PREALLOCATED)  # as after a crash: never closed, never trimmed
    assert caplog.text == ""
    assert list(again.batches(0, 100)) == batches and again.flushed_offset == 15
    assert path.stat().st_size == 64 << 10  # the room is kept for the next writes
    more = fill(again, 2, epoch=2)
    again.flush()
    assert list(opened(log_dir, **PREALLOCATED).batches(0, 100)) == batches + more


def test_zeros_left_after_a_rolled_segment_are_room_and_trimmed(log_dir, opened, caplog):
    """A crash after a segment rolled but before its trim reached the disk."""
    log = opened(log_dir)
    batches = fill(log, 10)
    log.flush()
    log.close()
    first = log_dir / segments(log_dir)[0]
    size = first.stat().st_size
    with open(first, "ab") as f:
        f.write(bytes(4096))
    with caplog.at_level(logging.WARNING, logger="quorum.log.file_log"):
        log = opened(log_dir)
    assert list(log.batches(0, 100)) == batches and caplog.text == ""
    assert first.stat().st_size == size


def test_a_file_system_without_preallocation_grows_files_instead(log_dir, opened, monkeypatch, caplog):
    def refuse(fd, offset, length):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(os, "posix_fallocate", refuse)
    with caplog.at_level(logging.WARNING, logger="quorum.log.file_log"):
        log = opened(log_dir, **PREALLOCATED)
        batches = fill(log, 4)
    assert caplog.text.count("Cannot preallocate") == 1
    assert (log_dir / segment_name(0)).stat().st_size == batches_end(log_dir / segment_name(0))
    log.flush()
    assert list(reopen(log, opened).batches(0, 100)) == batches


def _snapshot_files(log_dir):
    return {p.name: p.read_bytes() for p in sorted(log_dir.iterdir()) if p.is_file()}


def test_a_flipped_byte_mid_log_refuses_to_open_and_changes_nothing(log_dir, opened):
    log = opened(log_dir)
    fill(log, 12)
    log.flush()
    names = segments(log_dir)
    assert len(names) >= 4
    victim = log_dir / names[1]
    data = bytearray(victim.read_bytes())
    second_size = len(batchcodec.encode(batchcodec.decode(bytes(data))[0]))
    data[second_size + 40] ^= 0x01  # inside the second batch of the second segment
    victim.write_bytes(bytes(data))
    log.close()
    with open(log_dir / names[0], "ab") as f:  # and room a crash left untrimmed, before the damage
        f.write(bytes(1000))
    before = _snapshot_files(log_dir)
    with pytest.raises(StorageError) as e:
        opened(log_dir)
    assert str(victim) in str(e.value) and f"byte {second_size}" in str(e.value) and "CRC" in str(e.value)
    first_batch = next(batchcodec.scan(bytes(data)))
    assert f"(offset {first_batch.end_offset})" in str(e.value)  # the damaged batch's offset
    assert "--rejoin" in str(e.value)
    assert _snapshot_files(log_dir) == before


def test_a_flipped_byte_in_the_last_segment_with_records_after_it_is_damage(log_dir, opened):
    log = opened(log_dir, segment_bytes=1 << 20)
    fill(log, 4)
    log.flush()
    log.close()
    path = log_dir / segment_name(0)
    data = bytearray(path.read_bytes())
    data[60] ^= 0x10  # inside the first batch; three intact batches follow
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError):
        opened(log_dir)
    assert path.read_bytes() == bytes(data)


@pytest.mark.parametrize("bit", [0x01, 0x10, 0x80])
def test_a_flipped_bit_in_a_length_mid_segment_is_damage_not_a_torn_tail(log_dir, opened, bit):
    """A bad length makes the batch look torn, yet whole batches follow: refuse, cut nothing."""
    log = opened(log_dir, segment_bytes=1 << 20)
    batches = fill(log, 30)
    log.flush()
    log.close()
    path = log_dir / segment_name(0)
    data = bytearray(path.read_bytes())
    offsets = [h.position for h in batchcodec.scan(bytes(data))]
    victim = offsets[10]
    data[victim + 4 + 2] ^= bit  # the length field of the 11th batch; 19 intact batches follow
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError) as e:
        opened(log_dir)
    assert f"byte {victim}" in str(e.value) and f"(offset {batches[10].base_offset})" in str(e.value)
    assert "a valid batch follows" in str(e.value)
    assert path.read_bytes() == bytes(data)


def test_a_missing_segment_refuses_to_open(log_dir, opened):
    log = opened(log_dir)
    fill(log, 12)
    log.flush()
    names = segments(log_dir)
    (log_dir / names[2]).unlink()
    log.close()
    with pytest.raises(StorageError) as e:
        opened(log_dir)
    assert "the log before it ends at" in str(e.value)
    assert segments(log_dir) == [n for i, n in enumerate(names) if i != 2]


def test_a_batch_with_the_wrong_offset_refuses_to_open(log_dir, opened):
    log = opened(log_dir, segment_bytes=1 << 20)
    fill(log, 3)
    log.flush()
    log.close()
    with open(log_dir / segment_name(0), "ab") as f:  # valid CRC, but offset 100 instead of 9
        f.write(batchcodec.encode_batch(100, 1, 0, [b"stray"]))
    with pytest.raises(StorageError) as e:
        opened(log_dir)
    assert "expected 9" in str(e.value)


def test_an_empty_segment_left_by_a_crash_is_dropped_quietly(log_dir, opened, caplog):
    log = opened(log_dir)
    batches = fill(log, 4)
    log.flush()
    (log_dir / segment_name(log.end_offset)).touch()
    with caplog.at_level(logging.WARNING, logger="quorum.log.file_log"):
        log = reopen(log, opened)
    assert list(log.batches(0, 100)) == batches
    assert segment_name(log.end_offset) not in segments(log_dir)
    assert caplog.text == ""


def test_truncate_across_segments_deletes_later_files(log_dir, opened):
    log = opened(log_dir)
    batches = fill(log, 12)
    names = segments(log_dir)
    target = batches[4]  # somewhere in an early segment
    log.truncate_to(target.base_offset + 1)
    assert log.end_offset == target.base_offset
    kept = [n for n in names if int(n[:20]) < target.base_offset]
    assert segments(log_dir) == kept
    more = fill(log, 5, epoch=2)
    log.flush()
    log = reopen(log, opened)
    assert list(log.batches(0, 1000)) == batches[:4] + more
    assert log.end_offset_for_epoch(1).offset == target.base_offset


def test_truncate_to_a_segment_base_removes_that_segment(log_dir, opened):
    log = opened(log_dir)
    fill(log, 12)
    names = segments(log_dir)
    base = int(names[2][:20])
    log.truncate_to(base)
    assert segments(log_dir) == names[:2]
    assert log.append_as_leader([b"x"], 1, 0).base_offset == base
    log.truncate_to(0)
    assert segments(log_dir) == [] and log.end_offset == 0


def test_follower_append_of_many_batches_rolls_segments(log_dir, opened):
    leader = opened(log_dir / "leader", segment_bytes=1 << 20)
    fill(leader, 15, epoch=2)
    data = leader.read(0, 1 << 30)
    follower = opened(log_dir / "follower")
    assert follower.append_as_follower(data) == 45
    assert len(segments(log_dir / "follower")) > 3
    assert follower.read(0, 1 << 30) == data
    follower.flush()
    assert reopen(follower, opened).read(0, 1 << 30) == data


def test_reads_span_segments(log_dir, opened):
    log = opened(log_dir)
    batches = fill(log, 12)
    assert batchcodec.decode(log.read(2, 1 << 30)) == batches
    assert batchcodec.decode(log.read(7, SEGMENT_BYTES * 2)) == batches[2:2 + (SEGMENT_BYTES * 2) // len(
        batchcodec.encode(batches[0]))]


def test_other_files_in_the_directory_are_left_alone(log_dir, opened):
    log_dir.mkdir()
    (log_dir / "quorum-state").write_text("{}")
    (log_dir / "00000000000000000000-0.checkpoint").write_bytes(b"x")
    log = opened(log_dir)
    fill(log, 2)
    log.flush()
    reopen(log, opened)
    assert (log_dir / "quorum-state").read_text() == "{}"
    assert (log_dir / "00000000000000000000-0.checkpoint").exists()
