"""Snapshots: write time, load time and size at 20,000, 200,000 and 2,000,000 partitions (20,000 in --quick).

The image is built by the in-memory controller driver (30 brokers, topics of 100 partitions, RF 3,
everything replayed as a standby would). Writing is what a controller's snapshot thread does
(serialise the immutable image, fsync, rename); loading is what a restart does (read, check every
CRC, rebuild the image). Goals at 2M (issue "Snapshots"): written in <= 10 s off the event loop,
loaded in <= 5 s.
"""
from __future__ import annotations

import time
from pathlib import Path

from bench.harness.plots import line_chart
from bench.harness.results import fmt_number, markdown_table
from bench.suite import Context

NAME = "snapshot"
TITLE = "Snapshots: write, load and size by partition count"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (20_000, 200_000, 2_000_000)
GOAL_WRITE_S, GOAL_LOAD_S = 10.0, 5.0


def build_image(partitions: int, ctx: Context):
    from quorum.controller import api
    from quorum.controller.local import LocalController
    from quorum.uuids import random_uuid

    c = LocalController()
    epochs = {}
    for b in range(101, 131):
        epochs[b] = c.request(api.RegisterBrokerRequest(
            b, c.cluster_id, random_uuid(), (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + b),),
            f"rack-{b % 3}")).broker_epoch
    for b, e in epochs.items():
        c.request(api.BrokerHeartbeatRequest(b, e, c.end_offset))
    topics = partitions // 100
    for start in range(0, topics, 100):
        c.request(api.CreateTopicsRequest(tuple(api.CreatableTopic(f"t{i:06d}", 100, 3)
                                                for i in range(start, min(topics, start + 100)))))
        if start and start % 2000 == 0:
            ctx.progress.line(f"  {start * 100:,} / {partitions:,} partitions")
    return c


def _one(partitions: int, ctx: Context) -> dict:
    from quorum.snapshot.files import SnapshotId, load_latest, write_snapshot

    with ctx.progress.phase(f"build a {partitions:,}-partition image"):
        c = build_image(partitions, ctx)
    image = c.core.image
    directory = ctx.work_dir / f"p{partitions}"
    directory.mkdir()
    snapshot = SnapshotId(c.end_offset, 1)
    with ctx.progress.phase("write the snapshot"):
        started = time.monotonic()
        size = write_snapshot(directory, image, snapshot, c.cluster_id)
        write_s = time.monotonic() - started
    with ctx.progress.phase("load it"):
        started = time.monotonic()
        found = load_latest(directory, c.cluster_id)
        load_s = time.monotonic() - started
    assert found is not None and found[1].topics.by_id == image.topics.by_id
    ctx.progress.line(f"  write {write_s:.2f}s, load {load_s:.2f}s, {size / 2**20:.1f} MiB")
    return {"partitions": partitions, "write_s": write_s, "load_s": load_s, "bytes": size,
            "records": c.end_offset}


def run(ctx: Context) -> dict:
    results: dict = {"sizes": [], "systems": {"sparkraft": {"errors": []}}}
    for partitions in ctx.sizes(QUICK_SIZES, FULL_SIZES):
        try:
            results["sizes"].append(_one(partitions, ctx))
        except Exception as e:
            results["systems"]["sparkraft"]["errors"].append(f"{partitions}: {type(e).__name__}: {e}")
    return results


def report(document: dict) -> str:
    machine = document["machine"]
    rows = [[f"{s['partitions']:,}", fmt_number(s["write_s"], 2), fmt_number(s["load_s"], 2),
             fmt_number(s["bytes"] / 2**20, 1)] for s in document["results"]["sizes"]]
    return "\n".join([f"Measured {machine['date']} on {machine['cpu_count']} × {machine['cpu_model']} "
                      f"({document['mode']} mode). Goals at 2M: write ≤ {GOAL_WRITE_S:g} s, load ≤ {GOAL_LOAD_S:g} s.",
                      "", markdown_table(["partitions", "write s", "load s", "MiB"], rows)])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    series = {"write": [(s["partitions"], s["write_s"]) for s in sizes],
              "load": [(s["partitions"], s["load_s"]) for s in sizes]}
    return [line_chart(plots_dir / "snapshot-times.png", "Snapshot write and load time", series, "partitions",
                       "seconds", subtitle=document["machine"]["date"][:10],
                       references={f"goal at 2M: write {GOAL_WRITE_S:g} s": GOAL_WRITE_S,
                                   f"goal at 2M: load {GOAL_LOAD_S:g} s": GOAL_LOAD_S})]
