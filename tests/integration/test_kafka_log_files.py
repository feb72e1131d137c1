"""Apache Kafka's own metadata log files, read by sparkraft: a real Kafka 4.4 node (from Maven
Central's jars) is driven with Kafka's own tools, stopped, and then ``sparkraft dump-log`` reads its
``__cluster_metadata-0`` segments and ``.checkpoint`` snapshots and must print, record by record,
what Kafka's ``kafka-dump-log --cluster-metadata-decoder`` prints for the same files."""
from __future__ import annotations

import base64
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from apache_kafka import KafkaNode, jshell, kafka_tool, need_kafka

pytestmark = pytest.mark.slow

# kafka-dump-log's label before a control record's JSON -> sparkraft's type name for it
CONTROL_LABELS = {"LeaderChange:": "LEADER_CHANGE", "KRaftVersion": "KRAFT_VERSION", "KRaftVoters": "KRAFT_VOTERS",
                  "SnapshotHeader": "SNAPSHOT_HEADER", "SnapshotFooter": "SNAPSHOT_FOOTER"}
LINE = re.compile(r"^\| offset: (\d+) .*?headerKeys: \[[^\]]*\] (payload:|" + "|".join(CONTROL_LABELS) + r") (\{.*\})$")
SECRET_FIELDS = {"USER_SCRAM_CREDENTIAL_RECORD": ("salt", "storedKey", "serverKey")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _until_ok(*args: str) -> None:
    """A Kafka tool, retried while the node is still starting (its listener not open yet)."""
    for _ in range(60):
        out = kafka_tool(*args)
        if out.returncode == 0:
            return
        time.sleep(1)
    raise AssertionError(f"{args[0]} {' '.join(args[1:4])} kept failing: {out.stderr[-2000:]}")


@pytest.fixture(scope="module")
def kafka_log(tmp_path_factory) -> Path:
    """A Kafka node's metadata log directory after topics, configs, SCRAM users, quotas, ACLs and a
    deletion were made with Kafka's tools; snapshots every couple of seconds, so checkpoints exist."""
    need_kafka()
    root = tmp_path_factory.mktemp("kafka-log")
    node = KafkaNode(root, _free_port(), _free_port())
    with open(node.config, "a") as f:
        f.write("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                "super.users=User:ANONYMOUS\n"
                "metadata.log.max.record.bytes.between.snapshots=2000\n"
                "metadata.log.max.snapshot.interval.ms=2000\n")
    node.format(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
    node.start()
    try:
        bs = node.bootstrap_server
        _until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "3",
                  "--config", "retention.ms=60000")
        _until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "gone", "--partitions", "1")
        _until_ok("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "orders", "--partitions", "5")
        _until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
                  "orders", "--add-config", "cleanup.policy=compact")
        _until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
                  "orders", "--delete-config", "retention.ms")
        _until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", "--entity-default",
                  "--add-config", "log.cleaner.threads=2")
        _until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name",
                  "alice", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
        _until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name",
                  "bob", "--add-config", "producer_byte_rate=1024")
        _until_ok("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:alice", "--operation",
                  "Read", "--topic", "orders")
        _until_ok("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:bob", "--operation",
                  "Write", "--topic", "orders-", "--resource-pattern-type", "prefixed")
        _until_ok("kafka-acls", "--bootstrap-server", bs, "--remove", "--force", "--allow-principal", "User:bob",
                  "--operation", "Write", "--topic", "orders-", "--resource-pattern-type", "prefixed")
        _until_ok("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "gone")
        time.sleep(4)  # a snapshot after the last change
    finally:
        node.stop()
    return root / "data" / "__cluster_metadata-0"


def kafkas_dump(path: Path) -> dict[int, dict]:
    """offset -> {type, version, data} as kafka-dump-log --cluster-metadata-decoder prints ``path``."""
    folder = need_kafka()
    proc = subprocess.run(["java", "-cp", f"{folder}/*", "org.apache.kafka.tools.DumpLogSegments",
                           "--cluster-metadata-decoder", "--files", str(path)], capture_output=True, text=True,
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
    data[len(data) // 2] ^= 0xFF
    segment.write_bytes(bytes(data))
    proc = subprocess.run([sys.executable, "-m", "sparkraft", "dump-log", "--files", str(segment)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "damaged at byte" in proc.stderr and "CRC" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    good = [json.loads(line) for line in proc.stdout.splitlines()]
    assert good and good[0]["offset"] == 0  # everything before the damage


def test_every_record_type_kafka_defines_is_generated_with_its_newest_version(tmp_path):
    from quorum.kafka_log.records_gen import RECORDS

    stdout = jshell("""
for (var t : org.apache.kafka.common.metadata.MetadataRecordType.values())
    System.out.println("TYPE " + t.id() + " " + t.name() + " " + t.highestSupportedVersion());
""", tmp_path)
    kafkas = {int(i): (name, int(v)) for _, i, name, v in (line.split() for line in stdout.splitlines()
                                                            if line.startswith("TYPE "))}
    assert kafkas, stdout
    assert {k: (name, v) for k, (name, v, _) in RECORDS.items()} == kafkas
