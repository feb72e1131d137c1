"""Apache Kafka's own brokers on sparkraft's controllers: real Kafka 4.4 brokers
(``process.roles=broker``) whose quorum is three sparkraft controllers, serving a real producer and
consumer group through controller failovers, a rolling restart, and a broker SIGKILLed and back;
then the metadata they made, read back from the Delta tables and by Kafka's own tools.

What a Kafka broker sends the controllers (Fetch of the metadata log, registration, heartbeats,
AlterPartition, AllocateProducerIds, Envelope) is answered by quorum/kafka/raft_answers.py and
quorum/kafka/broker_answers.py; the log goes out in Kafka's format (quorum/kafka_log/export.py).
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from apache_kafka import KafkaBrokers, java_clients, kafka_tool, need_kafka, until_ok
from conftest import audit_entries, free_ports, kafka_answers, sparkraft_cmd, wait_for
from processes import watched

pytestmark = pytest.mark.slow

CONTROLLER = "CONTROLLER"  # the controllers' one listener: the quorum, sparkraft's CLI, Kafka's brokers and tools
LISTENER = "KCONTROLLER"  # a second controller listener, Kafka's protocol only (still supported)
BROKERS = (101, 102, 103)
TOPIC = "numbers"
PARTITIONS = 12
MESSAGES = 100_000
RATE = 500  # a second: the run spans the failovers and restarts below


def _cli(cp, *args: str, timeout: float = 60) -> str:
    out = subprocess.run(sparkraft_cmd(*args, "--bootstrap-controller", cp.bootstrap()), capture_output=True,
                         text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def brokers(cp) -> dict[int, dict]:
    return {b["broker_id"]: b for b in json.loads(_cli(cp, "brokers", "list", "--json"))}


def partitions(cp, topic: str = TOPIC) -> dict[int, dict]:
    """The topic's partitions as sparkraft's controllers describe them."""
    text = _cli(cp, "topics", "describe", "--topic", topic, "--json")
    return {p["partition"]: p for p in json.loads(text)["partitions"]}


def wait_unfenced(cp, ids=BROKERS, timeout: float = 120) -> None:
    wait_for(lambda: all(not brokers(cp).get(b, {"fenced": True})["fenced"] for b in ids), timeout,
             f"brokers {list(ids)} unfenced", interval=0.5)


def wait_full_isr(cp, timeout: float = 180) -> None:
    wait_for(lambda: all(len(p["isr"]) == 3 for p in partitions(cp).values()), timeout,
             "every partition's ISR back to 3 brokers", interval=0.5)


@pytest.fixture
def cluster(controller_processes, tmp_path):
    need_kafka()
    cp = controller_processes(**{"broker.session.timeout.ms": "6000"})
    cp.format()
    cp.start()
    cp.wait_leader(timeout=60)
    voters = ",".join(f"{i}@127.0.0.1:{cp.ports[i]}" for i in cp.voters)  # the controllers' own voters
    root = tmp_path / "kafka"
    root.mkdir()
    kb = KafkaBrokers(root, cp.cluster_id, voters, CONTROLLER, dict(zip(BROKERS, free_ports(len(BROKERS)))))
    kb.format()
    for b in BROKERS:
        kb.start(b)
    with watched(cp.dump_outputs, kb.dump, closing=(kb.close,)):
        wait_unfenced(cp, timeout=180)
        yield cp, kb


class Progress:
    """The producer's acknowledgements so far, read from its output file."""

    def __init__(self, path: Path):
        self.path = path

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def acked(self) -> int:
        return sum(1 for line in self.lines() if line.startswith("ACK "))


def _kill_active_controller(cp) -> int:
    leader = cp.wait_leader(timeout=60).leader_id
    cp.kill(leader)
    cp.wait_leader(timeout=60, exclude=(leader,))
    cp.start([leader])
    return leader


def _rolling_restart(cp, kb) -> None:
    for b in BROKERS:
        assert kb.stop(b, timeout=120) in (0, 143), f"broker {b} did not shut down cleanly:\n{kb.log(b)[-3000:]}"
        led = [p for p, d in partitions(cp).items() if d["leader"] == b]
        assert not led, f"broker {b} stopped while still leading partitions {led}"
        kb.start(b)
        wait_unfenced(cp, (b,))
        wait_full_isr(cp)


