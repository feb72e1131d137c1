"""The materialiser without Spark: records in, Delta tables out, read back with a second reader
(pyarrow datasets over the Delta files, not the writer's code), and crashes between commits."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from delta_tables.changes import table_changes
from delta_tables.cut import CutError, CutFollower, latest_cut, read_table, tables_at
from delta_tables.rows import image_keys, image_rows, row, rows_of
from delta_tables.schemas import IMAGE_TABLES, PARTITIONS, RECORDS, SCHEMAS, SNAPSHOTS
from delta_tables.writer import DeltaRsWriter, WarehouseError
from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.metadata.records import HEADER
from streaming.materializer import GapError, Materializer
from streaming.source import record_row, rows_table

sys.path.insert(0, str(Path(__file__).parent.parent / "unit" / "controller"))
from controller_helpers import controller, create, heartbeat  # noqa: E402


def log_rows(c: LocalController, start: int = 0, end: int | None = None) -> list[tuple]:
    """The controller's committed log as the streaming source's rows."""
    out = []
    for b in c.log:
        for i, raw in enumerate(b.records):
            o = b.base_offset + i
            if o >= start and (end is None or o < end):
                out.append(record_row(o, b.epoch, b.append_time_ms, raw, b.control))
    return out


def as_batch(rows: list[tuple]) -> pa.Table:
    return rows_table(rows)


def table_rows(warehouse, table: str, cut=None) -> list[dict]:
    """A table's rows through pyarrow (a reader independent of the writer), keys sorted."""
    rows = read_table(tables_at(str(warehouse), cut)[table]).to_pylist()
    for r in rows:
        r.pop("last_offset", None)
        r.pop("bucket", None)
    return sorted(rows, key=lambda r: sorted((k, str(v)) for k, v in r.items()))


def image_table(image, table: str) -> list[dict]:
    rows = image_rows(table, image)
    for r in rows:
        r.pop("last_offset", None)
        r.pop("bucket", None)
    return sorted(rows, key=lambda r: sorted((k, str(v)) for k, v in r.items()))


def assert_tables_equal_image(warehouse, image, cut=None):
    """The tables of the metadata image (the voters table is tests/streaming/test_voters_table.py's)."""
    for table in IMAGE_TABLES:
        assert table_rows(warehouse, table, cut) == image_table(image, table), table


def observations(histogram) -> int:
    """How many values a prometheus_client histogram has observed."""
    return int(next(s.value for s in histogram.collect()[0].samples if s.name.endswith("_count")))


def busy_controller() -> LocalController:
    c, epochs = controller(brokers=4, racks=["a", "b"])
    create(c, "orders", 6, 3, configs=(("retention.ms", "1000"),))
    create(c, "payments", 3, 2)
    create(c, "gone", 2, 2)
    c.request(api.DeleteTopicsRequest(("gone",)))
    c.request(api.IncrementalAlterConfigsRequest(((
        api.ConfigResourceKey("TOPIC", "orders"), (api.AlterableConfig("cleanup.policy", "SET", "compact"),
                                                   api.AlterableConfig("retention.ms", "DELETE"))),)))
    heartbeat(c, 0, epochs[0], want_shutdown=True)  # leaderships move: sparse PartitionChangeRecords
    # the domains no state table holds: client quotas, producer ids, ACLs
    c.request(api.AlterClientQuotasRequest((api.ClientQuotaAlteration((("user", "alice"),),
                                                                       (("producer_byte_rate", 1024.0),)),)))
    c.request(api.AllocateProducerIdsRequest(1, epochs[1]))
    c.request(api.CreateAclsRequest((api.AclBinding("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ",
                                                    "ALLOW"),)))
    return c


