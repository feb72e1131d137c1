"""Snapshots written by real controller processes: on every node, readable by dump-log and the
shell, loaded on restart (only the log after them replayed), old ones and the log below them
deleted by retention, a damaged one refused, and a node without the log catching up through
FetchSnapshot."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import LiveBrokers, create_topic_once, sparkraft_cmd, wait_for
from test_metrics import scrape

pytestmark = pytest.mark.slow

SMALL = {"metadata.log.max.record.bytes.between.snapshots": "3000",
         "metadata.max.retention.bytes": "15000",  # a few snapshots, then the oldest goes with the log below
         "metadata.log.segment.bytes": "2048"}


def checkpoints(cp, i):
    return sorted(cp.partition_dir(i).glob("*.checkpoint"))


def partition_count(cp, i) -> float:
    return scrape(cp.metrics_ports[i])["sparkraft_controller_global_partition_count"]


@pytest.fixture
def cluster_with_snapshots(controller_processes):
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes(metrics=True, **SMALL)
    cp.format()
    cp.start()
    cp.wait_leader()
    admin = ControllerClient(cp.bootstrap(), timeout=20)
    broker = LiveBrokers(admin, admin.describe_cluster().cluster_id, ((101, None),), heartbeat_interval_ms=300)
    try:
        broker.wait_unfenced()
        for i in range(6):
            create_topic_once(admin, f"t{i}", 20, 1)
        wait_for(lambda: all(checkpoints(cp, i) for i in cp.voters), 30, "a snapshot on every controller")
        yield cp, admin
    finally:
        broker.close()  # its heartbeats stop before the client they use is closed
        admin.close()


def segments(cp, i):
    return sorted(cp.partition_dir(i).glob("*.log"))


def retention_applied(cp, i) -> bool:
    """The log starts past 0, at the oldest snapshot kept: no segment lies wholly below it."""
    seg, kept = segments(cp, i), checkpoints(cp, i)
    if not seg or not kept:
        return False
    oldest = int(kept[0].name[:20])
    return 0 < int(seg[0].name[:20]) <= oldest and (len(seg) == 1 or int(seg[1].name[:20]) > oldest)


def test_every_controller_writes_snapshots_that_the_tools_read(cluster_with_snapshots, tmp_path):
    import shutil

    cp, admin = cluster_with_snapshots
    # Retention runs after each snapshot a node writes, and each node snapshots at the offsets its
    # own high watermark reached (a follower learns it later): write until every node has deleted
    # old snapshots and segments, at least ten topics, at most forty.
    for n in range(40):
        create_topic_once(admin, f"more{n}", 20, 1)
        if n >= 9 and all(retention_applied(cp, i) for i in cp.voters):
            break
    for i in cp.voters:
        assert all(p.name.endswith(".checkpoint") and len(p.name) == len("0" * 20 + "-" + "0" * 10 + ".checkpoint")
                   for p in checkpoints(cp, i))
        wait_for(lambda: retention_applied(cp, i), 30, f"controller {i} to delete its first segments")
    # A copy: retention may delete the original once a newer snapshot is written.
    newest = Path(shutil.copy(checkpoints(cp, 1)[-1], tmp_path))
    lines = subprocess.run(sparkraft_cmd("dump-log", "--files", str(newest)), capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    header, footer = json.loads(lines[0]), json.loads(lines[-1])
    assert header["type"] == "SNAPSHOT_HEADER" and header["data"]["end_offset"] == int(newest.name[:20])
    assert footer["type"] == "SNAPSHOT_FOOTER" and footer["data"]["records"] == len(lines) - 2
    ls = subprocess.run(sparkraft_cmd("shell", "--snapshot", str(newest)), input="ls /image/topics/byName\n",
                        capture_output=True, text=True, timeout=60)
    assert ls.returncode == 0 and "t0/" in ls.stdout
    metrics = scrape(cp.metrics_ports[1])
    assert metrics["sparkraft_snapshot_latest_offset"] >= int(newest.name[:20])
    assert metrics["sparkraft_raft_log_start_offset"] > 0


def test_a_restart_loads_the_newest_snapshot(cluster_with_snapshots):
    cp, admin = cluster_with_snapshots
    leader = cp.wait_leader().leader_id
    standby = next(i for i in cp.voters if i != leader)
    cp.stop(standby)
    newest = checkpoints(cp, standby)[-1]
    cp.start([standby])
    wait_for(lambda: "loaded snapshot " + newest.name in cp.run_output(standby), 30,
             "the restarted controller to load its newest snapshot")
    create_topic_once(admin, "after-restart", 5, 1)
    expected = 6 * 20 + 5
    wait_for(lambda: partition_count(cp, standby) == expected, 30, "the restarted controller to catch up")


def test_damaged_snapshots_are_refused_and_the_node_fetches_a_good_one(cluster_with_snapshots):
    cp, admin = cluster_with_snapshots
    for n in range(6):
        create_topic_once(admin, f"more{n}", 20, 1)
    leader = cp.wait_leader().leader_id
    standby = next(i for i in cp.voters if i != leader)
    wait_for(lambda: int(segments(cp, standby)[0].name[:20]) > 0, 30, "the standby's log to start past 0")
    cp.stop(standby)
    damaged = checkpoints(cp, standby)
    for path in damaged:  # every snapshot: none holds the records below the log start any more
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    cp.start([standby])
    wait_for(lambda: "loaded the leader's snapshot" in cp.run_output(standby), 60,
             "the standby to download and load the leader's snapshot")
    out = cp.run_output(standby)
    assert "fails" in out or "damaged" in out
    for path in damaged:  # evidence, not garbage: kept aside under another name, never served
        assert path.with_name(path.name + ".corrupt").exists()
    create_topic_once(admin, "after-repair", 5, 1)
    wait_for(lambda: partition_count(cp, standby) == partition_count(cp, leader) == 12 * 20 + 5, 30,
             "the repaired standby to agree with the leader")


def test_a_wiped_follower_rejoins_through_fetch_snapshot(cluster_with_snapshots):
    import shutil

    cp, admin = cluster_with_snapshots
    for n in range(6):
        create_topic_once(admin, f"more{n}", 20, 1)
    leader = cp.wait_leader().leader_id
    wait_for(lambda: int(segments(cp, leader)[0].name[:20]) > 0, 30, "the leader's log to start past 0")
    victim = next(i for i in cp.voters if i != leader)
    cp.kill(victim)
    shutil.rmtree(cp.log_dir(victim))
    formatted = subprocess.run(sparkraft_cmd("storage", "format", "--config", str(cp.config(victim)),
                                             "--cluster-id", cp.cluster_id, "--rejoin"),
                               capture_output=True, text=True, timeout=60)
    assert formatted.returncode == 0, formatted.stderr
    cp.start([victim])
    wait_for(lambda: "loaded the leader's snapshot" in cp.run_output(victim), 60,
             "the wiped follower to catch up through FetchSnapshot")
    create_topic_once(admin, "after-wipe", 5, 1)
    wait_for(lambda: partition_count(cp, victim) == partition_count(cp, leader) == 12 * 20 + 5, 30,
             "the rejoined follower to hold the leader's image")
    snapshot = checkpoints(cp, victim)[0]  # the downloaded one, whole and under its own name
    assert int(snapshot.name[:20]) > 0 and not list(cp.partition_dir(victim).glob("*.tmp"))


def test_observers_behind_the_log_start_load_the_leaders_snapshot(cluster_with_snapshots):
    """A broker whose starting point (here a Delta cut at offset 9) is older than the quorum's log
    start falls back to FetchSnapshot, then follows the log; so does read_image, and so does a
    broker with nothing to start from."""
    from quorum.broker.metadata_client import BrokerMetadataClient
    from quorum.metadata.image import MetadataImage
    from quorum.rpc.log_reader import read_image

    cp, admin = cluster_with_snapshots
    for n in range(6):
        create_topic_once(admin, f"more{n}", 20, 1)
    leader = cp.wait_leader().leader_id
    wait_for(lambda: int(segments(cp, leader)[0].name[:20]) > 0, 30, "the leader's log to start past 0")
    cluster_id = admin.describe_cluster().cluster_id
    updates = []
    stale_cut = BrokerMetadataClient(cp.bootstrap(), cluster_id, bootstrap_source=lambda: (MetadataImage.EMPTY, 10),
                                     fetch_wait_ms=100)
    stale_cut.add_listener(updates.append)
    fresh = BrokerMetadataClient(cp.bootstrap(), cluster_id, fetch_wait_ms=100)
    try:
        for client in (stale_cut, fresh):
            client.start()
            create_topic_once(admin, f"seen-by-{id(client)}", 3, 1)
            wait_for(lambda: client.image.topics.topic_names() == sorted(admin.list_topics()), 30,
                     "the broker to catch up through the snapshot")
            assert client.stats.bootstrap_source == "snapshot" and client.stats.snapshots_fetched == 1
            assert client.stats.bootstrap_offset >= int(checkpoints(cp, leader)[0].name[:20]) - 1
        assert updates[0].reloaded and not updates[0].records  # listeners are told the image was replaced
        assert all(u.first_offset > updates[0].last_offset for u in updates[1:])
        image = read_image(cp.bootstrap(), cluster_id=cluster_id)  # snapshot + log, as a tool reads it
        assert image.topics.topic_names() == sorted(admin.list_topics())
        assert image.topics.partition_count() == partition_count(cp, leader)
        assert fresh.image.topics.partition_count() == stale_cut.image.topics.partition_count() == \
            image.topics.partition_count()
    finally:
        stale_cut.stop()
        fresh.stop()


def log_start(cp, i) -> int:
    return int(segments(cp, i)[0].name[:20])


def newest_snapshot(cp, i) -> int:
    return int(checkpoints(cp, i)[-1].name[:20])


def test_a_readers_hold_keeps_the_log_from_retention_until_released(cluster_with_snapshots):
    """What the streaming job does after each micro-batch (streaming/log_hold.py): while a reader
    holds the log from an offset, no controller's retention deletes a segment past it, however far
    over metadata.max.retention.bytes the log grows; released (as an operator would, with the CLI),
    retention goes on."""
    from quorum.controller import api

    cp, admin = cluster_with_snapshots
    held = admin.call(api.HoldLogRequest("materialize:/test", 1)).offset  # the oldest offset: hold all of it
    assert held == 1
    bootstrap = ("--bootstrap-controller", cp.bootstrap())
    listed = subprocess.run(sparkraft_cmd("log-holds", "list", *bootstrap), capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "materialize:/test\tfrom offset 1\t" in listed.stdout and "holds" in listed.stdout
    starts = {i: log_start(cp, i) for i in cp.voters}
    before = max(newest_snapshot(cp, i) for i in cp.voters)
    for n in range(12):  # far past metadata.max.retention.bytes: retention would delete segments
        create_topic_once(admin, f"held{n}", 20, 1)
    wait_for(lambda: all(newest_snapshot(cp, i) > before + 200 for i in cp.voters), 30,
             "newer snapshots (and retention after each) on every controller")
    assert {i: log_start(cp, i) for i in cp.voters} == starts, "a segment the reader holds was deleted"
    released = subprocess.run(sparkraft_cmd("log-holds", "release", "materialize:/test", *bootstrap),
                              capture_output=True, text=True, timeout=60)
    assert released.returncode == 0, released.stderr
    for n in range(3):  # a snapshot on each node applies retention again
        create_topic_once(admin, f"released{n}", 20, 1)
    for i in cp.voters:
        wait_for(lambda: log_start(cp, i) > max(starts[i], 1), 30, f"controller {i}'s retention to go on")
    gone = subprocess.run(sparkraft_cmd("log-holds", "list", *bootstrap), capture_output=True, text=True, timeout=60)
    assert "No reader holds the log." in gone.stdout
