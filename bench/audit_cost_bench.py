"""What the audit trail costs a write: ``bench metadata_writes``' IncrementalAlterConfigs with the
trail on (the default) and off (``metadata.audit.enable=false``), in alternating rounds on fresh
clusters, with etcd's Put measured in the same run as the peer.

One short run of each is not enough: on 2 cores two runs of the same thing differ by up to 10 %
(etcd's own figures moved that much between two runs of ``metadata_writes``), more than the cost
being looked for. So each configuration runs ROUNDS times, alternating (on, off, on, off...), and
the cost at each concurrency is 1 - median(on) / median(off): how many fewer writes per second
the trail leaves, with each round's figure shown beside the medians.

Goal (issue 62): at most 5 % at every concurrency.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import ratio
from bench.harness.workload import Load
from bench.suite import Context

NAME = "audit_cost"
TITLE = "The audit trail's cost on IncrementalAlterConfigs (on and off, alternating), etcd's Put beside"
REQUIRES: tuple[str, ...] = ()

CONCURRENCY = (1, 16, 64, 256)
VALUE_BYTES = 100
BROKERS = 3
GOAL_PERCENT = 5.0
ROUNDS = {"quick": 2, "full": 4}
SECONDS = {"quick": (3.0, 1.0), "full": (8.0, 2.0)}  # measured, warm-up
CONFIGS = {"on": {}, "off": {"metadata.audit.enable": "false"}}


def _round(ctx: Context, key: str, rnd: int, out: dict) -> None:
    from bench.controller_bench import BrokerFleet, wait_until
    from bench.sparkraft_cluster import SparkraftCluster

    seconds, warmup = SECONDS[ctx.mode]
    with ctx.progress.phase(f"round {rnd + 1}, audit {key}: start 3 controllers and {BROKERS} brokers"):
        cluster = SparkraftCluster(ctx.work_dir / f"sparkraft-{key}-{rnd}", raft_only=False,
                                   overrides=CONFIGS[key]).__enter__()
    try:
        fleet = BrokerFleet(cluster.bootstrap, cluster.client.describe_quorum().cluster_id, count=BROKERS)
        fleet.start()
        try:
            wait_until(fleet.unfenced, 60, f"{BROKERS} brokers unfenced", interval=0.1)
            for c in CONCURRENCY:
                with ctx.progress.phase(f"  audit {key}: {c} writers, {seconds:g} s"):
                    r = cluster.throughput(Load(c, 1, VALUE_BYTES), seconds, warmup, op="alter-config")
                per_s = r["by_op"].get("alter-config", {}).get("per_s", 0.0)
                out.setdefault(key, {}).setdefault(str(c), []).append(per_s)
                ctx.progress.line(f"  audit {key}, {c} writers: {per_s:,.0f}/s")
        finally:
            fleet.stop()
    finally:
        cluster.__exit__(None, None, None)


def _etcd(ctx: Context, out: dict) -> None:
    from bench.peers.etcd_cluster import EtcdCluster, etcd_binary

    if etcd_binary() is None:
        out["etcd_error"] = "etcd is not installed (apt-get install etcd-server): not measured"
        return
    seconds, warmup = SECONDS[ctx.mode]
    with ctx.progress.phase("etcd: start 3 members"):
        cluster = EtcdCluster(ctx.work_dir / "etcd").__enter__()
    try:
        for c in CONCURRENCY:
            with ctx.progress.phase(f"  etcd put: {c} writers, {seconds:g} s"):
                r = cluster.throughput(Load(c, 1, VALUE_BYTES), seconds, warmup, op="put")
            out.setdefault("etcd", {})[str(c)] = r["by_op"].get("put", {}).get("per_s", 0.0)
    finally:
        cluster.__exit__(None, None, None)


def run(ctx: Context) -> dict:
    rounds = ROUNDS[ctx.mode]
    out: dict = {"settings": {"rounds": rounds, "seconds": SECONDS[ctx.mode][0], "concurrency": list(CONCURRENCY),
                              "value_bytes": VALUE_BYTES, "brokers": BROKERS}, "per_s": {}}
    for rnd in range(rounds):
        for key in (("on", "off") if rnd % 2 == 0 else ("off", "on")):
            _round(ctx, key, rnd, out["per_s"])
    _etcd(ctx, out["per_s"])
    if "etcd_error" in out["per_s"]:
        out["etcd_error"] = out["per_s"].pop("etcd_error")
    return out


def cost_percent(results: dict, c: int) -> float | None:
    """How many fewer writes per second with the trail on, in percent of those without it (medians)."""
    on, off = (results["per_s"].get(k, {}).get(str(c)) for k in ("on", "off"))
    if not on or not off:
        return None
    return 100.0 * (1 - statistics.median(on) / statistics.median(off))


def report(document: dict) -> str:
    results = document["results"]
    per_s = results["per_s"]
    rows = []
    for c in results["settings"]["concurrency"]:
        on, off = per_s.get("on", {}).get(str(c), []), per_s.get("off", {}).get(str(c), [])
        cost = cost_percent(results, c)
        etcd = per_s.get("etcd", {}).get(str(c))
        rows.append([c, fmt_number(statistics.median(on)) if on else None,
                     " / ".join(fmt_number(v) for v in on), fmt_number(statistics.median(off)) if off else None,
                     " / ".join(fmt_number(v) for v in off),
                     None if cost is None else f"{cost:+.1f} %" + (" (goal ≤ 5 %)" if cost > GOAL_PERCENT else ""),
                     fmt_number(etcd), fmt_number(ratio(statistics.median(on), etcd), 2) if on and etcd else None])
    lines = [f"{measured_on(document)}: IncrementalAlterConfigs, 3 controllers and {BROKERS} brokers, fsync on, "
             f"{results['settings']['rounds']} rounds of each configuration alternating, "
             f"{results['settings']['seconds']:g} s per point.", "",
             markdown_table(["writers", "audit on: median per s", "rounds", "audit off: median per s", "rounds",
                             "cost", "etcd Put per s", "audit on ÷ etcd"], rows), "",
             f"Goal: the trail costs at most {GOAL_PERCENT:g} % at every concurrency (a negative cost is noise)."]
    if results.get("etcd_error"):
        lines.append(f"Errors: {results['etcd_error']}")
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    results, machine = document["results"], document["machine"]
    per_s = results["per_s"]
    if not per_s.get("on"):
        return []
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    cs = results["settings"]["concurrency"]
    series = {f"audit {k}": [statistics.median(per_s[k][str(c)]) if per_s.get(k, {}).get(str(c)) else None
                             for c in cs] for k in ("on", "off")}
    if per_s.get("etcd"):
        series["etcd put"] = [per_s["etcd"].get(str(c)) for c in cs]
    return [grouped_bar_chart(plots_dir / "audit-cost.png", "IncrementalAlterConfigs/s with the audit trail on and off",
                              [f"{c} writers" for c in cs], series, "writes/s", subtitle=where,
                              value_format="{:,.0f}")]
