"""A live Apache Kafka cluster's metadata in the lakehouse: ``sparkraft materialize --source kafka``
reads a real Kafka 4.4 node's quorum over Kafka's own protocol (its controller listener, Fetch as an
observer) and writes sparkraft's tables. After each round of changes made with Kafka's own tools,
the tables at the newest cut hold what Kafka's own tools describe, and ``records`` every offset of
Kafka's log once, across restarts of the job."""
from __future__ import annotations

import base64
import json
import re
import subprocess
import time
import uuid

import pytest
from apache_kafka import KafkaNode, KafkaQuorum, need_kafka, until_ok
from conftest import free_ports, sparkraft_cmd

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import CONFIGS, PARTITIONS, RECORDS, TOPICS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    need_kafka()
    root = tmp_path_factory.mktemp("kafka")
    node = KafkaNode(root, *free_ports(2))
    node.format(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
    node.start()
    try:
        until_ok("kafka-topics", "--bootstrap-server", node.bootstrap_server, "--list")
        yield node
    finally:
        node.stop()


def _kafkas_partitions(bootstrap_server: str) -> dict:
    """(topic, partition) -> (topic id, leader, replicas, isr), as kafka-topics --describe says."""
    out = {}
    for line in until_ok("kafka-topics", "--bootstrap-server", bootstrap_server, "--describe").splitlines():
        fields = dict(re.findall(r"(\w+): ([^\t]*)", line))
        if "TopicId" in fields:
            topic_id = fields["TopicId"]
        elif "Partition" in fields:
            ids = [int(x) for x in fields["Isr"].split(",") if x.strip()]
            out[(fields["Topic"], int(fields["Partition"]))] = (
                topic_id, int(fields["Leader"]), [int(x) for x in fields["Replicas"].split(",")], ids)
    return out


def _materialize(kafka, wh, ck) -> None:
    proc = subprocess.run(sparkraft_cmd("materialize", "--source", "kafka", "--bootstrap-controller",
                                        kafka.bootstrap_controller, "--warehouse", str(wh), "--checkpoint", str(ck),
                                        "--available-now"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _tables_match_kafka(kafka, wh):
    cut = latest_cut(str(wh))
    tables = tables_at(str(wh), cut)
    topics = {r["name"]: r for r in read_table(tables[TOPICS]).to_pylist()}
    partitions = {(r["topic_name"], r["partition"]): (r["topic_id"], r["leader"], r["replicas"], r["isr"])
                  for r in read_table(tables[PARTITIONS]).to_pylist()}
    kafkas = _kafkas_partitions(kafka.bootstrap_server)
    assert partitions == kafkas
    assert {name: r["topic_id"] for name, r in topics.items()} == {t: v[0] for (t, _), v in kafkas.items()}
    records = read_table(tables[RECORDS])
    offsets = sorted(o for o, t in zip(records.column("offset").to_pylist(), records.column("type").to_pylist())
                     if t != "SNAPSHOT")
    snapshots = [o for o, t in zip(records.column("offset").to_pylist(), records.column("type").to_pylist())
                 if t == "SNAPSHOT"]
    first = snapshots[0] + 1 if snapshots else 0  # a snapshot row stands for every offset before its end
    assert offsets == list(range(first, cut.offset + 1)), "every offset of Kafka's log exactly once"
    return tables


def test_a_kafka_clusters_metadata_is_materialised_and_followed_across_restarts(kafka, tmp_path):
    bs = kafka.bootstrap_server
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "3",
              "--config", "retention.ms=60000")
    until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "gone", "--partitions", "2")
    _materialize(kafka, wh, ck)
    _tables_match_kafka(kafka, wh)

    # a second round of changes, and the job started again on the same checkpoint
    until_ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "5")
    until_ok("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "gone")
    until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
              "orders", "--add-config", "cleanup.policy=compact")
    _materialize(kafka, wh, ck)
    tables = _tables_match_kafka(kafka, wh)
    configs = {(r["resource_name"], r["name"]): r["value"] for r in read_table(tables[CONFIGS]).to_pylist()
               if r["resource_type"] == "TOPIC"}
    assert configs == {("orders", "retention.ms"): "60000", ("orders", "cleanup.policy"): "compact"}
    types = set(read_table(tables[RECORDS]).column("type").to_pylist())
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "REMOVE_TOPIC_RECORD", "REGISTER_BROKER_RECORD",
            "FEATURE_LEVEL_RECORD", "LEADER_CHANGE"} <= types, types
    # a type sparkraft's image does not model keeps Kafka's name and reading (a controller registration)
    assert not [t for t in types if t.startswith("UNKNOWN")], types
    controllers = [json.loads(r["data"]) for r in read_table(tables[RECORDS]).to_pylist()
                   if r["type"] == "REGISTER_CONTROLLER_RECORD"]
    assert controllers and controllers[0]["controllerId"] == 1, controllers


def test_a_checkpoint_of_another_cluster_is_refused_in_one_line(kafka, tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "sparkraft-cluster-id").write_text("AAAAAAAAAAAAAAAAAAAAAA\n")
    proc = subprocess.run(sparkraft_cmd("materialize", "--source", "kafka", "--bootstrap-controller",
                                        kafka.bootstrap_controller, "--warehouse", str(tmp_path / "wh"),
                                        "--checkpoint", str(ck), "--available-now"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "belongs to cluster AAAAAAAAAAAAAAAAAAAAAA" in lines[0], proc.stderr


@pytest.fixture(scope="module")
def kafka_quorum(tmp_path_factory):
    """Three Kafka controllers and a broker that snapshot every second and let go of log segments
    older than a second and a half: a reader starting at offset 0 must load a snapshot first."""
    need_kafka()
    root = tmp_path_factory.mktemp("kafka-quorum")
    quorum = KafkaQuorum(root, free_ports(4), {
        "metadata.log.max.snapshot.interval.ms": 1000, "metadata.log.max.record.bytes.between.snapshots": 1000,
        "metadata.log.segment.ms": 1500, "metadata.max.retention.ms": 1000})
    quorum.format(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
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

    leader = kafka_quorum.leader()
    kafka_quorum.kill(leader)
    deadline = time.monotonic() + 120
    while kafka_quorum.leader() in (None, leader):
        assert time.monotonic() < deadline, "no new Kafka leader"
        time.sleep(1)
    until_ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "t0", "--partitions", "25")
    until_ok("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "t1")
    _materialize(kafka_quorum, wh, ck)
    _tables_match_kafka(kafka_quorum, wh)
