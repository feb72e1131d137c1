"""The first materialisation of a large log on a Spark standalone cluster, against a local session.

A controller quorum holding a log of 200,000 partitions (2,000,000 too in full mode; 20,000 with
--quick) is built by the rig of ``bench controller`` (3 controller processes, fsync on, 28 brokers
heartbeating from this process; topics of 100 partitions, RF 3). Then the job materialises that log
from nothing, ``spark-submit jobs/materialize.py --available-now``, twice in the same run: with
``--master local[2]``, and with ``--master spark://...``, a standalone master and two workers of one
core each started here (the source's ranges are read on their executors; the replay and the Delta
writes stay on the driver). Timed: submit -> exit, the JVMs' start included, and within it the
job's micro-batches (source, then Delta). Checked: the newest cut holds the whole log and
``partitions`` has a row for each partition. Where the controllers have taken a snapshot by then (at
2,000,000 partitions they have), the job reads that snapshot and the records after it, as it would
from any quorum whose log starts after offset 0: the report says which.

Goal (issue 21): the first materialisation of a 2,000,000-partition log on the cluster <= 25 s,
5x the 116 s measured locally by the first wave. This machine has 2 cores: the cluster's two
workers, the driver and the quorum share them.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart, largest_size
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "cluster"
TITLE = "The first materialisation of a large log: a Spark standalone cluster against a local session"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (200_000, 2_000_000)
GOAL_2M_CLUSTER_S = 25.0
FIRST_WAVE_LOCAL_S = 116.0
DRIVER_MEMORY = "8g"
JOB_TIMEOUT_S = 1800
_BATCH = re.compile(r"Micro-batch \d+: .*\(source ([\d.]+)s, Delta ([\d.]+)s\)")
_SNAPSHOT = re.compile(r"Materializer loaded a snapshot ending at offset (\d+)")


def _one_size(partitions: int, ctx: Context) -> dict:
    from bench.controller_bench import create_partitions, start_rig, stop_rig
    from bench.harness.spark_standalone import StandaloneCluster

    work = ctx.work_dir / f"p{partitions}"
    work.mkdir()
    with ctx.progress.phase(f"{partitions:,} partitions: 3 controllers, 28 brokers"):
        rig = start_rig(work, ctx, process_brokers=())
    try:
        with ctx.progress.phase(f"create {partitions:,} partitions"):
            create_partitions(rig, partitions, ctx)
        end = rig.cluster.client.describe_quorum().high_watermark
        out: dict = {"partitions": partitions, "records": end}
        with ctx.progress.phase("materialise it with --master local[2]"):
            out["local"] = _materialize(rig.cluster.bootstrap, "local[2]", work / "local", partitions, end)
        with ctx.progress.phase("materialise it with --master local[2] --writer delta-spark"):
            out["local_delta_spark"] = _materialize(rig.cluster.bootstrap, "local[2]", work / "local-delta-spark",
                                                    partitions, end, writer="delta-spark")
        with ctx.progress.phase("start a standalone master and two workers of one core"):
            (work / "spark").mkdir()
            spark = StandaloneCluster(work / "spark", workers=2, cores=1, memory="2g")
        try:
            with ctx.progress.phase(f"materialise it with --master {spark.url}"):
                out["cluster"] = _materialize(rig.cluster.bootstrap, spark.url, work / "cluster", partitions, end)
            with ctx.progress.phase(f"materialise it with --master {spark.url} --writer delta-spark"):
                out["cluster_delta_spark"] = _materialize(rig.cluster.bootstrap, spark.url,
                                                          work / "cluster-delta-spark", partitions, end,
                                                          writer="delta-spark")
            for where, master in (("local", "local[2]"), ("cluster", spark.url)):
                with ctx.progress.phase(f"leaders per broker with Delta's Spark reader, --master {master}"):
                    out[f"{where}_read"] = _read(master, work / "cluster" / "wh", work / f"read-{where}.log")
        finally:
            spark.close()
        ctx.progress.line(f"  local[2] {out['local']['seconds']:.1f}s, cluster {out['cluster']['seconds']:.1f}s "
                          f"for {end:,} records")
        return out
    finally:
        stop_rig(rig)


def _materialize(bootstrap: str, master: str, work: Path, partitions: int, end: int,
                 writer: str = "deltalake") -> dict:
    """``spark-submit --master master`` of the job, available-now, into a new warehouse, with
    ``writer`` (delta-spark: Delta's jars as resolved, by --jars): timed and checked."""
    from bench.harness.procs import REPO
    from bench.harness.spark_standalone import spark_bin, spark_env
    from delta_tables.cut import latest_cut, tables_at
    from delta_tables.schemas import PARTITIONS

    work.mkdir()
    wh, log_path = work / "wh", work / "job.log"
    command = [spark_bin("spark-submit"), "--master", master, "--driver-memory", DRIVER_MEMORY,
               "--conf", "spark.driver.maxResultSize=0"]
    if writer == "delta-spark":
        from delta_tables.spark_session import DELTA_CONFS, delta_jars

        command += ["--jars", ",".join(delta_jars() or []),
                    *(a for key, value in DELTA_CONFS.items() for a in ("--conf", f"{key}={value}"))]
    command += [str(REPO / "jobs" / "materialize.py"), "--bootstrap-controller", bootstrap, "--warehouse", str(wh),
                "--checkpoint", str(work / "ck"), "--available-now", "--writer", writer]
    started = time.monotonic()
    with open(log_path, "wb") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=spark_env(), cwd=REPO, timeout=JOB_TIMEOUT_S)
    seconds = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    if done.returncode != 0:
        raise RuntimeError(f"the job with --master {master} exited {done.returncode}: {text[-2000:]}")
    cut = latest_cut(str(wh))
    rows = tables_at(str(wh), cut)[PARTITIONS].to_pyarrow_dataset().count_rows()
    if cut.offset < end - 1 or rows != partitions:
        raise RuntimeError(f"the job with --master {master} left a cut at offset {cut.offset} with {rows:,} "
                           f"partitions (the log ends at {end - 1:,}, with {partitions:,})")
    batches = [(float(s), float(d)) for s, d in _BATCH.findall(text)]
    # where the quorum had taken a snapshot, the job loads it and replays only the records after it
    snapshot = [int(offset) for offset in _SNAPSHOT.findall(text)]
    return {"seconds": seconds, "cut": cut.offset, "partition_rows": rows, "micro_batches": len(batches),
            "source_s": sum(s for s, _ in batches), "delta_s": sum(d for _, d in batches),
            "snapshot_end": snapshot[-1] if snapshot else None,
            "replayed": cut.offset - snapshot[-1] if snapshot else cut.offset + 1}