def test_tables_equal_the_image_at_each_cut_and_records_hold_every_offset_once(tmp_path):
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    half = len(rows) // 2
    m.process(as_batch(rows[:half]))
    m.process(as_batch(rows[half - 5:]))  # overlapping: the replayed part is skipped
    cut = latest_cut(str(tmp_path))
    assert cut.offset == c.end_offset - 1
    assert_tables_equal_image(tmp_path, c.core.image, cut)
    offsets = read_table(tables_at(str(tmp_path), cut)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(c.end_offset))
    topics = {r["name"] for r in table_rows(tmp_path, "topics")}
    assert topics == {"orders", "payments"}
    configs = {(r["resource_name"], r["name"]): r["value"] for r in table_rows(tmp_path, "configs")}
    assert configs == {("orders", "cleanup.policy"): "compact"}

    # the earlier cut still reads as it was
    first = latest_cut(str(tmp_path), half - 1)
    assert first.offset < cut.offset


def test_a_cut_follower_sees_each_new_cut_and_reads_its_tables_as_a_fresh_reader_does(tmp_path):
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    follower = CutFollower(str(tmp_path))
    with pytest.raises(CutError, match="has not written one yet"):
        follower.latest()
    cuts = []
    for start in range(0, len(rows), 7):  # a cut every 7 records, the follower looking after each
        m.process(as_batch(rows[start:start + 7]))
        cut = follower.latest()
        assert cut == latest_cut(str(tmp_path))
        if cuts:  # what changed since the last look: the change feed between the two cuts
            fed = follower.changes("topics", cuts[-1], cut).select(["name", "_change_type"])
            assert sorted(fed.to_pylist(), key=str) == sorted(table_changes(
                str(tmp_path), "topics", cuts[-1].offset, cut.offset).select(["name", "_change_type"]).to_pylist(),
                key=str)
        cuts.append(cut)
        assert follower.table("topics", cut) == read_table(tables_at(str(tmp_path), cut)["topics"])
    assert cuts[-1].offset == c.end_offset - 1 and len({x.offset for x in cuts}) == len(cuts)
    # an older cut's table, after the follower has moved on: as of that cut, not the newest
    old = cuts[len(cuts) // 2]
    for table in IMAGE_TABLES:
        assert follower.table(table, old) == read_table(tables_at(str(tmp_path), old)[table]), table
    created = follower.changes("topics", cuts[0], cuts[-1]).filter(pc.field("_change_type") == "insert")
    assert {"orders", "payments"} <= set(created.column("name").to_pylist())
    assert follower.changes("topics", cuts[-1], cuts[-1]).num_rows == 0
    assert follower.table("partitions", cuts[-1]).num_rows == sum(
        len(t.partitions) for t in c.core.image.topics.by_id.values())


def test_partition_rows_built_a_column_at_a_time_are_the_image_rows():
    c = busy_controller()
    orders = c.core.image.topics.topic_by_name("orders")
    moving = [b for b in range(4) if b not in orders.partitions.get(0).replicas][:1] + [0, 1]
    c.request(api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(
        api.TopicPartition("orders", 0), tuple(moving)),)))  # adding and removing replicas in flight
    image = c.core.image
    assert image.topics.topic_by_name("orders").partitions.get(0).adding_replicas
    items = [(key, offset) for offset, key in enumerate(image_keys(PARTITIONS, image))]
    items += [(("AAAAAAAAAAAAAAAAAAAAAA", 0), 7), ((orders.topic_id, 99), 8)]  # gone: no row
    expected = [r for key, offset in items if (r := row(PARTITIONS, key, image, offset)) is not None]
    assert rows_of(PARTITIONS, items, image).to_pylist() == expected
    assert len(expected) == len(items) - 2


