"""The job and SQL through Spark Connect: a Connect server started here (its class ships in the
pyspark wheel), `sparkraft materialize --remote sc://...` runs the source's driver side and the
materialiser on it and the tables equal the controllers' image; `sparkraft sql --engine spark
--remote` answers as DataFusion does."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_ports, sparkraft_cmd
from test_pipeline import assert_exactly_once

from delta_tables.sql import query_datafusion

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory):
    from bench.harness import spark_connect
    from delta_tables.spark_session import DELTA_CONFS, delta_jars

    pytest.importorskip("grpc_status", reason="Spark Connect's client needs pyspark[connect]")
    jars = delta_jars()
    if jars is None:
        pytest.skip("Delta's Spark connector is not resolved (python scripts/fetch_jars.py; .ci/run does it)")
    confs = {**DELTA_CONFS, "spark.sql.catalogImplementation": "hive"}  # its Derby metastore in its root
    args = ["--jars", ",".join(jars), *(a for key, value in confs.items() for a in ("--conf", f"{key}={value}"))]
    with spark_connect.connect_server(tmp_path_factory.mktemp("connect"), args, port=free_ports(1)[0],
                                      limit_s=120) as remote:
        yield remote


def test_the_job_and_sql_run_through_spark_connect(cluster, connect_server, tmp_path):
    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("orders", 6, 3, [("retention.ms", "1000")])
    cluster.client.create_topic("payments", 2, 2)
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    wh = tmp_path / "wh"
    result = subprocess.run(sparkraft_cmd("materialize", "--bootstrap-controller", bootstrap, "--warehouse", str(wh),
                                          "--checkpoint", str(tmp_path / "ck"), "--available-now",
                                          "--remote", connect_server),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[:3000]
    assert_exactly_once(wh, bootstrap, topics=2)

    sql = 'SELECT name, partition_count FROM topics ORDER BY name'
    result = subprocess.run(sparkraft_cmd("sql", sql, "--warehouse", str(wh), "--engine", "spark", "--remote",
                                          connect_server, "--json"), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == query_datafusion(str(wh), sql).to_pylist() == \
        [{"name": "orders", "partition_count": 6}, {"name": "payments", "partition_count": 2}]


def test_catalog_register_through_spark_connect_serves_the_tables_by_name(cluster, connect_server, tmp_path):
    """`sparkraft catalog register --remote` puts the tables in the Connect server's persistent
    (Hive) catalog; a second Connect client, another process, reads ``sparkraft.topics`` by name
    and gets DataFusion's rows; registering again adds nothing."""
    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("audit", 3, 2)
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    wh = tmp_path / "wh"
    run = subprocess.run(sparkraft_cmd("materialize", "--bootstrap-controller", bootstrap, "--warehouse", str(wh),
                                       "--checkpoint", str(tmp_path / "ck"), "--available-now"),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    register = sparkraft_cmd("catalog", "register", "--warehouse", str(wh), "--database", "connected",
                             "--remote", connect_server)
    first = subprocess.run(register, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "Registered 10 tables in connected" in first.stdout and "in memory" not in first.stdout, first.stdout
    again = subprocess.run(register, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Registered 0 tables in connected (10 already were)" in again.stdout, \
        again.stdout + again.stderr[-2000:]

    read = ("import json, sys; from pyspark.sql import SparkSession; "
            "s = SparkSession.builder.remote(sys.argv[1]).getOrCreate(); "
            "print(json.dumps([r.asDict() for r in s.table('connected.topics').select('name', 'partition_count')"
            ".orderBy('name').collect()]))")
    out = subprocess.run([sys.executable, "-c", read, connect_server], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    expected = query_datafusion(str(wh), "SELECT name, partition_count FROM topics ORDER BY name").to_pylist()
    assert json.loads(out.stdout.strip().splitlines()[-1]) == expected == [{"name": "audit", "partition_count": 3}]
