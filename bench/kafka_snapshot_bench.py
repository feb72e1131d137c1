"""A 2,000,000-partition Apache Kafka metadata snapshot, written by Kafka's own code, decoded and
materialised (issue 40's offline history).

- **written by Kafka**: ``bench/kafka/write_snapshot.jsh`` (jshell over Kafka 4.4's jars) builds the
  cluster with Kafka's image classes (MetadataDelta.replay of a controller's records: 300 brokers in
  30 racks, topics of 100 partitions with RF 3, one config per 100 topics) and writes it the way a
  KRaft controller writes a snapshot (MetadataImage.write into RaftSnapshotWriter, RecordsSnapshotWriter
  and FileRawSnapshotWriter): a ``<offset>-<epoch>.checkpoint`` of Kafka's record batches.
- **decoded**: sparkraft reads that file into its metadata image in this process
  (``kafka_snapshot_image``, what ``sparkraft shell --snapshot`` does), timed, and checked to hold
  every partition.
- **materialised**: the snapshot is put in the metadata directory of a real Kafka controller
  (``process.roles=controller``, one static voter, started once and stopped first, so that Kafka
  loads the snapshot as the newest state of its log at its next start), and ``sparkraft
  materialize --source kafka --available-now`` reads it from that controller (FetchSnapshot, then
  Fetch) into a new local warehouse: timed submit -> exit and checked (``partitions`` has a row
  for each). The controller's broker session timeout is an hour, so the 300 registered brokers that
  never heartbeat are not fenced while it runs.

Goal (issue 40): the 2,000,000-partition Kafka snapshot materialised <= 60 s. --quick: 200,000.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart, largest_size
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "kafka_snapshot"
TITLE = "A 2,000,000-partition Kafka snapshot written by Kafka's code: decoded and materialised"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (200_000,)
FULL_SIZES = (2_000_000,)
PARTITIONS_PER_TOPIC = 100
BROKERS = 300
SNAPSHOT_OFFSET = 10_000_000  # past anything the controller's own log holds: Kafka starts from it
GOAL_2M_S = 60.0
JOB_TIMEOUT_S = 1200


def _harness():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import apache_kafka

    return apache_kafka


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_snapshot(directory: Path, partitions: int, ctx: Context) -> Path:
    """Kafka's own code writes the snapshot into ``directory``; its path."""
    path, wrote = _harness().write_kafka_snapshot(directory, partitions // PARTITIONS_PER_TOPIC, PARTITIONS_PER_TOPIC,
                                                  BROKERS, SNAPSHOT_OFFSET, heap="8g")
    ctx.progress.line(f"  {wrote}")
    return path


def _decode(path: Path, partitions: int) -> dict:
    from quorum.kafka_import.files import kafka_snapshot_image

    started = time.monotonic()
    image = kafka_snapshot_image(path)
    seconds = time.monotonic() - started
    held = image.topics.partition_count()
    if held != partitions:
        raise RuntimeError(f"sparkraft read {held:,} partitions from Kafka's snapshot, not {partitions:,}")
    return {"seconds": seconds, "partitions": held, "bytes": path.stat().st_size}


def _wait_serving(node, partitions: int, limit_s: float = 1800) -> float:
    """Until the controller leads and its log starts at the snapshot (it has loaded it)."""
    from quorum.kafka_import.reader import KafkaMetadataLogReader
    from quorum.rpc.log_reader import SnapshotRequired

    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if node.proc.poll() is not None:
            raise RuntimeError(f"the Kafka controller exited: {node.log()[-3000:]}")
        try:
            with KafkaMetadataLogReader(node.bootstrap_controller, timeout=5) as reader:
                reader.read(0, max_records=1)
        except SnapshotRequired as e:
            if e.log_start_offset >= SNAPSHOT_OFFSET:
                return time.monotonic() - started
        except Exception:  # not listening or not leading yet
            pass
        time.sleep(1)
    raise RuntimeError(f"the Kafka controller did not serve its snapshot in {limit_s:g}s: {node.log()[-3000:]}")


