"""IMAGE1 + DELTA1 == IMAGE2, per domain; replay errors change nothing; records() rebuilds the image."""
from __future__ import annotations

import pytest
from metadata_helpers import broker, change, config, partition, rebuild, replay, same_except, topic, uid

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import MetadataDelta, MetadataImage, Provenance, ReplayError
from quorum.metadata.cluster import BrokerRegistration, Endpoint, SupportedFeature
from quorum.metadata.configs import CLUSTER, ConfigResource
from quorum.metadata.invariants import violations
from quorum.metadata.quotas import quota_entity
from quorum.metadata.topics import PartitionRegistration

TOPIC, BROKER = pb.ConfigResourceType.TOPIC, pb.ConfigResourceType.BROKER

IMAGE1 = replay(MetadataImage.EMPTY, [
    pb.FeatureLevelRecord(name="metadata.version", feature_level=7),
    broker(1, epoch=3, fenced=False, rack="a"),
    broker(2, epoch=4, fenced=False, rack="b"),
    broker(3, epoch=5, rack="c"),
    topic("orders", 1),
    config(TOPIC, "orders", "retention.ms", "1000"),
    partition(1, 0, [1, 2, 3], leader_epoch=0, partition_epoch=0),
    partition(1, 1, [2, 3, 1], isr=[2, 3]),
    topic("payments", 2),
    partition(2, 0, [3, 1], isr=[3]),
    config(BROKER, "", "log.retention.ms", "5000"),
    config(BROKER, "1", "log.cleaner.threads", "2"),
], Provenance(11, 1))


def test_image1_is_what_its_records_say():
    assert IMAGE1.provenance == Provenance(11, 1)
    assert IMAGE1.features.metadata_version == 7
    assert IMAGE1.cluster.broker(1) == BrokerRegistration(
        1, uid(1001), 3, (Endpoint("PLAINTEXT", "b1", 9092, pb.SecurityProtocol.PLAINTEXT),), "a",
        fenced=False, features=(SupportedFeature("metadata.version", 1, 7),))
    assert IMAGE1.cluster.fenced_broker_ids() == [3] and IMAGE1.cluster.unfenced_broker_ids() == [1, 2]
    orders = IMAGE1.topics.topic_by_name("orders")
    assert orders is IMAGE1.topics.topic(uid(1)) and orders.name == "orders"
    assert orders.partition(1) == PartitionRegistration((2, 3, 1), (2, 3), (), (), 2, 0, 0)
    assert IMAGE1.topics.topic_names() == ["orders", "payments"] and IMAGE1.topics.partition_count() == 3
    assert IMAGE1.configs.configs(ConfigResource(TOPIC, "orders")) == {"retention.ms": "1000"}
    assert IMAGE1.configs.value(CLUSTER, "log.retention.ms") == "5000" and CLUSTER.kind == "CLUSTER"
    assert violations(IMAGE1) == []


def test_replaying_records_from_empty_rebuilds_the_image():
    assert rebuild(IMAGE1) == IMAGE1
    assert list(rebuild(IMAGE1).records()) == list(IMAGE1.records())
    assert next(iter(IMAGE1.records())) == pb.FeatureLevelRecord(name="metadata.version", feature_level=7)


def test_image_from_records_builds_the_same_image_as_replaying():
    from quorum.metadata.loader import image_from_records

    assert image_from_records(IMAGE1.records(), IMAGE1.provenance) == IMAGE1
    # partitions of two topics interleaved, a topic removed and re-created between its partitions
    records = [topic("a", 1), topic("b", 2), partition(1, 0, [1]), partition(2, 0, [2]), partition(1, 1, [1]),
               pb.RemoveTopicRecord(topic_id=uid(2)), topic("b", 3), partition(3, 0, [3])]
    assert image_from_records(records, Provenance(7, 1)) == replay(MetadataImage.EMPTY, records, Provenance(7, 1))
    with pytest.raises(ReplayError):
        image_from_records([topic("a", 1), partition(9, 0, [1])], Provenance(1, 1))  # no topic 9
    with pytest.raises(ReplayError):
        image_from_records([pb.BeginTransactionRecord(name="x")], Provenance(1, 1))


def test_an_empty_delta_shares_everything():
    image2 = MetadataDelta(IMAGE1).apply(Provenance(12, 2))
    same_except(IMAGE1, image2)
    assert image2.provenance == Provenance(12, 2)
    noop = replay(IMAGE1, [pb.NoOpRecord()])
    same_except(IMAGE1, noop)
    assert noop.offset == 12 and noop.provenance.epoch == 1


