"""The ``sparkraft`` source as Spark's own sources behave: a batch read between two offsets
(``spark.read``), Trigger.AvailableNow as one query in as many micro-batches as the limits make,
admission control by records and by bytes, and the high watermark in the query's progress."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from quorum.rpc.log_reader import MetadataLogReader

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def bootstrap_of(cluster) -> str:
    return ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())


@pytest.fixture
def busy(cluster):
    cluster.active()
    cluster.register_brokers()
    for i in range(6):
        cluster.client.create_topic(f"t{i}", 3, 2)
    with MetadataLogReader(bootstrap_of(cluster)) as reader:
        hw = reader.high_watermark()
        sizes = {r.offset: len(r.data) for r in reader.follow(0, until=hw, wait_ms=100)}
    return bootstrap_of(cluster), hw, sizes


def stream_batches(spark, bootstrap: str, tmp_path, **options) -> tuple[list[list[int]], object]:
    """Run an available-now query; the offsets of each micro-batch, and the query."""
    batches: list[list[int]] = []
    reader = spark.readStream.format("sparkraft").option("bootstrap.controllers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, str(v))
    query = (reader.load().writeStream
             .foreachBatch(lambda df, _id: batches.append(sorted(r.offset for r in df.select("offset").collect())))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    return [b for b in batches if b], query


def test_a_batch_read_between_two_offsets_in_parallel_ranges(busy, spark):
    bootstrap, hw, _sizes = busy
    df = (spark.read.format("sparkraft").option("bootstrap.controllers", bootstrap)
          .option("startingOffsets", "3").option("endingOffsets", str(hw - 2)).option("recordsPerPartition", "4")
          .load())
    assert df.rdd.getNumPartitions() == -(-(hw - 5) // 4)
    offsets = sorted(r.offset for r in df.select("offset").collect())
    assert offsets == list(range(3, hw - 2))
    everything = spark.read.format("sparkraft").option("bootstrap.controllers", bootstrap).load()
    assert everything.count() >= hw  # latest: what is committed when the read is planned
    with pytest.raises(Exception, match="endingOffsets"):
        (spark.read.format("sparkraft").option("bootstrap.controllers", bootstrap)
         .option("endingOffsets", "soon").load().collect())


def test_available_now_is_one_query_in_batches_of_at_most_max_records(busy, spark, tmp_path):
    bootstrap, hw, _sizes = busy
    batches, query = stream_batches(spark, bootstrap, tmp_path, maxRecordsPerTrigger=5, idleFlushSeconds=0)
    covered = [o for b in batches for o in b]
    assert covered[:hw] == list(range(hw)) and len(covered) == len(set(covered))  # once each, in order
    assert all(len(b) <= 5 for b in batches) and len(batches) >= hw // 5
    progress = query.recentProgress[-1]["sources"][0]
    assert json.loads(progress["latestOffset"])["offset"] >= hw  # the high watermark, in the progress


def test_max_bytes_per_trigger_cuts_batches_by_size(busy, spark, tmp_path):
    bootstrap, hw, sizes = busy
    limit = max(sizes.values()) * 3
    batches, _query = stream_batches(spark, bootstrap, tmp_path, maxBytesPerTrigger=limit, idleFlushSeconds=0)
    covered = [o for b in batches for o in b]
    assert covered[:hw] == list(range(hw))
    assert len(batches) > 1
    for b in batches:
        known = [sizes[o] for o in b if o in sizes]
        assert len(b) == 1 or sum(known) <= limit, (b, known)
