"""Percentiles and summaries, computed the same way for every system measured."""
from __future__ import annotations

import math
import statistics
from typing import Sequence


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) by nearest rank: a value that was actually observed."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def latency_summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """Latencies given in seconds, summarised in milliseconds."""
    ms = [s * 1000 for s in seconds]
    if not ms:
        return {"count": 0}
    return {
        "count": len(ms),
        "mean": statistics.fmean(ms),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "p999": percentile(ms, 99.9),
        "max": max(ms),
    }


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of repeated measurements (failover times, repeated runs)."""
    if not values:
        return {"count": 0}
    return {"count": len(values), "median": statistics.median(values), "min": min(values),
            "max": max(values)}


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else math.nan