def _kill_and_return(cp, kb, victim: int) -> None:
    kb.kill(victim)
    wait_for(lambda: brokers(cp)[victim]["fenced"], 60, f"broker {victim} fenced after its session timeout",
             interval=0.5)
    wait_for(lambda: all(victim not in p["isr"] and p["leader"] != victim for p in partitions(cp).values()), 90,
             f"ISRs shrunk and leaders moved off broker {victim}", interval=0.5)
    kb.start(victim)
    wait_unfenced(cp, (victim,))
    wait_full_isr(cp)


def _lines(path: Path) -> list[tuple[int, int, int]]:
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit():
            out.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return out


def test_kafka_brokers_serve_a_producer_and_a_consumer_group_through_failovers_and_restarts(cluster, tmp_path):
    cp, kb = cluster
    until_ok("kafka-topics", "--bootstrap-server", kb.bootstrap_server, "--create", "--topic", TOPIC,
             "--partitions", str(PARTITIONS), "--replication-factor", "3", "--config", "min.insync.replicas=2")
    wait_full_isr(cp)
    acks, consumed, stop = tmp_path / "acks.txt", tmp_path / "consumed.txt", tmp_path / "stop"
    faults_done = tmp_path / "faults-done"  # the producer holds its last tenth until the faults are over
    with open(acks, "w") as a, open(consumed, "w") as c:
        producer = java_clients("produce", kb.bootstrap_server, TOPIC, str(MESSAGES), str(PARTITIONS), str(RATE),
                                str(faults_done), stdout=a)
        consumer = java_clients("consume", kb.bootstrap_server, TOPIC, "numbers-group", str(stop), stdout=c)
        try:
            progress = Progress(acks)
            wait_for(lambda: progress.acked() > 1000, 120, "the producer under way", interval=0.5)
            first = _kill_active_controller(cp)
            _rolling_restart(cp, kb)
            second = _kill_active_controller(cp)
            _kill_and_return(cp, kb, 102)
            assert progress.acked() < MESSAGES and producer.poll() is None, "the faults came after the producer"
            faults_done.touch()
            assert producer.wait(900) == 0
            stop.touch()
            assert consumer.wait(300) == 0
        finally:
            for p in (producer, consumer):
                if p.poll() is None:
                    p.kill()
    lines = acks.read_text().splitlines()
    assert lines[-1] == "DONE failed=0", [line for line in lines if line.startswith("FAIL")][:5]
    acked = {}
    for line in lines:
        if line.startswith("ACK "):
            p, o, v = line.split()[1:4]
            acked[int(v)] = (int(p), int(o))
    assert sorted(acked) == list(range(MESSAGES))

    # the log holds every acknowledged message once, where its ack said, in the order sent
    log_file = tmp_path / "log.txt"
    with open(log_file, "w") as out:
        assert java_clients("read", kb.bootstrap_server, TOPIC, stdout=out).wait(300) == 0
    in_log = _lines(log_file)
    assert len(in_log) == MESSAGES and {v: (p, o) for p, o, v in in_log} == acked
    for p in range(PARTITIONS):
        values = [v for q, _o, v in sorted(in_log) if q == p]
        assert values == sorted(values), f"partition {p} out of send order"

    # the consumer group read each of them; a message read again after a rebalance is the same offset
    seen: dict[tuple[int, int], int] = {}
    for p, o, v in _lines(consumed):
        assert seen.setdefault((p, o), v) == v
    assert {v: po for po, v in seen.items()} == acked

    # no broker stayed fenced; the controllers failed over twice
    assert all(not b["fenced"] for b in brokers(cp).values())
    assert first is not None and second is not None
    _kafkas_tools_agree_with_sparkraft(cp, kb)
    _delta_tables_show_the_kafka_brokers(cp, tmp_path)


