"""Delta Lake's own Spark reader (the connector, io.delta 4.4.0 from Maven Central) over the tables
delta-rs writes: every table read whole, and at each cut by `VERSION AS OF` the versions the cut
names, row for row what delta-rs reads. In a process of its own, as Spark's classpath is fixed when
its JVM starts (the other tests' session has no Delta jars)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_materializer import as_batch, busy_controller, log_rows

pytestmark = pytest.mark.slow

READ_WITH_DELTA = r"""
import json, sys
from delta_tables.spark_session import local_spark_session
spark = local_spark_session("delta-reader", delta=True)
asked = json.loads(sys.argv[1])
out = {}
for key, (path, version) in asked.items():
    rows = spark.sql(f"SELECT * FROM delta.`{path}` VERSION AS OF {version}").toJSON().collect()
    out[key] = sorted(rows)
print(json.dumps(out))
"""


def _plain_columns(table) -> list[str]:
    """The columns whose values read the same from both readers' JSON: integers, strings, booleans."""
    import pyarrow as pa

    schema = table.schema
    return [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_string(f.type)
            or pa.types.is_boolean(f.type)]


def _rows(rows: list[dict], columns: list[str]) -> list[tuple]:
    return sorted(tuple((c, row.get(c)) for c in columns) for row in rows)


