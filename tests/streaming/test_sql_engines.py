"""Every ``sparkraft sql`` query in the README gives the same rows on DataFusion and on Spark.

The queries are read from the README itself (each ``sparkraft sql "..."`` command, split as the
shell would), run on a warehouse the job materialised from a real quorum, and compared row for
row (sorted, where a query has no ORDER BY). Standard SQL quoting is the dialect: the test that
``"partition"`` is a column on both engines, not the string 'partition' on Spark, is among them.
"""
from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from delta_tables.sql import QueryError, query_datafusion, query_spark

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent


def readme_queries() -> list[str]:
    """The SQL of every ``sparkraft sql`` command in the README's shell blocks."""
    queries = []
    for block in re.findall(r"^```sh\n(.*?)^```$", (ROOT / "README.md").read_text(), re.S | re.M):
        for line in block.splitlines():
            if "sparkraft sql " not in line:
                continue
            words = shlex.split(line[line.index("sparkraft sql "):], comments=True)
            queries.append(words[2])
    return queries


def normalised(rows: list[dict], ordered: bool) -> list[str]:
    out = [json.dumps(r, sort_keys=True, default=str) for r in rows]
    return out if ordered else sorted(out)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """Tables with offline, under-replicated, under-min-ISR and config-changed partitions to find."""
    from conftest import wait_for
    from test_controller_node import Cluster

    from quorum.controller import api

    root = tmp_path_factory.mktemp("sql-engines")
    c = Cluster(root)
    try:
        c.active()
        c.register_brokers()
        c.client.create_topic("orders", 6, 3, [("retention.ms", "1000"), ("min.insync.replicas", "3")])
        c.client.create_topic("payments", 3, 1)
        c.client.alter_configs(api.ConfigResourceKey("TOPIC", "orders"),
                               [api.AlterableConfig("cleanup.policy", "SET", "compact")])
        c.brokers.lifecycles[103].stop()  # fenced after its session: ISRs shrink, its leaderships go
        wait_for(lambda: any(b.fenced for b in c.client.describe_cluster().brokers), 30, "broker 103 fenced")
        bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in c.nodes.values())
        wh = str(root / "wh")
        yield wh, bootstrap
    finally:
        c.close()


def test_every_readme_query_gives_the_same_rows_on_both_engines(warehouse, spark, tmp_path):
    from streaming import job

    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark)
    queries = readme_queries()
    assert len(queries) >= 6, queries
    assert any('"partition"' in q for q in queries)
    # the README sets these shell variables before its queries use them; the same values here
    first_cut = query_datafusion(wh, 'SELECT min("offset") AS o FROM snapshots').to_pylist()[0]["o"]
    shell = {"FIRST_CUT": str(first_cut)}
    for sql in queries:
        sql = re.sub(r"\$(\w+)", lambda m: shell[m.group(1)], sql)  # KeyError: a variable this test lacks
        ordered = "order by" in sql.lower()  # the README orders totally: ties would be a defect there
        on_datafusion = query_datafusion(wh, sql).to_pylist()
        on_spark = query_spark(wh, sql, spark=spark).to_pylist()
        assert normalised(on_spark, ordered) == normalised(on_datafusion, ordered), sql
        if '"partition"' in sql and on_spark:
            assert all(isinstance(r["partition"], int) for r in on_spark), sql
    # the data makes the queries mean something
    under = query_datafusion(wh, 'SELECT "partition" FROM partitions WHERE cardinality(isr) < cardinality(replicas)')
    assert under.num_rows > 0


def test_a_string_where_an_identifier_belongs_is_never_a_silent_answer(warehouse, spark, tmp_path):
    from streaming import job

    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark)
    rows = query_spark(wh, 'SELECT "partition" FROM partitions ORDER BY "partition"', spark=spark).to_pylist()
    assert rows and all(isinstance(r["partition"], int) for r in rows)
    # Spark's own setting is restored for other users of the session
    assert spark.sql('SELECT "x" AS v').collect()[0]["v"] == "x"
    for engine in (lambda q: query_datafusion(wh, q), lambda q: query_spark(wh, q, spark=spark)):
        with pytest.raises(QueryError):
            engine("SELECT \"no_such_column\" FROM topics")


