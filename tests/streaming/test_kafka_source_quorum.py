"""A live Apache Kafka quorum's metadata in the lakehouse: three Kafka 4.4 controllers and two brokers
that snapshot every second and drop older log segments, so the job starts from Kafka's snapshot;
its active controller SIGKILLed under a finished job and under a running one; a reassignment made
with Kafka's tool. (Split from test_kafka_source.py so the two files' Kafka clusters run on two
workers at once: each file's tests share their module's cluster.)"""
from __future__ import annotations

import json
import subprocess
import time

import pytest
from apache_kafka import KafkaQuorum, kafka_tool, need_kafka, until_ok
from conftest import free_ports, sparkraft_cmd, wait_for
from test_kafka_source import _materialize, _tables_match_kafka

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import PARTITIONS, RECORDS, TOPICS
from quorum.uuids import random_uuid

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kafka_quorum(tmp_path_factory):
    """Three Kafka controllers and two brokers that snapshot every second and let go of log segments
    older than a second and a half: a reader starting at offset 0 must load a snapshot first."""
    need_kafka()
    root = tmp_path_factory.mktemp("kafka-quorum")
    quorum = KafkaQuorum(root, free_ports(5), brokers=2, extra={
        "metadata.log.max.snapshot.interval.ms": 1000, "metadata.log.max.record.bytes.between.snapshots": 1000,
        "metadata.log.segment.ms": 1500, "metadata.max.retention.ms": 1000})
    quorum.format(random_uuid())
    quorum.start_all()
    try:
        until_ok("kafka-topics", "--bootstrap-server", quorum.bootstrap_server, "--list")
        yield quorum
    finally:
        quorum.stop_all()


def _log_start(quorum: KafkaQuorum) -> int:
    from quorum.kafka_import.reader import KafkaMetadataLogReader
    from quorum.rpc.log_reader import SnapshotRequired

    with KafkaMetadataLogReader(quorum.bootstrap_controller, timeout=30) as reader:
        try:
            reader.read(0, max_records=1)
        except SnapshotRequired as e:
            return e.log_start_offset
    return 0


def test_a_kafka_quorum_is_read_from_its_snapshot_and_followed_through_a_leader_sigkill(kafka_quorum, tmp_path):
    """The job starts where the Kafka leader's log no longer begins at 0 (FetchSnapshot, turned into
    sparkraft's checkpoint), then Kafka's active controller is SIGKILLed and the next run finds the
    new leader from the controllers it is given; after each, the tables equal Kafka's description."""
    bs = kafka_quorum.bootstrap_server
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    for i in range(3):
        until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", f"t{i}", "--partitions", "20")
    deadline = time.monotonic() + 120
    while _log_start(kafka_quorum) == 0:
        assert time.monotonic() < deadline, "Kafka's log still starts at offset 0"
        time.sleep(1)
    _materialize(kafka_quorum, wh, ck)
    tables = _tables_match_kafka(kafka_quorum, wh)
    assert "SNAPSHOT" in read_table(tables[RECORDS]).column("type").to_pylist()

    for c in [c for c in KafkaQuorum.CONTROLLERS if c not in kafka_quorum.procs]:
        kafka_quorum.start(c)  # another test of this module killed one: two must stay after the kill
    time.sleep(5)
    leader = wait_for(kafka_quorum.leader, 60, "Kafka's leader")
    kafka_quorum.kill(leader)
    deadline = time.monotonic() + 120
    while kafka_quorum.leader() in (None, leader):
        assert time.monotonic() < deadline, "no new Kafka leader"
        time.sleep(1)
    until_ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "t0", "--partitions", "25")
    until_ok("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "t1")
    _materialize(kafka_quorum, wh, ck)
    _tables_match_kafka(kafka_quorum, wh)


def test_a_reassignment_made_with_kafkas_tool_is_materialised_as_kafka_describes_it(kafka_quorum, tmp_path):
    """kafka-reassign-partitions moves a topic's replicas from broker 101 to 102; after Kafka says
    it is complete, the tables equal kafka-topics --describe: the new replicas and leaders, nothing
    left adding or removing. (This quorum snapshots every second and drops older segments, so the
    move's own records may be inside the snapshot the job starts from.)"""
    bs = kafka_quorum.bootstrap_server
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "moving", "--replica-assignment",
             "101,101,101,101")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": p, "replicas": [102]} for p in range(4)]}))
    until_ok("kafka-reassign-partitions", "--bootstrap-server", bs, "--reassignment-json-file", str(plan), "--execute")
    deadline = time.monotonic() + 120
    while "is still in progress" in until_ok("kafka-reassign-partitions", "--bootstrap-server", bs,
                                             "--reassignment-json-file", str(plan), "--verify"):
        assert time.monotonic() < deadline, "Kafka's reassignment did not complete"
        time.sleep(1)
    _materialize(kafka_quorum, wh, ck)
    tables = _tables_match_kafka(kafka_quorum, wh)
    moved = {r["partition"]: (r["replicas"], r["leader"], r["adding_replicas"], r["removing_replicas"])
             for r in read_table(tables[PARTITIONS]).to_pylist() if r["topic_name"] == "moving"}
    assert moved == {p: ([102], 102, [], []) for p in range(4)}, moved


