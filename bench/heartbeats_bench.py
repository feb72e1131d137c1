"""Broker heartbeats at scale: N simulated brokers registered with 3 controllers (full metadata
controllers, fsync on, default timeouts) and heartbeating every broker.heartbeat.interval.ms (2 s)
from a few load processes (``bench.heartbeat_load``: one asyncio loop carries thousands of brokers).

Every broker registers and is unfenced (its first heartbeat as caught up is a write) before the
measured window. Reported per N: how long that took for all, then heartbeats/s answered, their
latency, how many failed, how many answers said fenced, brokers fenced at the end, and the
controllers' CPU. At the largest N the active controller
is SIGKILLed half way: how long until every broker has heartbeated successfully again (a heartbeat
sent after the kill and answered), and whether any broker was fenced by the failover (a new active
controller gives every registered broker a fresh session, as Kafka's does).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness.plots import line_chart
from bench.harness.procs import ChildProcess, CpuMeter, python_module_command
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import latency_summary_ms
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "heartbeats"
TITLE = "Broker heartbeats: N brokers against 3 controllers, and a SIGKILL of the active one"
REQUIRES: tuple[str, ...] = ()

INTERVAL_MS = 2000  # broker.heartbeat.interval.ms's default
LOAD_PROCESSES = 2
GOAL_BROKERS = 10_000
GOAL_P99_MS = 100.0


@dataclass(frozen=True)
class Settings:
    brokers: tuple[int, ...]
    seconds: float


QUICK = Settings(brokers=(1_000, 4_000), seconds=16)
FULL = Settings(brokers=(2_000, 5_000, 10_000), seconds=30)


def _fenced(cluster: SparkraftCluster, ids: range) -> int:
    from quorum.rpc.controller_client import ControllerClient

    with ControllerClient(cluster.bootstrap, timeout=30) as client:
        brokers = client.describe_cluster().brokers
    return sum(1 for b in brokers if b.broker_id in ids and b.fenced)


def measure(ctx: Context, n: int, seconds: float, failover: bool) -> dict:
    work = ctx.work_dir / f"brokers-{n}"
    with ctx.progress.phase(f"{n:,} brokers: start 3 controllers"):
        cluster = SparkraftCluster(work, raft_only=False).__enter__()
    try:
        endpoints = {node_id: cluster.wire_endpoint(node_id) for node_id in cluster.ports}
        cluster_id = cluster.client.describe_quorum().cluster_id
        shares = [n // LOAD_PROCESSES + (1 if i < n % LOAD_PROCESSES else 0) for i in range(LOAD_PROCESSES)]
        first = [1 + sum(shares[:i]) for i in range(LOAD_PROCESSES)]
        loads = [ChildProcess(f"brokers-{i}", python_module_command(
            "bench.heartbeat_load", "--controllers", json.dumps(endpoints), "--cluster-id", cluster_id,
            "--first-id", str(first[i]), "--count", str(share), "--interval-ms", str(INTERVAL_MS)),
            work / f"brokers-{i}.log", json_control=True) for i, share in enumerate(shares)]
        with ctx.progress.phase(f"{n:,} brokers: register and unfence"):
            started = time.monotonic()
            for load in loads:
                load.start()
            for load in loads:
                load.receive(600, "registering and unfencing its brokers")
            register_s = time.monotonic() - started
        controllers = {f"controller-{i}": cluster.voter(i).pid for i in cluster.ports}
        active = cluster.leader_id()
        begin = time.monotonic()
        end = begin + seconds
        kill_at = begin + seconds / 2 if failover else None
        for load in loads:
            load.send({"cmd": "run", "end": end, "kill_at": kill_at})
        with ctx.progress.phase(f"{n:,} brokers: heartbeat for {seconds:g} s" + (", SIGKILL the active "
                                                                                 "controller half way" if failover else "")):
            meter = CpuMeter(controllers)
            cpu = None
            if kill_at is not None:
                time.sleep(max(0.0, kill_at - time.monotonic()))
                cpu = meter.percent()  # the window before the kill
                cluster.voter(active).kill()
            parts = [load.receive(seconds + 120, "its heartbeats") for load in loads]
            cpu = cpu or meter.percent()
        for load in loads:
            load.stop(timeout=5)
        latencies = [s for p in parts for s in p["latencies_s"]]
        steady = [s for p in parts for s in p["latencies_before_kill_s"]]
        result = {
            "brokers": n, "seconds": seconds, "register_s": round(register_s, 2),
            "heartbeats_per_s": len(latencies) / seconds, "latency_ms": latency_summary_ms(latencies),
            "latency_before_kill_ms": latency_summary_ms(steady) if kill_at is not None else None,
            "failures": sum(p["failures"] for p in parts), "fenced_answers": sum(p["fenced_answers"] for p in parts),
            "reregistered": sum(p["reregistered"] for p in parts),
            "fenced_at_end": _fenced(cluster, range(1, n + 1)),
            "active_controller_cpu_percent": cpu.get(f"controller-{active}"),
            "controllers_cpu_percent": cpu,
        }
        if kill_at is not None:
            recovered = [t for p in parts for t in p["first_after_kill"].values()]
            result["failover"] = {"recovered": len(recovered), "of": n,
                                  "all_heartbeating_after_s": round(max(recovered) - kill_at, 2) if recovered else None}
        steady_p99 = (f" ({result['latency_before_kill_ms']['p99']:.1f} ms before the SIGKILL)"
                      if kill_at is not None else "")
        ctx.progress.line(f"  {result['heartbeats_per_s']:,.0f} heartbeats/s, p50 {result['latency_ms']['p50']:.1f} "
                          f"ms, p99 {result['latency_ms']['p99']:.1f} ms{steady_p99}, fenced at end "
                          f"{result['fenced_at_end']}, "
                          f"active controller CPU {result['active_controller_cpu_percent']}%"
                          + (f"; after the SIGKILL all heartbeating again in "
                             f"{result['failover']['all_heartbeating_after_s']} s "
                             f"({result['failover']['recovered']:,}/{n:,})" if kill_at is not None else ""))
        return result
    finally:
        cluster.__exit__(None, None, None)


def run(ctx: Context) -> dict:
    settings = QUICK if ctx.quick else FULL
    runs = [measure(ctx, n, settings.seconds, failover=(n == settings.brokers[-1])) for n in settings.brokers]
    return {"settings": {"interval_ms": INTERVAL_MS, "seconds": settings.seconds, "load_processes": LOAD_PROCESSES},
            "runs": runs}


def _steady(run: dict) -> dict:
    """The latency summary without the failover: of the heartbeats sent before the SIGKILL."""
    return run.get("latency_before_kill_ms") or run["latency_ms"]


def report(document: dict) -> str:
    results = document["results"]
    rows = []
    for r in results["runs"]:
        lat = r["latency_ms"]
        fo = r.get("failover")
        steady = _steady(r)
        rows.append([f"{r['brokers']:,}", fmt_number(r["register_s"], 2), fmt_number(r["heartbeats_per_s"]), fmt_number(steady.get("p50"), 1),
                     fmt_number(steady.get("p99"), 1), "–" if fo is None else fmt_number(lat.get("p99"), 1),
                     r["failures"], r["fenced_answers"], r["fenced_at_end"],
                     fmt_number(r["active_controller_cpu_percent"]),
                     "–" if fo is None else f"{fo['all_heartbeating_after_s']} s ({fo['recovered']:,}/{fo['of']:,})"])
    return "\n".join([
        f"{measured_on(document)}. Heartbeat every {results['settings']['interval_ms']} ms per broker, "
        f"{results['settings']['seconds']:g} s per point, brokers in {results['settings']['load_processes']} "
        f"load processes over the wire.",
        "",
        markdown_table(["brokers", "all registered and unfenced s", "heartbeats/s", "p50 ms", "p99 ms", "p99 ms with the failover", "failed",
                        "answered fenced", "fenced at end", "active controller CPU %",
                        "SIGKILL → all heartbeating"], rows),
        "",
        "p50 and p99 of the heartbeats sent before the SIGKILL where there is one; the failures and the "
        "p99 with the failover include the heartbeats sent while there was no active controller.",
        "",
        f"Goal: {GOAL_BROKERS:,} brokers, no spurious fencing, p99 ≤ {GOAL_P99_MS:g} ms.",
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    runs = document["results"]["runs"]
    if not runs:
        return []
    series = {p: [(r["brokers"], _steady(r)[p]) for r in runs if _steady(r).get(p)] for p in ("p50", "p99")}
    where = f"{document['machine']['cpu_count']} CPUs, {document['machine']['date'][:10]}, {document['mode']} mode"
    return [line_chart(plots_dir / "heartbeats-latency.png", "Broker heartbeat latency by number of brokers",
                       {k: v for k, v in series.items() if v}, "brokers", "ms", subtitle=where, log_y=False,
                       references={f"goal p99 {GOAL_P99_MS:g} ms": GOAL_P99_MS})]
