"""``sparkraft dump-log`` on real segments (written by three in-process controllers) and on a
checkpoint-format cache, from a pipe, and on things that are not logs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sparkraft_cmd

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)

pytestmark = pytest.mark.slow


def dump(*paths, check=True):
    r = subprocess.run(sparkraft_cmd("dump-log", "--files", ",".join(map(str, paths))), capture_output=True,
                       text=True, timeout=60)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_segments_and_a_checkpoint_print_every_record_as_json(cluster, tmp_path):
    from quorum.broker.metadata_client import BrokerMetadataClient
    from quorum.log.meta_properties import metadata_partition_dir

    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("orders", 3, 3)
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    client = BrokerMetadataClient(bootstrap, cluster.cluster_id, tmp_path / "broker")
    client.bootstrap()
    while client.image.topics.topic_by_name("orders") is None:
        client.poll(wait_ms=200)
    client.stop(save=True)
    partition = metadata_partition_dir(cluster.nodes[1].raft.log_dir)
    cluster.close()

    lines = [json.loads(line) for line in dump(partition).stdout.splitlines()]
    assert [r["offset"] for r in lines] == list(range(len(lines)))
    assert lines[0]["type"] == "LEADER_CHANGE" and all({"epoch", "timestamp", "version", "data"} <= r.keys()
                                                       for r in lines)
    topic = next(r for r in lines if r["type"] == "TOPIC_RECORD")
    assert topic["data"]["name"] == "orders"

    cache = [json.loads(line) for line in dump(tmp_path / "broker" / "metadata-cache").stdout.splitlines()]
    assert cache[0]["type"] == "SNAPSHOT_HEADER" and cache[-1]["type"] == "SNAPSHOT_FOOTER"
    assert cache[-1]["data"]["records"] == len(cache) - 2

    piped = subprocess.run(" ".join(sparkraft_cmd("dump-log", "--files", str(partition))) + " | head -2",
                           shell=True, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and len(piped.stdout.splitlines()) == 2 and "Traceback" not in piped.stderr

    segment = next(partition.glob("*.log"))
    running = tmp_path / "running.log"  # as a running node's active segment: preallocated zeros after
    running.write_bytes(segment.read_bytes() + bytes(5 << 20))
    assert dump(running).stdout == dump(segment).stdout
    for name, data in (("damaged.log", segment.read_bytes()[:-7]),  # a torn last batch
                       ("torn-in-room.log", segment.read_bytes()[:-7] + bytes(5 << 20))):
        damaged = tmp_path / name
        damaged.write_bytes(data)
        r = dump(damaged, check=False)
        assert r.returncode == 1 and r.stdout.splitlines(), "the good records are printed first"
        assert r.stderr.startswith("ERROR:") and "damaged" in r.stderr and "Traceback" not in r.stderr


def test_what_is_not_a_log_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "random.log").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "empty").mkdir()
    (tmp_path / "zeros.log").write_bytes(bytes(3 << 20))  # preallocated, never written; or torn to zeros
    (tmp_path / "few-zeros.log").write_bytes(bytes(40))
    for path, words in ((tmp_path / "random.log", "not a log"), (tmp_path / "empty", "without .log"),
                        (tmp_path / "missing.log", "no such file"), (tmp_path / "zeros.log", "only zero bytes"),
                        (tmp_path / "few-zeros.log", "only zero bytes")):
        r = dump(path, check=False)
        assert r.returncode == 1 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stdout == ""
