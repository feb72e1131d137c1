"""Undo at scale: planning and executing a revert of 10,000 config changes and 1,000 topics on a
cluster of 200,000 partitions (20,000, 1,000 and 100 with --quick).

The cluster (topics of 100 partitions, RF 3, 30 brokers) is built in this process by the in-memory
controller and materialised (the job's foreachBatch code, fed straight from its log): that cut is
the target. Then 10 configs are set on each of 1,000 of its topics and 1,000 new topics of one
partition are created, and materialised again: the newest cut. Timed:

- **the plan**, as ``sparkraft revert --to-offset`` makes it: both cuts read into images and
  diffed (10,000 config deletions and 1,000 topic deletions);
- **the execution**: three controller processes are restored from the newest cut (``storage format
  --from-warehouse``), and the plan is re-checked against them (their image read from the log) and
  applied through them as sparkraft/revert/execute.py does, in grouped requests;
- **the controllers' write rate**, on the same quorum right after: IncrementalAlterConfigs from 64
  closed-loop writers (``bench metadata_writes``' load), each setting one config.

Goals (issue 63): the plan in under 5 s; the execution at the controllers' write rate (its records
per second at least the write rate's writes per second).
"""
from __future__ import annotations

import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "revert"
TITLE = "Undo at scale: planning and executing a revert of config changes and topics"
REQUIRES: tuple[str, ...] = ()

QUICK = {"partitions": 20_000, "topics_configured": 100, "configs_each": 10, "new_topics": 100}
FULL = {"partitions": 200_000, "topics_configured": 1_000, "configs_each": 10, "new_topics": 1_000}
CONFIG_NAMES = ("retention.ms", "retention.bytes", "segment.ms", "segment.bytes", "max.message.bytes",
                "min.insync.replicas", "cleanup.policy", "delete.retention.ms", "flush.ms", "flush.messages")
GOAL_PLAN_S = 5.0
WRITERS = 64


