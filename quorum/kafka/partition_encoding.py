"""Metadata's topics and partitions encoded with ``struct``: the one loop kio's writer is too slow
for. kio writes a partition in ~12 µs (its writer is Python, field by field), so the first
whole-cluster answer at 2,000,000 partitions took 25 s; one ``Struct.pack`` per partition, its
layout made once per version and shape, is several times cheaper.

Only the partitions are laid out here, from Kafka's MetadataResponse schema: error_code (int16),
partition_index, leader_id (int32), leader_epoch (int32, v7+), replica_nodes, isr_nodes,
offline_replicas (v5+) as int32 arrays (compact, with a length + 1, in the flexible versions v9+,
which also end each partition with an empty tagged-field count). The topic around them is written
by kio's own field writers. A test compares the bytes with kio's, for every version.
"""
from __future__ import annotations

import struct
from typing import Optional

from quorum.kafka.codec import around, array_length, encode_entity, materialize, nested_type

FLEXIBLE_FROM = 9  # Metadata v9+ is flexible
LEADER_EPOCH_FROM = 7
OFFLINE_REPLICAS_FROM = 5


def _layout(version: int, replicas: int, isr: int, offline: int) -> Optional[struct.Struct]:
    """The Struct of one partition with arrays of these lengths (None: a compact length that needs
    more than one varint byte, left to kio)."""
    flexible = version >= FLEXIBLE_FROM
    fmt = ">hii" + ("i" if version >= LEADER_EPOCH_FROM else "")
    arrays = (replicas, isr) + ((offline,) if version >= OFFLINE_REPLICAS_FROM else ())
    for n in arrays:
        if flexible and n + 1 > 127:
            return None
        fmt += ("B" if flexible else "i") + f"{n}i"
    return struct.Struct(fmt + ("B" if flexible else ""))


_LAYOUTS: dict[int, dict] = {}  # version -> {(replicas, isr, offline) lengths: _layout's answer}
MAX_SHAPES = 1024  # per version: shapes are few (replica counts), but what is kept stays bounded


def _layouts(version: int) -> dict:
    """The shapes met so far in ``version`` and their Structs (None: left to kio)."""
    layouts = _LAYOUTS.setdefault(version, {})
    if len(layouts) > MAX_SHAPES:
        layouts.clear()
    return layouts


def partitions_bytes(version: int, partitions: list[tuple]) -> list[Optional[bytes]]:
    """Each partition (error, index, leader, epoch, replicas, isr, offline) as Metadata ``version``
    encodes it, or None where kio must write it. One call per topic, the version's branch taken
    once: at 2,000,000 partitions a function call per partition is a second of its own."""
    layouts = _layouts(version)
    out: list[Optional[bytes]] = []
    append = out.append
    if version >= FLEXIBLE_FROM:  # compact lengths (+ 1), then no tagged fields
        for error, index, leader, epoch, replicas, isr, offline in partitions:
            shape = (len(replicas), len(isr), len(offline))
            layout = layouts[shape] if shape in layouts else layouts.setdefault(shape, _layout(version, *shape))
            if layout is None:
                append(None)
                continue
            append(layout.pack(error, index, leader, epoch, shape[0] + 1, *replicas, shape[1] + 1, *isr,
                               shape[2] + 1, *offline, 0))
        return out
    for error, index, leader, epoch, replicas, isr, offline in partitions:
        shape = (len(replicas), len(isr), len(offline))
        layout = layouts[shape] if shape in layouts else layouts.setdefault(shape, _layout(version, *shape))
        if version >= LEADER_EPOCH_FROM:
            append(layout.pack(error, index, leader, epoch, shape[0], *replicas, shape[1], *isr, shape[2], *offline))
        elif version >= OFFLINE_REPLICAS_FROM:
            append(layout.pack(error, index, leader, shape[0], *replicas, shape[1], *isr, shape[2], *offline))
        else:
            append(layout.pack(error, index, leader, shape[0], *replicas, shape[1], *isr))
    return out


def topic_bytes(topic_cls, version: int, topic: dict, partitions: list[tuple]) -> bytes:
    """``topic`` (the topic's fields but its partitions, as a dict) with ``partitions`` (each as
    :func:`partitions_bytes` takes them) as Metadata ``version`` encodes it."""
    before, after = around(materialize(topic_cls, {**topic, "partitions": []}), "partitions")
    partition_cls = nested_type(topic_cls, "partitions")
    parts = [before, array_length(topic_cls.__flexible__, len(partitions))]
    packed = partitions_bytes(version, partitions)
    if None not in packed:
        return b"".join((*parts, *packed, after))
    for p, data in zip(partitions, packed):
        if data is None:  # an array too long for one varint byte: kio writes it
            error, index, leader, epoch, replicas, isr, offline = p
            data = encode_entity(materialize(partition_cls, {
                "error_code": error, "partition_index": index, "leader_id": leader, "leader_epoch": epoch,
                "replica_nodes": replicas, "isr_nodes": isr, "offline_replicas": offline}))
        parts.append(data)
    parts.append(after)
    return b"".join(parts)
