"""A broker reaching the current metadata: how long, and how many bytes, by each bootstrap path,
at 200,000 and 2,000,000 partitions (20,000 in --quick).

The cluster is the controller benchmark's (3 controller processes, 28 simulated brokers, topics
of 100 partitions, RF 3). The broker under test is a BrokerMetadataClient in this process, timed
from construction until its image has applied everything committed when it started:

- **replay**: no cache, the whole log from offset 0;
- **Delta cut**: the log materialised into the Delta tables first (timed: the first
  materialisation), then a new broker loads the latest consistent cut and fetches the rest;
- **FetchSnapshot**: the controllers (started with retention off) are restarted one by one with
  ``metadata.max.retention.bytes=0`` (only the newest snapshot kept, the log below it deleted), so
  a new broker with nothing to start from is answered with the snapshot id, downloads the leader's
  snapshot and fetches the log after it;
- **restart after missing 1%**: stopped cleanly (its cache written), 1% more partitions created
  while it is down, restarted from its cache: it should move ~1% of the bytes.

The same cluster times a new *voter* (SIGKILLed, disk wiped, re-formatted with ``--rejoin``)
catching up with the leader's log, by replaying the whole log (before retention) and through
FetchSnapshot (after); Raft-level: until the leader sees it at the high watermark.

Goals (issue "Brokers"): <= 10 s at 2M from the Delta cut, >= 5x faster than replay, and a
restart's transfer proportional to what it missed. Snapshots are written every
``snapshot_bytes(partitions)`` of records so that even the quick size has one.
"""
from __future__ import annotations

import time
from pathlib import Path

from bench.controller_bench import PARTITIONS_PER_TOPIC, create_partitions, start_rig, stop_rig
from bench.harness.plots import line_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "broker"
TITLE = "Broker bootstrap: time and bytes to reach the current metadata, by path"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (20_000, 200_000, 2_000_000)
MISSED_FRACTION = 0.01
GOAL_DELTA_S = 10.0  # at 2M partitions, from the Delta cut


def snapshot_bytes(partitions: int) -> int:
    """metadata.log.max.record.bytes.between.snapshots for the rig: the default (20 MiB) at 2M,
    less for smaller sizes so that their logs hold a few snapshots too."""
    return min(20 << 20, max(64 << 10, partitions * 10))


def materialize(rig, warehouse: Path, ctx: Context) -> dict:
    """Write the warehouse from the log (the materialiser fed straight from a log reader, in chunks
    of 100,000 records, as the streaming job's micro-batches would be); its time."""

    from delta_tables.writer import DeltaRsWriter
    from quorum.rpc.log_reader import MetadataLogReader
    from streaming.materializer import Materializer
    from streaming.source import record_row, rows_table

    started = time.monotonic()
    m = Materializer(DeltaRsWriter(warehouse))
    with MetadataLogReader(rig.cluster.bootstrap) as reader:
        target = reader.high_watermark()
        rows: list = []
        for r in reader.follow(0, until=target, wait_ms=100):
            rows.append(record_row(r.offset, r.epoch, r.append_time_ms, r.data, r.control))
            if len(rows) >= 100_000 or r.offset == target - 1:
                m.process(rows_table(rows))
                rows = []
                ctx.progress.line(f"  materialised through offset {r.offset:,} of {target - 1:,}")
    size = sum(f.stat().st_size for f in warehouse.rglob("*") if f.is_file())
    return {"seconds": time.monotonic() - started, "records": target, "warehouse_bytes": size}


