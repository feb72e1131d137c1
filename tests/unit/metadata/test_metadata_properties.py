"""Random record sequences, as a well-behaved controller would write them.

A small model controller reads the published image and emits the records of one operation
(register a broker, create a topic, shrink an ISR, reassign, delete, set a config, ...), sometimes
inside a transaction that is committed or aborted, sometimes split over several batches; now and
then it writes a record naming something that does not exist, which must be refused and change
nothing. After every batch the image keeps its invariants; at the end, replaying the whole log in
one batch, and replaying ``image.records()`` onto an empty image, both give the same image.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from metadata_helpers import broker, change, config, partition, rebuild, same_except, uid

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import MetadataImage, MetadataLoader, ReplayError
from quorum.metadata.invariants import violations

BROKERS = range(1, 7)
TOPIC_NAMES = [f"t{i}" for i in range(6)]
TOPIC_CONFIGS = ["retention.ms", "cleanup.policy"]


class Controller:
    """Emits the records of one random operation that is valid against ``image``."""

    def __init__(self, draw):
        self.draw = draw
        self.next_id = 100  # for fresh topic and ACL ids

    def fresh_id(self) -> str:
        self.next_id += 1
        return uid(self.next_id)

    def pick(self, items):
        items = sorted(items)
        return self.draw(st.sampled_from(items)) if items else None

    def replicas(self, at_least: int = 1) -> list[int]:
        return self.draw(st.permutations(list(BROKERS)).map(
            lambda p: p[:self.draw(st.integers(at_least, 3))]))

    def subset(self, of, min_size=0) -> list[int]:
        return [r for r in of if self.draw(st.booleans())] or list(of[:min_size])

    def partition_of(self, image):
        topic_ids = [t.topic_id for t in image.topics.by_id.values() if t.partitions]
        tid = self.pick(topic_ids)
        if tid is None:
            return None, None, None
        t = image.topics.topic(tid)
        pid = self.pick(t.partitions)
        return t, pid, t.partitions[pid]

    # -- operations (each returns a list of records) -------------------------------------------
    def register_broker(self, image, offset):
        return [broker(self.draw(st.sampled_from(list(BROKERS))), epoch=offset,
                       fenced=self.draw(st.booleans()), rack=self.draw(st.sampled_from([None, "a", "b"])))]

    def change_broker(self, image, offset):
        b = image.cluster.broker(self.pick(image.cluster.brokers) or 0)
        if b is None:
            return []
        kw = {k: self.draw(st.booleans()) for k in ("fenced", "in_controlled_shutdown")
              if self.draw(st.booleans())}
        return [pb.BrokerRegistrationChangeRecord(broker_id=b.broker_id, broker_epoch=b.broker_epoch, **kw)]

    def unregister_broker(self, image, offset):
        b = image.cluster.broker(self.pick(image.cluster.brokers) or 0)
        if b is None:
            return []
        return [pb.UnregisterBrokerRecord(broker_id=b.broker_id, broker_epoch=b.broker_epoch)]

    def create_topic(self, image, offset):
        name = self.pick(set(TOPIC_NAMES) - set(image.topics.ids_by_name))
        if name is None:
            return []
        tid = self.fresh_id()
        records = [pb.TopicRecord(name=name, topic_id=tid)]
        if self.draw(st.booleans()):
            records.append(config(pb.ConfigResourceType.TOPIC, name, "retention.ms", "1000"))
        for pid in range(self.draw(st.integers(1, 3))):
            replicas = self.replicas()
            isr = self.subset(replicas, min_size=1)
            records.append(pb.PartitionRecord(partition_id=pid, topic_id=tid, replicas=replicas, isr=isr,
                                              leader=isr[0]))
        return records

    def add_partition(self, image, offset):
        t = image.topics.topic(self.pick(image.topics.by_id) or "")
        if t is None:
            return []
        replicas = self.replicas()
        return [pb.PartitionRecord(partition_id=max(t.partitions, default=-1) + 1, topic_id=t.topic_id,
                                   replicas=replicas, isr=replicas, leader=replicas[0])]

    def change_isr(self, image, offset):
        t, pid, p = self.partition_of(image)
        if t is None:
            return []
        isr = self.subset(p.replicas)
        kw = {} if p.leader in isr else {"leader": isr[0] if isr else -1}
        return [pb.PartitionChangeRecord(topic_id=t.topic_id, partition_id=pid,
                                         isr=pb.BrokerIds(ids=isr), **kw)]

    def elect_leader(self, image, offset):
        t, pid, p = self.partition_of(image)
        if t is None:
            return []
        return [pb.PartitionChangeRecord(topic_id=t.topic_id, partition_id=pid,
                                         leader=self.draw(st.sampled_from([*p.isr, -1])))]

    def reassign(self, image, offset):
        t, pid, p = self.partition_of(image)
        if t is None:
            return []
        target = self.replicas()
        adding = [r for r in target if r not in p.replicas]
        removing = [r for r in p.replicas if r not in target]
        replicas = target + removing
        isr = [r for r in p.isr if r in replicas]
        first = dict(replicas=replicas, adding_replicas=adding, removing_replicas=removing, isr=isr)
        if p.leader not in isr:
            first["leader"] = isr[0] if isr else -1
        records = [change(0, pid, **first)]
        if self.draw(st.booleans()):  # the reassignment completes
            final_isr = [r for r in isr if r in target]
            leader = first.get("leader", p.leader)
            done = dict(replicas=target, adding_replicas=[], removing_replicas=[], isr=final_isr)
            if leader not in final_isr:
                done["leader"] = final_isr[0] if final_isr else -1
            records.append(change(0, pid, **done))
        for r in records:
            r.topic_id = t.topic_id
        return records

    def remove_topic(self, image, offset):
        tid = self.pick(image.topics.by_id)
        return [] if tid is None else [pb.RemoveTopicRecord(topic_id=tid)]

    def set_config(self, image, offset):
        resource = self.draw(st.sampled_from(
            [(pb.ConfigResourceType.TOPIC, n) for n in image.topics.ids_by_name]
            + [(pb.ConfigResourceType.BROKER, ""), (pb.ConfigResourceType.BROKER, "1")]))
        value = self.draw(st.sampled_from([None, "1", "2"]))
        return [config(*resource, self.draw(st.sampled_from(TOPIC_CONFIGS)), value)]

    def set_feature(self, image, offset):
        return [pb.FeatureLevelRecord(name=self.draw(st.sampled_from(["metadata.version", "kraft.version"])),
                                      feature_level=self.draw(st.integers(0, 3)))]

    def set_quota(self, image, offset):
        user = self.draw(st.sampled_from([None, "alice"]))
        entity = [pb.ClientQuotaRecord.EntityData(entity_type="user", entity_name=user)]
        return [pb.ClientQuotaRecord(entity=entity,
                                     key="producer_byte_rate", value=self.draw(st.floats(0, 1e6)),
                                     remove=self.draw(st.booleans()))]

    def allocate_producer_ids(self, image, offset):
        return [pb.ProducerIdsRecord(broker_id=1, broker_epoch=1,
                                     next_producer_id=max(image.producer_ids.next_producer_id, 0) + 1000)]

    def add_acl(self, image, offset):
        return [pb.AccessControlEntryRecord(id=self.fresh_id(), resource_type=pb.AclResourceType.TOPIC,
                                            resource_name=self.draw(st.sampled_from(TOPIC_NAMES)),
                                            pattern_type=pb.PatternType.LITERAL, principal="User:alice",
                                            host="*", operation=pb.AclOperation.READ,
                                            permission_type=pb.AclPermissionType.ALLOW)]

    def remove_acl(self, image, offset):
        acl_id = self.pick(image.acls.acls)
        return [] if acl_id is None else [pb.RemoveAccessControlEntryRecord(id=acl_id)]

    def no_op(self, image, offset):
        return [pb.NoOpRecord()]

    OPERATIONS = [register_broker, register_broker, change_broker, unregister_broker, create_topic,
                  create_topic, add_partition, change_isr, change_isr, elect_leader, reassign,
                  remove_topic, set_config, set_feature, set_quota, allocate_producer_ids, add_acl,
                  remove_acl, no_op]


def bogus_record(draw, image):
    """A record no controller would write against ``image``: it names something absent."""
    return draw(st.sampled_from([
        partition(9999, 0, [1]),
        change(9999, 0, isr=[1]),
        pb.RemoveTopicRecord(topic_id=uid(9999)),
        pb.RemoveAccessControlEntryRecord(id=uid(9999)),
        pb.BrokerRegistrationChangeRecord(broker_id=99, broker_epoch=1, fenced=True),
    ]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_operations_keep_the_invariants_and_replay_the_same_everywhere(data):
    draw = data.draw
    controller = Controller(draw)
    loader = MetadataLoader()
    log: list = []  # every record the loader accepted, in offset order
    offset = 0

    def replay(record, epoch):
        nonlocal offset
        loader.replay(record, offset, epoch)
        log.append((record, offset, epoch))
        offset += 1

    for step in range(draw(st.integers(1, 40))):
        epoch = 1 + step // 10
        before = loader.image
        if draw(st.integers(0, 9)) == 0:
            try:
                loader.replay(bogus_record(draw, before), offset, epoch)
            except ReplayError:
                pass
            else:
                raise AssertionError("a record naming something absent was accepted")
            assert loader.flush() is before
            continue
        operation = draw(st.sampled_from(Controller.OPERATIONS))
        records = operation(controller, before, offset)
        how = draw(st.sampled_from(["plain", "commit", "abort", "split"]))
        if how == "plain":
            for record in records:
                replay(record, epoch)
        else:
            replay(pb.BeginTransactionRecord(name=operation.__name__), epoch)
            for record in records:
                replay(record, epoch)
                if how == "split":  # a transaction spans batches: nothing shows until its end
                    assert loader.flush() is before
            replay(pb.AbortTransactionRecord() if how == "abort" else pb.EndTransactionRecord(), epoch)
        image = loader.flush()
        assert image.offset == offset - 1 or image is before
        assert violations(image) == [], (operation.__name__, records)
        if how == "abort":
            same_except(before, image)

    image = loader.flush()
    assert rebuild(image) == image

    in_one_batch = MetadataLoader()
    for record, record_offset, epoch in log:
        in_one_batch.replay(record, record_offset, epoch)
    assert in_one_batch.flush() == image
    assert MetadataLoader(MetadataImage.EMPTY).flush() is MetadataImage.EMPTY
