"""When a broker writes its metadata cache: after enough records or the interval, never while it is
behind the quorum unless it is far behind (a million-election balance at 2M set off a 2M-partition
cache write in every broker process still replaying it)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from quorum.broker.metadata_client import BEHIND_CACHE_FACTOR, cache_due


def test_caught_up_it_writes_after_enough_records_or_the_interval():
    assert cache_due(pending=100, every=100, interval_due=False, lag=0)
    assert not cache_due(pending=99, every=100, interval_due=False, lag=0)
    assert cache_due(pending=1, every=100, interval_due=True, lag=0)
    assert not cache_due(pending=0, every=100, interval_due=True, lag=0)  # nothing new


def test_behind_it_waits_until_caught_up_or_far_behind():
    assert not cache_due(pending=1_000_000, every=500_000, interval_due=True, lag=1)
    assert not cache_due(pending=BEHIND_CACHE_FACTOR * 500_000 - 1, every=500_000, interval_due=True, lag=10**6)
    assert cache_due(pending=BEHIND_CACHE_FACTOR * 500_000, every=500_000, interval_due=False, lag=10**6)


@given(st.integers(-5, 10**7), st.integers(1, 10**6), st.booleans(), st.integers(0, 10**7))
def test_behind_never_writes_sooner_than_caught_up(pending, every, interval_due, lag):
    if cache_due(pending, every, interval_due, lag):
        assert cache_due(pending, every, interval_due, 0)
        assert lag == 0 or pending >= BEHIND_CACHE_FACTOR * every
