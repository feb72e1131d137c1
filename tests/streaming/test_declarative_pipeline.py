"""The shipped Spark Declarative Pipeline, run by Spark's own `spark-pipelines`: `sparkraft pipeline
init` writes it over a warehouse the job materialised from a real quorum (a broker fenced: offline,
under-replicated and under-min-ISR partitions to find); `dry-run` refuses a broken view a user
added, naming it, and `run` then writes every view as a Delta table, each read back with delta-rs
and compared with the same question asked of the warehouse with DataFusion."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sparkraft_cmd
from test_sql_engines import warehouse  # noqa: F401  (fixture: a quorum with a fenced broker, materialised)

from delta_tables.sql import query_datafusion

pytestmark = pytest.mark.slow

USER_VIEW = """\
-- one file, one view: topics by partition count
CREATE MATERIALIZED VIEW topics_by_partitions AS
SELECT name, partition_count FROM topics ORDER BY partition_count DESC
"""


def _spark_pipelines(folder: Path, command: str) -> subprocess.CompletedProcess:
    """Spark's `spark-pipelines` in ``folder``, with Delta's connector from the resolved jars (what
    --packages gives, without a download)."""
    import pyspark

    from delta_tables.spark_session import DELTA_CONFS, delta_jars

    home = os.path.dirname(pyspark.__file__)
    confs = DELTA_CONFS  # only these: with four more --conf (partition counts, UI, host), Spark 4.2.0's
    # SparkPipelines launcher started the server without Delta's catalog class ("Cannot find catalog plugin")
    cmd = [os.path.join(home, "bin", "spark-pipelines"), "--jars", ",".join(delta_jars()),
           *(a for key, value in confs.items() for a in ("--conf", f"{key}={value}")), command]
    env = {**os.environ, "SPARK_HOME": home, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(cmd, cwd=folder, capture_output=True, text=True, timeout=900, env=env,
                          stdin=subprocess.DEVNULL)


def _rows(folder: Path, table: str) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(folder / "spark-warehouse" / table)).to_pyarrow_table().to_pylist()


def _pairs(rows, *keys) -> list[tuple]:
    return sorted(tuple(r[k] for k in keys) for r in rows)


def test_spark_pipelines_dry_run_and_run_the_shipped_pipeline(warehouse, spark, tmp_path):  # noqa: F811
    from delta_tables.spark_session import delta_jars
    from quorum.controller.configs_control import TOPIC_CONFIGS
    from streaming import job

    if delta_jars() is None:
        pytest.skip("Delta's Spark connector is not resolved (python scripts/fetch_jars.py; .ci/run does it)")
    wh, bootstrap = warehouse
    job.run(bootstrap, wh, str(tmp_path / "ck"), available_now=True, spark=spark)
    folder = tmp_path / "pipeline"
    init = subprocess.run(sparkraft_cmd("pipeline", "init", "--folder", str(folder), "--warehouse", wh),
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert init.returncode == 0, init.stderr
    assert "spark-pipelines --packages io.delta:delta-spark_2.13:4.4.0" in init.stdout
    again = subprocess.run(sparkraft_cmd("pipeline", "init", "--folder", str(folder), "--warehouse", wh),
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert again.returncode == 1 and "is not empty" in again.stderr, again.stderr

    mine = folder / "transformations" / "topics_by_partitions.sql"
    mine.write_text(USER_VIEW.replace("partition_count FROM", "partition_total FROM"))  # no such column
    broken = _spark_pipelines(folder, "dry-run")
    assert broken.returncode != 0
    assert "partition_total" in broken.stdout + broken.stderr
    assert not (folder / "spark-warehouse" / "offline_partitions").exists()  # a dry run writes nothing
    mine.write_text(USER_VIEW)
    # (no second dry run of the mended view: `run` checks the whole graph the same way first, and
    # each spark-pipelines is a JVM and a Spark Connect server: two minutes of the suite)
    ran = _spark_pipelines(folder, "run")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "Run is COMPLETED" in ran.stdout + ran.stderr

    def datafusion(sql: str) -> list[dict]:
        return query_datafusion(wh, sql).to_pylist()

    log = datafusion('SELECT "offset" FROM records')
    assert _pairs(_rows(folder, "metadata_log"), "offset") == _pairs(log, "offset")
    offline = datafusion('SELECT topic_name, "partition" FROM partitions WHERE leader = -1')
    assert offline and _pairs(_rows(folder, "offline_partitions"), "topic_name", "partition") == \
        _pairs(offline, "topic_name", "partition")
    under = datafusion('SELECT topic_name, "partition" FROM partitions WHERE cardinality(isr) < cardinality(replicas)')
    assert under and _pairs(_rows(folder, "under_replicated_partitions"), "topic_name", "partition") == \
        _pairs(under, "topic_name", "partition")
    leaders = {r["leader"]: r["n"] for r in datafusion("SELECT leader, count(*) AS n FROM partitions GROUP BY leader")}
    per_broker = _rows(folder, "replicas_per_broker")
    assert {r["broker_id"] for r in per_broker} == {r["broker_id"] for r in datafusion("SELECT broker_id FROM brokers")}
    assert {r["broker_id"]: r["leaders"] for r in per_broker} == \
        {b["broker_id"]: leaders.get(b["broker_id"], 0) for b in per_broker}
    replicas = datafusion("SELECT replicas FROM partitions")
    assert sum(r["replicas"] for r in per_broker) == sum(len(r["replicas"]) for r in replicas)

    topics = [r["name"] for r in datafusion("SELECT name FROM topics")]
    effective = _rows(folder, "effective_topic_configs")
    assert len(effective) == len(topics) * len(TOPIC_CONFIGS)
    own = {(r["resource_name"], r["name"]): r["value"]
           for r in datafusion("SELECT resource_name, name, value FROM configs WHERE resource_type = 'TOPIC'")}
    assert own
    for r in effective:
        if (r["topic_name"], r["name"]) in own:
            assert (r["value"], r["source"]) == (own[r["topic_name"], r["name"]], "TOPIC_CONFIG"), r
        else:
            assert (r["value"], r["source"]) == (TOPIC_CONFIGS[r["name"]].default, "DEFAULT_CONFIG"), r
    min_isr = {r["topic_name"]: int(r["value"]) for r in effective if r["name"] == "min.insync.replicas"}
    expected = [p for p in datafusion('SELECT topic_name, "partition", isr FROM partitions')
                if len(p["isr"]) < min_isr[p["topic_name"]]]
    assert expected and _pairs(_rows(folder, "under_min_isr_partitions"), "topic_name", "partition") == \
        _pairs(expected, "topic_name", "partition")

    liveness = _rows(folder, "broker_liveness")
    fenced = [r for r in datafusion("SELECT brokers.broker_id FROM brokers WHERE fenced")]
    assert fenced, "the fixture fences a broker"
    for b in fenced:
        events = [r["event"] for r in sorted(liveness, key=lambda r: r["offset"]) if r["broker_id"] == b["broker_id"]]
        assert events[-1] == "fenced" and "unfenced" in events, events
    broker_records = datafusion("SELECT \"offset\" FROM records WHERE type IN ('REGISTER_BROKER_RECORD', "
                                "'FENCE_BROKER_RECORD', 'UNFENCE_BROKER_RECORD', 'BROKER_REGISTRATION_CHANGE_RECORD', "
                                "'UNREGISTER_BROKER_RECORD')")
    assert _pairs(liveness, "offset") == _pairs(broker_records, "offset")
    assert _pairs(_rows(folder, "topics_by_partitions"), "name", "partition_count") == \
        _pairs(datafusion("SELECT name, partition_count FROM topics"), "name", "partition_count")
