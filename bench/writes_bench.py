"""Durable writes: sparkraft against etcd, 3 members each on loopback, at concurrency 1, 64 and 256.

Both fsync before they acknowledge. The same generator drives both (``bench.sparkraft_load``:
closed-loop writers in two client processes, one 100-byte record per write): sparkraft through
RaftClient appends to a ``controller start --raft-only`` quorum, etcd through ``KV.Put`` at its
leader. Reported per concurrency: acknowledged writes/s and the latency of each write.

etcd comes from Debian's ``etcd-server`` package (``apt-get install etcd-server``); without it the
benchmark runs sparkraft alone and says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import ratio
from bench.harness.workload import Load
from bench.peers.etcd_cluster import EtcdCluster, etcd_binary
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "writes"
TITLE = "Durable writes: sparkraft vs etcd at concurrency 1, 64 and 256 (3 members, loopback)"
REQUIRES: tuple[str, ...] = ()

CONCURRENCY = (1, 64, 256)
RECORD_BYTES = 100


@dataclass(frozen=True)
class Settings:
    seconds: float
    warmup: float


QUICK = Settings(seconds=4, warmup=1)
FULL = Settings(seconds=15, warmup=3)

SYSTEMS = {
    "sparkraft": ("sparkraft (fsync on)", lambda d: SparkraftCluster(d / "sparkraft")),
    "etcd": ("etcd 3.4 (Debian)", lambda d: EtcdCluster(d / "etcd")),
}


def run(ctx: Context) -> dict:
    settings = QUICK if ctx.quick else FULL
    results: dict = {"settings": {"seconds": settings.seconds, "warmup": settings.warmup,
                                  "record_bytes": RECORD_BYTES, "concurrency": list(CONCURRENCY)},
                     "systems": {}}
    for key, (label, start) in SYSTEMS.items():
        system: dict = {"label": label, "by_concurrency": {}, "errors": []}
        results["systems"][key] = system
        if key == "etcd" and etcd_binary() is None:
            system["errors"].append("etcd is not installed (apt-get install etcd-server): not measured")
            ctx.progress.line("etcd not installed: skipped (apt-get install etcd-server)")
            continue
        try:
            with ctx.progress.phase(f"{label}: start 3 members"):
                cluster = start(ctx.work_dir).__enter__()
            try:
                for c in CONCURRENCY:
                    with ctx.progress.phase(f"{label}: {c} concurrent writers, {settings.seconds:g} s"):
                        r = cluster.throughput(Load(c, 1, RECORD_BYTES), settings.seconds, settings.warmup)
                    system["by_concurrency"][str(c)] = {
                        "writes_per_s": r["records_per_s"], "latency_ms": r["append_latency_ms"],
                        "errors": r["errors"], "cpu_percent": r.get("cpu_percent")}
                    ctx.progress.line(f"  {r['records_per_s']:,.0f} writes/s, p50 "
                                      f"{r['append_latency_ms'].get('p50', float('nan')):.2f} ms")
            finally:
                cluster.__exit__(None, None, None)
        except Exception as e:
            ctx.progress.line(f"{label} FAILED: {type(e).__name__}: {e}")
            system["errors"].append(f"{type(e).__name__}: {e}")
    return results


def _get(system: dict, c: int, *path):
    value = system.get("by_concurrency", {}).get(str(c))
    for p in path:
        value = None if value is None else value.get(p)
    return value


def report(document: dict) -> str:
    results, machine = document["results"], document["machine"]
    ours, etcd = results["systems"].get("sparkraft", {}), results["systems"].get("etcd", {})
    rows = []
    for c in results["settings"]["concurrency"]:
        rows.append([c,
                     fmt_number(_get(ours, c, "writes_per_s")), fmt_number(_get(ours, c, "latency_ms", "p50"), 2),
                     fmt_number(_get(ours, c, "latency_ms", "p99"), 2),
                     fmt_number(_get(etcd, c, "writes_per_s")), fmt_number(_get(etcd, c, "latency_ms", "p50"), 2),
                     fmt_number(_get(etcd, c, "latency_ms", "p99"), 2),
                     fmt_number(ratio(_get(ours, c, "writes_per_s"), _get(etcd, c, "writes_per_s")), 2)])
    errors = [f"{s['label']}: {e}" for s in results["systems"].values() for e in s.get("errors", [])]
    return "\n".join([
        f"{measured_on(document)}; "
        f"fsync of 4 KiB here: p50 {machine['fsync_4k_ms']['p50']:.2f} ms. One {RECORD_BYTES}-byte record "
        f"per write, closed loop, {results['settings']['seconds']:g} s per point.",
        "",
        markdown_table(["concurrency", "sparkraft writes/s", "p50 ms", "p99 ms", "etcd writes/s", "p50 ms",
                        "p99 ms", "sparkraft ÷ etcd"], rows),
        *([""] + [f"Errors: {e}" for e in errors] if errors else []),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    results, machine = document["results"], document["machine"]
    systems = [s for s in results["systems"].values() if s.get("by_concurrency")]
    if not systems:
        return []
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    groups = [f"concurrency {c}" for c in results["settings"]["concurrency"]]
    series = {s["label"]: [_get(s, c, "writes_per_s") for c in results["settings"]["concurrency"]]
              for s in systems}
    return [grouped_bar_chart(plots_dir / "writes-throughput.png", "Durable writes/s, 3 members on loopback",
                              groups, series, "writes/s", subtitle=where, value_format="{:,.0f}")]
