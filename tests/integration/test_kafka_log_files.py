"""Apache Kafka's own metadata log files, read by sparkraft: a real Kafka 4.4 node (from Maven
Central's jars) is driven with Kafka's own tools, stopped, and then ``sparkraft dump-log`` reads its
``__cluster_metadata-0`` segments and ``.checkpoint`` snapshots and must print, record by record,
what Kafka's ``kafka-dump-log --cluster-metadata-decoder`` prints for the same files."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from apache_kafka import KafkaNode, java, jshell, kafka_tool, need_kafka, until_ok
from conftest import free_ports

from quorum.uuids import random_uuid

pytestmark = pytest.mark.slow

# kafka-dump-log's label before a control record's JSON -> sparkraft's type name for it
CONTROL_LABELS = {"LeaderChange:": "LEADER_CHANGE", "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS",
                  "SnapshotHeader": "SNAPSHOT_HEADER", "SnapshotFooter": "SNAPSHOT_FOOTER"}
LINE = re.compile(r"^\| offset: (\d+) .*?headerKeys: \[[^\]]*\] (payload:|" + "|".join(CONTROL_LABELS) + r") (\{.*\})$")
SECRET_FIELDS = {"USER_SCRAM_CREDENTIAL_RECORD": ("salt", "storedKey", "serverKey")}


@pytest.fixture(scope="module")
def kafka_log(tmp_path_factory) -> Path:
    """A Kafka node's metadata log directory after topics, configs, SCRAM users, quotas, ACLs and a
    deletion were made with Kafka's tools; snapshots every couple of seconds, so checkpoints exist."""
    need_kafka()
    root = tmp_path_factory.mktemp("kafka-log")
    node = KafkaNode(root, *free_ports(2))
    with open(node.config, "a") as f:
        f.write("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                "super.users=User:ANONYMOUS\n"
                "metadata.log.max.record.bytes.between.snapshots=2000\n"
                "metadata.log.max.snapshot.interval.ms=2000\n")
    node.format(random_uuid())
    node.start()
    try:
        bs = node.bootstrap_server
        until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "3",
                  "--config", "retention.ms=60000")
        until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "gone", "--partitions", "1")
        until_ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "5")
        until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
                  "orders", "--add-config", "cleanup.policy=compact")
        until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
                  "orders", "--delete-config", "retention.ms")
        until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "log.cleaner.threads=2")
        until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name",
                  "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
        until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name",
                  "bob", "--add-config", "producer_byte_rate=1024")
        until_ok("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:alice", "--operation",
                  "Read", "--topic", "orders")
        until_ok("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:bob", "--operation",
                  "Write", "--topic", "orders-", "--resource-pattern-type", "prefixed")
        until_ok("kafka-acls", "--bootstrap-server", bs, "--remove", "--force", "--allow-principal", "User:bob",
                  "--operation", "Write", "--topic", "orders-", "--resource-pattern-type", "prefixed")
        until_ok("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "gone")
        time.sleep(4)  # a snapshot after the last change
        # what Kafka's own tools say of the cluster now, for the image read from its files
        described = {name: kafka_tool(*args).stdout for name, args in {
            "topics": ("kafka-topics", "--bootstrap-server", bs, "--describe"),
            "orders": ("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                       "--entity-name", "orders"),
            "defaults": ("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "brokers",
                         "--entity-default"),
            "users": ("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "users"),
            "acls": ("kafka-acls", "--bootstrap-server", bs, "--list"),
            "quorum": ("kafka-metadata-quorum", "--bootstrap-server", bs, "describe", "--status")}.items()}
        (root / "described.json").write_text(json.dumps(described))
    finally:
        node.stop()
    return root / "data" / "__cluster_metadata-0"


def kafkas_dump(path: Path) -> dict[int, dict]:
    """offset -> {type, version, data} as kafka-dump-log --cluster-metadata-decoder prints ``path``."""
    folder = need_kafka()
    proc = subprocess.run(java("-cp", f"{folder}/*", "org.apache.kafka.tools.DumpLogSegments",
                           "--cluster-metadata-decoder", "--files", str(path)), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        if not line.startswith("| offset:"):
            continue
        m = LINE.match(line)
        assert m, f"a kafka-dump-log line this test cannot read: {line[:300]}"
        offset, label, text = int(m.group(1)), m.group(2), json.loads(m.group(3))
        if label == "payload:":
            data = text["data"]
            for name in SECRET_FIELDS.get(text["type"], ()):
                data[name] = "(redacted)"  # sparkraft never prints credentials
            out[offset] = {"type": text["type"], "version": text["version"], "data": data}
        else:
            out[offset] = {"type": CONTROL_LABELS[label], "version": text.get("version", 0), "data": text}
    return out


def ours(path: Path) -> tuple[dict[int, dict], str]:
    proc = subprocess.run([sys.executable, "-m", "sparkraft", "dump-log", "--files", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return {d["offset"]: {"type": d["type"], "version": d["version"], "data": d.get("data")} for d in lines}, proc.stderr


def test_every_segment_and_snapshot_reads_as_kafka_dump_log_reads_it(kafka_log):
    files = sorted(kafka_log.glob("*.log")) + sorted(kafka_log.glob("*.checkpoint"))
    assert any(f.suffix == ".checkpoint" and not f.name.startswith("0" * 20 + "-") for f in files), files
    types = set()
    for path in files:
        theirs = kafkas_dump(path)
        mine, stderr = ours(path)
        assert mine.keys() == theirs.keys(), path
        for offset, record in theirs.items():
            assert mine[offset] == record, f"{path.name} offset {offset}"
        assert "WARNING" not in stderr, stderr
        types |= {r["type"] for r in mine.values()}
    # what the steps above make Kafka write, every one decoded by the generated readers
    assert {"TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "CONFIG_RECORD", "REMOVE_TOPIC_RECORD",
            "USER_SCRAM_CREDENTIAL_RECORD", "CLIENT_QUOTA_RECORD", "ACCESS_CONTROL_ENTRY_RECORD",
            "REMOVE_ACCESS_CONTROL_ENTRY_RECORD", "FEATURE_LEVEL_RECORD", "REGISTER_BROKER_RECORD",
            "BROKER_REGISTRATION_CHANGE_RECORD", "REGISTER_CONTROLLER_RECORD", "BEGIN_TRANSACTION_RECORD",
            "END_TRANSACTION_RECORD", "NO_OP_RECORD", "LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS",
            "SNAPSHOT_HEADER", "SNAPSHOT_FOOTER"} <= types, types
    assert "UNKNOWN" not in types


def test_no_secret_of_kafkas_log_is_printed(kafka_log):
    mine, _ = ours(kafka_log / ("0" * 20 + ".log"))
    scram = [r for r in mine.values() if r["type"] == "USER_SCRAM_CREDENTIAL_RECORD"]
    assert scram and all(r["data"][k] == "(redacted)" for r in scram for k in SECRET_FIELDS[scram[0]["type"]])


def test_a_damaged_kafka_segment_prints_what_is_good_then_says_where(kafka_log, tmp_path):
    segment = tmp_path / ("0" * 20 + ".log")
    shutil.copy(kafka_log / segment.name, segment)
    data = bytearray(segment.read_bytes())
    # the last byte of the batch holding the middle of the file: inside what its CRC-32C covers (a
    # batch's offset, length and leader epoch come before the CRC, and no CRC can catch a flip there)
    from quorum.kafka_log.batches import read_batches

    middle = next(b for b in read_batches(bytes(data)) if b.position + b.size > len(data) // 2)
    data[middle.position + middle.size - 1] ^= 0xFF
    segment.write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-m", "sparkraft", "dump-log", "--files", str(segment)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "damaged at byte" in proc.stderr and "CRC" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    good = [json.loads(line) for line in proc.stdout.splitlines()]
    assert good and good[0]["offset"] == 0  # everything before the damage


def test_every_record_type_kafka_defines_is_generated_with_its_newest_version(tmp_path):
    from quorum.kafka_log.gen.records import RECORDS

    stdout = jshell("""
for (var t : org.apache.kafka.common.metadata.MetadataRecordType.values())
    System.out.println("TYPE " + t.id() + " " + t.name() + " " + t.highestSupportedVersion());
""", tmp_path)
    kafkas = {int(i): (name, int(v)) for _, i, name, v in (line.split() for line in stdout.splitlines()
                                                            if line.startswith("TYPE "))}
    assert kafkas, stdout
    assert {k: (name, v) for k, (name, v, _) in RECORDS.items()} == kafkas


def _kafkas_topics(text: str) -> dict:
    """kafka-topics --describe: name -> (topic id, configs, {partition: (leader, replicas, isr, elr)})."""
    topics: dict = {}

    def ids(value: str) -> tuple:
        return tuple(int(x) for x in value.split(",") if x.strip())

    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+): ([^\t]*)", line))
        if "Partition" in fields:
            topics[fields["Topic"]][2][int(fields["Partition"])] = (
                int(fields["Leader"]), ids(fields["Replicas"]), ids(fields["Isr"]), ids(fields.get("Elr", "")))
        elif "TopicId" in fields:
            configs = dict(c.split("=", 1) for c in fields.get("Configs", "").split(",") if "=" in c)
            topics[fields["Topic"]] = (fields["TopicId"], configs, {})
    return topics


def _dynamic_configs(text: str) -> dict[str, str]:
    """kafka-configs --describe: the ``  name=value sensitive=... synonyms={...}`` lines."""
    return dict(re.findall(r"^  ([\w.]+)=(\S*) sensitive=", text, re.M))


def _images(kafka_log: Path, end: int):
    """The image before offset ``end`` twice: Kafka's newest snapshot before it with the segments
    replayed on top, and the segments alone replayed from offset 0."""
    from quorum.kafka_import.files import kafka_snapshot_image, replay_segments, snapshot_id_of

    segments = sorted(kafka_log.glob("*.log"))
    snapshot = max((p for p in kafka_log.glob("*.checkpoint") if 0 < snapshot_id_of(p)[0] <= end),
                   key=lambda p: p.name)
    return (replay_segments(segments, kafka_snapshot_image(snapshot), end=end),
            replay_segments(segments, end=end))


def test_kafkas_files_replay_to_the_cluster_kafkas_own_tools_described(kafka_log):
    """sparkraft's image of a real Kafka cluster, read from Kafka's files (its newest snapshot, and its
    segments replayed from offset 0, both up to the high watermark of that moment), holds what Kafka's tools described before the node stopped:
    topics with their ids and configs, every partition's leader, replicas, ISR and ELR, the brokers'
    default configs, SCRAM users (iterations only: no secret is carried), quotas and ACLs. (Kafka
    4.4 writes a cluster-wide min.insync.replicas of its own when it enables ELR.)"""
    from quorum.metadata.configs import ConfigResource

    described = json.loads((kafka_log.parent.parent / "described.json").read_text())
    kafkas = _kafkas_topics(described["topics"])
    assert set(kafkas) == {"orders"}, described["topics"]
    # the node stopped after describing: the image at the high watermark it had then
    high_watermark = int(re.search(r"HighWatermark:\s+(\d+)", described["quorum"]).group(1))
    for image in _images(kafka_log, high_watermark):
        assert set(image.topics.topic_names()) == set(kafkas)
        for name, (topic_id, _, partitions) in kafkas.items():
            topic = image.topics.topic_by_name(name)
            assert topic.topic_id == topic_id
            assert {p: (r.leader, r.replicas, r.isr, r.elr) for p, r in topic.partitions.items()} == partitions
        topic_configs = _dynamic_configs(described["orders"])
        assert dict(image.configs.configs(ConfigResource(2, "orders"))) == topic_configs == {"cleanup.policy": "compact"}
        defaults = _dynamic_configs(described["defaults"])
        assert dict(image.configs.configs(ConfigResource(4, ""))) == defaults
        assert defaults["log.cleaner.threads"] == "2"
        scram = [(r.name, r.mechanism, r.iterations, r.salt, r.stored_key) for r in image.scram.records()]
        assert scram == [("alice", 1, 8192, b"", b"")]
        assert "SCRAM-SHA-256=iterations=8192" in described["users"]
        quotas = [(tuple((e.entity_type, e.entity_name) for e in r.entity), r.key, r.value)
                  for r in image.client_quotas.records()]
        assert quotas == [((("user", "bob"),), "producer_byte_rate", 1024.0)]
        assert "producer_byte_rate=1024.0" in described["users"]
        acls = [(r.principal, r.operation, r.resource_type, r.resource_name, r.pattern_type, r.host)
                for r in image.acls.records()]
        assert acls == [("User:alice", 3, 2, "orders", 3, "*")]  # READ, TOPIC, LITERAL
        assert described["acls"].count("(principal=") == 1 and "principal=User:alice" in described["acls"]
        broker = image.cluster.broker(1)
        assert [(e.name, e.host, e.port) for e in broker.endpoints][:1] == [("PLAINTEXT", "127.0.0.1",
                                                                              int(_broker_port(kafka_log)))]


def _broker_port(kafka_log: Path) -> str:
    config = (kafka_log.parent.parent / "server.properties").read_text()
    return re.search(r"PLAINTEXT://127\.0\.0\.1:(\d+)", config).group(1)


def test_sparkraft_shell_browses_a_kafka_snapshot(kafka_log):
    from quorum.kafka_import.files import kafka_snapshot_image

    newest = max((p for p in kafka_log.glob("*.checkpoint")), key=lambda p: p.name)
    proc = subprocess.run([sys.executable, "-m", "sparkraft", "shell", "--snapshot", str(newest)],
                          input="ls topics/byName\ncat topics/byName/orders/0\n", capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    listing, _, partition = proc.stdout.partition("\n")
    assert listing == "orders/"
    registration = kafka_snapshot_image(newest).topics.topic_by_name("orders").partitions[0]
    shown = json.loads(partition)
    assert (shown["leader"], shown["replicas"], shown["isr"], shown["elr"]) == (
        registration.leader, list(registration.replicas), list(registration.isr), list(registration.elr))
    assert shown["replicas"] == [1]


def test_kafkas_partition_records_read_straight_equal_the_generic_way(kafka_log):
    """Every PartitionRecord of Kafka's own files (snapshots and segments, written by Kafka 4.4 with
    ELR and log directories) read by the snapshot's fast path equals the generic reading of it."""
    from quorum.kafka_import.partitions import PartitionReader
    from quorum.kafka_import.records import metadata_record
    from quorum.kafka_log.batches import read_batches
    from quorum.metadata.topics import PartitionRegistration

    reader, read = PartitionReader(), 0
    for path in sorted(kafka_log.glob("*.checkpoint")) + sorted(kafka_log.glob("*.log")):
        for batch in read_batches(path.read_bytes()):
            for record in () if batch.control else batch.records:
                straight = reader.read(record.value)
                message = metadata_record(record.value)[0]
                if getattr(message, "type", None) is not None and message.type.name == "PARTITION_RECORD":
                    assert straight == (message.message.topic_id, message.message.partition_id,
                                        PartitionRegistration.from_record(message.message)), path.name
                    read += 1
                else:
                    assert straight is None
    assert read >= 2  # in the snapshot and in the segments
