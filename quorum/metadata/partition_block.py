"""A topic's partitions as one columnar record: how checkpoints store nearly all of a large image.

A 2,000,000-partition image is 2,000,000 PartitionRecords; decoding and dispatching each one in
Python is what made loading a snapshot take ~9 s. In a checkpoint body (snapshots, the broker
cache; never in the log) every topic's partitions go into ONE record instead::

    u16 type = PARTITION_BLOCK, u16 version = 0,
    u16 topic id length, topic id (UTF-8),
    u16 list count, then each broker id list: u8 length, length x i32
    u32 partition count, then per partition 10 x i32:
        partition id, leader, leader epoch, partition epoch,
        replicas, isr, removing, adding, elr, last known elr (each an index into the lists above)

Version 0 blocks (written before ELR) have 8 x i32 rows, without the last two; they are still read.
A block holds no log directories: a topic whose partitions have some is checkpointed as
PartitionRecords instead (quorum/snapshot/checkpoint.py).

A cluster has few distinct replica lists, so they are stored once per topic and the partitions
are fixed-size rows that ``struct.iter_unpack`` reads at C speed. The type id is outside Kafka's
record types; ``dump-log`` prints a block as one record holding its partitions' PartitionRecord
JSON.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Mapping

from quorum.metadata.records import HEADER, MetadataRecord, RecordType, to_json
from quorum.metadata.topics import PartitionRegistration, broker_list

PARTITION_BLOCK = 0x7E00  # a checkpoint-only record type
VERSION = 1
_U16, _U32, _I32 = struct.Struct(">H"), struct.Struct(">I"), struct.Struct(">i")
_ROW = struct.Struct(">10i")
_ROW_V0 = struct.Struct(">8i")
_LIST = [struct.Struct(f">{k}i") for k in range(256)]  # a list of k broker ids (k is one byte)
_new_registration = tuple.__new__  # PartitionRegistration is a NamedTuple: build it without __new__'s overhead


@dataclass(frozen=True, slots=True)
class PartitionBlock:
    topic_id: str
    partitions: dict[int, PartitionRegistration]


def is_block(raw: bytes | memoryview) -> bool:
    return len(raw) >= HEADER.size and HEADER.unpack_from(raw)[0] == PARTITION_BLOCK


def encode_block(topic_id: str, partitions: Mapping[int, PartitionRegistration]) -> bytes:
    lists: dict[tuple[int, ...], int] = {}

    def index(ids: tuple[int, ...]) -> int:
        i = lists.get(ids)
        if i is None:
            i = lists[ids] = len(lists)
        return i

    rows = [_ROW.pack(pid, p.leader, p.leader_epoch, p.partition_epoch, index(p.replicas), index(p.isr),
                      index(p.removing_replicas), index(p.adding_replicas), index(p.elr), index(p.last_known_elr))
            for pid, p in sorted(partitions.items())]
    tid = topic_id.encode()
    parts = [HEADER.pack(PARTITION_BLOCK, VERSION), _U16.pack(len(tid)), tid, _U16.pack(len(lists))]
    for ids in lists:
        parts.append(bytes([len(ids)]) + struct.pack(f">{len(ids)}i", *ids))
    parts.append(_U32.pack(len(rows)))
    parts.extend(rows)
    return b"".join(parts)


def decode_block(raw: bytes) -> PartitionBlock:
    """ValueError if ``raw`` is not a well-formed block."""
    try:
        type_id, version = HEADER.unpack_from(raw)
        if type_id != PARTITION_BLOCK or version not in (0, VERSION):
            raise ValueError(f"not a version 0-{VERSION} partition block (type {type_id}, version {version})")
        pos = HEADER.size
        (n,) = _U16.unpack_from(raw, pos)
        topic_id = bytes(raw[pos + 2:pos + 2 + n]).decode()
        pos += 2 + n
        (count,) = _U16.unpack_from(raw, pos)
        pos += 2
        lists = []
        for _ in range(count):  # as many lists as partitions, often: precompiled structs keep it lean
            k = raw[pos]
            lists.append(broker_list(_LIST[k].unpack_from(raw, pos + 1)))
            pos += 1 + 4 * k
        (rows,) = _U32.unpack_from(raw, pos)
        pos += 4
        body = raw[pos:]
        row = _ROW if version == VERSION else _ROW_V0
        if len(body) != rows * row.size:
            raise ValueError(f"a partition block of {rows} partitions has {len(body)} bytes of rows")
        cls = PartitionRegistration
        if version == VERSION:
            partitions = {pid: _new_registration(cls, (lists[r], lists[i], lists[rm], lists[ad], leader, le, pe,
                                                       lists[el], lists[lk], ()))
                          for pid, leader, le, pe, r, i, rm, ad, el, lk in row.iter_unpack(body)}
        else:
            partitions = {pid: _new_registration(cls, (lists[r], lists[i], lists[rm], lists[ad], leader, le, pe,
                                                       (), (), ()))
                          for pid, leader, le, pe, r, i, rm, ad in row.iter_unpack(body)}
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"a damaged partition block: {e}") from None
    return PartitionBlock(topic_id, partitions)


def block_json(raw: bytes) -> dict:
    """What ``dump-log`` prints for a block: its partitions as PartitionRecord JSON."""
    block = decode_block(raw)
    return {"type": "PARTITION_BLOCK", "version": VERSION, "data": {
        "topic_id": block.topic_id,
        "partitions": [to_json(MetadataRecord(RecordType.PARTITION_RECORD, 0, p.to_record(block.topic_id, pid)))["data"]
                       for pid, p in sorted(block.partitions.items())]}}
