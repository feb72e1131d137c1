"""Restoring a quorum from the lakehouse: from ``storage format --from-warehouse`` to a serving quorum.

A cluster of 200,000 partitions (2,000,000 in full mode; 20,000 with --quick), topics of 100
partitions, RF 3, 30 brokers, is built in this process by the in-memory controller, and its whole
log materialised into a local warehouse by the materialiser (the Spark job's foreachBatch code,
fed straight from the log: the first materialisation, timed). Then three controller processes are
formatted from the newest cut, at once (as on machines of their own), and started; the quorum
serves once a leader answers and DescribeTopics from it lists every topic. Timed: the formats
(reading the cut, writing and verifying the snapshot), then up to serving.

Goal (issue 21): a restore at 2,000,000 partitions in <= 30 s from ``storage format`` to a serving
quorum.
"""
from __future__ import annotations

import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart, largest_size
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "restore"
TITLE = "Restoring a quorum from a warehouse cut: storage format --from-warehouse to a serving quorum"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (200_000, 2_000_000)
GOAL_RESTORE_2M_S = 30.0
MATERIALIZE_CHUNK = 200_000  # records per micro-batch of the first materialisation


def _materialize(c, warehouse: Path, ctx: Context) -> float:
    """The controller's whole log into ``warehouse``, in micro-batches; seconds taken."""

    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer
    from streaming.source import record_row, rows_table

    m = Materializer(DeltaRsWriter(warehouse))
    started = time.monotonic()
    rows: list[tuple] = []

    def flush():
        m.process(rows_table(rows))
        ctx.progress.line(f"  materialised through offset {rows[-1][0]:,}")
        rows.clear()

    for b in c.log:
        for i, raw in enumerate(b.records):
            rows.append(record_row(b.base_offset + i, b.epoch, b.append_time_ms, raw, b.control))
            if len(rows) >= MATERIALIZE_CHUNK:
                flush()
    if rows:
        flush()
    return time.monotonic() - started


def _one_size(partitions: int, ctx: Context) -> dict:
    from bench.snapshot_bench import build_image
    from bench.sparkraft_cluster import SparkraftCluster
    from delta_tables.cut import latest_cut
    from quorum.rpc.controller_client import ControllerClient

    with ctx.progress.phase(f"build a {partitions:,}-partition cluster in this process"):
        c = build_image(partitions, ctx)
    topics = len(c.core.image.topics.by_id)
    warehouse = ctx.work_dir / f"wh-{partitions}"
    with ctx.progress.phase(f"materialise its log ({c.end_offset:,} records)"):
        materialize_s = _materialize(c, warehouse, ctx)
    cut = latest_cut(str(warehouse))
    del c
    started = time.monotonic()
    with ctx.progress.phase(f"restore 3 controllers from the cut at offset {cut.offset:,}"):
        cluster = SparkraftCluster(ctx.work_dir / f"restored-{partitions}", raft_only=False,
                                   format_args=("--from-warehouse", str(warehouse), "--as-of-offset",
                                                str(cut.offset)))
        with cluster:
            formatted_s = max(_format_seconds(cluster, node_id) for node_id in cluster.ports)
            with ControllerClient(cluster.bootstrap, timeout=120) as client:
                while len(client.list_topics()) < topics:
                    time.sleep(0.1)
            serving_s = time.monotonic() - started
            ctx.progress.line(f"  serving {topics:,} topics {serving_s:.1f}s after the formats began")
    return {"partitions": partitions, "topics": topics, "records": cut.offset + 1,
            "materialize_s": materialize_s, "format_s": formatted_s, "restore_s": serving_s}


def _format_seconds(cluster, node_id: int) -> float:
    """What one format said it took ("written and verified in N s")."""
    text = (cluster._dir / f"format-{node_id}.log").read_text()
    return float(text.rsplit(" in ", 1)[1].rstrip().rstrip("s"))


def run(ctx: Context) -> dict:
    from bench.controller_bench import run_sizes

    return run_sizes(ctx, ctx.sizes(QUICK_SIZES, FULL_SIZES), _one_size, {})


def report(document: dict) -> str:
    results = document["results"]
    rows = [[f"{s['partitions']:,}", f"{s['records']:,}", fmt_number(s["materialize_s"], 1),
             fmt_number(s["format_s"], 1), fmt_number(s["restore_s"], 1)] for s in results["sizes"]]
    lines = [f"{measured_on(document)}: topics of 100 partitions, RF 3, 30 brokers; a local warehouse; three "
             f"controller processes formatted at once and started.", "",
             markdown_table(["partitions", "records", "first materialisation s (in-process)",
                             "storage format s (slowest of 3)", "format → serving quorum s"], rows), "",
             f"Goal: a restore at 2,000,000 partitions in ≤ {GOAL_RESTORE_2M_S:g} s from storage format to a "
             f"serving quorum."]
    lines += [f"Errors: {e}" for e in results.get("systems", {}).get("sparkraft", {}).get("errors", [])]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    _largest, where = largest_size(document)
    return [grouped_bar_chart(
        plots_dir / "restore.png", "Restoring a quorum from a warehouse cut", [f"{s['partitions']:,}" for s in sizes],
        {"storage format": [s["format_s"] for s in sizes], "to a serving quorum": [s["restore_s"] for s in sizes]},
        "seconds", subtitle=where, goal=GOAL_RESTORE_2M_S, value_format="{:.1f}")]