def test_a_table_that_is_not_there_is_answered_with_those_that_are(warehouse, spark, tmp_path):
    from streaming import job

    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark)
    for engine in (lambda q: query_datafusion(wh, q), lambda q: query_spark(wh, q, spark=spark)):
        with pytest.raises(QueryError) as refused:
            engine("SELECT * FROM nosuchtable")
        message = str(refused.value)
        assert "\n" not in message
        assert "the tables here: acls, audit, brokers, configs, partitions, records" in message, message


def test_a_spark_query_of_a_missing_warehouse_is_refused_before_spark_starts(tmp_path):
    """``sql --engine spark`` opens the warehouse first: a wrong path is one line within seconds,
    with no JVM started (it took 71 s and printed Spark's banner first)."""
    import subprocess

    from conftest import sparkraft_cmd

    out = subprocess.run(sparkraft_cmd("sql", "--engine", "spark", "--warehouse",
                                       str(tmp_path / "nowhere"), "SELECT 1"), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "is not a Delta table" in out.stderr, out.stderr
    assert "SparkContext" not in out.stderr and "log4j" not in out.stderr.lower()


def test_spark_reads_each_table_with_deltas_own_reader_at_the_cuts_version(warehouse, spark, tmp_path):
    """``--engine spark`` scans the Delta tables with Delta's Spark data source (not rows copied into
    the driver), each at the version of the cut asked for: the same rows as DataFusion at an older
    cut and at the newest."""
    from streaming import job

    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark, max_records_per_trigger=20)
    cuts = [r["o"] for r in query_datafusion(wh, 'SELECT "offset" AS o FROM snapshots ORDER BY o').to_pylist()]
    assert len(cuts) >= 2, cuts
    sql = 'SELECT topic_name, "partition", leader, isr FROM partitions ORDER BY topic_name, "partition"'
    for offset in (cuts[0], cuts[-1]):
        assert query_spark(wh, sql, offset, spark=spark).to_pylist() == \
            query_datafusion(wh, sql, offset).to_pylist(), offset
    plan = spark.sql("SELECT * FROM partitions")._jdf.queryExecution().executedPlan().toString()
    assert "Delta" in plan or "Tahoe" in plan, plan
    # table_changes: Delta's change data feed reader in Spark, the same changes as delta-rs's
    changes = f"SELECT * FROM table_changes('partitions', 0, {cuts[-1]})"  # from the tables' start
    on_spark = query_spark(wh, changes, spark=spark).to_pylist()
    assert normalised(on_spark, False) == normalised(query_datafusion(wh, changes).to_pylist(), False)
    assert {r["_change_type"] for r in on_spark} >= {"insert"}
    plan = spark.sql(f"SELECT * FROM table_changes_partitions_0_{cuts[-1]}")._jdf.queryExecution() \
        .executedPlan().toString()
    assert "Scan DeltaCDFRelation" in plan and "LocalTableScan" not in plan, plan  # scanned, not copied
    empty = f"SELECT * FROM table_changes('partitions', {cuts[-1]}, {cuts[-1]})"
    assert query_spark(wh, empty, spark=spark).num_rows == 0


def test_a_spark_query_without_deltas_connector_is_one_line_naming_the_fix(warehouse, spark, tmp_path):
    """Where Delta's jars are not resolved, ``sql --engine spark`` says how to get them, in one line."""
    import os
    import subprocess

    from conftest import sparkraft_cmd
    from streaming import job

    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark)
    out = subprocess.run(sparkraft_cmd("sql", "--engine", "spark", "--warehouse", wh, "SELECT 1"),
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                         env={**os.environ, "SPARKRAFT_JARS": str(tmp_path / "no-jars")})
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "scripts/fetch_jars.py" in out.stderr, out.stderr