def test_a_crash_between_table_commits_is_repaired_by_the_replayed_batch(tmp_path, monkeypatch):
    c = busy_controller()
    rows = log_rows(c)
    writer = DeltaRsWriter(tmp_path)
    m = Materializer(writer)
    real_merge = writer.merge_state

    def crash_on_partitions(table, *a, **kw):
        if table == PARTITIONS:
            raise RuntimeError("SIGKILL")
        return real_merge(table, *a, **kw)

    monkeypatch.setattr(writer, "merge_state", crash_on_partitions)
    with pytest.raises(RuntimeError, match="SIGKILL"):
        m.process(as_batch(rows))
    monkeypatch.undo()
    assert writer.applied(RECORDS) == c.end_offset - 1 and writer.applied("topics") == c.end_offset - 1
    assert writer.applied(PARTITIONS) == -1 and writer.applied(SNAPSHOTS) == -1

    restarted = Materializer(DeltaRsWriter(tmp_path))  # a new process: the image comes from `records`
    assert restarted.loader.image.topics == c.core.image.topics
    restarted.process(as_batch(rows))  # Spark replays the batch it never committed
    cut = latest_cut(str(tmp_path))
    assert cut.offset == c.end_offset - 1
    assert_tables_equal_image(tmp_path, c.core.image, cut)
    offsets = read_table(tables_at(str(tmp_path), cut)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(c.end_offset)), "every offset exactly once"


def test_a_transaction_is_never_half_visible(tmp_path):
    c, _ = controller(brokers=3, max_records_per_batch=50)
    create(c, "big", 120, 3)  # Begin + Topic + 120 partitions + End, over 3 batches
    rows = log_rows(c)
    begin = next(i for i, r in enumerate(rows) if r[3] == "BEGIN_TRANSACTION_RECORD")
    m = Materializer(DeltaRsWriter(tmp_path))
    result = m.process(as_batch(rows[:begin + 60]))  # ends inside the transaction
    assert result.get("waiting_for_transaction")
    cuts = read_table(tables_at(str(tmp_path), None)[SNAPSHOTS]).column("offset").to_pylist()
    assert all(o < rows[begin][0] for o in cuts)  # no cut inside the transaction
    assert all(r["name"] != "big" for r in table_rows(tmp_path, "topics"))
    m.process(as_batch(rows[begin + 60:]))
    assert len([r for r in table_rows(tmp_path, PARTITIONS) if r["topic_name"] == "big"]) == 120


def test_unknown_records_are_kept_and_do_not_stop_it_and_gaps_are_refused(tmp_path):
    c = busy_controller()
    rows = log_rows(c)
    future = HEADER.pack(999, 3) + b"\x08\x01"  # a record type from a newer writer
    unknown = record_row(len(rows), 1, 0, future, False)
    m = Materializer(DeltaRsWriter(tmp_path))
    m.process(as_batch(rows + [unknown]))
    records = read_table(tables_at(str(tmp_path), None)[RECORDS]).to_pylist()
    assert [r["type"] for r in records if r["offset"] == len(rows)] == ["UNKNOWN_RECORD_999"]
    assert latest_cut(str(tmp_path)).offset == len(rows)
    with pytest.raises(GapError):
        m.process(as_batch([record_row(len(rows) + 5, 1, 0, future, False)]))


def test_a_warehouse_that_is_not_one_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(WarehouseError, match="not a directory"):
        DeltaRsWriter(tmp_path / "file").ensure_tables()
    (tmp_path / "wh" / "topics").mkdir(parents=True)
    (tmp_path / "wh" / "topics" / "data.csv").write_text("a,b")
    with pytest.raises(WarehouseError, match="not a Delta table"):
        DeltaRsWriter(tmp_path / "wh").ensure_tables()


def test_maintenance_compacts_small_files_and_changes_no_row(tmp_path):
    from deltalake import DeltaTable

    from jobs.maintenance import maintain, summary

    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    for i in range(0, len(rows), 8):  # many small micro-batches: many small files
        m.process(as_batch(rows[i:i + 8]))
    before = len(DeltaTable(str(tmp_path / RECORDS)).file_uris())
    report = maintain(str(tmp_path), retention_hours=0)
    after = len(DeltaTable(str(tmp_path / RECORDS)).file_uris())
    assert before > 3 and after == 1 and report[RECORDS]["files_removed"] == before
    assert summary(report[RECORDS]).startswith(f"compacted {before} files into 1, vacuumed ")
    assert summary({"files_added": 0, "files_removed": 0, "vacuumed": 0, "version": 7}) == \
        "nothing to compact or vacuum; checkpoint at version 7"
    assert_tables_equal_image(tmp_path, c.core.image)
    offsets = read_table(tables_at(str(tmp_path), None)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(c.end_offset))


