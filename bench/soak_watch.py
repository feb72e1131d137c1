"""What the soak (bench/soak_bench.py) watches, every ``SAMPLE_S``: per process tree (a process and
every process under it, so the job counts its JVM and Python workers) resident memory and open
files; per controller, metadata log and snapshot bytes on disk; per Delta table, live data files
and all files on disk; the job's metrics (its freshness histogram, its lag). And what it makes of
them: growth over the second half, freshness p99 per window, the plots."""
from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path
from typing import Callable, Optional

from quorum.metrics.processes import descendants, open_files, rss_mb

SAMPLE_S = 10.0
FRESHNESS = "sparkraft_materializer_freshness_seconds"
GROWS_BY_DESIGN = ("delta_files",)  # Delta keeps replaced files and log entries a day


def _bytes(directory: Path, suffix: str) -> int:
    return sum(p.stat().st_size for p in directory.rglob(f"*{suffix}") if p.is_file()) if directory.exists() else 0


class Sampler:
    """Samples on a thread of its own; ``samples``: [{"t": seconds since start, family: {name: value}}]."""

    def __init__(self, processes: dict[str, Callable[[], Optional[int]]], controllers: dict[str, Path],
                 warehouse: Path, metrics_url: str):
        self.processes, self.controllers = processes, controllers
        self.warehouse, self.metrics_url = warehouse, metrics_url
        self.samples: list[dict] = []
        self.freshness: list[tuple[float, dict[str, float]]] = []  # (t, cumulative count by bucket bound)
        self._stop = threading.Event()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def latest(self) -> str:
        if not self.samples:
            return "no sample yet"
        s = self.samples[-1]
        return "RSS " + ", ".join(f"{k} {v:.0f} MB" for k, v in s["rss_mb"].items())

    def scrape(self) -> dict[str, float]:
        """The job's metrics without labels, and its freshness buckets under their bound."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            text = urllib.request.urlopen(self.metrics_url, timeout=5).read().decode()
        except OSError:
            return {}
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == f"{FRESHNESS}_bucket":
                    out[f"le={sample.labels['le']}"] = sample.value
                elif not sample.labels:
                    out[sample.name] = sample.value
        return out

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self._sample()
            except Exception as e:  # noqa: BLE001 - a sample missed is not a soak failed
                print(f"soak: a sample failed: {e}", flush=True)

    def _sample(self) -> None:
        from deltalake import DeltaTable

        t = time.monotonic() - self._started
        s: dict = {"t": t, "rss_mb": {}, "open_files": {}, "log_bytes": {}, "snapshot_bytes": {},
                   "delta_live_files": {}, "delta_files": {}}
        for name, pid_of in self.processes.items():
            pid = pid_of()
            if pid is None:
                continue
            tree = [pid, *descendants(pid)]
            s["rss_mb"][name] = sum(map(rss_mb, tree))
            s["open_files"][name] = sum(map(open_files, tree))
        for name, directory in self.controllers.items():
            s["log_bytes"][name] = _bytes(directory, ".log")
            s["snapshot_bytes"][name] = _bytes(directory, ".checkpoint")
        if self.warehouse.exists():
            for table in sorted(p for p in self.warehouse.iterdir() if (p / "_delta_log").is_dir()):
                try:
                    s["delta_live_files"][table.name] = len(DeltaTable(str(table)).file_uris())
                except Exception:  # noqa: BLE001 - a commit in flight
                    pass
                s["delta_files"][table.name] = sum(1 for p in table.rglob("*") if p.is_file())
        metrics = self.scrape()
        buckets = {k[3:]: v for k, v in metrics.items() if k.startswith("le=")}
        if buckets:
            self.freshness.append((t, buckets))
        s["lag_records"] = {"job": metrics.get("sparkraft_materializer_lag_records", float("nan"))}
        self.samples.append(s)


def _series(samples: list[dict]) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        for family, values in s.items():
            if family == "t":
                continue
            for name, v in values.items():
                out.setdefault(f"{family} {name}", []).append((s["t"], v))
    return out


def growth(samples: list[dict]) -> dict[str, tuple[float, float, float]]:
    """Per series: (its peak over the third quarter of the run, its peak over the last quarter, the
    relative growth). Peaks, since most series are saw-teeth (log segments deleted, files
    compacted, a controller killed and restarted): a leak raises the peaks, a saw-tooth does not."""
    if not samples:
        return {}
    end = samples[-1]["t"]
    out = {}
    for name, points in _series(samples).items():
        if name.startswith("lag_records"):
            continue
        third = [v for t, v in points if end / 2 <= t < end * 3 / 4]
        last = [v for t, v in points if t >= end * 3 / 4]
        if third and last:
            a, b = max(third), max(last)
            out[name] = (a, b, (b - a) / a if a else (0.0 if b == 0 else float("inf")))
    return out


def window_p99(freshness: list, window: float) -> list[float]:
    """p99 of the freshness histogram per ``window`` seconds (from the growth of its buckets)."""
    out, previous = [], None
    if not freshness:
        return out
    end = freshness[-1][0]
    k = 0
    while k * window < end:
        inside = [(t, b) for t, b in freshness if k * window <= t < (k + 1) * window]
        if inside:
            last = inside[-1][1]
            base = previous or {le: 0.0 for le in last}
            delta = {le: last[le] - base.get(le, 0.0) for le in last}
            total = delta.get("+Inf", 0.0)
            if total > 0:
                bounds = sorted((float(le), n) for le, n in delta.items() if le != "+Inf")
                out.append(next((le for le, n in bounds if n >= 0.99 * total), float("inf")))
            previous = last
        k += 1
    return out


def plot_series(samples: list[dict], plots_dir: Path, name: str) -> list[Path]:
    from bench.harness.plots import line_chart

    paths = []
    by_family: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for key, points in _series(samples).items():
        family, who = key.split(" ", 1)
        by_family.setdefault(family, {})[who] = [(t / 60, v) for t, v in points]
    units = {"rss_mb": "MB", "open_files": "open files", "log_bytes": "bytes", "snapshot_bytes": "bytes",
             "delta_live_files": "files", "delta_files": "files", "lag_records": "records"}
    for family, series in sorted(by_family.items()):
        spread = family in ("rss_mb", "open_files")  # the job's JVM beside 70 MB controllers: log scale
        paths.append(line_chart(plots_dir / f"{name}-{family.replace('_', '-')}.png", f"Soak: {family} over time",
                                series, "minutes", units.get(family, family), log_x=False, log_y=spread))
    return paths