def test_delta_rs_tables_read_by_deltas_own_spark_reader_at_every_cut(tmp_path):
    from delta_tables.cut import latest_cut, tables_at
    from delta_tables.spark_session import delta_jars
    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer

    if delta_jars() is None:
        pytest.skip("Delta's Spark connector is not resolved (python scripts/fetch_jars.py; .ci/run does it)")
    wh = str(tmp_path / "wh")
    c = busy_controller()
    rows = log_rows(c)
    m = Materializer(DeltaRsWriter(wh))
    m.process(as_batch(rows[: len(rows) // 2]))
    first = latest_cut(wh)
    m.process(as_batch(rows))
    second = latest_cut(wh)
    assert second.offset > first.offset
    asked, expected = {}, {}
    for n, cut in enumerate((first, second)):
        for table, dt in tables_at(wh, cut).items():
            key = f"{n}:{table}"
            asked[key] = (f"{wh}/{table}", dt.version())
            expected[key] = dt
    out = subprocess.run([sys.executable, "-c", READ_WITH_DELTA, json.dumps(asked)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    read = json.loads(out.stdout.strip().splitlines()[-1])
    for key, dt in expected.items():
        from delta_tables.cut import read_table

        table = read_table(dt)
        columns = _plain_columns(table)
        assert columns, key
        theirs = _rows([json.loads(r) for r in read[key]], columns)
        ours = _rows(table.to_pylist(), columns)
        assert theirs == ours, f"{key}: Delta's Spark reader and delta-rs disagree"
        assert ours or key.endswith(("acls", "users", "configs")), f"{key}: an empty table proves nothing"


READ_AFTER_MAINTENANCE = r"""
import json, sys
from delta_tables.spark_session import local_spark_session
from delta_tables.sql import query_spark
spark = local_spark_session("delta-reader", delta=True)
asked = json.loads(sys.argv[1])
out = {}
for key, (path, version) in asked["tables"].items():
    out[key] = sorted(spark.sql(f"SELECT * FROM delta.`{path}` VERSION AS OF {version}").toJSON().collect())
for key, sql in asked["queries"].items():
    out[key] = sorted(json.dumps(r, sort_keys=True, default=str) for r in query_spark(asked["warehouse"], sql, spark=spark).to_pylist())
print(json.dumps(out))
"""


def test_tables_after_maintenance_read_by_deltas_own_spark_reader(tmp_path):
    """After `maintain` (compaction, a checkpoint, the log's old entries cleaned up), Delta's Spark
    reader still reads every table at every cut and the change feed between them as delta-rs does;
    after a vacuum with no retention, the newest versions too."""
    import pyarrow as pa

    from delta_tables.changes import changes
    from delta_tables.cut import latest_cut, read_table, tables_at
    from delta_tables.spark_session import delta_jars
    from delta_tables.writer import DeltaRsWriter
    from jobs.maintenance import maintain
    from streaming.materializer import Materializer

    if delta_jars() is None:
        pytest.skip("Delta's Spark connector is not resolved (python scripts/fetch_jars.py; .ci/run does it)")
    wh = str(tmp_path / "wh")
    rows = log_rows(busy_controller())
    m = Materializer(DeltaRsWriter(wh))
    cuts = []
    for share in (0.5, 0.75, 1):  # three micro-batches: small files for compaction to fold (the first
        m.process(as_batch(rows[: int(len(rows) * share)]))  # with partitions: each cut is checked below)
        cuts.append(latest_cut(wh))
    from delta_tables.writer import protocol

    for table, dt in tables_at(wh, None).items():  # the protocol the docs list (docs/reference/tables.md)
        p = dt.protocol()
        assert (p.min_reader_version, p.min_writer_version, p.reader_features, p.writer_features) == \
            (*protocol(table), None, None), table
    report = maintain(wh)
    assert any(r.get("files_removed") for r in report.values()), report  # it compacted something
    assert any((tmp_path / "wh" / t / "_delta_log").glob("*.checkpoint.parquet") for t in report)

    tables, expected = {}, {}
    for n, cut in enumerate(cuts):
        for table, dt in tables_at(wh, cut).items():
            tables[f"{n}:{table}"] = (f"{wh}/{table}", dt.version())
            expected[f"{n}:{table}"] = read_table(dt).to_pylist()
    for table, dt in tables_at(wh, None).items():  # the newest: the compaction's versions
        tables[f"newest:{table}"] = (f"{wh}/{table}", dt.version())
        expected[f"newest:{table}"] = read_table(dt).to_pylist()
    queries = {f"changes:{t}": f"SELECT * FROM table_changes('{t}', {cuts[0].offset}, {cuts[-1].offset})"
               for t in ("topics", "partitions", "brokers", "configs")}
    feeds = changes(wh, cuts[0].offset, cuts[-1].offset, ("topics", "partitions", "brokers", "configs"))
    out = subprocess.run([sys.executable, "-c", READ_AFTER_MAINTENANCE,
                          json.dumps({"warehouse": wh, "tables": tables, "queries": queries})],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    read = json.loads(out.stdout.strip().splitlines()[-1])
    for key, ours in expected.items():
        columns = _plain_columns(pa.Table.from_pylist(ours)) if ours else []
        assert _rows([json.loads(r) for r in read[key]], columns) == _rows(ours, columns), key
        assert ours or key.endswith(("acls", "users", "configs")), f"{key}: an empty table proves nothing"
    for table, feed in feeds.items():
        columns = [c for c in _plain_columns(feed) if c != "_commit_offset"] + ["_commit_offset"]
        theirs = [json.loads(r) for r in read[f"changes:{table}"]]
        assert _rows(theirs, columns) == _rows(feed.to_pylist(), columns), table
    assert feeds["partitions"].num_rows, "the change feed between the cuts is not empty"

    maintain(wh, retention_hours=0)  # every file no newest version needs goes
    newest = {t: (f"{wh}/{t}", dt.version()) for t, dt in tables_at(wh, None).items()}
    out = subprocess.run([sys.executable, "-c", READ_AFTER_MAINTENANCE,
                          json.dumps({"warehouse": wh, "tables": newest, "queries": {}})],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    read = json.loads(out.stdout.strip().splitlines()[-1])
    for table, dt in tables_at(wh, None).items():
        ours = read_table(dt).to_pylist()
        columns = _plain_columns(pa.Table.from_pylist(ours)) if ours else []
        assert _rows([json.loads(r) for r in read[table]], columns) == _rows(ours, columns), table