def test_tables_keep_a_day_of_versions_unless_the_operator_chose_otherwise(tmp_path):
    """A day of log entries and of removed files (a week would make every read list ~7x more
    entries; bench history), set at creation and on a table of an older warehouse that lacks them;
    a retention someone set is left alone, and the maintenance job vacuums by the table's own."""
    from deltalake import DeltaTable

    from delta_tables.schemas import SCHEMAS
    from delta_tables.writer import RETENTION
    from jobs.maintenance import maintain

    DeltaRsWriter(tmp_path).ensure_tables()
    for table in (RECORDS, PARTITIONS, SNAPSHOTS):
        configuration = DeltaTable(str(tmp_path / table)).metadata().configuration
        assert {k: configuration.get(k) for k in RETENTION} == {
            "delta.logRetentionDuration": "interval 1 days", "delta.deletedFileRetentionDuration": "interval 1 days"}
    # a records table of an older warehouse, whose log retention someone chose
    older = tmp_path / "older"
    DeltaTable.create(str(older / RECORDS), SCHEMAS[RECORDS], configuration={"delta.logRetentionDuration": "interval 30 days"})
    DeltaRsWriter(older).ensure_tables()
    assert DeltaTable(str(older / RECORDS)).metadata().configuration == {
        "delta.logRetentionDuration": "interval 30 days", "delta.deletedFileRetentionDuration": "interval 1 days"}
    c = busy_controller()
    m = Materializer(DeltaRsWriter(tmp_path))
    rows = log_rows(c)
    for i in range(0, len(rows), 8):
        m.process(as_batch(rows[i:i + 8]))
    report = maintain(str(tmp_path))  # the tables' own day: the files just replaced are kept
    assert report[RECORDS]["files_removed"] > 1 and report[RECORDS]["vacuumed"] == 0
    assert_tables_equal_image(tmp_path, c.core.image)


def test_a_cut_never_names_a_version_the_maintenance_job_vacuumed(tmp_path, monkeypatch):
    """After a compaction, a table the materialiser does not write again is named in later cuts at
    its compacted version (within VERSIONS_REFRESH_S), not at the one before, whose files are
    vacuumed once the retention has passed (here at once)."""
    from delta_tables import writer as writer_module
    from jobs.maintenance import maintain

    monkeypatch.setattr(writer_module, "VERSIONS_REFRESH_S", 0.0)
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    for i in range(0, len(rows), 3):  # small micro-batches: many small files in every table (the brokers
        m.process(as_batch(rows[i:i + 3]))  # table's last write must leave several for a compaction to join)
    report = maintain(str(tmp_path), retention_hours=0)
    assert report["brokers"]["files_removed"] > 1 and report["brokers"]["vacuumed"] > 0
    start = c.end_offset
    c.request(api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("TOPIC", "orders"),
                                                   (api.AlterableConfig("retention.ms", "SET", "5"),)),)))
    m.process(as_batch(log_rows(c, start)))  # writes configs, not brokers
    cut = latest_cut(str(tmp_path))
    assert cut.offset == c.end_offset - 1
    assert_tables_equal_image(tmp_path, c.core.image, cut)  # every table readable at the cut


