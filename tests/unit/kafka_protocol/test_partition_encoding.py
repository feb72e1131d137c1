"""Metadata's topics as partition_encoding writes them are byte for byte what kio writes, in every
version, for any partition: leaderless ones, errors, empty and long arrays (past one varint byte,
which kio writes), large epochs and ids."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.kafka.apis import SUPPORTED
from quorum.kafka.codec import encode_entity, materialize, nested_type, response_type
from quorum.kafka.partition_encoding import topic_bytes

VERSIONS = range(SUPPORTED[3][0], SUPPORTED[3][1] + 1)
ids = st.integers(-1, 2**31 - 1)
partition = st.tuples(st.sampled_from([0, 5, 72]), st.integers(0, 2**31 - 1), ids, st.integers(0, 2**31 - 1),
                      st.lists(ids, max_size=6).map(tuple), st.lists(ids, max_size=6).map(tuple),
                      st.lists(ids, max_size=3).map(tuple))
long_array = st.lists(ids, min_size=127, max_size=130).map(tuple)


def kio_topic(topic_cls, topic: dict, partitions) -> bytes:
    return encode_entity(materialize(topic_cls, {**topic, "partitions": [
        {"error_code": e, "partition_index": i, "leader_id": leader, "leader_epoch": epoch, "replica_nodes": r,
         "isr_nodes": isr, "offline_replicas": off} for e, i, leader, epoch, r, isr, off in partitions]}))


@settings(max_examples=100, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), name=st.text("abc._-", min_size=1, max_size=30),
       partitions=st.lists(partition, max_size=8), long=st.booleans(), data=st.data())
def test_topics_encode_as_kio_encodes_them(version, name, partitions, long, data):
    if long:
        e, i, leader, epoch, _, isr, off = data.draw(partition)
        partitions = partitions + [(e, i, leader, epoch, data.draw(long_array), isr, off)]
    topic_cls = nested_type(response_type(3, version), "topics")
    topic = {"error_code": 0, "name": name, "topic_id": uuid.UUID(int=data.draw(st.integers(1, 2**128 - 1))),
             "is_internal": False, "topic_authorized_operations": -2147483648}
    assert topic_bytes(topic_cls, version, topic, partitions) == kio_topic(topic_cls, topic, partitions)