# -- features ---------------------------------------------------------------------------------
def test_features_set_and_level_zero_removes():
    image2 = replay(IMAGE1, [pb.FeatureLevelRecord(name="kraft.version", feature_level=1),
                             pb.FeatureLevelRecord(name="metadata.version", feature_level=8)])
    assert dict(image2.features.levels) == {"metadata.version": 8, "kraft.version": 1}
    image3 = replay(image2, [pb.FeatureLevelRecord(name="kraft.version", feature_level=0)])
    assert image3.features.level("kraft.version") == 0 and "kraft.version" not in image3.features.levels
    same_except(IMAGE1, image2, "features")
    assert rebuild(image3) == image3


# -- cluster ----------------------------------------------------------------------------------
def test_broker_registration_change_is_sparse():
    unfenced = replay(IMAGE1, [pb.BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=5, fenced=False)])
    b3 = unfenced.cluster.broker(3)
    assert (b3.fenced, b3.in_controlled_shutdown, b3.rack) == (False, False, "c")
    shutting = replay(unfenced, [pb.BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=5,
                                                                   in_controlled_shutdown=True)])
    b3 = shutting.cluster.broker(3)
    assert (b3.fenced, b3.in_controlled_shutdown) == (False, True)
    same_except(IMAGE1, unfenced, "cluster")
    assert rebuild(shutting) == shutting


def test_re_registration_replaces_and_unregistration_removes():
    image2 = replay(IMAGE1, [broker(1, epoch=20, rack="z")])  # fenced again, per the record
    assert image2.cluster.broker(1).broker_epoch == 20 and image2.cluster.broker(1).fenced
    image3 = replay(image2, [pb.UnregisterBrokerRecord(broker_id=1, broker_epoch=20),
                             pb.UnregisterBrokerRecord(broker_id=99, broker_epoch=1)])  # unknown: no-op
    assert image3.cluster.broker_ids() == [2, 3]
    assert rebuild(image3) == image3


@pytest.mark.parametrize("record, match", [
    (pb.BrokerRegistrationChangeRecord(broker_id=9, broker_epoch=5, fenced=False), "not registered"),
    (pb.BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=4, fenced=False),
     "epoch 4 != registered epoch 5"),
])
def test_a_change_to_an_unknown_broker_or_epoch_is_refused(record, match):
    delta = MetadataDelta(IMAGE1)
    with pytest.raises(ReplayError, match=match):
        delta.replay(record, 12)
    assert delta.last_offset == 11
    same_except(IMAGE1, delta.apply(IMAGE1.provenance))


# -- topics and partitions --------------------------------------------------------------------
def test_partition_change_follows_kafkas_merge():
    p = IMAGE1.topics.topic(uid(1)).partition(0)
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (1, 0, 0)

    isr_only = replay(IMAGE1, [change(1, 0, isr=[1, 2])]).topics.topic(uid(1)).partition(0)
    assert isr_only == p._replace(isr=(1, 2), partition_epoch=1)  # leader epoch unchanged

    new_leader = replay(IMAGE1, [change(1, 0, leader=2)]).topics.topic(uid(1)).partition(0)
    assert new_leader == p._replace(leader=2, leader_epoch=1, partition_epoch=1)

    same_leader = replay(IMAGE1, [change(1, 0, leader=1)]).topics.topic(uid(1)).partition(0)
    assert same_leader == p._replace(leader_epoch=1, partition_epoch=1)  # a present leader bumps it

    no_leader = replay(IMAGE1, [change(1, 0, leader=-1, isr=[])]).topics.topic(uid(1)).partition(0)
    assert no_leader == p._replace(leader=-1, isr=(), leader_epoch=1, partition_epoch=1)

    reassign = replay(IMAGE1, [change(1, 0, replicas=[1, 2, 3, 4], adding_replicas=[4],
                                      removing_replicas=[3])])
    assert reassign.topics.topic(uid(1)).partition(0) == p._replace(
        replicas=(1, 2, 3, 4), adding_replicas=(4,), removing_replicas=(3,), partition_epoch=1)

    twice = replay(IMAGE1, [change(1, 0, leader=2), change(1, 0, isr=[2])]).topics.topic(uid(1)).partition(0)
    assert (twice.leader, twice.isr, twice.leader_epoch, twice.partition_epoch) == (2, (2,), 1, 2)


def test_a_partition_change_copies_only_its_topic():
    image2 = replay(IMAGE1, [change(1, 1, isr=[2, 3, 1])])
    same_except(IMAGE1, image2, "topics")
    assert image2.topics.topic(uid(2)) is IMAGE1.topics.topic(uid(2))
    assert image2.topics.ids_by_name is IMAGE1.topics.ids_by_name  # no topic came or went
    assert image2.topics.topic(uid(1)).partition(0) is IMAGE1.topics.topic(uid(1)).partition(0)
    assert rebuild(image2) == image2


