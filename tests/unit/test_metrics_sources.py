"""The controller's counts on a scrape: asked of its loop once per scrape, and while the loop is busy
with one long operation, its last answer after a bounded wait (never a made-up one)."""
from __future__ import annotations

import concurrent.futures
import time

from quorum.metrics.registry import Registry
from quorum.metrics.sources import _LastAnswer, _PerScrape


class Loop:
    """A controller loop stand-in: answers at once, or (busy) not until released."""

    def __init__(self):
        self.busy, self.asked, self.value = False, 0, {"offline": 3, "fenced": 1}
        self.pending: list[concurrent.futures.Future] = []

    def ask(self) -> concurrent.futures.Future:
        self.asked += 1
        future = concurrent.futures.Future()
        if self.busy:
            self.pending.append(future)
        else:
            future.set_result(dict(self.value))
        return future


def _scrape(loop: Loop, patience_s: float = 0.2) -> tuple[str, float]:
    registry = Registry()
    view = _PerScrape(_LastAnswer(loop.ask, patience_s))
    for key in ("offline", "fenced"):
        for copy in range(5):  # many gauges on one view, as the controller's
            registry.gauge(f"x_{key}_{copy}", "", lambda k=key: view(k))
    started = time.monotonic()
    text = registry.render()
    return text, time.monotonic() - started


def test_one_scrape_asks_the_loop_once_for_every_gauge():
    loop = Loop()
    text, _ = _scrape(loop)
    assert loop.asked == 1
    assert "x_offline_4 3.0" in text and "x_fenced_0 1.0" in text


def test_a_busy_loop_costs_a_scrape_one_wait_and_gives_no_sample_before_any_answer():
    loop = Loop()
    loop.busy = True
    text, took = _scrape(loop, patience_s=0.3)  # longer than a scrape's sharing (0.25 s)
    assert loop.asked == 1, "a slow answer is not asked again by the next gauge"
    assert took < 0.9
    assert "\nx_offline_0 " not in text  # nothing answered yet: no sample rather than a made-up one


def test_a_busy_loop_gives_its_last_answer_once_it_has_given_one():
    loop = Loop()
    view = _PerScrape(_LastAnswer(loop.ask, 0.1), ttl_s=0.0)
    assert view("offline") == 3
    loop.busy, loop.value = True, {"offline": 7, "fenced": 2}
    started = time.monotonic()
    assert view("offline") == 3  # the last answer, after the patience
    assert time.monotonic() - started < 1.0
    loop.busy = False
    assert view("offline") == 7
