"""Kafka's PartitionRecords read straight into the image's partitions, a topic's run at a time.

Nearly every record of a large Kafka snapshot is a PartitionRecord (2,000,000 of 2,020,000 in
``bench kafka_snapshot``'s). Read the generic way (Kafka's JSON-like reading of each record, then
sparkraft's protobuf message, then the image's registration) each one costs ~45 µs of Python: most
of the 92 s a 2M snapshot took. :class:`PartitionReader` reads the record's fixed layout with a few
``struct`` unpacks into a :class:`PartitionRegistration`, sharing the replica lists a cluster
repeats (log directories are skipped, as the generic way drops them), and
:func:`with_partition_blocks` hands a run of one topic's partitions to the image loader whole (as
a checkpoint's PartitionBlock). A record it does not read this way (another type, a version newer
than 2, a varint longer than a byte) goes the generic way, so both read every record alike
(tests/unit/test_kafka_partitions.py; tests/integration/test_kafka_log_files.py on Kafka's bytes).
"""
from __future__ import annotations

import struct
from typing import Iterable, Iterator, Optional, Union

from quorum.kafka_log.wire import uuid_text
from quorum.metadata.partition_block import PartitionBlock
from quorum.metadata.records import AnyRecord
from quorum.metadata.topics import PartitionRegistration, broker_list

FRAME_VERSION = 1
PARTITION_RECORD = 3  # Kafka's api key of PartitionRecord
NEWEST_VERSION = 2  # v1: log directories (KIP-858); v2: ELR in tagged fields 1 and 2 (KIP-966)
_HEAD = struct.Struct(">i16s")  # partition id, topic id
_TAIL = struct.Struct(">iii")  # leader, leader epoch, partition epoch
_INTS = [struct.Struct(f">{n}i") for n in range(127)]  # a list of n broker ids (n + 1 in one varint byte)
_new_registration = tuple.__new__  # PartitionRegistration is a NamedTuple: without __new__'s overhead


class _Generic(Exception):
    """The record is read the generic way (a layout this reader does not take)."""


class PartitionReader:
    """Reads PartitionRecord values; remembers topic ids as Kafka's text."""

    def __init__(self) -> None:
        self._uuids: dict[bytes, str] = {}

    def _uuid(self, raw: bytes) -> str:
        text = self._uuids.get(raw)
        if text is None:
            text = self._uuids[raw] = uuid_text(raw)
        return text

    def read(self, value: bytes) -> Optional[tuple[str, int, PartitionRegistration]]:
        """(topic id, partition id, registration) of a PartitionRecord value; None for any other
        record or layout (read those the generic way). ValueError if the bytes are damaged."""
        if len(value) < 3 or value[0] != FRAME_VERSION or value[1] != PARTITION_RECORD or value[2] > NEWEST_VERSION:
            return None
        try:
            return self._read(value, value[2])
        except _Generic:
            return None
        except (IndexError, struct.error) as e:
            raise ValueError(f"a PartitionRecord cut short or damaged ({e})") from None

    def _read(self, value: bytes, version: int) -> tuple[str, int, PartitionRegistration]:
        partition_id, raw_topic = _HEAD.unpack_from(value, 3)
        pos = 23
        lists = []
        for _ in range(4):  # replicas, isr, removing, adding
            ids, pos = _int32s(value, pos)
            lists.append(ids)
        leader, leader_epoch, partition_epoch = _TAIL.unpack_from(value, pos)
        pos += 12
        if version >= 1:  # log directories: dropped, as the generic way does (quorum/kafka_import/records.py)
            n = value[pos] - 1
            if n >= 0x7F:
                raise _Generic
            pos += 1 + 16 * max(n, 0)
            if pos > len(value):
                raise IndexError("directories past the end")
        elr = last_known = ()
        tags = value[pos]
        if tags >= 0x80:
            raise _Generic
        pos += 1
        for _ in range(tags):
            tag, size = value[pos], value[pos + 1]
            if tag >= 0x80 or size >= 0x80:
                raise _Generic
            start, pos = pos + 2, pos + 2 + size
            if pos > len(value):
                raise IndexError("a tagged field past the end")
            if version >= 2 and tag in (1, 2):
                ids, after = _int32s(value, start)
                if after > pos:  # the array runs past its field, as the generic reader refuses too
                    raise IndexError(f"tagged field {tag}'s list runs past the field")
                if tag == 1:
                    elr = ids
                else:
                    last_known = ids
        replicas, isr, removing, adding = lists
        return self._uuid(raw_topic), partition_id, _new_registration(PartitionRegistration, (
            broker_list(replicas), broker_list(isr), broker_list(removing) if removing else (),
            broker_list(adding) if adding else (), leader, leader_epoch, partition_epoch,
            broker_list(elr) if elr else (), broker_list(last_known) if last_known else (), ()))


def _int32s(value: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """A compact array of int32 at ``pos`` (null read as empty) and the position after it."""
    n = value[pos] - 1
    if n >= 0x7F:
        raise _Generic
    if n <= 0:
        return (), pos + 1
    return _INTS[n].unpack_from(value, pos + 1), pos + 1 + 4 * n


def with_partition_blocks(values: Iterable[bytes], generic) -> Iterator[Union[PartitionBlock, AnyRecord]]:
    """Metadata record values as what ``image_from_records`` loads: each run of one topic's
    PartitionRecords as one PartitionBlock, every other record as ``generic(value)`` makes it."""
    reader = PartitionReader()
    topic_id, partitions = None, {}
    for value in values:
        read = reader.read(value)
        if read is None:
            if partitions:
                yield PartitionBlock(topic_id, partitions)
                topic_id, partitions = None, {}
            yield generic(value)
            continue
        if read[0] != topic_id and partitions:
            yield PartitionBlock(topic_id, partitions)
            partitions = {}
        topic_id = read[0]
        partitions[read[1]] = read[2]
    if partitions:
        yield PartitionBlock(topic_id, partitions)