def test_a_broker_image_from_the_cut_equals_the_controllers_and_a_bad_cut_is_refused(tmp_path):
    from delta_tables.bootstrap import image_from_cut
    from delta_tables.cut import CutError

    c = busy_controller()
    m = Materializer(DeltaRsWriter(tmp_path))
    m.process(as_batch(log_rows(c)))
    image, next_offset = image_from_cut(str(tmp_path))
    assert image == c.core.image and next_offset == c.end_offset  # provenance, quotas, ACLs... all of it
    assert image.acls.acls and image.client_quotas.entities and image.producer_ids.next_producer_id > 0

    # a snapshots row naming a cut its tables do not hold
    writer = DeltaRsWriter(tmp_path)
    writer.add_snapshot(c.end_offset + 10, 1, writer.versions())
    with pytest.raises(CutError, match="refused"):
        image_from_cut(str(tmp_path))


def test_replica_lists_read_from_arrow_are_exact_and_shared():
    from delta_tables.bootstrap import _broker_lists

    lists = [[1, 2, 3], [3, 2, 1], [], None, [7], [1, 2, 3], [2_147_483_647, 0], [1, 2], [1, 2, 3, 4, 5]]
    column = pa.chunked_array([pa.array(lists[:4], pa.list_(pa.int32())), pa.array(lists[4:], pa.list_(pa.int32()))])
    got = _broker_lists(column)
    assert got == [tuple(x or ()) for x in lists]
    assert got[0] is got[5]  # one shared tuple per distinct list
    assert _broker_lists(pa.array([[], None], pa.list_(pa.int32()))) == [(), ()]
    assert _broker_lists(pa.array([], pa.list_(pa.int32()))) == []


def test_a_cut_holding_a_partition_twice_is_refused(tmp_path):
    from deltalake import DeltaTable, write_deltalake

    from delta_tables.bootstrap import image_from_cut
    from delta_tables.cut import Cut, CutError

    c = busy_controller()
    Materializer(DeltaRsWriter(tmp_path)).process(as_batch(log_rows(c)))
    cut = latest_cut(str(tmp_path))
    table = DeltaTable(str(tmp_path / PARTITIONS))
    rows = table.to_pyarrow_table()
    victim = rows.filter(pa.compute.field("partition") == 0).slice(0, 1)
    topic_id = victim.column("topic_id")[0].as_py()
    # partition 1 replaced by a second partition 0: the topic's row count still matches
    table.delete(f"topic_id = '{topic_id}' AND partition = 1")
    write_deltalake(table, victim, mode="append")
    tampered = Cut(cut.offset, cut.epoch, {**cut.versions, PARTITIONS: DeltaTable(str(tmp_path / PARTITIONS)).version()})
    with pytest.raises(CutError, match="twice"):
        image_from_cut(str(tmp_path), tampered)
    assert image_from_cut(str(tmp_path), cut)[0] == c.core.image  # the cut as written still loads


def test_freshness_is_measured_from_a_batchs_newest_commit_to_its_cut_and_served(tmp_path):
    import urllib.request

    from streaming.job import serve_metrics

    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    server = serve_metrics(m, ("127.0.0.1", 0))
    try:
        now_us = int(time.time() * 1_000_000)
        # the records committed 2 s ago (their append time), visible now
        m.process(as_batch([(*r[:2], now_us - 2_000_000, *r[3:]) for r in rows]))
        assert 2.0 <= m.last_freshness_s < 60 and observations(m.freshness) == 1
        m.process(as_batch(rows))  # nothing new: no cut, no observation
        assert observations(m.freshness) == 1
        text = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10).read().decode()
    finally:
        server.stop()
    assert "sparkraft_materializer_freshness_seconds_count 1" in text
    assert f"sparkraft_materializer_applied_offset {c.end_offset - 1}" in text
    assert "sparkraft_materializer_last_freshness_seconds 2." in text