def test_a_running_job_follows_kafkas_quorum_through_a_leader_sigkill(kafka_quorum, tmp_path):
    """The job runs on (a processing-time trigger) while Kafka's active controller is SIGKILLed and
    changes go on through the new one: the running query finds the new leader by itself, the tables
    catch up to kafka-topics --describe, and after the job's SIGTERM every offset is there once."""
    import os
    import signal

    bs = kafka_quorum.bootstrap_server
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "before-kill", "--partitions", "3")
    log = open(tmp_path / "job.log", "wb")
    job = subprocess.Popen(sparkraft_cmd("materialize", "--source", "kafka", "--bootstrap-controller",
                                         kafka_quorum.bootstrap_controller, "--warehouse", str(wh),
                                         "--checkpoint", str(ck)),
                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def holds(topic):
            def check():
                try:
                    tables = tables_at(str(wh), latest_cut(str(wh)))
                except Exception:  # no cut yet
                    return False
                return topic in read_table(tables[TOPICS]).column("name").to_pylist()
            return check

        wait_for(holds("before-kill"), 300, "the running job's first cuts")
        down = [c for c in KafkaQuorum.CONTROLLERS if c not in kafka_quorum.procs]
        for c in down:  # another test of this module killed one: all three up, so two stay after the kill
            kafka_quorum.start(c)
        def voters_following() -> bool:
            out = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", kafka_quorum.bootstrap_controller,
                             "describe", "--replication").stdout
            rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
            return len([r for r in rows if r[-1] in ("Leader", "Follower")]) == len(KafkaQuorum.CONTROLLERS)

        wait_for(voters_following, 120, "all three Kafka controllers voting")
        leader = wait_for(kafka_quorum.leader, 60, "Kafka's leader")
        kafka_quorum.kill(leader)
        until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "after-kill", "--partitions", "4")
        until_ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "before-kill", "--partitions", "5")
        wait_for(holds("after-kill"), 300, "the running job to follow Kafka's new leader")
        deadline = time.monotonic() + 120
        while True:  # the partition count change may land a cut later
            try:
                _tables_match_kafka(kafka_quorum, wh)
                break
            except AssertionError as e:
                assert time.monotonic() < deadline, \
                    f"{str(e)[:4000]}\n--- job ---\n{(tmp_path / 'job.log').read_text(errors='replace')[-3000:]}"
                time.sleep(2)
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        assert job.wait(120) == 0, (tmp_path / "job.log").read_text(errors="replace")[-3000:]
        log.close()
    _tables_match_kafka(kafka_quorum, wh)