def _kafkas_tools_agree_with_sparkraft(cp, kb) -> None:
    """Kafka's own kafka-metadata-quorum (given the controllers' one address, as sparkraft's CLI is,
    and through a broker) and kafka-topics say what sparkraft's CLI says."""
    ours = json.loads(_cli(cp, "quorum", "describe", "--status", "--json"))
    for where in (("--bootstrap-controller", cp.bootstrap()), ("--bootstrap-server", kb.bootstrap_server)):
        status = until_ok("kafka-metadata-quorum", *where, "describe", "--status")
        kafkas = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        assert int(kafkas["LeaderId"]) == ours["LeaderId"], where
        assert int(kafkas["LeaderEpoch"]) == ours["LeaderEpoch"], where
        assert kafkas["ClusterId"].strip() == ours["ClusterId"] == cp.cluster_id
        for i, port in cp.ports.items():  # the voters' endpoints are the one address that serves everything
            voters = kafkas["CurrentVoters"]
            assert f'"id": {i},' in voters and f"CONTROLLER://127.0.0.1:{port}" in voters
    assert {o["id"] for o in ours["CurrentObservers"]} >= set(BROKERS), "the Kafka brokers observe the quorum"
    described = until_ok("kafka-topics", "--bootstrap-server", kb.bootstrap_server, "--describe", "--topic", TOPIC)
    theirs = {}
    for line in described.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in fields and "Leader" in fields:
            theirs[int(fields["Partition"])] = (int(fields["Leader"]), [int(x) for x in fields["Replicas"].split(",")],
                                                sorted(int(x) for x in fields["Isr"].split(",")))
    ours = {p: (d["leader"], d["replicas"], sorted(d["isr"])) for p, d in partitions(cp).items()}
    assert theirs == ours


def _ids(value) -> list[int]:
    """A broker id list as the records table writes it (a PartitionChangeRecord's are wrapped)."""
    return value.get("ids", []) if isinstance(value, dict) else value


def _delta_tables_show_the_kafka_brokers(cp, tmp_path) -> None:
    """sparkraft's Spark job materialises the cluster the Kafka brokers run in: the brokers, their
    fencing history and every ISR change are in the tables (read back with delta-rs)."""
    from delta_tables.cut import latest_cut, read_table, tables_at

    wh, ck = tmp_path / "wh", tmp_path / "ck"
    out = subprocess.run(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse",
                                       str(wh), "--checkpoint", str(ck), "--available-now"),
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    tables = tables_at(str(wh), latest_cut(str(wh)))
    rows = {r["broker_id"]: r for r in read_table(tables["brokers"]).to_pylist()}
    assert set(BROKERS) <= set(rows) and not any(rows[b]["fenced"] for b in BROKERS)
    records = [(r["type"], json.loads(r["data"])) for r in read_table(tables["records"]).to_pylist() if r["data"]]
    fencings = [d for t, d in records if t == "BROKER_REGISTRATION_CHANGE_RECORD" and d["broker_id"] == 102
                and d.get("fenced") is True]
    assert fencings, "broker 102's fencing is in the records table"
    shrinks = [d for t, d in records if t == "PARTITION_CHANGE_RECORD" and "isr" in d and 102 not in _ids(d["isr"])]
    assert len(shrinks) >= PARTITIONS, "the ISR shrinks without broker 102 are in the records table"


def _registration(cluster_id: str, mv: tuple[int, int], features=(), broker_id: int = 150):
    import uuid

    from kio.schema.broker_registration.v4 import request as r
    from kio.schema.types import BrokerId
    from kio.static.primitive import i16, i64, u16

    return r.BrokerRegistrationRequest(
        broker_id=BrokerId(broker_id), cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
        listeners=(r.Listener(name="PLAINTEXT", host="127.0.0.1", port=u16(9092), security_protocol=i16(0)),),
        features=tuple(r.Feature(name=n, min_supported_version=i16(lo), max_supported_version=i16(hi))
                       for n, lo, hi in (("metadata.version", *mv), *features)),
        rack=None, is_migrating_zk_broker=False, log_dirs=(uuid.uuid4(),), previous_broker_epoch=i64(-1))