def _changes(c, scale: dict, ctx: Context) -> None:
    from quorum.controller import api

    names = sorted(c.core.image.topics.topic_names())[:scale["topics_configured"]]
    values = {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    for start in range(0, len(names), 100):
        c.request(api.IncrementalAlterConfigsRequest(tuple(
            (api.ConfigResourceKey("TOPIC", name), tuple(api.AlterableConfig(k, "SET", values.get(k, "86400000"))
                                                       for k in CONFIG_NAMES[:scale["configs_each"]]))
            for name in names[start:start + 100])))
    for start in range(0, scale["new_topics"], 100):
        c.request(api.CreateTopicsRequest(tuple(api.CreatableTopic(f"new{i:06d}", 1, 3)
                                                for i in range(start, min(scale["new_topics"], start + 100)))))
    ctx.progress.line(f"  {len(names) * scale['configs_each']:,} configs set, {scale['new_topics']:,} topics created")


def _materialize_since(c, warehouse: Path, start: int) -> None:
    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer
    from streaming.source import record_row, rows_table

    rows = [record_row(b.base_offset + i, b.epoch, b.append_time_ms, raw, b.control)
            for b in c.log for i, raw in enumerate(b.records) if b.base_offset + i >= start]
    Materializer(DeltaRsWriter(warehouse)).process(rows_table(rows))


def run(ctx: Context) -> dict:
    from bench.controller_bench import BrokerFleet, wait_until
    from bench.harness.workload import Load
    from bench.restore_bench import _materialize
    from bench.snapshot_bench import build_image
    from bench.sparkraft_cluster import SparkraftCluster
    from delta_tables.bootstrap import image_from_cut
    from delta_tables.cut import latest_cut
    from delta_tables.revert import DOMAINS, plan
    from quorum.rpc.controller_client import ControllerClient
    from sparkraft.revert import execute
    from sparkraft.revert.sparkraft_admin import SparkraftAdmin

    scale = QUICK if ctx.quick else FULL
    out: dict = {"settings": {**scale, "writers": WRITERS}}
    warehouse = ctx.work_dir / "wh"
    with ctx.progress.phase(f"build a {scale['partitions']:,}-partition cluster in this process and materialise it"):
        c = build_image(scale["partitions"], ctx)
        _materialize(c, warehouse, ctx)
    target = latest_cut(str(warehouse))
    with ctx.progress.phase("change it, and materialise the changes"):
        start = c.end_offset
        _changes(c, scale, ctx)
        _materialize_since(c, warehouse, start)
    newest = latest_cut(str(warehouse))
    del c
    with ctx.progress.phase("plan the revert (read both cuts, diff them)"):
        started = time.monotonic()
        chosen = plan(image_from_cut(str(warehouse), newest)[0], image_from_cut(str(warehouse), target)[0], DOMAINS,
                      newest.offset, target.offset)
        out["plan_s"] = time.monotonic() - started
    out["steps"] = len(chosen.steps)
    ctx.progress.line(f"  {len(chosen.steps):,} steps in {out['plan_s']:.2f} s")
    target_image = image_from_cut(str(warehouse), target)[0]
    with ctx.progress.phase(f"restore 3 controllers from the newest cut (offset {newest.offset:,})"):
        cluster = SparkraftCluster(ctx.work_dir / "restored", raft_only=False, format_args=(
            "--from-warehouse", str(warehouse), "--as-of-offset", str(newest.offset))).__enter__()
    try:
        with ControllerClient(cluster.bootstrap, timeout=120) as client:
            admin = SparkraftAdmin(client, cluster.bootstrap)
            with ctx.progress.phase("re-check the plan against the controllers' image"):
                started = time.monotonic()
                execute.recheck(chosen, admin, target_image)
                out["recheck_s"] = time.monotonic() - started
            with ctx.progress.phase(f"apply {len(chosen.steps):,} steps"):
                started = time.monotonic()
                outcome = execute.apply(chosen, admin)
                out["apply_s"] = time.monotonic() - started
            out["applied"], out["failed"] = len(outcome.applied), [f"{s.describe()}: {e}" for s, e in outcome.failed]
            out["apply_records_per_s"] = len(outcome.applied) / out["apply_s"]
            ctx.progress.line(f"  {len(outcome.applied):,} applied in {out['apply_s']:.2f} s "
                              f"({out['apply_records_per_s']:,.0f} records/s)")
            with ctx.progress.phase("check: the controllers' image now against the target"):
                now = admin.current_image()
                out["left"] = [s.describe() for s in plan(now, target_image, DOMAINS, now.offset, target.offset).steps]
        fleet = BrokerFleet(cluster.bootstrap, cluster.client.describe_quorum().cluster_id, count=3)
        fleet.start()
        try:
            wait_until(fleet.unfenced, 60, "3 brokers unfenced", interval=0.1)
            with ctx.progress.phase(f"the controllers' write rate: IncrementalAlterConfigs, {WRITERS} writers"):
                r = cluster.throughput(Load(WRITERS, 1, 100), 5.0, 1.0, op="alter-config")
            out["write_rate_per_s"] = r["by_op"].get("alter-config", {}).get("per_s", 0.0)
        finally:
            fleet.stop()
    finally:
        cluster.__exit__(None, None, None)
    return out


def report(document: dict) -> str:
    r = document["results"]
    s = r["settings"]
    ratio = r["apply_records_per_s"] / r["write_rate_per_s"] if r.get("write_rate_per_s") else None
    rows = [["plan (read both cuts, diff)", fmt_number(r["plan_s"], 2), f"≤ {GOAL_PLAN_S:g} s",
             "met" if r["plan_s"] <= GOAL_PLAN_S else "missed"],
            ["re-check against the controllers", fmt_number(r["recheck_s"], 2), "", ""],
            ["apply", fmt_number(r["apply_s"], 2), "", ""],
            ["apply: records/s ÷ the controllers' writes/s", fmt_number(ratio, 2), "≥ 1",
             "met" if ratio is not None and ratio >= 1 else "missed"]]
    lines = [f"{measured_on(document)}: {s['partitions']:,} partitions (topics of 100, RF 3, 30 brokers); "
             f"{s['topics_configured'] * s['configs_each']:,} configs set and {s['new_topics']:,} topics created "
             f"after the target cut; {r['steps']:,} steps, {r['applied']:,} applied "
             f"({fmt_number(r['apply_records_per_s'])} records/s); the controllers' write rate "
             f"{fmt_number(r.get('write_rate_per_s'))} IncrementalAlterConfigs/s from {s['writers']} writers.", "",
             markdown_table(["", "seconds / ratio", "goal", ""], rows)]
    lines += [f"Refused: {f}" for f in r.get("failed", [])]
    lines += ["Afterwards the controllers' image equals the target cut's in every domain." if not r.get("left")
              else f"Afterwards {len(r['left'])} steps' worth still differ from the target, first: {r['left'][0]}"]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    r, machine = document["results"], document["machine"]
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    return [grouped_bar_chart(plots_dir / "revert.png", "A revert: plan, re-check and apply",
                              [f"{r['settings']['partitions']:,} partitions"],
                              {"plan": [r["plan_s"]], "re-check": [r["recheck_s"]], "apply": [r["apply_s"]]},
                              "seconds", subtitle=where, goal=GOAL_PLAN_S, value_format="{:.2f}")]