def test_a_commit_that_landed_though_its_write_failed_is_not_applied_twice(tmp_path, monkeypatch):
    """A store can take a commit and time out before it answers. The writer keeps what it knows
    of each table between its own commits (not asking the store each time); after a failed write it
    must ask again, or the replayed batch would append its records a second time."""
    import delta_tables.writer as writer_module

    c = busy_controller()
    rows = log_rows(c)
    writer = DeltaRsWriter(tmp_path)
    Materializer(writer).process(as_batch(rows[:10]))
    real = writer_module.write_deltalake

    def lands_then_fails(*args, **kwargs):
        real(*args, **kwargs)
        raise OSError("timed out waiting for the store's answer")

    monkeypatch.setattr(writer_module, "write_deltalake", lands_then_fails)
    records = pa.Table.from_pylist([{"offset": r[0], "epoch": r[1], "append_time": r[2] // 1000, "type": r[3],
                                     "version": r[4], "data": None, "raw": r[6]} for r in rows[10:20]],
                                   schema=SCHEMAS[RECORDS])
    with pytest.raises(OSError):
        writer.append_records(records, rows[19][0])
    monkeypatch.undo()
    assert writer.append_records(records, rows[19][0]) is False  # it landed: nothing appended twice
    offsets = read_table(tables_at(str(tmp_path), None)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(20))


def test_the_newest_cut_at_or_below_an_offset_is_found_from_file_statistics_as_by_a_full_scan(tmp_path):
    """``latest_cut`` scans only the ``snapshots`` files that can hold the answer (a year of
    micro-batches is tens of millions of rows); whatever the files, it answers as a full scan does."""
    from deltalake import DeltaTable

    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    for i in range(0, len(rows), 3):  # many cuts, a file each
        m.process(as_batch(rows[i:i + 3]))
    DeltaTable(str(tmp_path / SNAPSHOTS)).optimize.compact(target_size=2_000)  # some files merged, ranges overlap
    m.process(as_batch(rows))
    everything = read_table(tables_at(str(tmp_path), None)[SNAPSHOTS])
    offsets = sorted(everything.column("offset").to_pylist())
    for n in range(offsets[0], offsets[-1] + 3):
        expected = max(o for o in offsets if o <= n)
        assert latest_cut(str(tmp_path), n).offset == expected, n
    assert latest_cut(str(tmp_path)).offset == offsets[-1]
    with pytest.raises(CutError, match="no consistent cut at or below"):
        latest_cut(str(tmp_path), offsets[0] - 1)


def test_a_merge_reads_only_the_files_that_can_hold_its_keys(tmp_path, monkeypatch):
    """Between two compactions every micro-batch adds a file to ``topics``; new topics are appended
    without a lookup, and a MERGE names the keys it updates, so it scans the file that holds them
    and skips the rest (on object storage, reading every file made each merge slower than the
    last, and a batch of new partitions read the whole table)."""
    from delta_tables.schemas import TOPICS

    c, _ = controller(brokers=3)
    m = Materializer(DeltaRsWriter(tmp_path))
    m.process(as_batch(log_rows(c)))
    merges: dict[str, dict] = {}
    real = m.writer.merge_state

    def recorded(table, upserts, deletes, last, inserts=()):
        merges[table] = dict(real(table, upserts, deletes, last, inserts), upserts=len(upserts),
                             inserts=len(inserts))
        return merges[table]

    monkeypatch.setattr(m.writer, "merge_state", recorded)
    for k in range(12):  # twelve creates, twelve micro-batches: twelve files
        start = c.end_offset
        create(c, f"t{k:02d}", 1, 1)
        m.process(as_batch(log_rows(c, start)))
        assert merges[TOPICS]["inserts"] == 1 and merges[TOPICS]["upserts"] == 0
        assert merges[PARTITIONS]["inserts"] == 1 and "num_target_files_scanned" not in merges[PARTITIONS]
    start = c.end_offset
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("t03", 3),)))
    m.process(as_batch(log_rows(c, start)))
    assert merges[TOPICS]["upserts"] == 1  # t03's partition count
    assert merges[TOPICS]["num_target_files_scanned"] == 1
    assert merges[TOPICS]["num_target_files_skipped_during_scan"] >= 11
    assert merges[PARTITIONS]["inserts"] == 2
    assert_tables_equal_image(tmp_path, c.core.image)


