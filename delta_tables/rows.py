"""From metadata records to table rows: which keys a record touches, and each key's row in an image.

The materialiser replays records into a MetadataImage (the same loader the controllers and brokers
use) and notes the keys each record touches. When it writes, every touched key is looked up in
the image: present, its row is upserted; absent (a deleted topic, an unregistered broker, a
deleted config), its row is deleted. So a PartitionChangeRecord, sparse by design, becomes the
partition's whole new row, and a table always equals the image at the offset it was written at.

The ``voters`` table works the same way over the voter set the log's control records give
(streaming/materializer.py follows it): a change touches the node ids whose voter differs.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Optional

import pyarrow as pa

from delta_tables.schemas import (
    ACLS,
    BROKERS,
    CONFIGS,
    PARTITIONS,
    SCHEMAS,
    STATE_TABLES,
    TOPICS,
    USERS,
    VOTERS,
    partition_bucket,
)
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.log.voter_set import ZERO_UUID, VoterSet
from quorum.metadata import change_block
from quorum.metadata.configs import BROKER, TOPIC, ConfigResource, is_sensitive
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import REDACTED, MetadataRecord, RecordType
from quorum.metadata.scram import MECHANISM_CODES, mechanism_name

Key = tuple


class TouchedKeys:
    """Keys of each state table touched since the last write, with the offset that touched them last."""

    def __init__(self) -> None:
        self.keys: dict[str, dict[Key, int]] = defaultdict(dict)

    def __bool__(self) -> bool:
        return any(self.keys.values())

    def clear(self) -> None:
        self.keys.clear()

    def note_all(self, image: MetadataImage, voters: Optional[VoterSet], offset: int) -> None:
        """Every key ``image`` and ``voters`` have (the image was replaced wholesale by a snapshot's:
        keys of the old one are noted too, so rows that are gone get deleted)."""
        for table in STATE_TABLES:
            for key in image_keys(table, image, voters):
                self.keys[table][key] = offset

    def note_voters(self, before: Optional[VoterSet], after: VoterSet, offset: int) -> None:
        """The node ids whose voter differs between two voter sets (added, removed or changed)."""
        old = before or VoterSet()
        for node_id in old.ids | after.ids:
            if old.get(node_id) != after.get(node_id):
                self.keys[VOTERS][(node_id,)] = offset

    def drop_written(self, applied: dict[str, int]) -> None:
        """Forget the keys each table already holds: those last touched at or below the offset
        its last commit covers (``applied``, by table)."""
        for table, keys in self.keys.items():
            done = [k for k, o in keys.items() if o <= applied.get(table, -1)]
            for k in done:
                del keys[k]

    def note(self, record: MetadataRecord, offset: int, before: MetadataImage) -> None:
        """Note what ``record`` at ``offset`` touches; ``before`` is the image it applies to (a
        removed topic's partitions and configs are found there)."""
        m, t = record.message, record.type
        if t is RecordType.TOPIC_RECORD:
            self.keys[TOPICS][(m.topic_id,)] = offset
        elif t is RecordType.PARTITION_RECORD:
            self.keys[PARTITIONS][(m.topic_id, m.partition_id)] = offset
            self.keys[TOPICS][(m.topic_id,)] = offset  # its partition count
        elif t is RecordType.PARTITION_CHANGE_RECORD:
            self.keys[PARTITIONS][(m.topic_id, m.partition_id)] = offset
        elif t is RecordType.PARTITION_CHANGE_BLOCK_RECORD:  # row i is the change at offset + i
            for i, key in enumerate(change_block.touched(m)):
                self.keys[PARTITIONS][key] = offset + i
        elif t is RecordType.REMOVE_TOPIC_RECORD:
            self.keys[TOPICS][(m.topic_id,)] = offset
            topic = before.topics.topic(m.topic_id)
            if topic is not None:
                for pid in topic.partitions:
                    self.keys[PARTITIONS][(m.topic_id, pid)] = offset
                for name in before.configs.configs(ConfigResource(TOPIC, topic.name)):
                    self.keys[CONFIGS][("TOPIC", topic.name, name)] = offset
            for key in [k for k in self.keys[PARTITIONS] if k[0] == m.topic_id]:
                self.keys[PARTITIONS][key] = offset  # created earlier in this unpublished stretch
        elif t is RecordType.CONFIG_RECORD:
            resource = ConfigResource(m.resource_type, m.resource_name)
            self.keys[CONFIGS][(resource.kind, m.resource_name, m.name)] = offset
        elif t in (RecordType.REGISTER_BROKER_RECORD, RecordType.UNREGISTER_BROKER_RECORD,
                   RecordType.BROKER_REGISTRATION_CHANGE_RECORD):
            self.keys[BROKERS][(m.broker_id,)] = offset
        elif t in (RecordType.ACCESS_CONTROL_ENTRY_RECORD, RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD):
            self.keys[ACLS][(m.id,)] = offset
        elif t in (RecordType.USER_SCRAM_CREDENTIAL_RECORD, RecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD):
            self.keys[USERS][(m.name, mechanism_name(m.mechanism))] = offset


def row(table: str, key: Key, image: MetadataImage, last_offset: int,
        voters: Optional[VoterSet] = None) -> Optional[dict[str, Any]]:
    """The row of ``key`` in ``table`` as of ``image`` (``voters`` for the voters table), or None if
    it does not exist there."""
    if table == TOPICS:
        topic = image.topics.topic(key[0])
        if topic is None:
            return None
        return {"topic_id": topic.topic_id, "name": topic.name, "partition_count": len(topic.partitions),
                "last_offset": last_offset}
    if table == PARTITIONS:
        topic = image.topics.topic(key[0])
        p = None if topic is None else topic.partitions.get(key[1])
        if p is None:
            return None
        return {"topic_id": topic.topic_id, "topic_name": topic.name, "partition": key[1],
                "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
                "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
                "adding_replicas": list(p.adding_replicas), "removing_replicas": list(p.removing_replicas),
                "last_offset": last_offset, "bucket": partition_bucket(topic.topic_id),
                "elr": list(p.elr), "last_known_elr": list(p.last_known_elr), "directories": list(p.directories)}
    if table == BROKERS:
        b = image.cluster.broker(key[0])
        if b is None:
            return None
        return {"broker_id": b.broker_id, "incarnation_id": b.incarnation_id, "broker_epoch": b.broker_epoch,
                "endpoints": [{"name": e.name, "host": e.host, "port": e.port,
                               "security_protocol": e.security_protocol_name} for e in b.endpoints],
                "rack": b.rack, "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
                "last_offset": last_offset, "log_dirs": list(b.log_dirs)}
    if table == CONFIGS:
        kind, name, config = key
        resource = ConfigResource(TOPIC if kind == "TOPIC" else BROKER, name)
        value = image.configs.value(resource, config)
        if value is None:
            return None
        if is_sensitive(config):  # a password-type config: never materialised, only that it is set
            value = REDACTED
        return {"resource_type": kind, "resource_name": name, "name": config, "value": value,
                "last_offset": last_offset}
    if table == ACLS:
        a = image.acls.acl(key[0])
        if a is None:
            return None
        return {"acl_id": a.id, "principal": a.principal, "host": a.host,
                "operation": pb.AclOperation.Code.Name(a.operation),
                "permission_type": pb.AclPermissionType.Code.Name(a.permission_type),
                "resource_type": pb.AclResourceType.Code.Name(a.resource_type), "resource_name": a.resource_name,
                "pattern_type": pb.PatternType.Code.Name(a.pattern_type), "last_offset": last_offset}
    if table == USERS:
        c = image.scram.credential(key[0], MECHANISM_CODES.get(key[1], -1))
        if c is None:
            return None
        return {"name": key[0], "mechanism": key[1], "iterations": c.iterations, "last_offset": last_offset}
    if table == VOTERS:
        v = None if voters is None else voters.get(key[0])
        if v is None:
            return None
        return {"node_id": v.key.id, "directory_id": v.key.directory_id or ZERO_UUID,
                "endpoints": [{"name": e.name, "host": e.host, "port": e.port} for e in v.endpoints],
                "last_offset": last_offset}
    raise ValueError(f"not a state table: {table}")


def rows_of(table: str, items: list[tuple[Key, int]], image: MetadataImage,
            voters: Optional[VoterSet] = None) -> pa.Table:
    """The rows of ``(key, last_offset)`` items that exist in ``image``, as ``table``'s Arrow table.
    The ``partitions`` rows are built a column at a time, each topic looked up once: a first
    materialisation writes 2,000,000 of them, which as ``row()`` dicts took 9 µs each."""
    if table != PARTITIONS:
        rows = [row(table, key, image, offset, voters) for key, offset in items]
        return pa.Table.from_pylist([r for r in rows if r is not None], schema=SCHEMAS[table])
    by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (topic_id, partition), offset in items:
        by_topic[topic_id].append((partition, offset))
    columns: dict[str, list] = {name: [] for name in SCHEMAS[PARTITIONS].names}
    for topic_id, partitions in by_topic.items():
        topic = image.topics.topic(topic_id)
        if topic is None:
            continue
        found = [(pid, offset, p) for pid, offset in partitions if (p := topic.partitions.get(pid)) is not None]
        columns["topic_id"] += [topic_id] * len(found)
        columns["topic_name"] += [topic.name] * len(found)
        columns["bucket"] += [partition_bucket(topic_id)] * len(found)
        columns["partition"] += [pid for pid, _, _ in found]
        columns["last_offset"] += [offset for _, offset, _ in found]
        for name in _PARTITION_FIELDS:
            columns[name] += [getattr(p, name) for _, _, p in found]
    return pa.Table.from_pydict(columns, schema=SCHEMAS[PARTITIONS])


# The columns of a partitions row that are a PartitionRegistration's fields of the same name.
_PARTITION_FIELDS = ("replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding_replicas",
                     "removing_replicas", "elr", "last_known_elr", "directories")


_UNSEEN = object()


def holds(table: str, image: MetadataImage) -> Callable[[Key], bool]:
    """Whether ``table`` has a row for a key as of ``image`` (not the voters table, which the image
    does not hold): for the two large tables cheaper than building the row, each topic looked up
    once (the materialiser asks for every key a micro-batch touched, 2,000,000 at a first one)."""
    if table == TOPICS:
        return lambda key: image.topics.topic(key[0]) is not None
    if table == PARTITIONS:
        topics: dict[str, Any] = {}  # topic id -> its partitions, None for a topic not there

        def partition_held(key: Key) -> bool:
            partitions = topics.get(key[0], _UNSEEN)
            if partitions is _UNSEEN:
                topic = image.topics.topic(key[0])
                partitions = topics[key[0]] = None if topic is None else topic.partitions
            return partitions is not None and key[1] in partitions
        return partition_held
    return lambda key: row(table, key, image, -1) is not None


def image_rows(table: str, image: MetadataImage, voters: Optional[VoterSet] = None) -> list[dict[str, Any]]:
    """Every row of ``table`` in ``image`` and ``voters`` (last_offset -1: unknown), for comparing a
    table with an image in tests and tools."""
    return [row(table, k, image, -1, voters) for k in image_keys(table, image, voters)]


def image_keys(table: str, image: MetadataImage, voters: Optional[VoterSet] = None) -> list[Key]:
    """The key of every row ``table`` has for ``image`` and ``voters``."""
    keys: list[Key]
    if table == TOPICS:
        keys = [(t,) for t in image.topics.by_id]
    elif table == PARTITIONS:
        keys = [(t.topic_id, p) for t in image.topics.by_id.values() for p in t.partitions]
    elif table == BROKERS:
        keys = [(b,) for b in image.cluster.brokers]
    elif table == CONFIGS:
        keys = [(r.kind, r.name, n) for r, values in image.configs.resources.items() for n in values]
    elif table == ACLS:
        keys = [(i,) for i in image.acls.acls]
    elif table == USERS:
        keys = [(user, mechanism_name(code)) for user, code in image.scram.credentials]
    elif table == VOTERS:
        keys = [(i,) for i in voters or ()]
    else:
        raise ValueError(f"not a state table: {table}")
    return keys
