"""A fleet in one Spark application (``materialize --sources``, docs/use/fleet.md): what each
cluster costs.

N single-controller sparkraft quorums of P partitions each (restored from one warehouse cut built
in this process: topics of 100 partitions, RF 3, 30 brokers) are followed by one fleet job.
Measured:

- **first materialisation of the whole fleet**: from the job's start until every cluster's tables
  hold its log;
- **freshness** per cluster at a steady change rate (each cluster one config change a second):
  from a change's append time (the controller's stamp) to the cut that holds it being written
  (the ``snapshots`` table's ``created_at``), p50 and p99 over every change of every cluster;
- **the job's memory**: the resident set of its whole process tree (the JVM, the Python driver and
  the Python workers each query starts), sampled while changes flow;
- **CPU per cluster**: the job's CPU seconds per second while changes flow, and that divided by
  the clusters, against a one-cluster fleet measured in the same run.

Goals (issue 64): 40 clusters with freshness p99 ≤ 5 s each, the job's memory ≤ 2 GiB, each added
cluster costing at most 5 % of a one-cluster application's CPU.
"""
from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import percentile
from bench.suite import Context

NAME = "fleet"
TITLE = "A fleet in one Spark application: first materialisation, freshness, memory and CPU per cluster"
REQUIRES: tuple[str, ...] = ()

QUICK = ((1, 2_000), (4, 2_000))
# --sizes P: one cluster and forty of P partitions each
FULL = ((1, 5_000), (10, 20_000), (40, 5_000))
STEADY_S = {"quick": 20.0, "full": 60.0}
GOAL_P99_S, GOAL_RSS_GIB, GOAL_CPU_SHARE = 5.0, 2.0, 0.05


def _template(partitions: int, ctx: Context) -> Path:
    from bench.restore_bench import _materialize
    from bench.snapshot_bench import build_image

    warehouse = ctx.work_dir / f"template-{partitions}"
    if not warehouse.exists():
        with ctx.progress.phase(f"build a {partitions:,}-partition cluster and materialise it (the template)"):
            _materialize(build_image(partitions, ctx), warehouse, ctx)
    return warehouse


def _tree_rss_mb(pid: int) -> float:
    from quorum.metrics.processes import descendants, rss_mb

    return sum(rss_mb(p) for p in [pid, *descendants(pid)])


def _roles_mb(pid: int) -> dict[str, float]:
    """The job's memory by process: the JVM, the Python driver, the source's planner, the workers."""
    from quorum.metrics.processes import descendants, rss_mb

    out: dict[str, float] = {}
    for p in [pid, *descendants(pid)]:
        try:
            argv = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv)
        role = ("driver (Python)" if p == pid else "Spark JVM" if argv[0].endswith(b"java")
                else "source planner" if b"streaming_source_runner" in text or b"plan_data_source" in text
                else "Python workers" if b"daemon" in text or b"worker" in text else "other")
        out[role] = out.get(role, 0.0) + rss_mb(p)
    return out


def _tree_cpu_s(pid: int) -> float:
    from bench.harness.procs import cpu_seconds
    from quorum.metrics.processes import descendants

    return sum(cpu_seconds(p) for p in [pid, *descendants(pid)])


