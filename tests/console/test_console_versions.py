"""A state table derived from another version through its change feed (console/versions.py) equals
the table read at that version: every state table, every pair of versions, forward and backward,
over a busy history (topics created and deleted, partitions added, leaders moved, configs set and
deleted, brokers fenced) materialised in micro-batches of a few records."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

sys.path.insert(0, str(Path(__file__).parent.parent / "streaming"))
from test_materializer import as_batch, busy_controller, log_rows  # noqa: E402

from console.model import Warehouse  # noqa: E402
from console import versions  # noqa: E402
from console.versions import FEED_COLUMNS, derive, key_column  # noqa: E402
from delta_tables.cut import plain_types, read_table, scan  # noqa: E402
from delta_tables.schemas import KEYS, STATE_TABLES  # noqa: E402
from delta_tables.writer import DeltaRsWriter  # noqa: E402
from quorum.controller import api  # noqa: E402
from streaming.materializer import Materializer  # noqa: E402


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    wh = tmp_path_factory.mktemp("versions") / "wh"
    c = busy_controller()
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("payments", 5),)))
    c.request(api.DeleteTopicsRequest(("orders",)))
    c.request(api.CreateTopicsRequest((api.CreatableTopic("orders", 2, 2),)))  # the same name again, a new id
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(wh))
    for i in range(0, len(rows), 5):
        m.process(as_batch(rows[i:i + 5]))
    return wh


def as_set(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in plain_types(table).to_pylist())


@pytest.mark.parametrize("sliced_max", [0, 2_000], ids=["filtered", "sliced"])
@pytest.mark.parametrize("name", [t for t in STATE_TABLES if t in KEYS])
def test_every_version_derived_from_every_other_equals_the_version_read(warehouse, name, sliced_max, monkeypatch):
    monkeypatch.setattr(versions, "SLICED_MAX", sliced_max)  # the rows kept by a filter, or as slices
    path = str(warehouse / name)
    newest = DeltaTable(path).version()
    read = {v: read_table(DeltaTable(path, version=v)) for v in range(newest + 1)}
    assert newest >= 3 or name in ("users", "voters", "acls")
    for base in range(newest + 1):
        for target in range(newest + 1):
            if base == target:
                continue
            low, high = sorted((base, target))
            feed = plain_types(pa.table(DeltaTable(path).load_cdf(starting_version=low + 1,
                                                                  ending_version=high).read_all()))
            got, key = derive(read[base], feed, KEYS[name], forward=target > base)
            assert key.to_pylist() == key_column(got, KEYS[name]).to_pylist()
            assert got.schema == read[target].schema
            assert as_set(got) == as_set(read[target]), (name, base, target)


def test_the_console_derives_what_it_has_not_read_and_shows_the_same(warehouse):
    wh = Warehouse(str(warehouse))
    cuts = wh.cuts().column("offset").to_pylist()
    for offset in reversed(cuts):  # the newest is read, each older one derived from the one after it
        cut = wh.resolve(str(offset))
        for name in ("topics", "partitions", "brokers", "configs"):
            assert as_set(wh.table(cut, name)) == as_set(read_table(DeltaTable(str(warehouse / name),
                                                                                version=cut.versions[name])))
    assert wh.derived > 0
    assert FEED_COLUMNS == ("_change_type", "_commit_version")


def test_the_newest_cuts_tables_stay_kept_while_older_ones_come_and_go(warehouse, monkeypatch):
    from console import model

    monkeypatch.setattr(model, "TABLES_KEPT", 4)
    wh = Warehouse(str(warehouse))
    newest = wh.newest()
    model.overview(wh, newest)
    for offset in wh.cuts().column("offset").to_pylist():
        model.overview(wh, wh.resolve(str(offset)))
    tables = [k for k in wh._kept if k[0] == "table"]
    for name in ("topics", "partitions", "brokers", "configs"):
        assert ("table", name, newest.versions[name], None) in tables, name
    assert len(wh._kept) <= 4 + 4  # the limit, and the newest cut's four tables beside it


def test_the_records_index_and_the_cuts_grow_by_the_feed_to_what_a_whole_read_gives(tmp_path):
    from console.marks import with_marks

    wh_path = tmp_path / "wh"
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(wh_path))
    m.process(as_batch(rows[:20]))
    wh = Warehouse(str(wh_path))
    first = wh.records_index()
    assert first.column("offset").to_pylist() == list(range(20))
    for start in range(20, len(rows), 6):  # more micro-batches, each looked at
        m.process(as_batch(rows[start:start + 6]))
        wh._newest = None
        newest = wh.newest()
        whole = with_marks(read_table(DeltaTable(str(wh_path / "records"))).select(
            ["offset", "append_time", "type", "data"])).sort_by("offset")
        assert wh.records_index().to_pylist() == whole.to_pylist()
        snapshots = read_table(DeltaTable(str(wh_path / "snapshots"))).sort_by("offset")
        assert wh.cuts().to_pylist() == snapshots.to_pylist()
        assert newest.offset == snapshots.column("offset")[-1].as_py() == min(start + 6, len(rows)) - 1
    assert wh._records.whole_reads == wh._snapshots.whole_reads == 1  # then only what each version added
    assert wh._records.fed > 0 and wh._snapshots.fed > 0


def test_a_page_of_many_partitions_is_the_same_by_top_k_as_by_sorting_them_all(warehouse, monkeypatch):
    from console import model

    wh = Warehouse(str(warehouse))
    cut = wh.newest()
    total = model.partitions_page(wh, cut).total
    monkeypatch.setattr(model, "PAGE_SIZE", 2)
    for start in range(0, total + 2):
        sorted_whole = model.partitions_page(wh, cut, start=start)
        monkeypatch.setattr(model, "SORTED_WHOLE_MAX", 0)
        top_k = model.partitions_page(wh, cut, start=start)
        monkeypatch.setattr(model, "SORTED_WHOLE_MAX", 200_000)
        assert top_k == sorted_whole and len(top_k.rows) == min(2, max(0, total - start)), start


@pytest.mark.parametrize("name", STATE_TABLES)
def test_a_table_scanned_by_delta_rs_equals_it_read_by_pyarrow_at_every_version(warehouse, name):
    """What the console reads a cut's tables with (delta_tables/cut.scan: delta-rs's engine, its view
    types cast back): the same schema and rows as pyarrow's dataset, whole and by columns."""
    path = str(warehouse / name)
    for version in range(DeltaTable(path).version() + 1):
        dt = DeltaTable(path, version=version)
        expected = read_table(dt)
        got = scan(dt)
        assert got.schema == expected.schema, (name, version)
        assert as_set(got) == as_set(expected), (name, version)
        assert got.column(0).num_chunks <= 1
        some = expected.schema.names[-2:]
        assert scan(dt, some).schema == expected.select(some).schema
