"""Apache Kafka's metadata read as its operators secure and restore it: ``sparkraft materialize
--source kafka`` over Kafka's own SASL_SSL controller listener (SCRAM inside mutual TLS, refused in
one line with a wrong secret, an unauthorized user or no certificate), and from a Kafka controller
restored from a snapshot of an older epoch, read once. (Apart from test_kafka_source.py so that
xdist runs the two files side by side.)"""
from __future__ import annotations

import subprocess

import pytest
from apache_kafka import KafkaNode, need_kafka, restored_controller, until_ok, write_kafka_snapshot
from conftest import free_ports, sparkraft_cmd
from pki import Pki
from test_kafka_source import _materialize, _tables_match_kafka

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import PARTITIONS, RECORDS
from quorum.uuids import random_uuid

pytestmark = pytest.mark.slow


STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def kafka_sasl(tmp_path_factory):
    """A Kafka node with a second controller listener, SECURE: SASL_SSL with SCRAM-SHA-256 and
    mutual TLS, Kafka's authorizer on. The node's own traffic stays on its first (plaintext)
    controller listener; the reader comes in on SECURE as user ``reader`` (with its own client
    certificate), which holds only the ACLs that reading the metadata log needs."""
    need_kafka()
    root = tmp_path_factory.mktemp("kafka-sasl")
    pki = Pki(root / "pki")
    broker_port, controller_port, secure_port = free_ports(3)
    listeners = (f"PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port},"
                 f"SECURE://127.0.0.1:{secure_port}")
    secure = "listener.name.secure."
    node = KafkaNode(root, broker_port, controller_port, extra={
        "listeners": listeners, "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER,SECURE",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
        f"{secure}sasl.enabled.mechanisms": "SCRAM-SHA-256",
        f"{secure}scram-sha-256.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        f"{secure}ssl.keystore.type": "PEM", f"{secure}ssl.keystore.location": pki.jvm_keystore("kafka-controller"),
        f"{secure}ssl.truststore.type": "PEM", f"{secure}ssl.truststore.location": pki.truststore,
        f"{secure}ssl.client.auth": "required",
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    node.format(random_uuid())
    node.start()
    try:
        bs = node.bootstrap_server
        for user in ("reader", "stranger"):
            until_ok("kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "users", "--entity-name",
                     user, "--add-config", f"SCRAM-SHA-256=[password={user}-secret]")
        until_ok("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:reader",
                 "--operation", "Alter", "--operation", "ClusterAction", "--cluster")
        until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "secured", "--partitions", "3")
        yield node, pki, f"127.0.0.1:{secure_port}"
    finally:
        node.stop()


def _sasl_config(pki: Pki, user: str, password: str):
    return pki.client_config(f"{user}-{password}", protocol="SASL_SSL", keystore=pki.keystore(user),
                             mechanism="SCRAM-SHA-256", username=user, password=password)


def _refused(kafka, address: str, config, tmp_path) -> str:
    proc = subprocess.run(sparkraft_cmd("materialize", "--source", "kafka", "--bootstrap-controller", address,
                                        "--command-config", str(config), "--warehouse", str(tmp_path / "no-wh"),
                                        "--checkpoint", str(tmp_path / "no-ck"), "--available-now"),
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    assert not (tmp_path / "no-wh").exists()
    return lines[0]


def test_a_kafka_quorum_is_read_over_sasl_ssl_with_scram_and_mutual_tls(kafka_sasl, tmp_path):
    """Kafka's own SASL_SSL controller listener: SCRAM-SHA-256 inside mutual TLS, the principal
    authorized by Kafka's ACLs. The job logs in and the tables equal Kafka's description; a wrong
    password, a user without the ACLs and a missing client certificate are each refused in one
    line that never shows the password; the password is in no log line and no table."""
    node, pki, address = kafka_sasl
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    proc = _materialize(node, wh, ck, "--command-config", str(_sasl_config(pki, "reader", "reader-secret")),
                        bootstrap_controller=address)
    _tables_match_kafka(node, wh)
    assert "reader-secret" not in proc.stdout + proc.stderr
    for path in wh.rglob("*"):
        assert not path.is_file() or b"reader-secret" not in path.read_bytes(), path

    line = _refused(node, address, _sasl_config(pki, "reader", "wrong-secret"), tmp_path)
    assert line.startswith("SASL_AUTHENTICATION_FAILED") and "wrong-secret" not in line, line
    line = _refused(node, address, _sasl_config(pki, "stranger", "stranger-secret"), tmp_path)
    assert line.startswith("CLUSTER_AUTHORIZATION_FAILED") and "ClusterAction" in line, line
    no_certificate = pki.client_config("no-certificate", protocol="SASL_SSL", mechanism="SCRAM-SHA-256",
                                       username="reader", password="reader-secret")
    line = _refused(node, address, no_certificate, tmp_path)
    assert "reader-secret" not in line, line


def test_a_kafka_controller_restored_from_a_snapshot_of_an_older_epoch_is_read_once(tmp_path):
    """A Kafka controller started on a snapshot written by Kafka's own code (in epoch 1) leads in a
    later epoch. Kafka answers a Fetch at its log start naming any epoch but the snapshot's with
    "load the snapshot" again: the reader used to download it again and again, forever. Now the job
    loads it once, reads on from its end, and the tables hold what sparkraft's reading of the same
    file (checked against Kafka's own tools in test_kafka_log_files) holds."""
    from quorum.kafka_import.files import kafka_snapshot_image

    need_kafka()
    (tmp_path / "snapshot").mkdir()
    (tmp_path / "kafka").mkdir()
    path, _ = write_kafka_snapshot(tmp_path / "snapshot", topics=20, per_topic=10, brokers=30, offset=5000)
    (port,) = free_ports(1)
    node = restored_controller(tmp_path / "kafka", port, path)
    node.start()
    try:
        wh, ck = tmp_path / "wh", tmp_path / "ck"
        _materialize(node, wh, ck)
        tables = tables_at(str(wh), latest_cut(str(wh)))
        records = read_table(tables[RECORDS]).to_pylist()
        assert [(r["offset"], r["epoch"]) for r in records if r["type"] == "SNAPSHOT"] == [(4999, 1)]
        offsets = sorted(r["offset"] for r in records if r["type"] != "SNAPSHOT")
        assert offsets == list(range(5000, latest_cut(str(wh)).offset + 1)) and offsets, offsets
        assert {r["epoch"] for r in records if r["type"] != "SNAPSHOT"} - {1}, "Kafka leads in a later epoch"
        image = kafka_snapshot_image(path)
        expected = {(topic.name, pid): (list(p.replicas), list(p.isr), p.leader)
                    for topic in image.topics.by_id.values() for pid, p in topic.partitions.items()}
        partitions = {(r["topic_name"], r["partition"]): (r["replicas"], r["isr"], r["leader"])
                      for r in read_table(tables[PARTITIONS]).to_pylist()}
        assert len(partitions) == 200 and partitions == expected
    finally:
        node.stop()
