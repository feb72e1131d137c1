"""The whole pipeline for real: a quorum, a Spark Structured Streaming query over the ``sparkraft``
source, Delta tables written by delta-rs and read back with pyarrow and DataFusion, a stream behind
the log's start, and the commands' bad input (the job through a failover and a SIGKILL is in
test_pipeline_failover.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sparkraft_cmd, wait_for
from test_materializer import assert_tables_equal_image

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import RECORDS, SNAPSHOTS
from quorum.metadata.loader import MetadataLoader
from quorum.rpc.log_reader import MetadataLogReader, replay

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)
from test_snapshots import cluster_with_snapshots, segments  # noqa: E402,F401  (fixture: snapshots + retention)

pytestmark = pytest.mark.slow



def bootstrap_of(cluster) -> str:
    return ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())


def image_at(bootstrap: str, offset: int):
    """The committed image at ``offset``, replayed from the quorum's log."""
    with MetadataLogReader(bootstrap) as reader:
        return replay(MetadataLoader(), reader.follow(0, until=offset + 1, wait_ms=200))


def assert_exactly_once(wh, bootstrap: str, topics: int | None = None):
    """The warehouse's newest cut holds every offset once in ``records`` and state tables equal to
    the controllers' image there (with ``topics`` topics); the cut."""
    cut = latest_cut(str(wh))
    offsets = read_table(tables_at(str(wh), cut)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(cut.offset + 1)), "every offset exactly once"
    image = image_at(bootstrap, cut.offset)
    if topics is not None:
        assert len(image.topics.topic_names()) == topics
    assert_tables_equal_image(str(wh), image, cut)
    return cut


def test_the_stream_materialises_the_controllers_image_exactly(cluster, spark, tmp_path):
    from quorum.controller import api
    from streaming import job

    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("orders", 6, 3, [("retention.ms", "1000")])
    cluster.client.create_topic("payments", 3, 2)
    bootstrap = bootstrap_of(cluster)
    wh, ck = str(tmp_path / "wh"), str(tmp_path / "ck")
    job.run(bootstrap, wh, ck, available_now=True, spark=spark)
    first = latest_cut(wh)
    assert_tables_equal_image(wh, image_at(bootstrap, first.offset), first)
    # the job holds the log from where its tables end: retention keeps what they do not hold yet
    holds = cluster.client.call(api.DescribeLogHoldsRequest()).holds
    assert [(h.holder, h.offset) for h in holds] == [(f"materialize:{wh}", first.offset + 1)]

    # more changes, and the same query (same checkpoint) picks up from where it stopped
    cluster.client.delete_topic("payments")
    cluster.client.alter_configs(api.ConfigResourceKey("TOPIC", "orders"),
                                 [api.AlterableConfig("retention.ms", "DELETE"),
                                  api.AlterableConfig("cleanup.policy", "SET", "compact")])
    cluster.client.create_partitions("orders", 8)
    job.run(bootstrap, wh, ck, available_now=True, spark=spark)
    second = latest_cut(wh)
    assert second.offset > first.offset
    assert_tables_equal_image(wh, image_at(bootstrap, second.offset), second)
    assert_tables_equal_image(wh, image_at(bootstrap, first.offset), first)  # time travel by cut
    offsets = read_table(tables_at(wh, second)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(second.offset + 1))

    # SQL through DataFusion, at the newest cut and at the first one
    from delta_tables.sql import query_datafusion

    now = query_datafusion(wh, "SELECT name, partition_count FROM topics ORDER BY name").to_pylist()
    assert now == [{"name": "orders", "partition_count": 8}]
    then = query_datafusion(wh, "SELECT name FROM topics ORDER BY name", as_of_offset=first.offset).to_pylist()
    assert then == [{"name": "orders"}, {"name": "payments"}]


def _cuts(wh) -> int:
    """The cuts the warehouse ``wh`` (a path or a URI) holds; 0 before it exists."""
    try:
        return read_table(tables_at(str(wh), None)[SNAPSHOTS]).num_rows
    except Exception:  # no warehouse yet
        return 0


def test_bad_input_is_one_line_and_non_zero(controller_processes, tmp_path):
    def run(*args):
        r = subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=120)
        return r.returncode, r.stderr.strip()

    code, err = run("sql", "SELECT * FROM topics", "--warehouse", str(tmp_path / "nowhere"))
    assert code == 1 and err.startswith("ERROR:") and "not a Delta table" in err and "\n" not in err
    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    wh = tmp_path / "wh"
    code, err = run("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse", str(wh),
                    "--checkpoint", str(tmp_path / "ck"), "--available-now")
    assert code == 0, err
    code, err = run("sql", "SELEC oops", "--warehouse", str(wh))
    assert code == 1 and err.startswith("ERROR:") and "SELEC" in err
    code, err = run("sql", "SELECT * FROM topics", "--warehouse", str(wh), "--as-of-offset", "-1")
    assert code == 1 and "no consistent cut at or below offset -1" in err
    (tmp_path / "ck" / "sparkraft-cluster-id").write_text("Some0ther0Cluster0Idxx\n")
    code, err = run("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse", str(wh),
                    "--checkpoint", str(tmp_path / "ck"), "--available-now")
    assert code == 1 and "belongs to cluster Some0ther0Cluster0Idxx" in err
    code, err = run("materialize", "--bootstrap-controller", "127.0.0.1:1", "--warehouse", str(wh),
                    "--checkpoint", str(tmp_path / "ck2"), "--timeout", "1")
    assert code == 1 and err.startswith("NETWORK_EXCEPTION")
    rows = json.loads(subprocess.run(sparkraft_cmd("sql", "SELECT count(*) AS n FROM records", "--warehouse",
                                                   str(wh), "--json"), capture_output=True, text=True).stdout)
    assert rows[0]["n"] > 0


def test_a_stream_behind_the_log_start_loads_the_snapshot_first(cluster_with_snapshots, spark, tmp_path):
    """The quorum's log starts past 0 (snapshots and retention): a new job reads the leader's
    snapshot as one SNAPSHOT row, then the log after it, and its tables equal the image."""
    from quorum.rpc.log_reader import read_image
    from streaming import job
    from streaming.source import SNAPSHOT_TYPE

    cp, admin = cluster_with_snapshots
    for n in range(6):
        admin.create_topic(f"more{n}", 20, 1)
    leader = cp.wait_leader().leader_id
    wait_for(lambda: int(segments(cp, leader)[0].name[:20]) > 0, 30, "the leader's log to start past 0")
    wh, ck = str(tmp_path / "wh"), str(tmp_path / "ck")
    job.run(cp.bootstrap(), wh, ck, available_now=True, spark=spark)
    cut = latest_cut(wh)
    image = read_image(cp.bootstrap())
    assert_tables_equal_image(wh, image, cut)
    records = read_table(tables_at(wh, cut)[RECORDS]).to_pylist()
    snapshot_rows = [r for r in records if r["type"] == SNAPSHOT_TYPE]
    assert len(snapshot_rows) == 1 and snapshot_rows[0]["offset"] + 1 == min(r["offset"] for r in records
                                                                             if r["type"] != SNAPSHOT_TYPE)
    admin.delete_topic("more0")
    job.run(cp.bootstrap(), wh, ck, available_now=True, spark=spark)
    assert_tables_equal_image(wh, read_image(cp.bootstrap()), latest_cut(wh))
