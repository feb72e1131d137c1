"""Metrics in Prometheus' text exposition format (0.0.4): gauges read at scrape time, histograms.

Gauges are callables, so the numbers come from where they live (the Raft status, the committed
image) at the moment Prometheus asks, and nothing has to be pushed on every change. Histograms
count observations into cumulative buckets, as Prometheus expects.
"""
from __future__ import annotations

import math
import threading
from typing import Callable, Optional

DEFAULT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _number(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    if value == math.inf:
        return "+Inf"
    return repr(float(value)) if isinstance(value, float) else str(int(value))


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = DEFAULT_BUCKETS):
        self.buckets = tuple(sorted(buckets))
        self._counts = [0] * len(self.buckets)
        self._sum = 0.0
        self._count = 0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self._lock:
            self._sum += value
            self._count += 1
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    self._counts[i] += 1

    def snapshot(self) -> tuple[list[tuple[float, int]], float, int]:
        with self._lock:
            return list(zip(self.buckets, self._counts)), self._sum, self._count


class Registry:
    def __init__(self) -> None:
        self._metrics: dict[str, tuple[str, str, object]] = {}  # name -> (type, help, source)

    def gauge(self, name: str, help: str, read: Callable[[], Optional[float]]) -> None:
        self._metrics[name] = ("gauge", help, read)

    def histogram(self, name: str, help: str, histogram: Histogram) -> Histogram:
        self._metrics[name] = ("histogram", help, histogram)
        return histogram

    def described(self) -> list[tuple[str, str, str]]:
        """(name, type, help) of every metric, in registration order: the docs' reference reads it."""
        return [(name, kind, help) for name, (kind, help, _) in self._metrics.items()]

    def render(self) -> str:
        lines: list[str] = []
        for name, (kind, help, source) in self._metrics.items():
            lines.append(f"# HELP {name} {help}")
            lines.append(f"# TYPE {name} {kind}")
            if kind == "gauge":
                try:
                    value = source()
                except Exception:  # a source that cannot answer now (stopping): no sample
                    continue
                if value is not None:
                    lines.append(f"{name} {_number(value)}")
            else:
                buckets, total, count = source.snapshot()
                for bound, n in buckets:
                    lines.append(f'{name}_bucket{{le="{_number(bound)}"}} {n}')
                lines.append(f'{name}_bucket{{le="+Inf"}} {count}')
                lines.append(f"{name}_sum {_number(total)}")
                lines.append(f"{name}_count {count}")
        return "\n".join(lines) + "\n"