def _one(clusters: int, partitions: int, ctx: Context) -> dict:
    from bench.harness.procs import python_module_command
    from bench.sparkraft_cluster import SparkraftCluster
    from delta_tables.cut import latest_cut
    from delta_tables.fleet import cluster_warehouse

    template = _template(partitions, ctx)
    cut = latest_cut(str(template))
    work = ctx.work_dir / f"fleet-{clusters}x{partitions}"
    quorums = []
    with ctx.progress.phase(f"start {clusters} quorums of {partitions:,} partitions"):
        for i in range(clusters):
            quorums.append(SparkraftCluster(work / f"q{i}", size=1, raft_only=False, format_args=(
                "--from-warehouse", str(template), "--as-of-offset", str(cut.offset))).__enter__())
    try:
        sources = work / "sources.yaml"
        sources.write_text("sources:\n" + "".join(
            f"  - name: c{i}\n    bootstrap-controller: {q.bootstrap}\n    trigger: 0.5\n    idle-flush: 5\n"
            for i, q in enumerate(quorums)))
        wh = work / "wh"
        started = time.monotonic()
        log = open(work / "job.log", "wb")
        job = subprocess.Popen(python_module_command("sparkraft", "materialize", "--sources", str(sources),
                                                     "--warehouse", str(wh), "--checkpoint", str(work / "ck")),
                               stdout=log, stderr=subprocess.STDOUT)
        try:
            ends = [q.client.describe_quorum().high_watermark for q in quorums]
            with ctx.progress.phase("first materialisation of the whole fleet"):
                while not all(_newest(cluster_warehouse(str(wh), f"c{i}")) >= end - 1 for i, end in enumerate(ends)):
                    if job.poll() is not None:
                        tail = (work / "job.log").read_text()[-2000:]
                        raise RuntimeError(f"the fleet job exited {job.returncode}: {tail}")
                    time.sleep(0.5)
            first_s = time.monotonic() - started
            steady = _steady(quorums, job.pid, STEADY_S[ctx.mode], ctx)
        finally:
            job.terminate()
            try:
                job.wait(120)
            except subprocess.TimeoutExpired:
                job.kill()
            log.close()
        lags = _freshness(wh, clusters, steady["from_ms"])
    finally:
        for q in quorums:
            q.__exit__(None, None, None)
    return {"clusters": clusters, "partitions": partitions, "first_s": first_s, **steady,
            "freshness_p50_s": percentile(lags, 50), "freshness_p99_s": percentile(lags, 99), "changes": len(lags)}


def _newest(warehouse: str) -> int:
    from delta_tables.cut import CutError, latest_cut

    try:
        return latest_cut(warehouse).offset
    except (CutError, OSError):
        return -1


def _steady(quorums, job_pid: int, seconds: float, ctx: Context) -> dict:
    """One config change a second on every cluster for ``seconds``: the job's memory and CPU."""
    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    clients = [ControllerClient(q.bootstrap, timeout=20) for q in quorums]
    rss, cpu0, t0, roles = [], _tree_cpu_s(job_pid), time.monotonic(), {}
    from_ms = time.time() * 1000
    with ctx.progress.phase(f"steady changes, one a second on each cluster, {seconds:g} s"):
        n = 0
        while time.monotonic() - t0 < seconds:
            for c in clients:
                c.call(api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("CLUSTER", ""), (
                    api.AlterableConfig("log.retention.ms", "SET", str(1000 + n)),)),)))
            rss.append(_tree_rss_mb(job_pid))
            if rss[-1] >= max(rss):
                roles = _roles_mb(job_pid)
            n += 1
            time.sleep(max(0.0, t0 + n - time.monotonic()))
    cpu = (_tree_cpu_s(job_pid) - cpu0) / (time.monotonic() - t0)
    for c in clients:
        c.close()
    time.sleep(10)  # the last changes' cuts
    return {"rss_mb_max": max(rss), "rss_mb_median": statistics.median(rss), "cpu_cores": cpu, "from_ms": from_ms,
            "rss_mb_by_process": roles}


def _freshness(wh: Path, clusters: int, from_ms: float) -> list[float]:
    """Seconds from each config change's append time to its cut's ``created_at``, every cluster."""
    from delta_tables.cut import read_table, tables_at
    from delta_tables.fleet import cluster_warehouse
    from delta_tables.schemas import RECORDS, SNAPSHOTS

    out = []
    for i in range(clusters):
        tables = tables_at(cluster_warehouse(str(wh), f"c{i}"), None)
        records = read_table(tables[RECORDS]).select(["offset", "append_time", "type"]).to_pylist()
        cuts = sorted((r["offset"], r["created_at"]) for r in read_table(tables[SNAPSHOTS]).to_pylist())
        for r in records:
            if r["type"] != "CONFIG_RECORD" or r["append_time"].timestamp() * 1000 < from_ms:
                continue
            holding = next((created for offset, created in cuts if offset >= r["offset"]), None)
            if holding is not None:
                out.append((holding - r["append_time"]).total_seconds())
    return out