def test_partitions_can_be_added_to_a_topic():
    image2 = replay(IMAGE1, [partition(2, 1, [1, 2]), partition(2, 2, [2, 3])])
    assert sorted(image2.topics.topic(uid(2)).partitions) == [0, 1, 2]
    assert rebuild(image2) == image2


def test_removing_a_topic_removes_its_partitions_and_configs_only():
    image2 = replay(IMAGE1, [pb.RemoveTopicRecord(topic_id=uid(1))])
    assert image2.topics.topic(uid(1)) is None and image2.topics.topic_by_name("orders") is None
    assert image2.topics.topic_names() == ["payments"]
    assert ConfigResource(TOPIC, "orders") not in image2.configs.resources
    assert image2.configs.value(CLUSTER, "log.retention.ms") == "5000"
    same_except(IMAGE1, image2, "topics", "configs")
    assert violations(image2) == [] and rebuild(image2) == image2


def test_a_topic_created_and_removed_in_one_delta_leaves_no_trace():
    image2 = replay(IMAGE1, [topic("tmp", 3), partition(3, 0, [1]), config(TOPIC, "tmp", "a", "b"),
                             pb.RemoveTopicRecord(topic_id=uid(3))])
    assert image2.topics == IMAGE1.topics and image2.configs == IMAGE1.configs


def test_a_name_freed_in_a_delta_can_be_taken_again_in_it():
    image2 = replay(IMAGE1, [pb.RemoveTopicRecord(topic_id=uid(1)), topic("orders", 4),
                             partition(4, 0, [2])])
    orders = image2.topics.topic_by_name("orders")
    assert orders.topic_id == uid(4) and list(orders.partitions) == [0]
    assert image2.topics.topic(uid(1)) is None
    assert image2.configs.configs(ConfigResource(TOPIC, "orders")) == {}
    assert violations(image2) == [] and rebuild(image2) == image2


@pytest.mark.parametrize("record, match", [
    (topic("orders", 9), "name is taken"),
    (topic("new", 1), f"id {uid(1)} exists"),
    (partition(9, 0, [1]), "no topic with id"),
    (change(9, 0, isr=[1]), "no topic with id"),
    (change(1, 5, isr=[1]), "no such partition"),
    (pb.RemoveTopicRecord(topic_id=uid(9)), "no topic with id"),
    (pb.RemoveAccessControlEntryRecord(id=uid(9)), "no such ACL"),
])
def test_a_record_naming_what_does_not_exist_is_refused_and_changes_nothing(record, match):
    delta = MetadataDelta(IMAGE1)
    delta.replay(change(1, 0, isr=[1]), 12)
    before = delta.apply()
    with pytest.raises(ReplayError, match=match):
        delta.replay(record, 13)
    assert delta.apply() == before


def test_offsets_must_move_forward():
    delta = MetadataDelta(IMAGE1)
    with pytest.raises(ReplayError, match="offset 11 is not after"):
        delta.replay(pb.NoOpRecord(), 11)


def test_transaction_markers_are_the_loaders_business():
    with pytest.raises(ReplayError, match="MetadataLoader"):
        MetadataDelta(IMAGE1).replay(pb.BeginTransactionRecord(), 12)


def test_replica_lists_are_shared_between_partitions():
    a = IMAGE1.topics.topic(uid(1)).partition(0)
    image2 = replay(IMAGE1, [partition(2, 5, [1, 2, 3])])
    b = image2.topics.topic(uid(2)).partition(5)
    assert a.replicas is b.replicas and a.replicas is a.isr


# -- configs ----------------------------------------------------------------------------------
def test_config_set_overwrite_and_delete():
    image2 = replay(IMAGE1, [config(TOPIC, "orders", "cleanup.policy", "compact"),
                             config(TOPIC, "orders", "retention.ms", "2000"),
                             config(BROKER, "1", "log.cleaner.threads", None),
                             config(BROKER, "", "x", None)])  # deleting an unset key: nothing
    assert image2.configs.configs(ConfigResource(TOPIC, "orders")) == {
        "retention.ms": "2000", "cleanup.policy": "compact"}
    assert ConfigResource(BROKER, "1") not in image2.configs.resources  # emptied resources go
    same_except(IMAGE1, image2, "configs")
    assert rebuild(image2) == image2 and violations(image2) == []


# -- client quotas, producer ids, ACLs -----------------------------------------------------------
def _quota(key, value=0.0, remove=False, **entity):
    return pb.ClientQuotaRecord(
        entity=[pb.ClientQuotaRecord.EntityData(entity_type=t.replace("_", "-"), entity_name=n)
                for t, n in entity.items()], key=key, value=value, remove=remove)


