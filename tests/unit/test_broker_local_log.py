"""A broker's own copy of the metadata log (quorum/broker/local_log.py): what it keeps, what it
lets go after a cache, and that damage only makes it start afresh."""
from __future__ import annotations

import logging
import os

import pytest

from quorum.broker.local_log import LOG_DIR, LocalMetadataLog
from quorum.log.api import LogError
from quorum.rpc.log_reader import LogRecord

SEGMENT_BYTES = 400


def records(first: int, n: int, epoch: int = 1, control_at: int = -1) -> list[LogRecord]:
    return [LogRecord(o, epoch if o < first + n // 2 else epoch + 1, 1000 + o // 4, b"record-%d" % o + b"." * 20,
                      o == control_at) for o in range(first, first + n)]


def read_all(local: LocalMetadataLog, offset: int) -> list[LogRecord]:
    return [r for chunk in local.records_from(offset) for r in chunk]


def test_records_come_back_as_they_went_in_across_segments_and_a_reopen(tmp_path):
    local = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    local.restart_at(100)
    written = records(100, 30, control_at=107)
    local.append(written[:13])
    local.append(written[13:])
    assert (local.start_offset, local.end_offset) == (100, 130)
    assert read_all(local, 100) == written and read_all(local, 117) == written[17:]
    local.flush()
    local.close()
    assert len(list((tmp_path / LOG_DIR).glob("*.log"))) > 2
    again = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    assert again.holds(100) and again.holds(130) and not again.holds(99)
    assert read_all(again, 100) == written


def test_a_cache_lets_the_segments_before_it_go(tmp_path):
    local = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    written = records(0, 40)
    local.append(written)
    local.release_below(25)
    segments = sorted(int(p.name[:20]) for p in (tmp_path / LOG_DIR).glob("*.log"))
    assert segments[0] > 0 and segments[0] <= 25  # whole segments before 25 are gone, 25 itself kept
    assert not local.holds(24) and local.holds(25)
    assert read_all(local, 25) == written[25:]


def test_records_that_do_not_follow_are_refused_and_restart_at_moves_the_copy(tmp_path):
    local = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    local.append(records(0, 10))
    with pytest.raises(LogError, match="do not follow"):
        local.append(records(12, 3))
    assert local.end_offset == 10
    local.restart_at(500)  # e.g. a snapshot was loaded: the image is at 500 now
    assert not local.holds(9) and local.holds(500)
    local.append(records(500, 4))
    assert [r.offset for r in read_all(local, 500)] == [500, 501, 502, 503]


def test_a_torn_copy_keeps_what_is_whole_and_a_damaged_one_starts_afresh(tmp_path, caplog):
    local = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    written = records(0, 30)
    local.append(written)
    local.flush()
    local.close()
    last = sorted((tmp_path / LOG_DIR).glob("*.log"))[-1]
    os.truncate(last, last.stat().st_size - 3)  # a crash mid-write
    torn = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    kept = read_all(torn, 0)
    assert 0 < len(kept) < 30 and kept == written[:len(kept)]
    torn.close()

    first = sorted((tmp_path / LOG_DIR).glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[40] ^= 0xFF  # damage with records after it: the copy is a cache, so it is dropped
    first.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="quorum.broker.local_log"):
        fresh = LocalMetadataLog(tmp_path, SEGMENT_BYTES)
    assert "Discarding the broker's copy of the metadata log" in caplog.text
    assert (fresh.start_offset, fresh.end_offset) == (0, 0)