def run(ctx: Context) -> dict:
    points = []
    runs = tuple((n, p) for p in ctx.only_sizes for n in (1, 40)) or (QUICK if ctx.quick else FULL)
    for clusters, partitions in runs:
        points.append(_one(clusters, partitions, ctx))
        ctx.progress.line(f"  {clusters} x {partitions:,}: first {points[-1]['first_s']:.1f} s, freshness p99 "
                          f"{points[-1]['freshness_p99_s']} s, {points[-1]['rss_mb_max']:,.0f} MB, "
                          f"{points[-1]['cpu_cores']:.2f} cores")
    return {"points": points}


def report(document: dict) -> str:
    points = document["results"]["points"]
    single = next((p for p in points if p["clusters"] == 1), None)
    rows = []
    for p in points:
        share = ((p["cpu_cores"] - single["cpu_cores"]) / (p["clusters"] - 1) / single["cpu_cores"]
                 if single and p["clusters"] > 1 and single["cpu_cores"] else None)
        rows.append([p["clusters"], f"{p['partitions']:,}", fmt_number(p["first_s"], 1),
                     fmt_number(p["freshness_p50_s"], 2), fmt_number(p["freshness_p99_s"], 2), p["changes"],
                     fmt_number(p["rss_mb_max"]), fmt_number(p["cpu_cores"], 2),
                     None if share is None else f"{share * 100:.0f} %"])
    memory = [f"- {p['clusters']} × {p['partitions']:,}: " + ", ".join(
        f"{role} {mb:,.0f} MB" for role, mb in sorted(p["rss_mb_by_process"].items(), key=lambda kv: -kv[1]))
        for p in points if p.get("rss_mb_by_process")]
    return "\n".join([
        f"{measured_on(document)}: single-controller sparkraft quorums restored from one cut, one fleet job; "
        f"one config change a second on every cluster while measuring.", "",
        markdown_table(["clusters", "partitions each", "first materialisation s", "freshness p50 s", "p99 s",
                        "changes", "job memory MB (max)", "job CPU cores", "CPU per added cluster (of one)"], rows),
        *(["", "The job's memory at its largest, by process:", "", *memory] if memory else []),
        *_model(points, single),
        "", f"Goals: 40 clusters with freshness p99 ≤ {GOAL_P99_S:g} s each, the job's memory ≤ {GOAL_RSS_GIB:g} GiB, "
            f"each added cluster ≤ {GOAL_CPU_SHARE * 100:g} % of a one-cluster application's CPU."])


def _model(points: list[dict], single) -> list[str]:
    """A thousand clusters, from what each added cluster cost here (the largest fleet of the one
    cluster's size against that one cluster): a model, not a measurement."""
    same = [p for p in points if single and p["partitions"] == single["partitions"] and p["clusters"] > 1]
    if not same:
        return []
    big = max(same, key=lambda p: p["clusters"])
    mb = (big["rss_mb_max"] - single["rss_mb_max"]) / (big["clusters"] - 1)
    cores = (big["cpu_cores"] - single["cpu_cores"]) / (big["clusters"] - 1)
    return ["", f"Model (not measured) of 1,000 clusters of {single['partitions']:,} partitions, each changing once a "
                f"second, from the cost of each added cluster between 1 and {big['clusters']} here ({mb:,.1f} MB and "
                f"{cores:.3f} cores each): {(single['rss_mb_max'] + 999 * mb) / 1024:,.1f} GB and "
                f"{single['cpu_cores'] + 999 * cores:,.1f} cores in one application."]


def plot(document: dict, plots_dir: Path) -> list[Path]:
    points = document["results"]["points"]
    machine = document["machine"]
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    return [grouped_bar_chart(plots_dir / "fleet.png", "A fleet: freshness p99 and the job's memory",
                              [f"{p['clusters']} x {p['partitions']:,}" for p in points],
                              {"freshness p99 s": [p["freshness_p99_s"] for p in points],
                               "job memory GB": [p["rss_mb_max"] / 1024 for p in points]},
                              "seconds / GB", subtitle=where, value_format="{:.2f}")]
