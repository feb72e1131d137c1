"""The controller's side of a ZooKeeper migration (quorum/controller/migration_control.py) and the
pure halves of the driver: importing a read cluster (importer.py) and turning image differences
into znode writes (zk_view.py). The I/O against a real ZooKeeper is in
tests/integration/test_zk_migration.py."""
from __future__ import annotations

import itertools
import json

import pytest
from controller_helpers import metadata_written

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.controller.settings import ControllerSettings
from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.image import Provenance
from quorum.metadata.loader import image_from_records
from quorum.metadata.records import decode_record
from quorum.migration import znodes as z
from quorum.migration.importer import ZkCluster, import_records
from quorum.migration.zk_view import zk_writes

TOPIC_ID = "OrdersTopicIdAAAAAAAAA"


def cluster() -> ZkCluster:
    c = ZkCluster(cluster_id="Ab3dEfGhIjKlMnOpQrStUv")
    c.brokers = [z.ZkBroker(b, (("PLAINTEXT", "127.0.0.1", 9090 + b, 0),), f"rack-{b}") for b in (1, 2, 3)]
    c.topics = [z.ZkTopic("orders", TOPIC_ID, {0: (1, 2), 1: (2, 3)}), z.ZkTopic("legacy", None, {0: (3, 1)})]
    c.states = {("orders", 0): z.ZkPartitionState(1, 4, (1, 2), 9), ("orders", 1): z.ZkPartitionState(2, 0, (2,), 3),
                ("legacy", 0): z.ZkPartitionState(3, 1, (3, 1), 0)}
    c.configs = {("topics", "orders"): {"retention.ms": "1000"}, ("users", "alice"): {"producer_byte_rate": "10"}}
    c.acls = {(z.LITERAL, "Topic", "orders"): [z.ZkAcl("User:alice", "*", z.OPERATIONS["Read"], z.PERMISSIONS["Allow"])]}
    c.producer_id_block_end = 1999
    return c


def uuids():
    n = itertools.count()
    return lambda: f"NewId{next(n):017d}"


def migrating(**settings) -> LocalController:
    return LocalController(ControllerSettings(seed=7, zk_migration=True, **settings))


def state(c: LocalController) -> str:
    return c.core.image.features.zk_migration_state_name


def test_a_migrating_quorum_starts_in_pre_migration_and_takes_no_write_until_the_import():
    c = migrating()
    assert state(c) == "PRE_MIGRATION"
    e = c.expect_error(api.CreateTopicsRequest((api.CreatableTopic("early", 1, 1),)))
    assert e.error is Errors.NOT_CONTROLLER and "PRE_MIGRATION" in e.message
    assert c.core.list_topics() == []
    assert c.expect_error(api.FinalizeMigrationRequest()).error is Errors.INVALID_REQUEST


def test_a_kraft_quorum_has_no_migration():
    c = LocalController(ControllerSettings(seed=7))
    assert state(c) == "NONE"
    imported = import_records(cluster(), uuids())
    e = c.expect_error(api.ImportZkMetadataRequest(tuple(imported.records)))
    assert e.error is Errors.INVALID_REQUEST and "NONE" in e.message


