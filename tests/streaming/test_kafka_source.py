"""A live Apache Kafka cluster's metadata in the lakehouse: ``sparkraft materialize --source kafka``
reads a real Kafka 4.4 node's quorum over Kafka's own protocol (its controller listener, Fetch as an
observer) and writes sparkraft's tables. After each round of changes made with Kafka's own tools,
the tables at the newest cut hold what Kafka's own tools describe, and ``records`` every offset of
Kafka's log once, across restarts of the job."""
from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from apache_kafka import KafkaNode, admin_describe, need_kafka, until_ok
from conftest import free_ports, sparkraft_cmd

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import ACLS, BROKERS, CONFIGS, PARTITIONS, RECORDS, TOPICS, USERS
from quorum.metadata.records import decode_record
from quorum.uuids import random_uuid

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    need_kafka()
    root = tmp_path_factory.mktemp("kafka")
    node = KafkaNode(root, *free_ports(2), extra={  # ACLs need Kafka's authorizer; the tools run as ANONYMOUS
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    # an older metadata.version, so that a test can upgrade Kafka's features with Kafka's tool
    node.format(random_uuid(), release_version="3.9-IV0")
    node.start()
    try:
        until_ok("kafka-topics", "--bootstrap-server", node.bootstrap_server, "--list")
        yield node
    finally:
        node.stop()


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _kafkas_partitions(bootstrap_server: str) -> dict:
    """(topic, partition) -> (topic id, leader, replicas, isr, elr, last known elr), as kafka-topics
    --describe says (ELR columns empty where Kafka does not print them: before ELR is enabled)."""
    out = {}
    for line in until_ok("kafka-topics", "--bootstrap-server", bootstrap_server, "--describe").splitlines():
        fields = dict(re.findall(r"(\w+): ([^\t]*)", line))
        if "TopicId" in fields:
            topic_id = fields["TopicId"]
        elif "Partition" in fields:
            out[(fields["Topic"], int(fields["Partition"]))] = (
                topic_id, int(fields["Leader"]), _ints(fields["Replicas"]), _ints(fields["Isr"]),
                _ints(fields.get("Elr", "")), _ints(fields.get("LastKnownElr", "")))
    return out


def _materialize(kafka, wh, ck, *extra: str, bootstrap_controller: str = "") -> subprocess.CompletedProcess:
    proc = subprocess.run(sparkraft_cmd("materialize", "--source", "kafka", "--bootstrap-controller",
                                        bootstrap_controller or kafka.bootstrap_controller, "--warehouse", str(wh),
                                        "--checkpoint", str(ck), "--available-now", *extra),
                          capture_output=True, text=True, timeout=600)
    restarts = [line for line in proc.stderr.splitlines() if "starting it again from its checkpoint" in line]
    assert proc.returncode == 0, "\n".join(restarts) + "\n" + proc.stderr[-4000:]
    return proc


def _tables_match_kafka(kafka, wh):
    cut = latest_cut(str(wh))
    tables = tables_at(str(wh), cut)
    topics = {r["name"]: r for r in read_table(tables[TOPICS]).to_pylist()}
    partitions = {(r["topic_name"], r["partition"]): (r["topic_id"], r["leader"], r["replicas"], r["isr"],
                                                       r["elr"] or [], r["last_known_elr"] or [])
                  for r in read_table(tables[PARTITIONS]).to_pylist()}
    kafkas = _kafkas_partitions(kafka.bootstrap_server)
    assert partitions == kafkas
    assert {name: r["topic_id"] for name, r in topics.items()} == {t: v[0] for (t, _), v in kafkas.items()}
    records = read_table(tables[RECORDS])
    rows = sorted(zip(records.column("offset").to_pylist(), records.column("type").to_pylist()),
                  key=lambda r: (r[0], r[1] != "SNAPSHOT"))
    # Every offset of Kafka's log exactly once: a record row, or inside a snapshot row, which stands
    # for every offset up to its own (a job loads one each time Kafka's log start has passed it).
    covered = -1
    for offset, kind in rows:
        if kind == "SNAPSHOT":
            assert offset > covered, f"a snapshot row at {offset} goes back behind offset {covered}"
        else:
            assert offset == covered + 1, f"record {offset} follows offset {covered}: a gap or a repeat"
        covered = offset
    assert covered == cut.offset, f"the records end at {covered}, the cut at {cut.offset}"
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
    # every type is read, a controller registration (KIP-919) in sparkraft's own form
    assert not [t for t in types if t.startswith("UNKNOWN")], types
    controllers = [json.loads(r["data"]) for r in read_table(tables[RECORDS]).to_pylist()
                   if r["type"] == "REGISTER_CONTROLLER_RECORD"]
    assert controllers and controllers[0]["controller_id"] == 1, controllers


def _quotas_in_records(records: list[dict]) -> set:
    """Client quotas as Kafka's AdminClient prints them ("{client-id=app1}", key, "1024.0"), folded
    from the CLIENT_QUOTA_RECORDs of the ``records`` table in offset order."""
    quotas: dict = {}
    for r in sorted(records, key=lambda r: r["offset"]):
        if r["type"] == "CLIENT_QUOTA_RECORD":
            d = json.loads(r["data"])
            entity = "{" + ", ".join(f"{e['entity_type']}={e.get('entity_name', 'null')}"
                                     for e in sorted(d["entity"], key=lambda e: e["entity_type"])) + "}"
            if d["remove"]:
                quotas.pop((entity, d["key"]), None)
            else:
                quotas[(entity, d["key"])] = str(float(d["value"]))
    return {(entity, key, value) for (entity, key), value in quotas.items()}


def _features_in_records(records: list[dict]) -> set:
    """Finalized feature levels as Kafka's AdminClient prints them, from the FEATURE_LEVEL_RECORDs
    (a level of 0 takes the feature away) and the quorum's KRAFT_VERSION control records."""
    levels: dict = {}
    for r in sorted(records, key=lambda r: r["offset"]):
        d = json.loads(r["data"]) if r["data"] else {}
        if r["type"] == "FEATURE_LEVEL_RECORD":
            levels[d["name"]] = d["feature_level"]
        elif r["type"] == "KRAFT_VERSION":
            levels["kraft.version"] = d["kraft_version"]
    return {(name, str(level)) for name, level in levels.items() if level}


def _admin_matches_tables(kafka, wh, tmp_path, users=None) -> dict:
    """Kafka's AdminClient's description (tests/apache_kafka.py admin_describe), checked equal to the
    tables at the newest cut: ACLs, SCRAM users (or ``users`` where Kafka's own description is
    known wrong), dynamic broker configs and cluster defaults, brokers with their fencing and
    endpoints; client quotas and finalized features (no table of their own) as the ``records``
    table's history folds them. Topics and partitions as _tables_match_kafka checks them."""
    kafkas = admin_describe(tmp_path, kafka.bootstrap_server)
    tables = _tables_match_kafka(kafka, wh)
    assert {(r["principal"], r["host"], r["operation"], r["permission_type"], r["resource_type"],
             r["resource_name"], r["pattern_type"]) for r in read_table(tables[ACLS]).to_pylist()} == kafkas["acls"]
    assert {(r["name"], r["mechanism"], str(r["iterations"])) for r in read_table(tables[USERS]).to_pylist()} \
        == (kafkas["users"] if users is None else users)
    assert {(r["resource_name"], r["name"], r["value"]) for r in read_table(tables[CONFIGS]).to_pylist()
            if r["resource_type"] in ("BROKER", "CLUSTER")} == kafkas["configs"]  # CLUSTER: name ""
    assert {(str(r["broker_id"]), str(r["fenced"]).lower(), e["host"], str(e["port"]), r["rack"])
            for r in read_table(tables[BROKERS]).to_pylist() for e in r["endpoints"]
            if e["name"] == "PLAINTEXT"} == kafkas["brokers"]
    records = read_table(tables[RECORDS]).to_pylist()
    assert _quotas_in_records(records) == kafkas["quotas"]
    assert _features_in_records(records) == kafkas["features"]
    return kafkas


def test_acls_users_quotas_features_broker_configs_and_a_restart_equal_kafkas_admin_client(kafka, tmp_path):
    """Beyond topics: after Kafka's tools add and remove ACLs, SCRAM users and client quotas, set a
    broker's config and a cluster default, upgrade every feature, and after the node stops (a
    controlled shutdown) and starts again, the tables at the newest cut equal what Kafka's own
    AdminClient describes, and no SCRAM secret reaches the lakehouse."""
    bs = kafka.bootstrap_server
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    acls = ("kafka-acls", "--bootstrap-server", bs)
    until_ok(*acls, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Describe",
             "--topic", "ledger")
    until_ok(*acls, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--operation", "Write",
             "--topic", "pay", "--resource-pattern-type", "prefixed")
    until_ok(*acls, "--add", "--allow-principal", "User:carol", "--operation", "All", "--group", "g1")
    configs = ("kafka-configs", "--bootstrap-server", bs, "--alter")
    until_ok(*configs, "--entity-type", "users", "--entity-name", "alice", "--add-config",
             "SCRAM-SHA-256=[iterations=8192,password=alice-secret]")
    until_ok(*configs, "--entity-type", "users", "--entity-name", "bob", "--add-config",
             "SCRAM-SHA-512=[password=bob-secret]")
    until_ok(*configs, "--entity-type", "users", "--entity-name", "dave", "--add-config",
             "SCRAM-SHA-256=[password=dave-secret]")
    until_ok(*configs, "--entity-type", "clients", "--entity-name", "app1", "--add-config",
             "producer_byte_rate=1024,consumer_byte_rate=2048")
    until_ok(*configs, "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
             "--entity-default", "--add-config", "request_percentage=50")
    until_ok(*configs, "--entity-type", "brokers", "--entity-name", str(kafka.node_id), "--add-config",
             "log.cleaner.threads=2")
    until_ok(*configs, "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=3600000")
    until_ok("kafka-features", "--bootstrap-server", bs, "upgrade", "--release-version", "4.4")
    until_ok("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "ledger", "--partitions", "2")
    # and some taken away again
    until_ok(*acls, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "All", "--group", "g1")
    until_ok(*configs, "--entity-type", "users", "--entity-name", "dave", "--delete-config", "SCRAM-SHA-256")
    until_ok(*configs, "--entity-type", "clients", "--entity-name", "app1", "--delete-config", "consumer_byte_rate")
    _materialize(kafka, wh, ck)
    before = _admin_matches_tables(kafka, wh, tmp_path)
    assert {("User:carol", "*", "ALL", "ALLOW", "GROUP", "g1", "LITERAL")}.isdisjoint(before["acls"])
    assert before["users"] == {("alice", "SCRAM-SHA-256", "8192"), ("bob", "SCRAM-SHA-512", "4096")}
    assert before["quotas"] == {("{client-id=app1}", "producer_byte_rate", "1024.0"),
                                ("{client-id=null, user=alice}", "request_percentage", "50.0")}
    assert (str(kafka.node_id), "log.cleaner.threads", "2") in before["configs"]
    assert ("metadata.version", "33") in before["features"]  # 4.4-IV2: the upgrade happened

    kafka.stop()  # SIGTERM: Kafka's broker shuts down under its controller's control
    kafka.start()
    until_ok("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "ledger")
    deadline = time.monotonic() + 120
    while True:  # back, unfenced, and leading its partitions again
        brokers = admin_describe(tmp_path, bs)["brokers"]
        if brokers and all(fenced == "false" for _, fenced, *_ in brokers) and all(
                leader >= 0 for _, leader, *_ in _kafkas_partitions(bs).values()):
            break
        assert time.monotonic() < deadline, brokers
        time.sleep(1)
    _materialize(kafka, wh, ck)
    # Apache Kafka 4.4.0 itself describes no SCRAM credential for alice after this restart, though
    # its log never removed it: replaying its log, its image loses every other SCRAM-SHA-256 user
    # once one (dave) was deleted (reproduced alone: add alice, add dave, delete dave, restart). The
    # lakehouse keeps what Kafka's log says, which is what Kafka described before the restart.
    after = _admin_matches_tables(kafka, wh, tmp_path, users=before["users"])
    assert after["acls"] == before["acls"] and after["configs"] == before["configs"]

    tables = tables_at(str(wh), latest_cut(str(wh)))
    records = read_table(tables[RECORDS]).to_pylist()
    # the restart, as Kafka's log tells it: a controlled shutdown, fenced, then a new registration
    changes = [json.loads(r["data"]) for r in sorted(records, key=lambda r: r["offset"])
               if r["type"] in ("BROKER_REGISTRATION_CHANGE_RECORD", "REGISTER_BROKER_RECORD")]
    shutdown = next(i for i, d in enumerate(changes) if d.get("in_controlled_shutdown"))
    assert any(d.get("fenced") for d in changes[shutdown:])
    registrations = [d for d in changes[shutdown:] if "incarnation_id" in d]
    assert registrations, changes
    (row,) = read_table(tables[BROKERS]).to_pylist()
    assert (row["broker_epoch"], row["incarnation_id"], row["in_controlled_shutdown"]) == (
        registrations[-1]["broker_epoch"], registrations[-1]["incarnation_id"], False)
    # salts and keys stay in Kafka's log: the lakehouse has mechanisms and iterations only
    scram = [r for r in records if r["type"] == "USER_SCRAM_CREDENTIAL_RECORD"]
    assert len(scram) == 3, scram
    for r in scram:
        d = json.loads(r["data"])
        assert all(d.get(k, "(redacted)") == "(redacted)" for k in ("salt", "stored_key", "server_key")), d
        m = decode_record(r["raw"]).message
        assert (m.salt, m.stored_key, m.server_key) == (b"", b"", b""), m


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
