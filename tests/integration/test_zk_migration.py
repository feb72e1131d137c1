"""Migration from a ZooKeeper-mode cluster (KIP-866) against a real ZooKeeper and real
``sparkraft controller start`` processes.

A ZooKeeper-mode cluster is written into ZooKeeper the way Kafka's brokers write it
(tests/zookeeper_server.py); three controllers formatted with its cluster id and
``zookeeper.metadata.migration.enable=true`` import it, then mirror every change back in Kafka's
layout until ``migrate finalize``. Checked: the import equals ZooKeeper field by field; changes made
through the quorum appear in ZooKeeper; a paused ZooKeeper holds up only the mirror, which catches
up; a foreign cluster id, a newer claim or a malformed znode is one line and changes nothing; an
active controller killed during the import leaves nothing half-imported and the next one imports.
"""
from __future__ import annotations

import json
import subprocess
import time

import pytest
import zookeeper_server as zks
from conftest import LiveBrokers, free_ports, sparkraft_cmd, wait_for

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.rpc.controller_client import ControllerClient

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not zks.available(), reason="needs Debian's zookeeper package (.ci/run installs it)")]

SALT, STORED, SERVER = b"0123456789abcdef", bytes(range(32)), bytes(range(32, 64))


@pytest.fixture
def zookeeper(tmp_path):
    server = zks.ZooKeeperServer(tmp_path / "zk")
    server.kazoo = server.client()
    try:
        yield server
    finally:
        server.kazoo.stop()
        server.kazoo.close()
        server.close()


def topic_id(i: int) -> str:
    return f"T{i:03d}" + "A" * 18  # 22 characters: a Kafka Uuid's base64 form


def populate(zk, cluster_id: str, topics: int = 100) -> zks.KafkaZkWriter:
    """A ZooKeeper-mode cluster: 3 brokers, ``topics`` topics (the last without an id, as before Kafka
    2.8), configs, quotas, a SCRAM user, literal and prefixed ACLs, a producer id block."""
    w = zks.KafkaZkWriter(zk, cluster_id)
    for b in (1, 2, 3):
        w.broker(b, 9090 + b, rack=f"rack-{b}")
    for i in range(topics):
        assignment = {p: [1 + (p + i) % 3, 1 + (p + i + 1) % 3] for p in range(1 + i % 4)}
        w.topic(f"topic-{i:03d}", assignment, topic_id=None if i == topics - 1 else topic_id(i),
                leader_epoch=i % 5, state_writes=1 + i % 3)
    w.config("topics", "topic-000", {"retention.ms": "3600000", "cleanup.policy": "compact"})
    w.config("brokers", "<default>", {"log.retention.ms": "86400000"})
    w.config("brokers", "2", {"log.cleaner.threads": "2"})
    w.config("users", "alice", {"producer_byte_rate": "1048576",
                                "SCRAM-SHA-256": zks.scram_config(SALT, STORED, SERVER, 4096)})
    w.config("clients", "reporting", {"consumer_byte_rate": "2048"})
    w.acl("Topic", "topic-001", [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
                                  "host": "*"},
                                 {"principal": "User:bob", "permissionType": "Deny", "operation": "Write",
                                  "host": "10.0.0.1"}])
    w.acl("Group", "payments-", [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
                                  "host": "*"}], prefixed=True)
    w.producer_id_block(1, 5000, 5999)
    return w


def migrating(controller_processes, zookeeper, **kw):
    return controller_processes(**{"zookeeper.metadata.migration.enable": "true",
                                   "zookeeper.connect": zookeeper.connect, **kw})