def test_a_kafka_broker_of_another_cluster_or_release_is_refused_and_nothing_is_written(controller_processes,
                                                                                       tmp_path):
    """As Kafka's controller refuses them: another cluster id (its metadata Fetch and its
    registration), a metadata.version range without this cluster's, a feature level the cluster has
    finalized that the broker does not support; each with Kafka's error and one log line, and no
    broker is registered."""
    from quorum.controller.settings import MV_MAX
    from quorum.errors import Errors
    from quorum.kafka.client import KafkaConnection

    need_kafka()
    cp = controller_processes(voters=(1,))
    cp.format()
    cp.start()
    cp.wait_leader(timeout=60)
    port = cp.ports[1]
    wait_for(lambda: kafka_answers(port), 60, "Kafka's protocol on the controller's port")
    _cli(cp, "features", "upgrade", "--feature", "eligible.leader.replicas.version=1")
    with KafkaConnection("127.0.0.1", port) as kafka:
        other = kafka.request(_registration("AAAAAAAAAAAAAAAAAAAAAQ", (7, 33)))
        older = kafka.request(_registration(cp.cluster_id, (7, MV_MAX - 1)))  # a release before the cluster's
        no_elr = kafka.request(_registration(cp.cluster_id, (7, 33), (("eligible.leader.replicas.version", 0, 0),)))
        fine = kafka.request(_registration(cp.cluster_id, (7, 33), (("eligible.leader.replicas.version", 0, 1),),
                                           broker_id=151))
    assert other.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert older.error_code == Errors.UNSUPPORTED_VERSION
    assert no_elr.error_code == Errors.UNSUPPORTED_VERSION
    assert fine.error_code == Errors.NONE and fine.broker_epoch > 0
    assert set(brokers(cp)) == {151}, "only the broker that matches was registered"
    log = cp.output(1).read_text()
    assert "refused the registration of broker 150: it is in cluster AAAAAAAAAAAAAAAAAAAAAQ" in log
    assert f"it supports metadata.version 7 to {MV_MAX - 1} (3.3-IV3 to 4.4-IV1), and this cluster's is {MV_MAX} " \
           f"(4.4-IV2)" in log

    # a real Kafka broker formatted for another cluster: its metadata Fetch is refused, it never registers
    root = tmp_path / "kafka"
    root.mkdir()
    kb = KafkaBrokers(root, "AAAAAAAAAAAAAAAAAAAAAQ", f"1@127.0.0.1:{port}", CONTROLLER, {160: free_ports(1)[0]})
    kb.format()
    kb.start(160)
    try:
        wait_for(lambda: "INCONSISTENT_CLUSTER_ID" in kb.log(160), 90, "the Kafka broker told its cluster id is wrong")
        time.sleep(2)
        assert 160 not in brokers(cp)
    finally:
        kb.close()



SMALL_LOG = {"metadata.log.max.record.bytes.between.snapshots": "3000", "metadata.max.retention.bytes": "15000",
             "metadata.log.segment.bytes": "2048"}  # snapshots every few KB; the log below them deleted


def test_a_kafka_broker_joining_after_the_log_was_truncated_loads_the_snapshot(controller_processes, tmp_path):
    """A Kafka broker whose fetch falls below the controllers' log start is told the snapshot, fetches
    it in Kafka's checkpoint format (FetchSnapshot), then the log after it; it sees every topic made
    before, and registers."""
    from conftest import LiveBrokers

    from quorum.rpc.controller_client import ControllerClient

    need_kafka()
    cp = controller_processes(**SMALL_LOG)
    cp.format()
    cp.start()
    cp.wait_leader(timeout=60)
    admin = ControllerClient(cp.bootstrap(), timeout=20)
    sparkrafts = LiveBrokers(admin, cp.cluster_id, ((201, None),), heartbeat_interval_ms=300)
    root = tmp_path / "kafka"
    root.mkdir()
    voters = ",".join(f"{i}@127.0.0.1:{cp.ports[i]}" for i in cp.voters)
    kb = KafkaBrokers(root, cp.cluster_id, voters, CONTROLLER, {101: free_ports(1)[0]})
    with watched(cp.dump_outputs, kb.dump, closing=(kb.close, sparkrafts.close, admin.close)):
        sparkrafts.wait_unfenced()
        for n in range(16):
            admin.create_topic(f"before-{n}", 20, 1)
        leader = cp.wait_leader(timeout=60).leader_id
        wait_for(lambda: _log_start(cp, leader) > 0, 60, "the leader's log truncated behind a snapshot")
        kb.format()
        kb.start(101)
        wait_unfenced(cp, (101,), timeout=180)
        checkpoints = list((root / "data-101" / "__cluster_metadata-0").glob("*.checkpoint"))
        assert checkpoints, "the Kafka broker stored the snapshot it fetched"
        listed = until_ok("kafka-topics", "--bootstrap-server", kb.bootstrap_server, "--list").split()
        assert {f"before-{n}" for n in range(16)} <= set(listed)
        exports = [line.split("Exported the snapshot ending at offset ")[1].split(" for ")[0]
                   for i in cp.voters for line in cp.output(i).read_text(errors="replace").splitlines()
                   if "Exported the snapshot ending at offset" in line]
        assert exports and len(set(exports)) == len(exports), \
            f"each snapshot is exported once, however many slices it is fetched in: {exports}"


