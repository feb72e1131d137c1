"""What changed between two offsets (the state tables' Change Data Feed, cut by offsets): replaying
the changes on the tables at the first cut gives the tables at the second, for every state table;
each change names the cut it became visible at; the CLI and both SQL engines' ``table_changes``
answer the same rows."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_materializer import as_batch, busy_controller, log_rows

from delta_tables.changes import changes
from delta_tables.cut import CutError, latest_cut, read_table, tables_at
from delta_tables.schemas import KEYS, SNAPSHOTS, STATE_TABLES
from delta_tables.sql import query_datafusion
from delta_tables.writer import DeltaRsWriter
from quorum.controller import api
from streaming.materializer import Materializer


def rows_by_key(table: str, rows: list[dict]) -> dict[tuple, dict]:
    return {tuple(r[k] for k in KEYS[table]): {k: v for k, v in r.items() if k != "bucket"} for r in rows}


def sorted_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


@pytest.fixture
def warehouse(tmp_path):
    """A busy history materialised in several micro-batches (so several cuts), and more after."""
    c = busy_controller()
    c.request(api.CreatePartitionsRequest((api.PartitionCountUpdate("payments", 5),)))
    c.request(api.DeleteTopicsRequest(("orders",)))
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(tmp_path))
    for i in range(0, len(rows), 7):
        m.process(as_batch(rows[i:i + 7]))
    return tmp_path


def test_replaying_the_changes_on_the_first_cut_gives_the_second_in_every_table(warehouse):
    cuts = read_table(tables_at(str(warehouse), None)[SNAPSHOTS]).column("offset").to_pylist()
    assert len(cuts) >= 4
    a, b = sorted(cuts)[1], sorted(cuts)[-1]
    found = changes(str(warehouse), a, b)
    for table in STATE_TABLES:
        before = rows_by_key(table, read_table(tables_at(str(warehouse), latest_cut(str(warehouse), a))[table]).to_pylist())
        after = rows_by_key(table, read_table(tables_at(str(warehouse), latest_cut(str(warehouse), b))[table]).to_pylist())
        state = dict(before)
        for change in found[table].to_pylist():  # in commit order
            assert a < change["_commit_offset"] <= b and change["_commit_offset"] in cuts
            kind = change.pop("_change_type")
            change.pop("_commit_offset")
            key = tuple(change[k] for k in KEYS[table])
            if kind in ("insert", "update_postimage"):
                state[key] = change
            elif kind == "delete":
                assert state.pop(key) == change
            else:
                assert state[key] == change, table  # the preimage is what the row was
        assert state == after, table
    kinds = {k for t in found.values() for k in t.column("_change_type").to_pylist()}
    assert {"insert", "delete", "update_preimage", "update_postimage"} <= kinds


def test_the_cli_and_both_sql_engines_answer_the_same_changes(warehouse):
    cuts = sorted(read_table(tables_at(str(warehouse), None)[SNAPSHOTS]).column("offset").to_pylist())
    a, b = cuts[0], cuts[-1]
    expected = changes(str(warehouse), a, b, ("topics",))["topics"].to_pylist()
    assert {r["name"] for r in expected if r["_change_type"] == "delete"} >= {"orders"}
    result = subprocess.run([sys.executable, "-m", "sparkraft", "changes", "--warehouse", str(warehouse),
                             "--from-offset", str(a), "--to-offset", str(b), "--table", "topics", "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == expected
    sql = f"SELECT * FROM table_changes('topics', {a}, {b})"
    assert sorted_rows(query_datafusion(str(warehouse), sql).to_pylist()) == sorted_rows(expected)
    nothing = changes(str(warehouse), b, b + 1000)
    assert all(t.num_rows == 0 for t in nothing.values())


def test_bad_ranges_and_tables_are_refused(warehouse):
    with pytest.raises(CutError, match="past"):
        changes(str(warehouse), 10, 5)
    with pytest.raises(CutError, match="no change feed for 'records'"):
        changes(str(warehouse), 0, 10, ("records",))
