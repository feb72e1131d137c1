"""The per-broker partition index moved by ``update`` equals one built from scratch, whatever changed."""
import random

import pytest

from quorum.controller.index import PartitionIndex
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import change_block
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.image import MetadataImage

BROKERS = range(6)


def _random_change(rng, topic_id, pid, replicas):
    change = pb.PartitionChangeRecord(partition_id=pid, topic_id=topic_id)
    roll = rng.random()
    if roll < 0.4:  # a broker leaves or rejoins the ISR
        change.isr.ids.extend(sorted(rng.sample(replicas, rng.randint(1, len(replicas)))))
    if roll > 0.3:  # the leader moves, or is lost (-1)
        change.leader = rng.choice([*replicas, -1])
    return change


def _random_topics(rng, prefix: str, seed: int, topics: int, max_partitions: int):
    """An image of ``topics`` topics of random sizes, RF 3, every ISR full; and each partition's replicas."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    replicas = {}
    for t in range(topics):
        tid = f"{prefix}{t}-{seed:04d}".ljust(22, "0")
        delta.replay(pb.TopicRecord(name=f"topic-{t}", topic_id=tid))
        for pid in range(rng.randint(1, max_partitions)):
            r = rng.sample(BROKERS, 3)
            replicas[tid, pid] = r
            delta.replay(pb.PartitionRecord(partition_id=pid, topic_id=tid, replicas=r, isr=r, leader=r[0]))
    return delta.apply(), replicas

@pytest.mark.parametrize("seed", range(20))
def test_update_equals_a_rebuild_after_random_isr_and_leader_changes(seed):
    rng = random.Random(seed)
    image, replicas = _random_topics(rng, "t", seed, topics=4, max_partitions=70)
    index = PartitionIndex.build(image)
    for _ in range(30):
        delta = MetadataDelta(image)
        touched = rng.sample(sorted(replicas), rng.randint(1, 20))
        for tid, pid in touched:
            delta.replay(_random_change(rng, tid, pid, replicas[tid, pid]))
        new = delta.apply()
        index.update(image, new, touched)
        image = new
        assert index.snapshot() == PartitionIndex.build(image).snapshot()
        _assert_counts_match_every_partition(index, image, min_isr={tid: 1 + ord(tid[1]) % 3 for tid, _ in replicas})


@pytest.mark.parametrize("seed", range(20))
def test_update_from_what_blocks_did_equals_a_rebuild(seed):
    """The active controller's path: blocks replayed with ``moves`` (the registrations before and
    after each row), beside single records; a partition changed twice in one delta (two rows of a
    block, or a record and a row) is taken from the images instead."""
    rng = random.Random(seed)
    image, replicas = _random_topics(rng, "b", seed, topics=3, max_partitions=40)
    index = PartitionIndex.build(image)
    keys = sorted(replicas)
    for _ in range(30):
        delta = MetadataDelta(image)
        parts, moves = set(), {}
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.3:  # a single record
                tid, pid = rng.choice(keys)
                delta.replay(_random_change(rng, tid, pid, replicas[tid, pid]))
                parts.add((tid, pid))
            else:  # a block of rows in key order, some partitions twice
                rows = sorted(rng.choices(keys, k=rng.randint(1, 25)))
                block = change_block.block_of([_random_change(rng, tid, pid, replicas[tid, pid]) for tid, pid in rows])
                change_block.replay(delta.sub("topics"), block, moves, parts)
        new = delta.apply()
        index.update(image, new, parts, (), moves)
        image = new
        assert index.snapshot() == PartitionIndex.build(image).snapshot()


def _assert_counts_match_every_partition(index, image, min_isr):
    """The metrics' counts kept by the index equal a walk over every partition."""
    parts = [(tid, p) for tid, t in image.topics.by_id.items() for p in t.partitions.values()]
    assert index.offline_count() == sum(1 for _, p in parts if p.leader == -1)
    assert index.imbalanced_count() == sum(1 for _, p in parts if p.leader != p.replicas[0])
    assert index.under_replicated_count() == sum(1 for _, p in parts if len(p.isr) < len(p.replicas))
    under = sum(1 for tid, p in parts if len(p.isr) < min_isr[tid])
    assert index.under_min_isr_count(min_isr.__getitem__) == under
    assert index.under_min_isr_count(min_isr.__getitem__, ceiling=max(min_isr.values())) == under
