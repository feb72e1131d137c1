"""The source's driver side against a real quorum: a tail of NoOp records is held back until it is
``idleFlushSeconds`` old, and released at once, with the NoOps before it, by a record that changes
metadata. No Spark session is needed: ``latestOffset`` is plain Python."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import wait_for
from pyspark.sql.streaming.datasource import ReadAllAvailable

from quorum.rpc.log_reader import MetadataLogReader
from streaming.source import SparkraftStreamReader, _is_idle_record

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)

pytestmark = pytest.mark.slow


def source(cluster, **options) -> SparkraftStreamReader:
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    return SparkraftStreamReader({"bootstrap.controllers": bootstrap, "cluster.id": cluster.cluster_id,
                                  **options})


def kinds(cluster, start: int, end: int) -> list[bool]:
    """Whether each committed record in [start, end) is idle (NoOp or LeaderChange)."""
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    out = []
    with MetadataLogReader(bootstrap, cluster_id=cluster.cluster_id) as reader:
        offset = start
        while offset < end:
            chunk = reader.read(offset, wait_ms=200)
            out += [_is_idle_record(r.data, r.control) for r in chunk.records if r.offset < end]
            offset = chunk.next_offset
    return out


def test_an_idle_tail_is_held_and_a_real_change_releases_it_at_once(cluster):
    cluster.active()
    cluster.register_brokers()
    reader = source(cluster, idleFlushSeconds="3600")
    # Everything up to now, brokers included, is offered: it holds real changes.
    first = reader.latestOffset({"offset": 0}, ReadAllAvailable())["offset"]
    assert first > 0 and not all(kinds(cluster, 0, first))
    # Then only NoOps arrive (the leader appends one every 500 ms): nothing is offered.
    wait_for(lambda: reader._high_watermark() >= first + 3, 20, "a few NoOps")
    assert all(kinds(cluster, first, reader._high_watermark()))
    for _ in range(3):
        assert reader.latestOffset({"offset": first}, ReadAllAvailable()) == {"offset": first}
        time.sleep(0.3)
    # A real change: offered at once, with every NoOp before it.
    cluster.client.create_topic("orders", 1, 1)
    end = reader.latestOffset({"offset": first}, ReadAllAvailable())["offset"]
    assert end > first + 3 and not all(kinds(cluster, first, end))
    reader.stop()


def test_an_idle_tail_is_released_once_its_oldest_record_is_old_enough(cluster, monkeypatch):
    """On a clock the test moves (the records' append times are the controllers' real ones)."""
    import streaming.source

    cluster.active()
    reader = source(cluster, idleFlushSeconds="60")
    start = wait_for(lambda: reader.latestOffset({"offset": 0}, ReadAllAvailable())["offset"], 20,
                     "the bootstrap records offered")
    wait_for(lambda: all(kinds(cluster, start, reader._high_watermark())) and reader._high_watermark() > start,
             20, "NoOps after them")
    now = [time.time() * 1000]
    monkeypatch.setattr(streaming.source, "_wall_ms", lambda: now[0])
    assert reader.latestOffset({"offset": start}, ReadAllAvailable()) == {"offset": start}  # held
    now[0] += 61_000  # the oldest NoOp is now more than a minute old
    released = reader.latestOffset({"offset": start}, ReadAllAvailable())["offset"]
    assert released > start and all(kinds(cluster, start, released))
    reader.stop()


def test_zero_turns_the_hold_off_and_bad_values_are_refused(cluster):
    cluster.active()
    reader = source(cluster, idleFlushSeconds="0")
    start = reader.latestOffset({"offset": 0}, ReadAllAvailable())["offset"]
    wait_for(lambda: reader.latestOffset({"offset": start}, ReadAllAvailable())["offset"] > start, 20,
             "NoOps offered at once")
    reader.stop()
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(ValueError, match="idleFlushSeconds"):
            source(cluster, idleFlushSeconds=bad)