def test_the_writer_leaves_expired_log_entries_to_maintenance(tmp_path):
    """Removing expired log entries lists the whole log: the writer's commits leave it to the
    maintenance job, which removes them."""
    from deltalake import DeltaTable

    from jobs.maintenance import maintain

    writer = DeltaRsWriter(tmp_path)
    writer.ensure_tables()
    DeltaTable(str(tmp_path / RECORDS)).alter.set_table_properties(
        {"delta.checkpointInterval": "2", "delta.logRetentionDuration": "interval 0 seconds"})
    writer = DeltaRsWriter(tmp_path)
    for offset in range(8):
        writer.append_records(pa.Table.from_pylist([{"offset": offset, "epoch": 1, "append_time": None,
                                                     "type": "NO_OP_RECORD", "version": 0, "data": "{}", "raw": b""}],
                                                   schema=SCHEMAS[RECORDS]), offset)
    log_dir = tmp_path / RECORDS / "_delta_log"
    # (the property change itself was committed with delta-rs's default hooks: it removed version 0)
    first_own = log_dir / f"{2:020d}.json"  # the writer's first commit: checkpointed past, expired
    assert first_own.exists() and len(list(log_dir.glob("*.checkpoint.parquet"))) >= 3
    maintain(str(tmp_path), retention_hours=0)
    assert not first_own.exists()
    assert sorted(read_table(tables_at(str(tmp_path), None)[RECORDS]).column("offset").to_pylist()) == list(range(8))


def test_the_data_column_is_the_json_forms_data_exactly():
    """``records.data`` is cut out of the source's JSON form: for every kind of record it equals
    the data part parsed and written again, and a form in another layout is parsed."""
    import json

    from streaming.materializer import records_table

    c = busy_controller()
    rows = log_rows(c)
    odd = json.dumps({"version": 0, "type": "X", "data": {"s": ',"type":'}})  # not the source's form
    rows.append((rows[-1][0] + 1, 1, rows[-1][2], "X", 0, odd, b""))
    forms = [r[5] for r in rows]
    assert len({json.loads(f)["type"] for f in forms}) >= 8
    data = records_table(as_batch(rows)).column("data").to_pylist()
    assert data == [json.dumps(json.loads(f)["data"], separators=(",", ":"), sort_keys=True) for f in forms]
    assert json.loads(data[-1]) == {"s": ',"type":'}


def test_a_password_type_config_is_never_materialised(tmp_path):
    """A broker's listener keystore password (a Kafka PASSWORD config) in the log, as a migrated or
    an Apache Kafka cluster's log holds it: the configs table says it is set, as ``(redacted)``;
    neither its row nor the records table's JSON or raw frame holds the value; a broker bootstrapped
    from the cut lacks it, rather than taking the placeholder for the password; the other configs
    keep their values."""
    from delta_tables.bootstrap import image_from_cut
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata.configs import BROKER, ConfigResource
    from quorum.metadata.records import encode_record

    secret = "keystore-secret-4711"
    c, _ = controller(1)
    c.request(api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("BROKER", "0"), (
        api.AlterableConfig("log.retention.ms", "SET", "1000"),)),)))
    rows = log_rows(c)
    password = pb.ConfigRecord(resource_type=BROKER, resource_name="0",
                               name="listener.name.internal.ssl.keystore.password", value=secret)
    rows.append(record_row(c.end_offset, 1, 0, encode_record(password), False))
    wh = tmp_path / "wh"
    Materializer(DeltaRsWriter(wh)).process(as_batch(rows))
    for path in wh.rglob("*"):
        assert not path.is_file() or secret.encode() not in path.read_bytes(), path
    configs = {r["name"]: r["value"] for r in table_rows(wh, "configs")}
    assert configs == {"listener.name.internal.ssl.keystore.password": "(redacted)", "log.retention.ms": "1000"}
    image, _ = image_from_cut(str(wh))
    assert dict(image.configs.configs(ConfigResource(BROKER, "0"))) == {"log.retention.ms": "1000"}
