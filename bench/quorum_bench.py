"""The quorum: committed records/s, single-writer commit latency and failover time of three voters
on loopback, sparkraft (fsync on and off) against PySyncObj measured in the same run.

Goals (issue "The quorum", "How fast"): >= 100,000 records/s of 100-byte records with fsync on,
p50 commit latency <= 3 ms for a single writer, failover <= 3 s after SIGKILL of the leader at
default timeouts.

Every system is a :class:`~bench.harness.workload.ReplicatedLogUnderTest` and goes through the
same phases; each phase prints one line when it starts and one when it ends.
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from bench.harness.plots import bar_chart, cdf_chart, grouped_bar_chart, line_chart, points_chart
from bench.harness.results import fmt_number, markdown_table
from bench.harness.stats import latency_summary_ms, ratio, spread
from bench.harness.workload import Load, ReplicatedLogUnderTest
from bench.suite import Context

NAME = "quorum"
TITLE = "The quorum: throughput, commit latency and failover (3 voters, loopback)"
REQUIRES = ("pysyncobj",)

GOAL_RECORDS_PER_S = 100_000
GOAL_P50_MS = 3.0
GOAL_FAILOVER_S = 3.0
RECORD_BYTES = 100
FAILOVER_TIMEOUT_S = 15.0  # five times the goal: longer counts as a failed failover


@dataclass(frozen=True)
class Settings:
    throughput_seconds: float
    warmup_seconds: float
    headline: Load  # the load every system runs; the README's throughput figure
    sweep: tuple[Load, ...]  # further loads (full mode): how throughput depends on batching
    latency_count: int
    latency_warmup: int
    latency_max_seconds: float  # caps slow systems (PySyncObj's default ticks every 50-100 ms)
    failover_reps: int


QUICK = Settings(throughput_seconds=5, warmup_seconds=2, headline=Load(16, 250, RECORD_BYTES), sweep=(),
                 latency_count=500, latency_warmup=50, latency_max_seconds=8, failover_reps=2)
FULL = Settings(throughput_seconds=20, warmup_seconds=5, headline=Load(16, 250, RECORD_BYTES),
                sweep=(Load(16, 1, RECORD_BYTES), Load(16, 10, RECORD_BYTES), Load(16, 100, RECORD_BYTES),
                       Load(16, 500, RECORD_BYTES), Load(8, 250, RECORD_BYTES), Load(24, 250, RECORD_BYTES)),
                latency_count=2000, latency_warmup=200, latency_max_seconds=60, failover_reps=5)


@dataclass(frozen=True)
class System:
    key: str  # stable id in the JSON
    label: str
    start: Callable[[Path], object]  # work dir -> context manager yielding a ReplicatedLogUnderTest
    failover: bool  # measure failover on it (at default timeouts only)
    note: str = ""


def _systems() -> list[System]:
    from bench.peers.pysyncobj_cluster import VARIANTS, PySyncObjCluster
    from bench.sparkraft_cluster import SparkraftCluster

    return [
        System("sparkraft", "sparkraft (fsync on)", lambda d: SparkraftCluster(d, fsync=True), True,
               "defaults; fsync before every acknowledgement"),
        System("sparkraft-nofsync", "sparkraft (fsync off)", lambda d: SparkraftCluster(d, fsync=False),
               False, "defaults; fsync made a no-op (bench/fsync_off.py)"),
        System("pysyncobj-default", "PySyncObj default", lambda d: PySyncObjCluster(d, VARIANTS["default"]),
               True, "SyncObjConf() as shipped; log in memory, no fsync"),
        System("pysyncobj-tuned", "PySyncObj tuned", lambda d: PySyncObjCluster(d, VARIANTS["tuned"]),
               False, "batched, 2 ms tick, 5 ms AppendEntries period"),
        System("pysyncobj-unbatched", "PySyncObj unbatched",
               lambda d: PySyncObjCluster(d, VARIANTS["unbatched"]), False,
               "appendEntriesUseBatch=False: each command sent at once"),
    ]


@dataclass
class SystemResult:
    label: str
    note: str
    throughput: list[dict] = field(default_factory=list)  # one per load, headline first
    latency_ms: dict = field(default_factory=dict)
    latency_samples_ms: list[float] = field(default_factory=list)
    failover_s: list[float] = field(default_factory=list)
    failover: dict = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _measure(system: System, settings: Settings, ctx: Context, result: SystemResult) -> None:
    """Run every phase on ``system``, filling ``result`` as figures arrive (kept if a phase fails)."""
    say = ctx.progress
    with ExitStack() as stack:
        with say.phase(f"{system.label}: start 3 voters"):
            cluster: ReplicatedLogUnderTest = stack.enter_context(system.start(ctx.work_dir / system.key))
        for load in (settings.headline, *settings.sweep):
            with say.phase(f"{system.label}: throughput, {load.describe()}, "
                           f"{settings.warmup_seconds:g}+{settings.throughput_seconds:g} s"):
                measured = cluster.throughput(load, settings.throughput_seconds, settings.warmup_seconds)
            result.throughput.append({"load": asdict(load), **measured})
            say.line(f"{system.label}: {measured['records_per_s']:,.0f} records/s committed; CPU % of a "
                     f"core: {_cpu_text(measured['cpu_percent'])}")
        with say.phase(f"{system.label}: single-writer latency, {settings.latency_count} appends"):
            samples = cluster.latency(settings.latency_count, settings.latency_warmup, RECORD_BYTES,
                                      settings.latency_max_seconds)
        result.latency_ms = latency_summary_ms(samples)
        result.latency_samples_ms = [round(s * 1000, 4) for s in samples]
        say.line(f"{system.label}: latency p50 {result.latency_ms['p50']:.2f} ms, "
                 f"p99 {result.latency_ms['p99']:.2f} ms, max {result.latency_ms['max']:.2f} ms "
                 f"over {result.latency_ms['count']} appends")
        if system.failover:
            for rep in range(1, settings.failover_reps + 1):
                try:
                    with say.phase(f"{system.label}: failover {rep}/{settings.failover_reps} "
                                   "(SIGKILL the leader, time until an append commits)"):
                        seconds = cluster.failover(RECORD_BYTES, FAILOVER_TIMEOUT_S)
                except TimeoutError as e:
                    result.errors.append(f"failover {rep}: {e}")
                    continue
                result.failover_s.append(seconds)
                say.line(f"{system.label}: failover took {seconds:.2f} s")
            result.failover = {**spread(result.failover_s),
                               "failed": settings.failover_reps - len(result.failover_s)}
        with say.phase(f"{system.label}: stop"):
            stack.close()


def _cpu_text(cpu: dict[str, float]) -> str:
    return ", ".join(f"{name} {pct:.0f}" for name, pct in cpu.items()) + f" (total {sum(cpu.values()):.0f})"


def run(ctx: Context) -> dict:
    settings = QUICK if ctx.quick else FULL
    systems: dict[str, dict] = {}
    for system in _systems():
        result = SystemResult(system.label, system.note)
        try:
            _measure(system, settings, ctx, result)
        except Exception as e:  # one broken system must not lose the others' figures
            ctx.progress.line(f"{system.label}: FAILED: {type(e).__name__}: {e}")
            result.errors.append(f"{type(e).__name__}: {e}")
        systems[system.key] = asdict(result)
    # How the writers reach the quorum: RaftClient takes the wire where the voters serve it.
    document = {"settings": _settings_dict(settings), "systems": systems, "client_transport": "the wire, quorum/wire/"}
    document["ratios"] = _ratios(systems)
    for line in _ratio_lines(document["ratios"]):
        ctx.progress.line(line)
    return document


def _settings_dict(settings: Settings) -> dict:
    d = asdict(settings)
    d["goals"] = {"records_per_s": GOAL_RECORDS_PER_S, "latency_p50_ms": GOAL_P50_MS,
                  "failover_s": GOAL_FAILOVER_S}
    return d


# -- figures derived from the measurements ------------------------------------------------------

def _headline_rate(system: dict) -> float:
    return system["throughput"][0]["records_per_s"] if system.get("throughput") else math.nan


def _p50(system: dict) -> float:
    return system.get("latency_ms", {}).get("p50", math.nan)


def _ratios(systems: dict[str, dict]) -> list[dict]:
    """sparkraft against every peer measured in this run: >1 means sparkraft is better."""
    ours = [s for k, s in systems.items() if k.startswith("sparkraft")]
    peers = [s for k, s in systems.items() if not k.startswith("sparkraft")]
    return [{"ours": o["label"], "peer": p["label"],
             "throughput": ratio(_headline_rate(o), _headline_rate(p)),
             "latency_p50_speedup": ratio(_p50(p), _p50(o))}
            for o in ours for p in peers]


def _times(x: float | None, better: str, worse: str) -> str:
    if x is None or math.isnan(x):
        return "not measured"
    return f"{x:.2f}x {better}" if x >= 1 else f"{1 / x:.2f}x {worse}"


def _ratio_lines(ratios: list[dict]) -> list[str]:
    return [f"ratio {r['ours']} vs {r['peer']}: throughput {_times(r['throughput'], 'higher', 'lower')}, "
            f"p50 latency {_times(r['latency_p50_speedup'], 'lower', 'higher')}"
            for r in ratios]


# -- markdown --------------------------------------------------------------------------------

def report(document: dict) -> str:
    results, machine = document["results"], document["machine"]
    settings, systems = results["settings"], results["systems"]
    load = Load(**settings["headline"])
    ours = systems.get("sparkraft", {})
    rows = []
    for key, s in systems.items():
        rate = _headline_rate(s)
        lat = s.get("latency_ms", {})
        fo = s.get("failover", {})
        rows.append([
            s["label"],
            fmt_number(rate),
            "1.00" if key == "sparkraft" else fmt_number(ratio(_headline_rate(ours), rate), 2),
            fmt_number(lat.get("p50"), 2), fmt_number(lat.get("p99"), 2), fmt_number(lat.get("max"), 1),
            _failover_text(fo),
        ])
    table = markdown_table(
        ["system", "records/s committed", "sparkraft (fsync on) ÷ this", "p50 ms", "p99 ms", "max ms",
         "failover median / max s"], rows)
    text = [
        f"Measured {machine['date']} on {machine['cpu_count']} × {machine['cpu_model']}, Python "
        f"{machine['python']}, sparkraft {machine.get('sparkraft_revision')}, PySyncObj "
        f"{machine['packages'].get('pysyncobj')}; fsync of 4 KiB here: p50 "
        f"{machine['fsync_4k_ms']['p50']:.2f} ms; CPUs busy before the start: "
        f"{_busy_text(machine)} ({document['mode']} mode).",
        "",
        table,
        "",
        f"Throughput: {load.describe()} (closed loop, {load.in_flight:,} records in flight; PySyncObj "
        f"gets the same number of one-record calls outstanding), {settings['warmup_seconds']:g} s warm-up "
        f"then {settings['throughput_seconds']:g} s measured. Latency: one writer, one 100-byte record "
        "per append, sequential. Failover: SIGKILL the leader at default timeouts, time until a "
        "client's append commits again.",
        f"sparkraft's writers are separate client processes going through `RaftClient` "
        f"({results.get('client_transport', 'gRPC')}); "
        "PySyncObj has no client protocol, so its load runs inside the leader's own process, with no "
        "network hop: its best case.",
        f"Goals: ≥ {GOAL_RECORDS_PER_S:,} records/s with fsync, p50 ≤ {GOAL_P50_MS:g} ms, "
        f"failover ≤ {GOAL_FAILOVER_S:g} s.",
    ]
    text += ["", "Ratios, all from this run:", "",
             *(f"- {line.removeprefix('ratio ')}" for line in _ratio_lines(results.get("ratios", [])))]
    sweep = _sweep_rows(systems)
    if sweep:
        text += ["", "Throughput by load (records/s committed):", "", sweep]
    errors = [f"- {s['label']}: {e}" for s in systems.values() for e in s.get("errors", [])]
    if errors:
        text += ["", "Errors:", *errors]
    return "\n".join(text)


def _failover_text(fo: dict) -> str | None:
    if not fo:
        return None
    failed = fo.get("failed", 0)
    reps = fo.get("count", 0) + failed
    text = f"{fo['median']:.2f} / {fo['max']:.2f}" if fo.get("count") else "–"
    return text + (f" ({failed} of {reps} > {FAILOVER_TIMEOUT_S:g} s)" if failed else "")


def _busy_text(machine: dict) -> str:
    busy = machine.get("cpu_busy_percent_at_start")
    return "not measured" if busy is None else f"{busy:.0f} %"


def _sweep_rows(systems: dict[str, dict]) -> str:
    loads = []
    for s in systems.values():
        for t in s.get("throughput", []):
            if t["load"] not in loads:
                loads.append(t["load"])
    if len(loads) < 2:
        return ""
    headers = ["load (writers × records/append)"] + [s["label"] for s in systems.values()]
    rows = []
    for load in loads:
        row = [f"{load['writers']} × {load['records_per_append']}"]
        for s in systems.values():
            match = [t for t in s.get("throughput", []) if t["load"] == load]
            row.append(fmt_number(match[0]["records_per_s"]) if match else None)
        rows.append(row)
    return markdown_table(headers, rows)


# -- plots -------------------------------------------------------------------------------------

def plot(document: dict, plots_dir: Path) -> list[Path]:
    results, machine = document["results"], document["machine"]
    systems = results["systems"]
    labels = [s["label"] for s in systems.values()]
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    load = Load(**results["settings"]["headline"])
    paths = [
        bar_chart(plots_dir / "quorum-throughput.png", "Committed records/s, 3 voters on loopback",
                  labels, [_none_if_nan(_headline_rate(s)) for s in systems.values()], "records/s",
                  subtitle=f"{load.describe()}; {where}", goal=GOAL_RECORDS_PER_S,
                  colors=["tab:blue" if k.startswith("sparkraft") else "tab:grey" for k in systems]),
        grouped_bar_chart(plots_dir / "quorum-latency.png", "Single-writer commit latency", labels,
                          {p: [s.get("latency_ms", {}).get(p) for s in systems.values()]
                           for p in ("p50", "p99")},
                          "ms (log scale)", subtitle=where, log_scale=True, goal=GOAL_P50_MS),
        cdf_chart(plots_dir / "quorum-latency-cdf.png", "Single-writer commit latency (CDF)",
                  {s["label"]: s.get("latency_samples_ms", []) for s in systems.values()}, "ms",
                  subtitle=where),
    ]
    failovers = {_failover_label(s): s["failover_s"] for s in systems.values() if s.get("failover")}
    if failovers:
        paths.append(points_chart(plots_dir / "quorum-failover.png",
                                  "Failover: SIGKILL the leader → next committed append", failovers,
                                  "seconds", subtitle=f"default timeouts; {where}", goal=GOAL_FAILOVER_S))
    by_batch = _batch_series(systems)
    if by_batch:
        paths.append(line_chart(plots_dir / "quorum-throughput-by-batch.png",
                                "Committed records/s by records per append (16 writers)", by_batch,
                                "records per append", "records/s", subtitle=where))
    return paths


def _failover_label(system: dict) -> str:
    failed = system["failover"].get("failed", 0)
    return system["label"] + (f"\n({failed} of {failed + len(system['failover_s'])} "
                              f"> {FAILOVER_TIMEOUT_S:g} s, not shown)" if failed else "")


def _batch_series(systems: dict[str, dict]) -> dict[str, list[tuple[float, float]]]:
    series = {}
    for s in systems.values():
        points = sorted((t["load"]["records_per_append"], t["records_per_s"]) for t in s.get("throughput", [])
                        if t["load"]["writers"] == 16)
        if len(points) > 1:
            series[s["label"]] = points
    return series


def _none_if_nan(value: float) -> float | None:
    return None if value is None or math.isnan(value) else value
