"""The warehouse's tables in Spark's persistent catalog: `sparkraft catalog register` once, then a
fresh `spark-sql` and a fresh PySpark session read `sparkraft.partitions` with no path, row for row
what delta-rs reads. The embedded Derby metastore in the folder they run from is the catalog; each
JVM is a process of its own, as users run them. A second warehouse under the same names and a
metastore held by another process are each refused in one line, and change nothing. A fleet's
warehouse registers its ``sources`` table and a view per table of every cluster's."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sparkraft_cmd
from test_materializer import as_batch, busy_controller, log_rows

pytestmark = pytest.mark.slow

HOLD_THE_CATALOG = r"""
import json, sys
from delta_tables.spark_session import local_spark_session
from delta_tables.catalog import register, registered_location
spark = local_spark_session("catalog-reader", delta=True, hive=True)
rows = [r.asDict(recursive=True) for r in spark.table("sparkraft.partitions").collect()]
out = {"partitions": rows, "location": registered_location(spark, "sparkraft", "topics"),
       "again": register(spark, sys.argv[1])}
print(json.dumps(out, default=str), flush=True)
sys.stdin.readline()  # hold the Derby metastore open until the test has tried a second process
"""


def _warehouse(root: Path) -> str:
    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer

    wh = str(root)
    Materializer(DeltaRsWriter(wh)).process(as_batch(log_rows(busy_controller())))
    return wh


def _register(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd("catalog", "register", *args), cwd=cwd, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


def _spark_sql(cwd: Path, sql: str) -> subprocess.CompletedProcess:
    """Spark's own SQL shell, a fresh JVM, with Delta's connector from the resolved jars (as
    --packages would give it, without a download) and nothing else: no path."""
    import pyspark

    from delta_tables.spark_session import DELTA_CONFS, delta_jars

    home = os.path.dirname(pyspark.__file__)
    confs = [a for key, value in DELTA_CONFS.items() for a in ("--conf", f"{key}={value}")]
    cmd = [os.path.join(home, "bin", "spark-sql"), "--master", "local[2]", "--jars", ",".join(delta_jars()),
           "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1", *confs,
           "--silent", "-e", sql]
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env,
                          stdin=subprocess.DEVNULL)


def _said(result: subprocess.CompletedProcess) -> list[str]:
    """What a command said as its own (the JVM's start-up lines aside), and that it said no more."""
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr, result.stderr[-3000:]
    return [line for line in result.stderr.splitlines() if line.startswith("ERROR")]


def test_registered_tables_read_with_no_path_by_fresh_sessions(tmp_path):
    from fleet_warehouse import build_fleet

    from delta_tables.cut import read_table, tables_at
    from delta_tables.fleet import cluster_warehouse
    from delta_tables.spark_session import delta_jars

    if delta_jars() is None:
        pytest.skip("Delta's Spark connector is not resolved (python scripts/fetch_jars.py; .ci/run does it)")
    wh = _warehouse(tmp_path / "wh")
    other = _warehouse(tmp_path / "other")
    here = tmp_path / "analyst"
    here.mkdir()

    first = _register(here, "--warehouse", wh)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Registered 10 tables in sparkraft, in the embedded Derby metastore" in first.stdout, first.stdout
    assert (here / "metastore_db").is_dir()

    shell = _spark_sql(here, "SELECT topic_name, partition, leader FROM sparkraft.partitions")
    assert shell.returncode == 0, shell.stderr[-3000:]
    ours = read_table(tables_at(wh, None)["partitions"]).to_pylist()
    expected = sorted(f"{r['topic_name']}\t{r['partition']}\t{r['leader']}" for r in ours)
    assert sorted(line for line in shell.stdout.splitlines() if "\t" in line) == expected
    assert len(expected) == 9  # orders' 6 and payments' 3 partitions: the rows mean something

    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_CATALOG, wh], cwd=here, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        held = json.loads(holder.stdout.readline())
        assert sorted((r["topic_name"], r["partition"], r["leader"]) for r in held["partitions"]) == \
            sorted((r["topic_name"], r["partition"], r["leader"]) for r in ours)
        assert held["location"] == f"file:{wh}/topics"
        assert held["again"] == []  # registered already, at the same place: nothing to do
        locked = _register(here, "--warehouse", wh)
        assert locked.returncode == 1
        assert _said(locked) == [
            "ERROR: the embedded Derby metastore in ./metastore_db is open in another Spark process, and Derby "
            "allows one at a time: stop that one, or configure a Hive metastore service (hive.metastore.uris)"]
    finally:
        holder.communicate("\n", timeout=120)

    clash = _register(here, "--warehouse", other)
    assert clash.returncode == 1
    assert _said(clash) == [
        f"ERROR: the catalog already holds sparkraft.topics at file:{wh}/topics, not this warehouse's file://{other}/topics: "
        f"drop it (DROP TABLE sparkraft.topics) or register under another database (--database NAME)"]
    beside = _register(here, "--warehouse", other, "--database", "other_cluster")
    assert beside.returncode == 0, beside.stderr[-3000:]
    # a fleet's warehouse: its sources table, and a view per table of every cluster's
    fleet = build_fleet(tmp_path / "fleet")
    registered = _register(here, "--warehouse", fleet, "--database", "fleet")
    assert registered.returncode == 0, registered.stderr[-3000:]
    assert "Registered the fleet's sources table and 10 views of every cluster's tables in fleet" in registered.stdout
    shell = _spark_sql(here, "SELECT count(*) FROM sparkraft.topics; SELECT count(*) FROM other_cluster.topics; "
                             "SELECT cluster, cluster_id, topic_name, partition, leader FROM fleet.partitions; "
                             "SELECT cluster, state FROM fleet.sources")
    assert shell.returncode == 0, shell.stderr[-3000:]
    lines = [line.strip() for line in shell.stdout.splitlines() if line.strip()]
    assert [line for line in lines if "\t" not in line] == ["2", "2"]
    expected = sorted(f"{name}\tid-{name}\t{r['topic_name']}\t{r['partition']}\t{r['leader']}"
                      for name in ("east", "west")
                      for r in read_table(tables_at(cluster_warehouse(fleet, name), None)["partitions"]).to_pylist())
    assert sorted(line for line in lines if line.count("\t") == 4) == expected
    assert {line.split("\t")[0] for line in lines if line.count("\t") == 4} == {"east", "west"}
    assert sorted(line for line in lines if line.count("\t") == 1) == ["east\trunning", "west\trunning"]