def test_the_import_is_one_transaction_with_the_move_to_migration():
    c = migrating()
    imported = import_records(cluster(), uuids())
    assert imported.topics_without_id == ("legacy",)
    start = c.end_offset
    c.request(api.ImportZkMetadataRequest(tuple(imported.records), zk_controller_epoch=8))
    written = [m for b in c.log if b.base_offset >= start for r in b.records
               if not isinstance(m := decode_record(r).message, pb.AuditRecord)]  # (its entry, the controller's)
    assert isinstance(written[0], pb.BeginTransactionRecord) and isinstance(written[-1], pb.EndTransactionRecord)
    assert written[-2] == pb.ZkMigrationStateRecord(zk_migration_state=pb.ZkMigrationState.MIGRATION)
    assert state(c) == "MIGRATION"
    image = c.core.image
    # each imported broker's epoch is the offset of its registration (fenced: a ZooKeeper-mode process)
    for b in image.cluster.brokers.values():
        offset = next(b2.base_offset + i for b2 in c.log if not b2.control for i, r in enumerate(b2.records)
                      if isinstance(m := decode_record(r).message, pb.RegisterBrokerRecord)
                      and m.broker_id == b.broker_id)
        assert b.broker_epoch == offset and b.fenced
    orders = image.topics.topic_by_name("orders")
    assert orders.topic_id == TOPIC_ID
    p0 = orders.partitions[0]
    assert (p0.replicas, p0.isr, p0.leader, p0.leader_epoch, p0.partition_epoch) == ((1, 2), (1, 2), 1, 4, 9)
    assert c.core.describe_client_quotas(api.DescribeClientQuotasRequest((("user", "EXACT", "alice"),)))[0].values \
        == (("producer_byte_rate", 10.0),)
    # the quorum now takes writes; a second import is refused
    assert c.request(api.CreateTopicsRequest((api.CreatableTopic("after", 1, 1),)))
    e = c.expect_error(api.ImportZkMetadataRequest(tuple(imported.records)))
    assert e.error is Errors.INVALID_REQUEST and "MIGRATION" in e.message
    c.request(api.FinalizeMigrationRequest())
    assert state(c) == "POST_MIGRATION"
    assert c.expect_error(api.FinalizeMigrationRequest()).error is Errors.INVALID_REQUEST


def test_an_import_that_does_not_apply_changes_nothing():
    c = migrating()
    end = c.end_offset
    orphan = pb.PartitionRecord(partition_id=0, topic_id="NoSuchTopicAAAAAAAAAAA", replicas=[1], isr=[1], leader=1)
    e = c.expect_error(api.ImportZkMetadataRequest((orphan,)))
    assert e.error is Errors.INVALID_RECORD
    marker = pb.ZkMigrationStateRecord(zk_migration_state=pb.ZkMigrationState.POST_MIGRATION)
    assert c.expect_error(api.ImportZkMetadataRequest((marker,))).error is Errors.INVALID_RECORD
    assert metadata_written(c, end) == 0 and state(c) == "PRE_MIGRATION"
    c.request(api.ImportZkMetadataRequest(tuple(import_records(cluster(), uuids()).records)))
    assert state(c) == "MIGRATION"


def test_an_import_cut_off_by_a_failover_is_aborted_and_done_again():
    """The import spans several batches; the active controller dies after the first committed.
    The next active controller aborts the open transaction: nothing of it is in the image, the
    state is still PRE_MIGRATION, and its own import goes through."""
    c = migrating(max_records_per_batch=3)
    records = tuple(import_records(cluster(), uuids()).records)
    c.hold = True
    c.propose(c.core.handle(api.ImportZkMetadataRequest(records), c.now))
    assert len(c.uncommitted) > 2
    first = c.uncommitted[0]
    c.log.append(first)
    c.core.replay_committed(first)
    c.hold = False
    c.end_offset = first.end_offset
    c.elect(2)
    assert any(isinstance(decode_record(r).message, pb.AbortTransactionRecord)
               for b in c.log if not b.control for r in b.records)
    assert state(c) == "PRE_MIGRATION" and c.core.list_topics() == [] and not c.core.image.cluster.brokers
    c.request(api.ImportZkMetadataRequest(tuple(import_records(cluster(), uuids()).records)))
    assert state(c) == "MIGRATION" and sorted(c.core.list_topics()) == ["legacy", "orders"]


def test_a_partition_missing_its_state_is_a_malformed_znode():
    broken = cluster()
    del broken.states[("orders", 1)]
    with pytest.raises(z.MalformedZnode) as e:
        import_records(broken, uuids())
    assert "/brokers/topics/orders/partitions/1/state" in str(e.value)


