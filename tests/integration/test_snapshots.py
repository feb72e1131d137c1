"""Snapshots written by real controller processes: on every node, readable by dump-log and the
shell, loaded on restart (only the log after them replayed), and a damaged one skipped."""
from __future__ import annotations

import json
import subprocess
import threading

import pytest

from conftest import sparkraft_cmd, wait_for
from test_metrics import scrape

pytestmark = pytest.mark.slow

SMALL = {"metadata.log.max.record.bytes.between.snapshots": "3000"}


def checkpoints(cp, i):
    return sorted(cp.partition_dir(i).glob("*.checkpoint"))


def partition_count(cp, i) -> float:
    return scrape(cp.metrics_ports[i])["sparkraft_controller_global_partition_count"]


@pytest.fixture
def cluster_with_snapshots(controller_processes):
    from quorum.broker.lifecycle import BrokerLifecycle
    from quorum.controller import api
    from quorum.log.meta_properties import random_uuid
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes(metrics=True, **SMALL)
    cp.format()
    cp.start()
    cp.wait_leader()
    admin = ControllerClient(cp.bootstrap(), timeout=20)
    cluster_id = admin.describe_cluster().cluster_id
    broker = BrokerLifecycle(admin, 101, cluster_id, random_uuid(), (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092),),
                             None, heartbeat_interval_ms=300)
    threading.Thread(target=broker.run, daemon=True).start()
    wait_for(lambda: broker.state.broker_epoch >= 0 and not broker.state.fenced, 20, "the broker unfenced")
    for i in range(6):
        admin.create_topic(f"t{i}", 20, 1)
    wait_for(lambda: all(checkpoints(cp, i) for i in cp.voters), 30, "a snapshot on every controller")
    try:
        yield cp, admin
    finally:
        broker.stop()
        admin.close()


def test_every_controller_writes_snapshots_that_the_tools_read(cluster_with_snapshots):
    cp, _ = cluster_with_snapshots
    for i in cp.voters:
        assert all(p.name.endswith(".checkpoint") and len(p.name) == len("0" * 20 + "-" + "0" * 10 + ".checkpoint")
                   for p in checkpoints(cp, i))
        wait_for(lambda: len(checkpoints(cp, i)) <= 2, 10, "older snapshots pruned")
    newest = checkpoints(cp, 1)[-1]
    lines = subprocess.run(sparkraft_cmd("dump-log", "--files", str(newest)), capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    header, footer = json.loads(lines[0]), json.loads(lines[-1])
    assert header["type"] == "SNAPSHOT_HEADER" and header["data"]["end_offset"] == int(newest.name[:20])
    assert footer["type"] == "SNAPSHOT_FOOTER" and footer["data"]["records"] == len(lines) - 2
    ls = subprocess.run(sparkraft_cmd("shell", "--snapshot", str(newest)), input="ls /image/topics/byName\n",
                        capture_output=True, text=True, timeout=60)
    assert ls.returncode == 0 and "t0/" in ls.stdout
    assert scrape(cp.metrics_ports[1])["sparkraft_snapshot_latest_offset"] >= int(newest.name[:20])


def test_a_restart_loads_the_newest_snapshot_and_a_damaged_one_is_skipped(cluster_with_snapshots):
    cp, admin = cluster_with_snapshots
    leader = cp.wait_leader().leader_id
    standby = next(i for i in cp.voters if i != leader)
    cp.stop(standby)
    newest = checkpoints(cp, standby)[-1]
    cp.start([standby])
    wait_for(lambda: "loaded snapshot " + newest.name in cp.output(standby).read_text(), 30,
             "the restarted controller to load its newest snapshot")
    admin.create_topic("after-restart", 5, 1)
    expected = 6 * 20 + 5
    wait_for(lambda: partition_count(cp, standby) == expected, 30, "the restarted controller to catch up")

    # Damage the newest snapshot: the next start skips it for the older one (or the log) and agrees.
    cp.stop(standby)
    newest = checkpoints(cp, standby)[-1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    cp.start([standby])
    wait_for(lambda: "Skipping snapshot" in cp.output(standby).read_text(), 30, "the damaged snapshot skipped")
    wait_for(lambda: partition_count(cp, standby) == expected, 30, "the controller to rebuild the same image")
    assert newest.exists(), "a damaged snapshot is evidence, not garbage: it stays"