def test_a_table_needing_a_feature_this_delta_lacks_is_one_line_naming_the_fix(tmp_path):
    """A state table whose protocol names a reader feature this delta-rs does not know (one a newer
    writer enabled) is refused by `sql` on either engine, and by `catalog register`, in one line
    that names the feature and the fix, before any JVM starts; nothing is written."""
    wh = _warehouse(tmp_path / "wh")
    log = Path(wh) / "topics" / "_delta_log"
    newest = max(int(p.stem) for p in log.glob("*.json"))
    (log / f"{newest + 1:020d}.json").write_text(
        json.dumps({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["futureFeature"],
                                 "writerFeatures": ["futureFeature"]}}) + "\n"
        + json.dumps({"commitInfo": {"operation": "SET TBLPROPERTIES"}}) + "\n")
    before = sorted(p.name for p in Path(wh).rglob("*"))
    for args in (("sql", "SELECT * FROM topics", "--warehouse", wh),
                 ("sql", "SELECT * FROM topics", "--warehouse", wh, "--engine", "spark"),
                 ("catalog", "register", "--warehouse", wh)):
        out = subprocess.run(sparkraft_cmd(*args), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == 1, args
        assert out.stderr.count("\n") == 1, out.stderr
        assert "needs the Delta table feature 'futureFeature'" in out.stderr and "pip install -U deltalake" in out.stderr
        assert "SparkContext" not in out.stderr
    assert sorted(p.name for p in Path(wh).rglob("*")) == before
    assert not (tmp_path / "metastore_db").exists()