@pytest.mark.parametrize("path,data", [
    ("/brokers/topics/t/partitions/0/state", b"{not json"),
    ("/brokers/topics/t/partitions/0/state", b'{"leader": 1, "isr": "1,2", "leader_epoch": 0}'),
    ("/brokers/topics/t", b'{"version": 3, "partitions": {}}'),
    ("/brokers/topics/t", b'{"version": 3, "partitions": {"0": [1]}, "topic_id": "short"}'),
])
def test_malformed_znodes_name_their_path(path, data):
    with pytest.raises(z.MalformedZnode) as e:
        if path.endswith("state"):
            z.decode_partition_state("t", 0, data, 0)
        else:
            z.decode_topic("t", data)
    assert path in str(e.value)


def test_the_mirror_writes_kafkas_layout_for_what_changed():
    imported = import_records(cluster(), uuids())
    c = migrating()
    c.request(api.ImportZkMetadataRequest(tuple(imported.records)))
    mirrored = image_from_records(imported.records, Provenance(-1, -1))
    first = {w.path for w in zk_writes(mirrored, c.core.image, 9, imported.topics_without_id)}
    assert "/brokers/topics/legacy" in first  # the topic from before ids is given its new id
    assert not any(p.startswith("/brokers/topics/orders") for p in first)  # unchanged: not rewritten
    before = c.core.image
    for b in (1, 2, 3):  # the ZooKeeper-mode brokers come back as sparkraft brokers
        reply = c.request(api.RegisterBrokerRequest(b, c.cluster_id, f"Incarnation{b:011d}",
                                                    (api.BrokerEndpoint("PLAINTEXT", "h", 9092),), None))
        c.request(api.BrokerHeartbeatRequest(b, reply.broker_epoch, c.core.last_committed_offset))
    c.request(api.CreateTopicsRequest((api.CreatableTopic("fresh", 2, 2),)))
    c.request(api.DeleteTopicsRequest(("legacy",)))
    c.request(api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("TOPIC", "orders"),
                                                   (api.AlterableConfig("retention.ms", "DELETE"),)),)))
    writes = {w.path: w for w in zk_writes(before, c.core.image, 9, ())}
    fresh = json.loads(writes["/brokers/topics/fresh"].data)
    assert fresh["topic_id"] == c.core.image.topics.topic_by_name("fresh").topic_id
    assert sorted(fresh["partitions"]) == ["0", "1"] and writes["/brokers/topics/fresh"].create
    state0 = json.loads(writes["/brokers/topics/fresh/partitions/0/state"].data)
    assert state0["controller_epoch"] == 9 and state0["leader"] in state0["isr"]
    assert writes["/brokers/topics/legacy"].data is None  # deleted
    assert "/config/topics/legacy" not in writes or writes["/config/topics/legacy"].data is None
    assert json.loads(writes["/config/topics/orders"].data)["config"] == {}
    changes = [w for w in writes.values() if w.sequential and w.path.startswith(z.CONFIG_CHANGE_PREFIX)]
    assert any(json.loads(w.data)["entity_path"] == "topics/orders" for w in changes)
    assert zk_writes(c.core.image, c.core.image, 9, ()) == []


def test_the_records_table_shows_the_migration():
    """The lakehouse's ``records`` rows of the migration's state changes name the state."""
    from streaming.source import record_row

    c = migrating()
    c.request(api.ImportZkMetadataRequest(tuple(import_records(cluster(), uuids()).records)))
    c.request(api.FinalizeMigrationRequest())
    rows = [record_row(b.base_offset + i, b.epoch, b.append_time_ms, raw, b.control)
            for b in c.log for i, raw in enumerate(b.records)]
    states = [json.loads(r[5])["data"]["zk_migration_state"] for r in rows if r[3] == "ZK_MIGRATION_STATE_RECORD"]
    assert states == ["PRE_MIGRATION", "MIGRATION", "POST_MIGRATION"]
