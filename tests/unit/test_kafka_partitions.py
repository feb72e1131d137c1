"""Kafka's PartitionRecords read straight into partitions (quorum/kafka_import/partitions.py) equal
what the generic way makes of the same bytes, at every version and with every optional part; what it
does not read that way it leaves to the generic way, and damaged bytes are an error, never a guess.
(On the bytes of Kafka's own snapshot writer: tests/integration/test_kafka_log_files.py.)"""
from __future__ import annotations

import pytest

from quorum.kafka_import.partitions import PartitionReader, with_partition_blocks
from quorum.kafka_import.records import metadata_record
from quorum.kafka_log.gen.records import WRITERS
from quorum.kafka_log.wire import Writer
from quorum.metadata.partition_block import PartitionBlock
from quorum.metadata.topics import PartitionRegistration

TOPIC = "AAAAAAAAAAkAAAAAAAAAJA"
DIRS = ["AAAAAAAAAAkAAAAAAAAAAQ", "AAAAAAAAAAkAAAAAAAAAAg", "AAAAAAAAAAkAAAAAAAAAAw"]


def value(api_key: int, version: int, data: dict) -> bytes:
    w = Writer()
    w.uvarint(1)
    w.uvarint(api_key)
    w.uvarint(version)
    WRITERS[api_key](w, data, version)
    return bytes(w.buf)


def partition(version: int, **fields) -> bytes:
    data = {"partitionId": 7, "topicId": TOPIC, "replicas": [1, 2, 3], "isr": [1, 2], "removingReplicas": [],
            "addingReplicas": [], "leader": 1, "leaderEpoch": 4, "partitionEpoch": 9, "directories": DIRS, **fields}
    return value(3, version, data)


def generic(raw: bytes) -> tuple[str, int, PartitionRegistration]:
    message = metadata_record(raw)[0].message
    return message.topic_id, message.partition_id, PartitionRegistration.from_record(message)


@pytest.mark.parametrize("raw", [
    partition(0), partition(1), partition(2),
    partition(2, eligibleLeaderReplicas=[3], lastKnownElr=[2, 3]),
    partition(2, eligibleLeaderReplicas=[], lastKnownElr=[]),
    partition(2, leaderRecoveryState=1, eligibleLeaderReplicas=[3]),
    partition(1, eligibleLeaderReplicas=[3]),  # not written below v2: nothing to read
    partition(2, removingReplicas=[3], addingReplicas=[4, 5], replicas=[1, 2, 3, 4, 5]),
    partition(1, directories=[], isr=[], leader=-1),
    partition(2, replicas=list(range(1, 127))),  # the longest list a one-byte varint counts
], ids=lambda raw: raw.hex()[:12])
def test_read_straight_equals_the_generic_way(raw):
    assert PartitionReader().read(raw) == generic(raw)


def test_what_is_not_read_straight_is_left_to_the_generic_way():
    reader = PartitionReader()
    assert reader.read(value(2, 0, {"name": "orders", "topicId": TOPIC})) is None  # a TopicRecord
    assert reader.read(partition(2, replicas=list(range(1, 200)))) is None  # a two-byte varint
    newer = bytearray(partition(2))
    newer[2] = 3  # a version newer than this reader knows
    assert reader.read(bytes(newer)) is None


@pytest.mark.parametrize("cut", [5, 24, 30, 40, -3])
def test_damaged_bytes_are_an_error(cut):
    raw = partition(2, eligibleLeaderReplicas=[3])
    with pytest.raises(ValueError):
        PartitionReader().read(raw[:cut])


def test_runs_of_one_topic_become_blocks_in_the_records_order():
    other = "AAAAAAAAAAkAAAAAAAAAJQ"
    topic = value(2, 0, {"name": "orders", "topicId": TOPIC})
    values = [topic, partition(1, partitionId=0), partition(1, partitionId=1),
              partition(1, partitionId=0, topicId=other), topic]
    out = list(with_partition_blocks(values, lambda raw: ("generic", raw)))
    assert out[0] == ("generic", topic) and out[-1] == ("generic", topic)
    assert [type(x) for x in out[1:3]] == [PartitionBlock, PartitionBlock]
    assert (out[1].topic_id, sorted(out[1].partitions)) == (TOPIC, [0, 1])
    assert (out[2].topic_id, sorted(out[2].partitions)) == (other, [0])
    assert out[1].partitions[1] == generic(partition(1, partitionId=1))[2]


def test_a_list_running_past_its_tagged_field_is_an_error_both_ways():
    """ELR's list claims more ids than its tagged field holds: the generic reader, bounded by the
    field, refuses it; read straight it must not take the bytes after the field instead."""
    raw = bytearray(partition(2, eligibleLeaderReplicas=[3], lastKnownElr=[2, 3]))
    tags = raw.index(bytes([2, 1, 5]))  # two tagged fields; tag 1 of 5 bytes: a list of one id
    raw[tags + 3] = 3  # the list now claims two ids: 8 bytes in a field of 5
    with pytest.raises(ValueError):
        generic(bytes(raw))
    with pytest.raises(ValueError):
        PartitionReader().read(bytes(raw))
