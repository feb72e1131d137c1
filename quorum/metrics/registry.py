"""Metrics on ``prometheus_client``, the standard library for them: histograms observed where the
time is measured, gauges and counters read at scrape time from where the numbers live (the Raft
status, the committed image), so nothing is pushed on every change.

Each process has its own :class:`Registry` (a ``CollectorRegistry``, not the library's global one:
tests run several nodes in one process). Histograms are made unregistered where they are observed
(:func:`histogram`) and registered by the process that serves them.
"""
from __future__ import annotations

from typing import Callable, Iterator, Optional

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client import Histogram as _Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

disable_created_metrics()  # no *_created series: a scrape at 2M partitions stays the size it was

DEFAULT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
Histogram = _Histogram


def histogram(name: str, documentation: str, buckets: tuple[float, ...] = DEFAULT_BUCKETS) -> _Histogram:
    """A histogram not yet in any registry (the serving process registers it)."""
    return _Histogram(name, documentation, buckets=buckets, registry=None)


class _ReadAtScrape(Collector):
    """Gauges and counters whose value is read when Prometheus asks; one that cannot answer now (a
    node stopping) gives no sample rather than a made-up one."""

    def __init__(self) -> None:
        self.metrics: list[tuple[str, str, str, Callable[[], Optional[float]]]] = []

    def collect(self) -> Iterator:
        for kind, name, help, read in self.metrics:
            try:
                value = read()
            except Exception:
                continue
            family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(name, help)
            if value is not None:
                family.add_metric([], float(value))
            yield family


class Registry:
    def __init__(self) -> None:
        self.prometheus = CollectorRegistry(auto_describe=False)
        self._read = _ReadAtScrape()
        self.prometheus.register(self._read)
        self._described: list[tuple[str, str, str]] = []

    def gauge(self, name: str, help: str, read: Callable[[], Optional[float]]) -> None:
        self._read.metrics.append(("gauge", name, help, read))
        self._described.append((name, "gauge", help))

    def counter(self, name: str, help: str, read: Callable[[], Optional[float]]) -> None:
        """A counter read at scrape time; exposed as ``name`` (which ends in ``_total``)."""
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends in _total: {name}")
        self._read.metrics.append(("counter", name[: -len("_total")], help, read))
        self._described.append((name, "counter", help))

    def histogram(self, histogram: _Histogram) -> _Histogram:
        self.prometheus.register(histogram)
        self._described.append((histogram._name, "histogram", histogram._documentation))
        return histogram

    def described(self) -> list[tuple[str, str, str]]:
        """(name, type, help) of every metric, in registration order: the docs' reference reads it."""
        return list(self._described)

    def render(self) -> str:
        """Prometheus' text format."""
        return generate_latest(self.prometheus).decode()