def _materialize(node, work: Path, partitions: int) -> dict:
    from bench.harness.procs import REPO
    from delta_tables.cut import latest_cut, tables_at
    from delta_tables.schemas import PARTITIONS

    wh = work / "wh"
    command = [sys.executable, "-m", "sparkraft", "materialize", "--source", "kafka", "--bootstrap-controller",
               node.bootstrap_controller, "--warehouse", str(wh), "--checkpoint", str(work / "ck"), "--available-now"]
    started = time.monotonic()
    with open(work / "job.log", "wb") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO,
                              timeout=JOB_TIMEOUT_S)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"the job exited {done.returncode}: {(work / 'job.log').read_text(errors='replace')[-2000:]}")
    cut = latest_cut(str(wh))
    rows = tables_at(str(wh), cut)[PARTITIONS].to_pyarrow_dataset().count_rows()
    if rows != partitions:
        raise RuntimeError(f"the cut at {cut.offset} holds {rows:,} partitions, not {partitions:,}")
    return {"seconds": seconds, "cut": cut.offset, "partition_rows": rows}


def _one_size(partitions: int, ctx: Context) -> dict:
    work = ctx.work_dir / f"p{partitions}"
    (work / "snapshot").mkdir(parents=True)
    (work / "kafka").mkdir()
    (work / "job").mkdir()
    out: dict = {"partitions": partitions}
    with ctx.progress.phase(f"Kafka's code writes a snapshot of {partitions:,} partitions"):
        started = time.monotonic()
        path = write_snapshot(work / "snapshot", partitions, ctx)
        out["write_s"] = time.monotonic() - started
    with ctx.progress.phase("sparkraft decodes it (kafka_snapshot_image)"):
        out["decode"] = _decode(path, partitions)
        ctx.progress.line(f"  {out['decode']['bytes'] / 1e6:,.0f} MB in {out['decode']['seconds']:.1f}s")
    with ctx.progress.phase("a Kafka controller, started once, then given the snapshot"):
        node = _harness().restored_controller(work / "kafka", _free_port(), path, heap="10g")
    try:
        with ctx.progress.phase("the Kafka controller loads the snapshot"):
            node.start()
            out["kafka_load_s"] = _wait_serving(node, partitions)
        with ctx.progress.phase("sparkraft materialize --source kafka --available-now"):
            out["materialize"] = _materialize(node, work / "job", partitions)
    finally:
        node.stop()
    ctx.progress.line(f"  Kafka loaded it in {out['kafka_load_s']:.1f}s; materialised in "
                      f"{out['materialize']['seconds']:.1f}s")
    return out


def run(ctx: Context) -> dict:
    from bench.controller_bench import run_sizes

    return run_sizes(ctx, ctx.sizes(QUICK_SIZES, FULL_SIZES), _one_size, {})


def report(document: dict) -> str:
    rows = [[f"{s['partitions']:,}", fmt_number(s["decode"]["bytes"] / 1e6, 0), fmt_number(s["write_s"], 1),
             fmt_number(s["decode"]["seconds"], 1), fmt_number(s["kafka_load_s"], 1),
             fmt_number(s["materialize"]["seconds"], 1)] for s in document["results"]["sizes"]]
    lines = [f"{measured_on(document)}: a Kafka metadata snapshot written by Kafka 4.4's own image and snapshot "
             f"writer ({BROKERS} brokers, topics of {PARTITIONS_PER_TOPIC} partitions, RF 3); sparkraft's decoding "
             f"of the file into its image; a Kafka controller loading it at start; `sparkraft materialize --source "
             f"kafka --available-now` from that controller into a new local warehouse, submit → exit.", "",
             markdown_table(["partitions", "snapshot MB", "Kafka writes: s", "sparkraft decodes: s",
                             "Kafka loads: s", "materialised: s"], rows), "",
             f"Goal: the 2,000,000-partition Kafka snapshot materialised ≤ {GOAL_2M_S:g} s."]
    lines += [f"Errors: {e}" for e in document["results"].get("systems", {}).get("sparkraft", {}).get("errors", [])]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    _largest, where = largest_size(document)
    return [grouped_bar_chart(
        plots_dir / "kafka_snapshot.png", "A Kafka snapshot: decoded, and materialised from a Kafka controller",
        [f"{s['partitions']:,}" for s in sizes],
        {"sparkraft decodes the file": [s["decode"]["seconds"] for s in sizes],
         "Kafka's controller loads it": [s["kafka_load_s"] for s in sizes],
         "materialised (submit → exit)": [s["materialize"]["seconds"] for s in sizes]},
        "seconds", subtitle=where, goal=GOAL_2M_S, value_format="{:.1f}")]
