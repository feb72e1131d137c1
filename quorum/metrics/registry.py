"""Metrics on ``prometheus_client``, the standard library for them: histograms observed where the
time is measured, gauges and counters read at scrape time from where the numbers live (the Raft
status, the committed image), so nothing is pushed on every change.

Each process has its own :class:`Registry` (a ``CollectorRegistry``, not the library's global one:
tests run several nodes in one process). Histograms are made unregistered where they are observed
(:func:`histogram`) and registered by the process that serves them.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client import Histogram as _Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

disable_created_metrics()  # no *_created series: a scrape at 2M partitions stays the size it was

DEFAULT_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
Histogram = _Histogram


def histogram(name: str, documentation: str, buckets: tuple[float, ...] = DEFAULT_BUCKETS,
              kafka: Optional[str] = None, labels: tuple[str, ...] = ()) -> _Histogram:
    """A histogram not yet in any registry (the serving process registers it)."""
    return _Histogram(name, with_kafka_name(documentation, kafka), labelnames=labels, buckets=buckets, registry=None)


class _ReadAtScrape(Collector):
    """Gauges and counters whose value is read when Prometheus asks; one that cannot answer now (a
    node stopping, a follower asked what only the leader knows) gives no sample rather than a
    made-up one. A labelled gauge's read gives {label value: value}."""

    def __init__(self) -> None:
        self.metrics: list[tuple[str, str, str, Optional[str], Callable[[], Any]]] = []

    def collect(self) -> Iterator:
        for kind, name, help, label, read in self.metrics:
            try:
                value = read()
            except Exception:
                value = None
            family = (GaugeMetricFamily if kind == "gauge" else CounterMetricFamily)(
                name, help, labels=[label] if label else None)
            if label and value is not None:
                for key, v in sorted(value.items()):
                    family.add_metric([str(key)], float(v))
            elif value is not None:
                family.add_metric([], float(value))
            yield family


def with_kafka_name(help: str, kafka: Optional[str]) -> str:
    """The help text, naming the Kafka metric (JMX name) this one maps to."""
    return f"{help} Kafka: {kafka}." if kafka else help


class Registry:
    def __init__(self) -> None:
        self.prometheus = CollectorRegistry(auto_describe=False)
        self._read = _ReadAtScrape()
        self.prometheus.register(self._read)
        self._described: list[tuple[str, str, str, str]] = []

    def gauge(self, name: str, help: str, read: Callable[[], Optional[float]], kafka: Optional[str] = None,
              label: Optional[str] = None) -> None:
        """A gauge read at scrape time; with ``label``, ``read`` gives {label value: value}."""
        self._read_at_scrape("gauge", name, name, help, read, kafka, label)

    def counter(self, name: str, help: str, read: Callable[[], Optional[float]], kafka: Optional[str] = None,
                label: Optional[str] = None) -> None:
        """A counter read at scrape time; exposed as ``name`` (which ends in ``_total``); with ``label``,
        ``read`` gives {label value: value}."""
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends in _total: {name}")
        self._read_at_scrape("counter", name[: -len("_total")], name, help, read, kafka, label)

    def _read_at_scrape(self, kind: str, family: str, name: str, help: str, read: Callable[[], Any],
                        kafka: Optional[str], label: Optional[str]) -> None:
        self._read.metrics.append((kind, family, with_kafka_name(help, kafka), label, read))
        self._described.append((f"{name}{{{label}}}" if label else name, kind, help, kafka or ""))

    def histogram(self, histogram: _Histogram) -> _Histogram:
        """Serve ``histogram`` (made by :func:`histogram`, its help naming its Kafka metric if any)."""
        self.prometheus.register(histogram)
        help, _, kafka = histogram._documentation.partition(" Kafka: ")
        labels = f"{{{','.join(histogram._labelnames)}}}" if histogram._labelnames else ""
        self._described.append((histogram._name + labels, "histogram", help, kafka.removesuffix(".")))
        return histogram

    def described(self) -> list[tuple[str, str, str, str]]:
        """(name, type, help, Kafka's name or "") of every metric, in registration order: the docs'
        reference and the dashboard's check read it."""
        return list(self._described)

    def render(self) -> str:
        """Prometheus' text format."""
        return generate_latest(self.prometheus).decode()