READ_SQL = "SELECT leader, count(*) AS led FROM partitions GROUP BY leader ORDER BY leader"


def _read(master: str, wh: Path, log_path: Path) -> dict:
    """``sparkraft sql --engine spark`` of READ_SQL on ``master``: Delta's own reader scanning the
    partitions table on the executors. Timed (the JVM's start included, as a user waits for it) and
    checked against DataFusion's answer on the same table."""
    import json
    import os

    from bench.harness.procs import REPO
    from delta_tables.sql import query_datafusion

    env = {**os.environ, "SPARKRAFT_SPARK_MASTER": master}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "sparkraft", "sql", READ_SQL, "--warehouse", str(wh),
                           "--engine", "spark", "--json"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=JOB_TIMEOUT_S)
    seconds = time.monotonic() - started
    log_path.write_text(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"the query with --master {master} exited {done.returncode}: {done.stderr[-2000:]}")
    rows = json.loads(done.stdout)
    expected = query_datafusion(str(wh), READ_SQL).to_pylist()
    if rows != expected:
        raise RuntimeError(f"Delta's Spark reader on {master} answered {rows[:5]}..., DataFusion {expected[:5]}...")
    return {"seconds": seconds, "brokers": len(rows), "partitions": sum(r["led"] for r in rows)}


def run(ctx: Context) -> dict:
    from bench.controller_bench import run_sizes

    return run_sizes(ctx, ctx.sizes(QUICK_SIZES, FULL_SIZES), _one_size, {})


def report(document: dict) -> str:
    results = document["results"]
    rows = [[f"{s['partitions']:,}", f"{s['records']:,}", _read_as(s["cluster"]),
             *(_seconds(s, m) for m in ("local", "cluster", "local_delta_spark", "cluster_delta_spark")),
             *(f"{fmt_number(s[m]['source_s'], 1)} / {fmt_number(s[m]['delta_s'], 1)}" for m in ("local", "cluster")),
             fmt_number(s["local"]["seconds"] / s["cluster"]["seconds"], 2),
             *(_seconds(s, m) for m in ("local_read", "cluster_read"))] for s in results["sizes"]]
    lines = [f"{measured_on(document)}: 3 controller processes (fsync on), 28 brokers, topics of 100 partitions, "
             f"RF 3; `spark-submit jobs/materialize.py --available-now` into a new local warehouse, with "
             f"`--master local[2]` and on a standalone master with two workers of one core, with delta-rs's "
             f"writer (the default) and Delta's Spark writer. Then `sparkraft sql --engine spark` of "
             f"`{READ_SQL}`: Delta's Spark reader scanning `partitions` on the executors (start to answer, "
             f"checked against DataFusion's).", "",
             markdown_table(["partitions", "records", "the job read", "local[2]: submit → exit s",
                             "cluster: submit → exit s", "local[2], Delta's Spark writer s",
                             "cluster, Delta's Spark writer s", "local[2]: source / Delta s",
                             "cluster: source / Delta s", "local ÷ cluster", "query, local[2] s",
                             "query, cluster s"], rows), "",
             f"Goal: the first materialisation of 2,000,000 partitions on the cluster ≤ {GOAL_2M_CLUSTER_S:g} s "
             f"({FIRST_WAVE_LOCAL_S:g} s measured locally by the first wave)."]
    lines += [f"Errors: {e}" for e in results.get("systems", {}).get("sparkraft", {}).get("errors", [])]
    return "\n".join(lines)


def _seconds(size: dict, run: str) -> str:
    return fmt_number(size[run]["seconds"], 1) if run in size else "–"  # "–": a run from before it was measured


def _read_as(run: dict) -> str:
    """What the job's first micro-batch held: the whole log, or the quorum's snapshot and the rest."""
    if "replayed" not in run:
        return "–"  # a run from before this was recorded
    if run["snapshot_end"] is None:
        return f"{run['replayed']:,} records"
    return f"a snapshot to offset {run['snapshot_end']:,} + {run['replayed']:,} records"


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    _largest, where = largest_size(document)
    return [grouped_bar_chart(
        plots_dir / "cluster.png", "First materialisation: submit to exit", [f"{s['partitions']:,}" for s in sizes],
        {"local[2]": [s["local"]["seconds"] for s in sizes],
         **({"local[2], Delta's Spark writer": [s["local_delta_spark"]["seconds"] for s in sizes]}
            if all("local_delta_spark" in s for s in sizes) else {}),
         "standalone cluster": [s["cluster"]["seconds"] for s in sizes],
         **({"standalone cluster, Delta's Spark writer": [s["cluster_delta_spark"]["seconds"] for s in sizes]}
            if all("cluster_delta_spark" in s for s in sizes) else {})},
        "seconds", subtitle=where, goal=GOAL_2M_CLUSTER_S, value_format="{:.1f}")]
