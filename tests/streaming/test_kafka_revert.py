"""``sparkraft revert`` against a real Apache Kafka node, materialised with ``--source kafka``: its
topics, configs, ACLs and quotas changed with Kafka's own AdminClient after a cut; the revert
planned from the lakehouse, re-checked against Kafka's controllers' log and applied through Kafka's
Admin API (``--bootstrap-server``); then Kafka's own AdminClient describes what it described at the
cut, and the lakehouse's next cut equals the target in every domain. (A stale plan's refusal, the
same code on either cluster, is tested on sparkraft's: tests/integration/test_revert.py.)"""
from __future__ import annotations

import subprocess

import pytest
from apache_kafka import KafkaNode, jshell, need_kafka, until_ok
from conftest import free_ports, sparkraft_cmd

from delta_tables.bootstrap import image_from_cut
from delta_tables.cut import latest_cut
from delta_tables.revert import DOMAINS, plan
from quorum.uuids import random_uuid

pytestmark = pytest.mark.slow

ADMIN = """
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.*;
import java.util.*;
var admin = Admin.create(Map.of("bootstrap.servers", "%(bootstrap)s"));
var orders = new ConfigResource(ConfigResource.Type.TOPIC, "orders");
var cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
AlterConfigOp set(String k, String v) { return new AlterConfigOp(new ConfigEntry(k, v), AlterConfigOp.OpType.SET); }
AlterConfigOp del(String k) { return new AlterConfigOp(new ConfigEntry(k, ""), AlterConfigOp.OpType.DELETE); }
AclBinding acl(String who, AclOperation op, String topic) {
    return new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                          new AccessControlEntry(who, "*", op, AclPermissionType.ALLOW)); }
ClientQuotaAlteration quota(String user, String key, Double value) {
    return new ClientQuotaAlteration(new ClientQuotaEntity(Map.of("user", user)),
                                     List.of(new ClientQuotaAlteration.Op(key, value))); }
%(body)s
admin.close();
"""

BEFORE = """
admin.createTopics(List.of(new NewTopic("orders", 2, (short) 1).configs(Map.of("retention.ms", "86400000")),
                           new NewTopic("payments", 1, (short) 1))).all().get();
admin.incrementalAlterConfigs(Map.of(cluster, List.of(set("log.retention.ms", "5000")))).all().get();
admin.createAcls(List.of(acl("User:alice", AclOperation.READ, "orders"))).all().get();
admin.alterClientQuotas(List.of(quota("alice", "producer_byte_rate", 1024.0))).all().get();
"""

AFTER = """
admin.deleteTopics(List.of("payments")).all().get();
admin.createTopics(List.of(new NewTopic("scratch", 1, (short) 1))).all().get();
admin.incrementalAlterConfigs(Map.of(orders, List.of(set("retention.ms", "1000"), set("cleanup.policy", "compact")),
                                     cluster, List.of(del("log.retention.ms")))).all().get();
admin.deleteAcls(List.of(acl("User:alice", AclOperation.READ, "orders").toFilter())).all().get();
admin.createAcls(List.of(acl("User:bob", AclOperation.WRITE, "orders"))).all().get();
admin.alterClientQuotas(List.of(quota("alice", "producer_byte_rate", 4096.0),
                                quota("bob", "consumer_byte_rate", 10.0))).all().get();
"""

DESCRIBE = """
for (var t : new TreeSet<>(admin.listTopics().names().get())) System.out.println("TOPIC\\t" + t);
for (var e : admin.describeConfigs(List.of(orders, cluster)).all().get().entrySet())
    for (var c : e.getValue().entries())
        if (c.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG
                || c.source() == ConfigEntry.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            System.out.println("CONFIG\\t" + e.getKey().name() + "\\t" + c.name() + "=" + c.value());
for (var b : admin.describeAcls(AclBindingFilter.ANY).values().get()) System.out.println("ACL\\t" + b);
for (var e : admin.describeClientQuotas(ClientQuotaFilter.all()).entities().get().entrySet())
    System.out.println("QUOTA\\t" + e.getKey() + "\\t" + new TreeMap<>(e.getValue()));
"""


def _admin(node, tmp, body: str) -> set[str]:
    out = jshell(ADMIN % {"bootstrap": node.bootstrap_server, "body": body}, tmp)
    return {line for line in out.splitlines() if line.split("\t")[0] in ("TOPIC", "CONFIG", "ACL", "QUOTA")}


def _materialize(node, wh) -> int:
    """Kafka's log up to its end into the warehouse, by the code the job's Spark tasks and
    foreachBatch run (the job itself on Kafka's quorum is test_kafka_source.py's: here its Spark
    start would be most of the time); the newest cut's offset."""
    import pyarrow as pa

    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer
    from streaming.quorum_access import QuorumOptions
    from streaming.source import LogRange, read_range

    quorum = QuorumOptions(node.bootstrap_controller, "", None, "kafka")
    with quorum.reader(timeout=30) as reader:
        end = reader.high_watermark()
    m = Materializer(DeltaRsWriter(wh))
    batches = list(read_range(quorum, LogRange(m.next_offset, end)))
    if batches:
        m.process(pa.Table.from_batches(batches))
    return latest_cut(str(wh)).offset


def test_a_kafka_clusters_metadata_comes_back_through_kafkas_admin_api(tmp_path):
    need_kafka()
    node = KafkaNode(tmp_path, *free_ports(2), extra={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    node.format(random_uuid())
    node.start()
    wh = tmp_path / "wh"
    try:
        until_ok("kafka-topics", "--bootstrap-server", node.bootstrap_server, "--list")
        then = _admin(node, tmp_path, BEFORE + DESCRIBE)
        target = _materialize(node, wh)
        assert _admin(node, tmp_path, AFTER + DESCRIBE) != then
        _materialize(node, wh)

        def revert(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(sparkraft_cmd("revert", "--warehouse", str(wh), "--bootstrap-controller",
                                                node.bootstrap_controller, "--bootstrap-server", node.bootstrap_server,
                                                *args), capture_output=True, text=True, timeout=300)

        done = revert("--to-offset", str(target), "--execute", "--allow-topic-deletion", "--verify-timeout", "0")
        assert done.returncode == 0 and "Applied" in done.stdout, done.stdout + done.stderr
        assert _admin(node, tmp_path, DESCRIBE) == then, "Kafka's AdminClient describes the cluster as at the cut"
        newest = _materialize(node, wh)
        left = plan(image_from_cut(str(wh), latest_cut(str(wh)))[0],
                    image_from_cut(str(wh), latest_cut(str(wh), target))[0], DOMAINS, newest, target)
        assert [s.describe() for s in left.steps] == []
    finally:
        node.stop()