def status(cp, timeout=20) -> dict:
    """``migrate status --json``; while the controllers just started are not listening yet (the
    command says so after 10 s of refused connections, which a very busy machine can still exceed),
    asked again until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = subprocess.run(sparkraft_cmd("migrate", "status", "--bootstrap-controller", cp.bootstrap(),
                                              "--json", "--timeout", str(timeout)),
                                capture_output=True, text=True, timeout=timeout + 30)
        if result.returncode == 0 or "nothing listens" not in result.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_mirrored(cp, state="MIGRATION", timeout=60) -> dict:
    def done():
        s = status(cp)
        claimed = s["zk_controller_epoch"] > 0 or state == "POST_MIGRATION"  # finalized: ZooKeeper let go
        return s if s["state"] == state and s["dual_write_lag_records"] == 0 and claimed else None
    return wait_for(done, timeout, f"state {state} with nothing left to mirror")


def znode(zk, path):
    data, stat = zk.get(path)
    return json.loads(data), stat


def assert_imported_equals_zookeeper(client: ControllerClient, zk) -> None:
    """Every topic and partition the quorum describes equals what ZooKeeper holds, field by field."""
    names = sorted(zk.get_children("/brokers/topics"))
    assert sorted(client.list_topics()) == names
    for d in client.describe_topics(names):
        assert not isinstance(d, SparkraftError), d
        topic, _ = znode(zk, f"/brokers/topics/{d.name}")
        if "topic_id" in topic:
            assert d.topic_id == topic["topic_id"]
        assert {p.partition: list(p.replicas) for p in d.partitions} == {
            int(p): r for p, r in topic["partitions"].items()}
        for p in d.partitions:
            state, stat = znode(zk, f"/brokers/topics/{d.name}/partitions/{p.partition}/state")
            assert (p.leader, p.leader_epoch, list(p.isr)) == (state["leader"], state["leader_epoch"], state["isr"])


def test_import_mirror_outage_and_finalize(controller_processes, zookeeper, tmp_path):
    zk = zookeeper.kazoo
    cp = migrating(controller_processes, zookeeper)
    populate(zk, cp.cluster_id)
    cp.format()
    cp.start()
    first = wait_mirrored(cp)
    controller, _ = znode(zk, "/controller")
    assert controller["kraftControllerEpoch"] > 0 and controller["brokerid"] in cp.voters
    assert znode(zk, "/controller_epoch")[0] == first["zk_controller_epoch"] == 8  # Kafka's was 7

    client = ControllerClient(cp.bootstrap(), timeout=30)
    try:
        assert_imported_equals_zookeeper(client, zk)
        # the topic from before topic ids got one, and ZooKeeper was given it
        legacy = client.describe_topic("topic-099")
        assert znode(zk, "/brokers/topics/topic-099")[0]["topic_id"] == legacy.topic_id
        configs = {e.name: e.value for e in client.describe_configs(api.ConfigResourceKey("TOPIC", "topic-000"))
                   if e.source == "DYNAMIC_TOPIC_CONFIG"}
        assert configs == {"retention.ms": "3600000", "cleanup.policy": "compact"}
        acls = client.describe_acls(api.AclBinding("ANY", None, "ANY", None, None, "ANY", "ANY"))
        assert sorted((a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                       a.permission_type) for a in acls) == [
            ("GROUP", "payments-", "PREFIXED", "User:alice", "*", "READ", "ALLOW"),
            ("TOPIC", "topic-001", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
            ("TOPIC", "topic-001", "LITERAL", "User:bob", "10.0.0.1", "WRITE", "DENY")]
        scram = client.call(api.DescribeUserScramCredentialsRequest(("alice",)))
        assert scram[0].credentials == (("SCRAM-SHA-256", 4096),)
        quotas = client.call(api.DescribeClientQuotasRequest((("user", "EXACT", "alice"),)))
        assert quotas[0].values == (("producer_byte_rate", 1048576.0),)

        # the ZooKeeper-mode brokers come back as sparkraft brokers; changes reach ZooKeeper
        brokers = LiveBrokers(client, cp.cluster_id, brokers=((1, "rack-1"), (2, "rack-2"), (3, "rack-3")),
                              port_base=free_ports(1)[0])
        try:
            brokers.wait_unfenced()
            client.create_topic("created-in-kraft", 3, 2)
            client.alter_configs(api.ConfigResourceKey("TOPIC", "topic-002"),
                                 [api.AlterableConfig("retention.ms", "SET", "60000")])
            client.delete_topic("topic-003")
            wait_mirrored(cp)
            created, _ = znode(zk, "/brokers/topics/created-in-kraft")
            assert created["topic_id"] == client.describe_topic("created-in-kraft").topic_id
            assert sorted(created["partitions"]) == ["0", "1", "2"]
            assert not zk.exists("/brokers/topics/topic-003")
            assert znode(zk, "/config/topics/topic-002")[0]["config"] == {"retention.ms": "60000"}
            changes = zk.get_children("/config/changes")
            assert any(json.loads(zk.get(f"/config/changes/{c}")[0]).get("entity_path") == "topics/topic-002"
                       for c in changes)
            assert_imported_equals_zookeeper(client, zk)

            # ZooKeeper SIGSTOPped for 20 s (longer than the controller's ZooKeeper session): the
            # quorum goes on, the mirror waits, then catches up (claiming ZooKeeper again if its
            # session expired meanwhile)
            zookeeper.pause()
            paused = time.monotonic()
            try:
                for i in range(5):
                    client.create_topic(f"during-outage-{i}", 1, 2)
                lagging = status(cp)
                assert lagging["state"] == "MIGRATION" and lagging["dual_write_lag_records"] > 0
                time.sleep(max(0.0, 20 - (time.monotonic() - paused)))
            finally:
                zookeeper.resume()
            zk = zookeeper.kazoo = zookeeper.reconnected(zk)  # the test's own session may have expired too
            wait_mirrored(cp, timeout=90)
            assert all(zk.exists(f"/brokers/topics/during-outage-{i}") for i in range(5))
            assert_imported_equals_zookeeper(client, zk)

            # finalize: ZooKeeper is no longer written
            subprocess.run(sparkraft_cmd("migrate", "finalize", "--bootstrap-controller", cp.bootstrap()),
                           check=True, capture_output=True, timeout=60)
            wait_mirrored(cp, state="POST_MIGRATION")
            client.create_topic("after-finalize", 1, 2)
            time.sleep(1.0)
            assert not zk.exists("/brokers/topics/after-finalize")
            again = subprocess.run(sparkraft_cmd("migrate", "finalize", "--bootstrap-controller", cp.bootstrap()),
                                   capture_output=True, text=True, timeout=60)
            assert again.returncode == 1 and "INVALID_REQUEST" in again.stderr
            assert len(again.stderr.strip().splitlines()) == 1
        finally:
            brokers.close()
    finally:
        client.close()


def _refused(cp, zk, expected: str) -> None:
    """The migration waits in PRE_MIGRATION with ``expected`` in its one-line error; nothing was
    imported, ZooKeeper's controller is not taken, and the quorum refuses writes until then."""
    def refused():
        s = status(cp)
        return s if expected in s["error"] else None
    s = wait_for(refused, 60, f"the migration refused: {expected}")
    assert s["state"] == "PRE_MIGRATION" and "\n" not in s["error"]
    client = ControllerClient(cp.bootstrap(), timeout=3)
    try:
        assert client.list_topics() == ()
        with pytest.raises(SparkraftError) as e:
            client.create_topic("not-yet", 1, 1)
        assert e.value.error in (Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT)
    finally:
        client.close()