def _catch_up(rig, cluster_id: str, cache_dir: Path, warehouse: Path | None = None) -> dict:
    """Start a client, wait until it applied everything committed at its start; its figures."""
    from quorum.broker.metadata_client import BrokerMetadataClient
    from quorum.rpc.log_reader import MetadataLogReader

    source = None
    if warehouse is not None:
        from delta_tables.bootstrap import image_from_cut

        source = lambda: image_from_cut(str(warehouse))  # noqa: E731
    with MetadataLogReader(rig.cluster.bootstrap) as probe:
        target = probe.high_watermark()
    started = time.monotonic()
    client = BrokerMetadataClient(rig.cluster.bootstrap, cluster_id, cache_dir, bootstrap_source=source)
    client.bootstrap()
    loaded = time.monotonic() - started
    while client.next_offset < target:
        client.poll(wait_ms=100)
    elapsed = time.monotonic() - started
    result = {"seconds": elapsed, "bootstrap_s": loaded, "source": client.stats.bootstrap_source,
              "bytes": client.bytes_fetched, "records": client.stats.records_fetched, "offset": target - 1,
              "partitions": client.image.topics.partition_count()}
    save_started = time.monotonic()
    client.stop(save=True)
    result["cache_write_s"] = time.monotonic() - save_started
    return result