def _log_start(cp, node_id: int) -> int:
    segments = sorted(cp.partition_dir(node_id).glob("*.log"))
    return int(segments[0].name[:20]) if segments else 0


BROKER_SECRET = "broker-secret-on-controllers"


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_a_kafka_broker_joins_secured_controllers_by_scram_or_by_its_certificate(protocol, tmp_path):
    """The controllers' listeners secured as Kafka's are: SSL with client certificates on the
    controllers' one port (the broker is User:broker by its certificate; the controllers' own Raft,
    the CLI's wire and gRPC share the port, told apart by their TLS ClientHello), or SASL_SSL with
    SCRAM on a second controller listener (the broker logs in as User:broker); Kafka's authorizer
    on, the broker a super user. It fetches the log, registers, is unfenced and serves a producer and
    a consumer; its password is in no controller's log."""
    from conftest import ControllerProcesses
    from pki import Pki, secure_controller_props

    need_kafka()
    pki = Pki(tmp_path / "pki")
    (tmp_path / "quorum").mkdir()
    one_port = protocol == "SSL"
    listener = CONTROLLER if one_port else "KAFKA"
    cp = ControllerProcesses(tmp_path / "quorum", kafka_listener=None if one_port else "KAFKA",
                             per_node=lambda i: secure_controller_props(
        pki, i, **{"listener.security.protocol.map": "CONTROLLER:SSL" + ("" if one_port else f",KAFKA:{protocol}"),
                   "super.users": "User:admin;User:broker"}))
    root = tmp_path / "kafka"
    root.mkdir()
    client = {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.truststore}
    if protocol == "SASL_SSL":
        # a broker reads its login to the controllers as a server's: the listener's and mechanism's prefix
        client.update({"sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                       "listener.name.kafka.scram-sha-512.sasl.jaas.config": (
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            f'password="{BROKER_SECRET}";')})
    else:
        client.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.jvm_keystore("broker")})
    voters = ",".join(f"{i}@127.0.0.1:{(cp.ports if one_port else cp.kafka_ports)[i]}" for i in cp.voters)
    kb = KafkaBrokers(root, cp.cluster_id, voters, listener, {101: free_ports(1)[0]}, extra={
        "listener.security.protocol.map": f"{listener}:{protocol},PLAINTEXT:PLAINTEXT", **client,
        "offsets.topic.replication.factor": 1})
    with watched(cp.dump_outputs, kb.dump, closing=(kb.close, cp.close)):
        cp.format_dynamic({i: ["--add-scram", f"SCRAM-SHA-512=[name=broker,password={BROKER_SECRET}]"]
                           for i in cp.voters})
        cp.start()
        kb.format()
        kb.start(101)
        wait_for(lambda: "has been unfenced" in kb.log(101), 180, f"the Kafka broker unfenced over {protocol}")
        # the controllers authorize what a broker forwards as its client's: the PLAINTEXT client here is
        # ANONYMOUS, so the admin creates the topic (over gRPC, by its certificate)
        admin = pki.client_config("admin", keystore=pki.keystore("admin"))
        out = subprocess.run(sparkraft_cmd("topics", "create", "--topic", "secured", "--partitions", "3",
                                           "--replication-factor", "1", "--bootstrap-controller", cp.bootstrap(),
                                           "--command-config", str(admin)), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        refused = kafka_tool("kafka-topics", "--bootstrap-server", kb.bootstrap_server, "--create", "--topic",
                             "anonymous", "--partitions", "1", "--replication-factor", "1")
        assert refused.returncode != 0 and "AuthorizationException" in refused.stdout + refused.stderr
        # the audit trail of a secured cluster: the admin by certificate over gRPC, and the broker's
        # client, forwarded, denied, attributed to the client and not the broker (Kafka's Envelope
        # carries no client software: the protocol does not give it there)
        from quorum.security.client import ClientSecurity

        entries = audit_entries(cp.bootstrap(), security=ClientSecurity.from_file(str(admin)))
        (created,) = [e for e in entries if e.request == "CreateTopics" and list(e.resources) == ["TOPIC:secured"]]
        assert (created.principal, created.error_code, created.forwarded_by) == ("User:admin", 0, ""), created
        denied = [e for e in entries if e.request == "CreateTopics" and list(e.resources) == ["TOPIC:anonymous"]]
        assert denied and denied[0].principal == "User:ANONYMOUS" and denied[0].error_code == 29, denied
        assert denied[0].forwarded_by == "User:broker", denied[0]
        acks = tmp_path / "acks.txt"
        with open(acks, "w") as out:
            assert java_clients("produce", kb.bootstrap_server, "secured", "2000", "3", "0", stdout=out).wait(300) == 0
        assert acks.read_text().splitlines()[-1] == "DONE failed=0"
        read = tmp_path / "read.txt"
        with open(read, "w") as out:
            assert java_clients("read", kb.bootstrap_server, "secured", stdout=out).wait(300) == 0
        assert sorted(v for _p, _o, v in _lines(read)) == list(range(2000))
        for i in cp.voters:
            assert BROKER_SECRET not in cp.output(i).read_text(errors="replace")


def test_a_sparkraft_broker_and_a_kafka_broker_in_one_dynamic_quorums_cluster_see_the_same_image(
        controller_processes, tmp_path):
    """A dynamic quorum (KIP-853: the voter registers all its listeners), a sparkraft broker and an
    Apache Kafka broker that finds the controllers by controller.quorum.bootstrap.servers: both
    registered and unfenced, and Kafka's tools read the same topics, partitions and brokers from
    either (a topic made through each)."""
    from conftest import BrokerProcesses

    need_kafka()
    cp = controller_processes(voters=(1,), dynamic=True, kafka_listener=LISTENER)
    cp.format_dynamic({1: ["--standalone"]})
    cp.start()
    cp.wait_leader(timeout=60)
    (tmp_path / "sparkraft").mkdir()
    ours = BrokerProcesses(tmp_path / "sparkraft", cp, {201: None}, {
        "controller.quorum.voters": None, "controller.quorum.bootstrap.servers": cp.bootstrap()})
    root = tmp_path / "kafka"
    root.mkdir()
    theirs = KafkaBrokers(root, cp.cluster_id, f"127.0.0.1:{cp.kafka_ports[1]}", LISTENER, {101: free_ports(1)[0]},
                          extra={"offsets.topic.replication.factor": 1})
    with watched(ours.dump, theirs.dump, closing=(theirs.close, ours.close)):
        ours.start(201)
        theirs.format()
        theirs.start(101)
        wait_unfenced(cp, (101, 201), timeout=180)
        sparkraft_side = f"127.0.0.1:{ours.ports[201]}"
        until_ok("kafka-topics", "--bootstrap-server", theirs.bootstrap_server, "--create", "--topic", "via-kafka",
                 "--replica-assignment", "101,101,101")
        until_ok("kafka-topics", "--bootstrap-server", sparkraft_side, "--create", "--topic", "via-sparkraft",
                 "--replica-assignment", "101,101")

        def described(bootstrap: str) -> str:
            return until_ok("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--exclude-internal")

        wait_for(lambda: described(theirs.bootstrap_server) == described(sparkraft_side), 60,
                 "the same topics described by both brokers")
        text = described(sparkraft_side)
        assert "via-kafka" in text and "via-sparkraft" in text and "Leader: 101" in text
        endpoints = {b: until_ok("kafka-cluster", "list-endpoints", "--bootstrap-server", b)
                     for b in (theirs.bootstrap_server, sparkraft_side)}
        for listing in endpoints.values():
            assert "101" in listing and "201" in listing
        # the audit trail names the tools' client, not the broker that forwarded its request: from
        # the Kafka broker's Envelope, and from the sparkraft broker (which heard the tool's ApiVersions)
        creations = {tuple(e.resources): e for e in audit_entries(cp.bootstrap()) if e.request == "CreateTopics"}
        via_kafka, via_sparkraft = creations[("TOPIC:via-kafka",)], creations[("TOPIC:via-sparkraft",)]
        for e in (via_kafka, via_sparkraft):
            assert (e.principal, e.client_host, e.error_code) == ("User:ANONYMOUS", "127.0.0.1", 0), e
            assert e.forwarded_by, e
        assert via_sparkraft.client_software_name == "apache-kafka-java" and via_sparkraft.client_software_version, \
            via_sparkraft
