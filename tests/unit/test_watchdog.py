"""The streaming job's watchdog (streaming/watchdog.py) deciding, step by step on a clock it is
given: progress of any kind resets it; a stall is acted on once, after ``stall_after_s`` with
records to apply; a query that does not end after as long again raises QueryStalled. (The real
thing, a source runner stopped for good under a real Spark query, is
tests/streaming/test_job_restart.py's.)"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from streaming.watchdog import QueryStalled, Watchdog


def _watchdog(log_end=100, applied=10):
    materializer = SimpleNamespace(next_offset=applied, in_batch=False)
    ended = []
    w = Watchdog(materializer, lambda: log_end, stall_after_s=30, end_source=lambda: ended.append(1) or [4242])
    w.log_end = log_end  # as the poller would have read it
    query = SimpleNamespace(lastProgress=None)
    w.watch(query)
    return w, materializer, query, ended


def test_a_stall_is_acted_on_once_then_the_job_gives_up():
    w, _, query, ended = _watchdog()
    start = w._since
    w.check(query, start + 29)
    assert not ended and w.stalls == 0
    w.check(query, start + 31)
    assert ended == [1] and w.stalls == 1
    w.check(query, start + 50)
    assert ended == [1], "the source is ended once per stall"
    with pytest.raises(QueryStalled, match="did not end when its source's processes were ended"):
        w.check(query, start + 62)


@pytest.mark.parametrize("progress", ["event", "batch", "offset", "caught up"])
def test_any_progress_resets_it(progress):
    w, materializer, query, ended = _watchdog()
    start = w._since
    w.check(query, start + 20)
    if progress == "event":
        query.lastProgress = {"batchId": 7, "timestamp": "2026-11-29T22:00:00.000Z"}
    elif progress == "batch":
        materializer.in_batch = True
    elif progress == "offset":
        materializer.next_offset = 11
    else:
        w.log_end = materializer.next_offset  # nothing to apply: idle, not stalled
    w.check(query, start + 25)
    materializer.in_batch = False
    w.check(query, start + 40)
    assert not ended, "30 s had not passed since the progress"
    if progress != "caught up":
        w.check(query, start + 56)
        assert ended == [1]


def test_an_unreachable_quorum_is_not_a_stall():
    w, _, query, ended = _watchdog()
    w.log_end = None
    w.check(query, w._since + 100)
    assert not ended and w.lag is None