def _one_size(partitions: int, ctx: Context) -> dict:
    work = ctx.work_dir / f"p{partitions}"
    work.mkdir()
    with ctx.progress.phase(f"{partitions:,} partitions: 3 controllers, 28 brokers"):
        # Retention off until the FetchSnapshot step: replay and the materialiser need the log from 0.
        rig = start_rig(work, ctx, process_brokers=(),
                        overrides={"metadata.log.max.record.bytes.between.snapshots": str(snapshot_bytes(partitions)),
                                   "metadata.max.retention.bytes": "-1", "metadata.max.retention.ms": "-1"})
    try:
        cluster_id = rig.cluster.client.describe_quorum().cluster_id
        with ctx.progress.phase(f"create {partitions:,} partitions"):
            create_partitions(rig, partitions, ctx)
        out: dict = {"partitions": partitions}
        with ctx.progress.phase("new broker: replay the log from offset 0"):
            out["replay"] = _catch_up(rig, cluster_id, work / "broker")
        if out["replay"]["source"] != "log":
            raise RuntimeError(f"replay bootstrapped from {out['replay']['source']}: the log no longer starts at 0")
        with ctx.progress.phase("materialise the log into the Delta tables"):
            out["materialize"] = materialize(rig, work / "wh", ctx)
        with ctx.progress.phase("new broker: the Delta cut, then the log after it"):
            out["delta"] = _catch_up(rig, cluster_id, work / "broker-delta", work / "wh")
        follower = next(n for n in rig.cluster.ports if n != rig.cluster.leader_id())
        with ctx.progress.phase(f"new voter: controller {follower} wiped, replays the whole log"):
            out["voter_replay"] = {"seconds": rig.cluster.rejoin_wiped(follower)}
        with ctx.progress.phase("rolling restart with metadata.max.retention.bytes=0 (log below the newest snapshot goes)"):
            rig.cluster.rolling_restart({"metadata.max.retention.bytes": "0"})
        with ctx.progress.phase("new broker: FetchSnapshot, then the log after it"):
            out["snapshot"] = _catch_up(rig, cluster_id, work / "broker-snapshot")
        if out["snapshot"]["source"] != "snapshot":
            raise RuntimeError(f"the FetchSnapshot path bootstrapped from {out['snapshot']['source']}: "
                               f"the controllers' logs still start at 0")
        follower = next(n for n in rig.cluster.ports if n != rig.cluster.leader_id())
        with ctx.progress.phase(f"new voter: controller {follower} wiped, catches up through FetchSnapshot"):
            out["voter_snapshot"] = {"seconds": rig.cluster.rejoin_wiped(follower)}
        missed = max(PARTITIONS_PER_TOPIC, int(partitions * MISSED_FRACTION))
        with ctx.progress.phase(f"create {missed:,} partitions while it is down"):
            create_partitions(rig, missed, ctx, first_topic=partitions // PARTITIONS_PER_TOPIC)
        with ctx.progress.phase("restart from its cache"):
            out["restart"] = _catch_up(rig, cluster_id, work / "broker")
        r, s, d, f = out["replay"], out["restart"], out["delta"], out["snapshot"]
        ctx.progress.line(f"  replay {r['seconds']:.1f}s {r['bytes'] / 2**20:.1f} MiB; delta cut {d['seconds']:.1f}s; "
                          f"FetchSnapshot {f['seconds']:.1f}s ({f['source']}) {f['bytes'] / 2**20:.1f} MiB; "
                          f"voter replay {out['voter_replay']['seconds']:.1f}s, "
                          f"voter FetchSnapshot {out['voter_snapshot']['seconds']:.1f}s; "
                          f"restart {s['seconds']:.2f}s {s['bytes'] / 2**20:.2f} MiB "
                          f"({s['bytes'] / max(1, r['bytes']):.1%} of the bytes)")
        return out
    finally:
        stop_rig(rig)


def run(ctx: Context) -> dict:
    sizes = ctx.sizes(QUICK_SIZES, FULL_SIZES)
    results: dict = {"settings": {"missed_fraction": MISSED_FRACTION}, "sizes": [],
                     "systems": {"sparkraft": {"errors": []}}}
    for partitions in sizes:
        try:
            results["sizes"].append(_one_size(partitions, ctx))
        except Exception as e:
            ctx.progress.line(f"{partitions:,} partitions FAILED: {type(e).__name__}: {e}")
            results["systems"]["sparkraft"]["errors"].append(f"{partitions}: {type(e).__name__}: {e}")
    return results


def report(document: dict) -> str:
    results = document["results"]
    rows, snapshot_rows = [], []
    for s in results["sizes"]:
        r, t, d, f = s["replay"], s["restart"], s.get("delta"), s.get("snapshot")
        rows.append([f"{s['partitions']:,}", fmt_number(r["seconds"], 2), fmt_number(r["bytes"] / 2**20, 1),
                     fmt_number(d["seconds"], 2) if d else None,
                     fmt_number(d["bootstrap_s"], 2) if d else None,
                     fmt_number(r["seconds"] / d["seconds"], 1) if d else None,
                     fmt_number(t["seconds"], 2), fmt_number(t["bytes"] / 2**20, 2),
                     f"{t['bytes'] / max(1, r['bytes']):.1%}",
                     fmt_number(s["materialize"]["seconds"], 1) if s.get("materialize") else None])
        if f:
            vr, vs = s["voter_replay"]["seconds"], s["voter_snapshot"]["seconds"]
            snapshot_rows.append([f"{s['partitions']:,}", fmt_number(f["seconds"], 2), fmt_number(f["bytes"] / 2**20, 1),
                                  f["source"], fmt_number(r["seconds"] / f["seconds"], 1),
                                  fmt_number(vr, 2), fmt_number(vs, 2), fmt_number(vr / vs, 1)])
    errors = results.get("systems", {}).get("sparkraft", {}).get("errors", [])
    return "\n".join([
        f"{measured_on(document)}.",
        "",
        markdown_table(["partitions", "replay from 0: s", "MiB", "Delta cut + log: s", "of which cut load s",
                        "replay ÷ Delta", "restart after 1% missed: s", "MiB", "restart bytes ÷ replay bytes",
                        "first materialisation s"], rows),
        "",
        markdown_table(["partitions", "broker FetchSnapshot + log: s", "MiB", "bootstrapped from",
                        "replay ÷ FetchSnapshot", "new voter, replay: s", "new voter, FetchSnapshot: s",
                        "voter replay ÷ FetchSnapshot"], snapshot_rows),
        *([""] + [f"Errors: {e}" for e in errors] if errors else []),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    machine = document["machine"]
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    series = {"replay from offset 0": [(s["partitions"], s["replay"]["seconds"]) for s in sizes],
              "Delta cut + log": [(s["partitions"], s["delta"]["seconds"]) for s in sizes if s.get("delta")],
              "FetchSnapshot + log": [(s["partitions"], s["snapshot"]["seconds"]) for s in sizes if s.get("snapshot")],
              "restart after missing 1%": [(s["partitions"], s["restart"]["seconds"]) for s in sizes]}
    return [line_chart(plots_dir / "broker-bootstrap.png", "Broker: time to reach the current metadata",
                       series, "partitions", "seconds", subtitle=where,
                       references={f"goal at 2M: Delta cut {GOAL_DELTA_S:g} s": GOAL_DELTA_S})]
