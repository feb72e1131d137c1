"""Applying a delta costs what the delta touches, not what the image holds.

Measured by structure, not time: after one partition changes, every other topic, partition and
sub-image is the very same object as before, and the trie nodes that are new (not shared with the
old image) are one root-to-leaf path per map, a bounded number of entries however big the image.
The image here has 20,000 topics (the topic map of a 2-million-partition cluster) plus one topic
with 50,000 partitions (a big partition map); both maps are deep tries, which is the point.
"""
from __future__ import annotations

import pytest
from metadata_helpers import change, depth, new_nodes, partition, same_except, topic, uid

from quorum.metadata import MetadataDelta, MetadataImage
from quorum.metadata.pmap import LEAF_MAX

TOPICS = 20_000
BIG = TOPICS  # the topic number of the 50,000-partition topic
BIG_PARTITIONS = 50_000


@pytest.fixture(scope="module")
def image() -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for n in range(TOPICS):
        delta.replay(topic(f"topic-{n}", n))
        delta.replay(partition(n, 0, [n % 5, (n + 1) % 5, (n + 2) % 5]))
    delta.replay(topic("big", BIG))
    for pid in range(BIG_PARTITIONS):
        delta.replay(partition(BIG, pid, [pid % 5, (pid + 1) % 5]))
    return delta.apply()


@pytest.mark.parametrize("topic_n, pid", [(77, 0), (BIG, 31_337)])
def test_changing_one_partition_copies_one_path_per_map(image, topic_n, pid):
    delta = MetadataDelta(image)
    delta.replay(change(topic_n, pid, isr=[]))
    image2 = delta.apply()

    old_topics, new_topics = image.topics, image2.topics
    assert new_topics.ids_by_name is old_topics.ids_by_name
    same_except(image, image2, "topics")

    # the topic map: one new path, every other topic the same object
    fresh = new_nodes(old_topics.by_id, new_topics.by_id)
    assert len(fresh) <= depth(old_topics.by_id) and depth(old_topics.by_id) >= 3
    assert sum(len(node) for node in fresh) <= 32 * (len(fresh) - 1) + LEAF_MAX
    changed = [t for t in new_topics.by_id.values() if t is not old_topics.topic(t.topic_id)]
    assert [t.topic_id for t in changed] == [uid(topic_n)]

    # the changed topic's partition map: one new path, every other partition the same object
    old_parts, new_parts = old_topics.topic(uid(topic_n)).partitions, changed[0].partitions
    fresh = new_nodes(old_parts, new_parts)
    assert len(fresh) <= depth(old_parts)
    assert sum(len(node) for node in fresh) <= 32 * (len(fresh) - 1) + LEAF_MAX
    assert [p for p, reg in new_parts.items() if reg is not old_parts[p]] == [pid]
    assert new_parts[pid].isr == () and old_parts[pid].isr != ()


def test_a_big_image_shares_its_replica_lists(image):
    big = image.topics.topic(uid(BIG)).partitions
    distinct = {id(reg.replicas) for reg in big.values()}
    assert len(distinct) == 5  # 50,000 partitions, five distinct replica lists, five tuples