def test_foreign_cluster_newer_claim_and_malformed_znode_change_nothing(controller_processes, zookeeper):
    zk = zookeeper.kazoo
    populate(zk, "ForeignClusterIdAAAAAA", topics=3)
    cp = migrating(controller_processes, zookeeper)
    cp.format()
    cp.start()
    _refused(cp, zk, "holds cluster ForeignClusterIdAAAAAA")
    assert zk.get("/controller_epoch")[0] == b"7" and not zk.exists("/controller")

    # the right cluster, but a newer KRaft controller already claimed it
    zk.set("/cluster/id", json.dumps({"version": "1", "id": cp.cluster_id}).encode())
    zk.create("/controller", json.dumps({"version": 2, "brokerid": 9, "timestamp": "1",
                                         "kraftControllerEpoch": 10**6}).encode())
    _refused(cp, zk, "newer epoch")
    assert zk.get("/controller_epoch")[0] == b"7"

    # that claim gone, but a partition state znode is not Kafka's JSON
    zk.delete("/controller")
    zk.set("/brokers/topics/topic-001/partitions/0/state", b"{not json")
    _refused(cp, zk, "/brokers/topics/topic-001/partitions/0/state")

    # repaired: the import goes through
    zk.set("/brokers/topics/topic-001/partitions/0/state", zks.KafkaZkWriter.state([2, 3], 1))
    wait_mirrored(cp)
    client = ControllerClient(cp.bootstrap(), timeout=30)
    try:
        assert_imported_equals_zookeeper(client, zk)
    finally:
        client.close()


def test_active_controller_killed_during_the_import(controller_processes, zookeeper):
    """SIGKILL the active controller as soon as it claims ZooKeeper: whatever it wrote of its import
    transaction is aborted by the next active controller, which imports again (exactly once)."""
    zk = zookeeper.kazoo
    cp = migrating(controller_processes, zookeeper)
    populate(zk, cp.cluster_id, topics=600)
    cp.format()
    cp.start()
    first = wait_for(lambda: znode(zk, "/controller")[0] if zk.exists("/controller") else None, 60,
                     "a controller claiming ZooKeeper")
    cp.kill(first["brokerid"])
    wait_mirrored(cp, timeout=90)
    now, _ = znode(zk, "/controller")
    assert now["brokerid"] != first["brokerid"] and now["kraftControllerEpoch"] > first["kraftControllerEpoch"]
    client = ControllerClient(cp.bootstrap(ids=[i for i in cp.voters if i != first["brokerid"]]), timeout=30)
    try:
        assert_imported_equals_zookeeper(client, zk)
    finally:
        client.close()
    cp.start([first["brokerid"]])  # the killed controller replays the log: one import, no duplicates
    wait_mirrored(cp)