def test_client_quotas_set_and_remove():
    alice = quota_entity({"user": "alice", "client-id": None})
    image2 = replay(IMAGE1, [_quota("producer_byte_rate", 100.0, client_id=None, user="alice"),
                             _quota("consumer_byte_rate", 50.0, user="alice", client_id=None),
                             _quota("producer_byte_rate", 1.0, user=None)])
    assert image2.client_quotas.quotas(alice) == {"producer_byte_rate": 100.0, "consumer_byte_rate": 50.0}
    assert rebuild(image2) == image2
    image3 = replay(image2, [_quota("producer_byte_rate", remove=True, user="alice", client_id=None),
                             _quota("consumer_byte_rate", remove=True, user="alice", client_id=None)])
    assert alice not in image3.client_quotas.entities and len(image3.client_quotas.entities) == 1
    same_except(image2, image3, "client_quotas")


def test_producer_ids_move_to_the_next_block():
    assert IMAGE1.producer_ids.next_producer_id == -1 and list(IMAGE1.producer_ids.records()) == []
    image2 = replay(IMAGE1, [pb.ProducerIdsRecord(broker_id=1, broker_epoch=3, next_producer_id=1000)])
    assert image2.producer_ids.next_producer_id == 1000
    same_except(IMAGE1, image2, "producer_ids")
    assert rebuild(image2) == image2


def test_acls_are_added_and_removed_by_id():
    acl = pb.AccessControlEntryRecord(id=uid(50), resource_type=pb.AclResourceType.TOPIC,
                                      resource_name="orders", pattern_type=pb.PatternType.LITERAL,
                                      principal="User:alice", host="*", operation=pb.AclOperation.READ,
                                      permission_type=pb.AclPermissionType.ALLOW)
    image2 = replay(IMAGE1, [acl])
    assert image2.acls.acl(uid(50)).to_record() == acl
    same_except(IMAGE1, image2, "acls")
    assert rebuild(image2) == image2
    image3 = replay(image2, [pb.RemoveAccessControlEntryRecord(id=uid(50))])
    assert image3.acls.acl(uid(50)) is None
    added_and_removed = replay(IMAGE1, [acl, pb.RemoveAccessControlEntryRecord(id=uid(50))])
    assert added_and_removed.acls is IMAGE1.acls


def test_checkpoint_round_trip_is_exact_with_partition_blocks(tmp_path):
    """Image -> checkpoint (partitions as one PARTITION_BLOCK per topic) -> image, exactly; the
    older one-record-per-partition body still loads; a damaged block is refused as a whole."""
    from quorum.log import control_records
    from quorum.log.batch import encode_batch
    from quorum.metadata.partition_block import decode_block, encode_block, is_block
    from quorum.metadata.records import encode_record
    from quorum.snapshot.checkpoint import (
        CheckpointError,
        checkpoint_body,
        decode_checkpoint,
        read_checkpoint,
        write_checkpoint,
    )

    # partitions moving replicas and without a leader, so every column is exercised
    image = replay(IMAGE1, [partition(2, 1, [1, 2], isr=[1], leader=-1, leader_epoch=4, partition_epoch=9,
                                      removing_replicas=[2], adding_replicas=[3])], Provenance(12, 1))
    path = tmp_path / "x.checkpoint"
    write_checkpoint(path, image, {"cluster_id": "c"})
    header, loaded = read_checkpoint(path)
    assert loaded == image and header["version"] == 1
    body = checkpoint_body(image)
    blocks = [decode_block(raw) for raw in body if is_block(raw)]
    assert [b.topic_id for b in blocks] == [uid(1), uid(2)]
    assert blocks[1].partitions == dict(image.topics.topic(uid(2)).partitions.items())

    # version 0: one PartitionRecord each (caches written before blocks)
    head = control_records.encode_control(control_records.SNAPSHOT_HEADER, {
        "version": 0, "image_offset": 12, "image_epoch": 1, "cluster_id": "c"})
    records = [encode_record(r) for r in image.records()]
    foot = control_records.encode_control(control_records.SNAPSHOT_FOOTER, {"records": len(records)})
    old = b"".join([encode_batch(0, 0, 0, [head], control=True), encode_batch(1, 0, 0, records),
                    encode_batch(1 + len(records), 0, 0, [foot], control=True)])
    assert decode_checkpoint(old)[1] == image

    bad = encode_block(uid(1), dict(image.topics.topic(uid(1)).partitions.items()))[:-3]  # rows cut short
    with pytest.raises(ValueError):
        decode_block(bad)
    cut = [encode_batch(0, 0, 0, [head.replace(b'"version":0', b'"version":1')], control=True),
           encode_batch(1, 0, 0, [encode_record(topic("orders", 1)), bad]),
           encode_batch(3, 0, 0, [control_records.encode_control(control_records.SNAPSHOT_FOOTER, {"records": 2})],
                        control=True)]
    with pytest.raises(CheckpointError, match="do not rebuild"):
        decode_checkpoint(b"".join(cut))
