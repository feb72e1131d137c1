"""sparkraft's metadata log in Apache Kafka's format: what an Apache Kafka broker fetches from
sparkraft's controllers (Fetch of ``__cluster_metadata``) and reads as if Kafka's controllers wrote it.

Encoded on the way out, one sparkraft batch to one Kafka record batch v2 with the same base offset,
leader epoch, append time and record count: every offset and epoch a Kafka broker sees is sparkraft's
own (docs/design/kafka-brokers.md says why this, rather than storing Kafka's format on disk).

What Kafka's brokers are told:

- **metadata.version** as it is, in Kafka's numbering (quorum/metadata/versions.py), and every
  record at the version Kafka's controller writes it at that level (``level``: the level in force
  where the record is in the log): log directories from 3.7-IV2, ELR fields from 4.0-IV1;
- a record sparkraft writes but Kafka's brokers have no use for (sparkraft.version, ZooKeeper
  migration), or one written by a newer sparkraft, goes out as a NoOpRecord, keeping its offset;
- control records (LeaderChange, KRaftVersion, KRaftVoters) in Kafka's messages, encoded with kio.
"""
from __future__ import annotations

import struct
import uuid
from typing import Callable, Iterable, Optional

import crc32c
from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0 import data as leader_change
from kio.schema.voters_record.v0 import data as voters
from kio.serial import entity_writer
from kio.static.primitive import i16, i32, u16

from quorum.gen.sparkraft.v1.metadata_pb2 import AuditRecord, LogHoldRecord
from quorum.kafka_log.gen.records import WRITERS
from quorum.kafka_log.wire import Writer, uuid_bytes
from quorum.log import batch as sparkraft_batch
from quorum.log import control_records
from quorum.metadata import change_block
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.records import SPARKRAFT_ONLY, MetadataRecord, RecordType, decode_record, record_type
from quorum.metadata.topics import MIGRATING
from quorum.metadata.versions import SPARKRAFT_VERSION, from_legacy, record_version
from quorum.snapshot.checkpoint import decode_checkpoint

NO_OP = int(RecordType.NO_OP_RECORD)
_REGISTRATION_CHANGE = int(RecordType.BROKER_REGISTRATION_CHANGE_RECORD)
# Kafka's Uuid.ZERO_UUID: what a record's missing id stands for
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_UNCHANGED_LEADER = -2
_FENCE, _UNFENCE = 1, -1
_HEADER = struct.Struct(">qiibIhiqqqhii")  # Kafka's record batch v2 header (quorum/kafka_log/batches.py)
_CRC_FROM = 21
_ATTR_CONTROL = 0x20
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version 0, its type


def _ids(message, field: str):
    return list(getattr(message, field).ids) if message.HasField(field) else None


def _opt(message, field: str):
    return getattr(message, field) if message.HasField(field) else None


def _register_broker(m) -> dict:
    return {"brokerId": m.broker_id, "incarnationId": m.incarnation_id or ZERO_UUID, "brokerEpoch": m.broker_epoch,
            "endPoints": [{"name": e.name, "host": e.host, "port": e.port, "securityProtocol": int(e.security_protocol)}
                          for e in m.endpoints],
            "features": [{"name": f.name, "minSupportedVersion": f.min_supported_version,
                          "maxSupportedVersion": f.max_supported_version} for f in m.features],
            "rack": _opt(m, "rack"), "fenced": m.fenced, "inControlledShutdown": m.in_controlled_shutdown,
            "logDirs": list(m.log_dirs),
            "cordonedLogDirs": list(m.cordoned_log_dirs.ids) if m.HasField("cordoned_log_dirs") else None}


def _register_controller(m) -> dict:
    return {"controllerId": m.controller_id, "incarnationId": m.incarnation_id or ZERO_UUID,
            "zkMigrationReady": m.zk_migration_ready,
            "endPoints": [{"name": e.name, "host": e.host, "port": e.port, "securityProtocol": int(e.security_protocol)}
                          for e in m.endpoints],
            "features": [{"name": f.name, "minSupportedVersion": f.min_supported_version,
                          "maxSupportedVersion": f.max_supported_version} for f in m.features]}


def _partition(m) -> dict:
    return {"partitionId": m.partition_id, "topicId": m.topic_id, "replicas": list(m.replicas), "isr": list(m.isr),
            "removingReplicas": list(m.removing_replicas), "addingReplicas": list(m.adding_replicas),
            "leader": m.leader, "leaderEpoch": m.leader_epoch, "partitionEpoch": m.partition_epoch,
            # not known: Kafka's MIGRATING for each replica, as its image reads a partition from before 3.7-IV2
            "directories": list(m.directories) or [MIGRATING] * len(m.replicas),
            "eligibleLeaderReplicas": list(m.eligible_leader_replicas) or None,
            "lastKnownElr": list(m.last_known_elr) or None}


def _partition_change(m) -> dict:
    leader = _opt(m, "leader")
    return {"partitionId": m.partition_id, "topicId": m.topic_id, "isr": _ids(m, "isr"),
            "leader": _UNCHANGED_LEADER if leader is None else leader, "replicas": _ids(m, "replicas"),
            "removingReplicas": _ids(m, "removing_replicas"), "addingReplicas": _ids(m, "adding_replicas"),
            "directories": _change_directories(m),
            "eligibleLeaderReplicas": _ids(m, "eligible_leader_replicas"), "lastKnownElr": _ids(m, "last_known_elr")}


def _change_directories(m):
    """Given; or, with new replicas and none given, MIGRATING for each (a Kafka broker's image must
    never keep directories of the old replicas: the image here reads them as not known too)."""
    if m.HasField("directories"):
        return list(m.directories.ids)
    return [MIGRATING] * len(m.replicas.ids) if m.HasField("replicas") else None


def _registration_change(m) -> dict:
    fenced = _opt(m, "fenced")
    return {"brokerId": m.broker_id, "brokerEpoch": m.broker_epoch,
            "fenced": 0 if fenced is None else (_FENCE if fenced else _UNFENCE),
            "inControlledShutdown": 1 if _opt(m, "in_controlled_shutdown") else 0,
            "logDirs": _ids(m, "log_dirs") or [], "cordonedLogDirs": _ids(m, "cordoned_log_dirs")}


def _b64(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode()


# sparkraft's record type -> its message as Kafka's fields (the names the generated readers, gen/records.py, give);
# a type sparkraft writes that is not here is a test failure (tests/unit/kafka_log/test_export.py)
TO_KAFKA: dict[RecordType, Callable[[object], dict]] = {
    RecordType.REGISTER_BROKER_RECORD: _register_broker,
    RecordType.UNREGISTER_BROKER_RECORD: lambda m: {"brokerId": m.broker_id, "brokerEpoch": m.broker_epoch},
    RecordType.TOPIC_RECORD: lambda m: {"name": m.name, "topicId": m.topic_id},
    RecordType.PARTITION_RECORD: _partition,
    RecordType.CONFIG_RECORD: lambda m: {"resourceType": int(m.resource_type), "resourceName": m.resource_name,
                                         "name": m.name, "value": _opt(m, "value")},
    RecordType.PARTITION_CHANGE_RECORD: _partition_change,
    RecordType.REMOVE_TOPIC_RECORD: lambda m: {"topicId": m.topic_id},
    RecordType.FEATURE_LEVEL_RECORD: lambda m: {"name": m.name, "featureLevel": from_legacy(m.feature_level)[0]
                                                if m.name == METADATA_VERSION else m.feature_level},
    RecordType.USER_SCRAM_CREDENTIAL_RECORD: lambda m: {
        "name": m.name, "mechanism": int(m.mechanism), "salt": _b64(m.salt), "storedKey": _b64(m.stored_key),
        "serverKey": _b64(m.server_key), "iterations": m.iterations},
    RecordType.CLIENT_QUOTA_RECORD: lambda m: {
        "entity": [{"entityType": e.entity_type, "entityName": _opt(e, "entity_name")} for e in m.entity],
        "key": m.key, "value": m.value, "remove": m.remove},
    RecordType.PRODUCER_IDS_RECORD: lambda m: {"brokerId": m.broker_id, "brokerEpoch": m.broker_epoch,
                                               "nextProducerId": m.next_producer_id},
    RecordType.BROKER_REGISTRATION_CHANGE_RECORD: _registration_change,
    RecordType.ACCESS_CONTROL_ENTRY_RECORD: lambda m: {
        "id": m.id, "resourceType": int(m.resource_type), "resourceName": m.resource_name,
        "patternType": int(m.pattern_type), "principal": m.principal, "host": m.host,
        "operation": int(m.operation), "permissionType": int(m.permission_type)},
    RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: lambda m: {"id": m.id},
    RecordType.NO_OP_RECORD: lambda m: {},
    RecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD: lambda m: {"name": m.name, "mechanism": int(m.mechanism)},
    RecordType.BEGIN_TRANSACTION_RECORD: lambda m: {"name": _opt(m, "name")},
    RecordType.END_TRANSACTION_RECORD: lambda m: {},
    RecordType.ABORT_TRANSACTION_RECORD: lambda m: {"reason": _opt(m, "reason")},
    RecordType.REGISTER_CONTROLLER_RECORD: _register_controller,
    RecordType.UNREGISTER_CONTROLLER_RECORD: lambda m: {"controllerId": m.controller_id},
}
# what Kafka's brokers are not told (sent as a NoOpRecord): ZooKeeper migration is a sparkraft
# controller's business, and a 4.x broker no longer reads the record; nor sparkraft's audit trail
# (who changed what is not Kafka's metadata, and its principals are not for every broker); nor
# sparkraft's own feature; nor a reader's hold on the log
NOT_SENT = frozenset({RecordType.ZK_MIGRATION_STATE_RECORD, RecordType.AUDIT_RECORD, RecordType.LOG_HOLD_RECORD})
NOT_SENT_FEATURES = frozenset({SPARKRAFT_VERSION})
_NOT_IN_KAFKA_SNAPSHOTS = (AuditRecord, LogHoldRecord)


def _registration_change_version(m) -> int:
    """As Kafka's controller writes a BrokerRegistrationChangeRecord: 0 for fencing, 1 for a
    controlled shutdown, 2 for log directories, 3 for cordoned ones (the fields each added)."""
    if m.HasField("cordoned_log_dirs"):
        return 3
    return 2 if m.HasField("log_dirs") else 1 if m.HasField("in_controlled_shutdown") else 0


def record_value(raw: bytes, level: int) -> bytes:
    """One sparkraft metadata record (``<type><version><protobuf>``) as a Kafka metadata record's value
    at metadata.version ``level``: ``uvarint frame version 1, uvarint api key, uvarint version``,
    then the message."""
    record = decode_record(raw)
    if not isinstance(record, MetadataRecord):  # written by a newer sparkraft: its place is kept
        return _NO_OP_VALUE
    return _value(record.type, record.message, level)


def message_value(message, level: int) -> bytes:
    """A metadata record's protobuf message (an image's, for a snapshot) as a Kafka record's value."""
    return _value(record_type(message), message, level)


_NO_OP_VALUE = bytes([1, NO_OP, 0, 0])  # NoOpRecord v0: frame 1, key 20, version 0, no tagged fields


def _value(kind: RecordType, message, level: int) -> bytes:
    if kind in NOT_SENT or kind is RecordType.FEATURE_LEVEL_RECORD and message.name in NOT_SENT_FEATURES:
        return _NO_OP_VALUE
    if kind in SPARKRAFT_ONLY:
        raise ValueError(f"a {kind.name} is sent as the PartitionChangeRecords it stands for: export its batch")
    key = int(kind)
    version = _registration_change_version(message) if key == _REGISTRATION_CHANGE else record_version(key, level)
    w = Writer()
    w.uvarint(1)
    w.uvarint(key)
    w.uvarint(version)
    WRITERS[key](w, TO_KAFKA[kind](message), version)
    return bytes(w.buf)


def _directory(text) -> "uuid.UUID | None":
    return None if text is None else uuid.UUID(bytes=uuid_bytes(text))


_WRITE_LEADER_CHANGE = entity_writer(leader_change.LeaderChangeMessage)
_WRITE_VOTERS = entity_writer(voters.VotersRecord)
_WRITE_KRAFT_VERSION = entity_writer(KRaftVersionRecord)


def _kio(write, message) -> bytes:
    import io

    buf = io.BytesIO()
    write(buf, message)
    return buf.getvalue()


def control_value(raw: bytes) -> tuple[bytes, bytes]:
    """One sparkraft control record as a Kafka control record's (key, value)."""
    c = control_records.decode_control(raw)
    d = c.data
    if c.type == control_records.LEADER_CHANGE:
        value = _kio(_WRITE_LEADER_CHANGE, leader_change.LeaderChangeMessage(
            version=i16(0), leader_id=i32(d["leader_id"]),
            voters=tuple(leader_change.Voter(voter_id=i32(v)) for v in d.get("voters", ())),
            granting_voters=tuple(leader_change.Voter(voter_id=i32(v)) for v in d.get("granting_voters", ()))))
    elif c.type == control_records.KRAFT_VERSION:
        value = _kio(_WRITE_KRAFT_VERSION, KRaftVersionRecord(version=i16(0), k_raft_version=i16(d["kraft_version"])))
    elif c.type == control_records.KRAFT_VOTERS:
        value = _kio(_WRITE_VOTERS, voters.VotersRecord(version=i16(0), voters=tuple(
            voters.Voter(voter_id=i32(v["id"]), voter_directory_id=_directory(v.get("directory_id")),
                         endpoints=tuple(voters.Endpoint(name=e["name"], host=e["host"], port=u16(e["port"]))
                                         for e in v.get("endpoints", ())),
                         k_raft_version_feature=voters.KRaftVersionFeature(min_supported_version=i16(0),
                                                                           max_supported_version=i16(1)))
            for v in d["voters"])))
    else:  # SNAPSHOT_HEADER / FOOTER live in snapshots, which are exported whole (snapshot_export.py)
        raise ValueError(f"a {c.type_name} control record in the log")
    return _CONTROL_KEY.pack(0, c.type), value


def encode_batch(base_offset: int, epoch: int, append_time_ms: int, records: Iterable[tuple], control: bool) -> bytes:
    """A Kafka record batch v2 of ``records`` ((key, value) pairs), uncompressed, outside any
    producer (producer id, epoch and sequence -1), every record at the batch's time."""
    body = Writer()
    count = 0
    for key, value in records:
        rec = Writer()
        rec.int8(0)  # attributes
        rec.varint(0)  # timestamp delta
        rec.varint(count)  # offset delta
        for part in (key, value):
            if part is None:
                rec.varint(-1)
            else:
                rec.varint(len(part))
                rec.buf += part
        rec.varint(0)  # headers
        body.varint(len(rec.buf))
        body.buf += rec.buf
        count += 1
    attributes = _ATTR_CONTROL if control else 0
    header = _HEADER.pack(base_offset, _HEADER.size - 12 + len(body.buf), epoch, 2, 0, attributes, count - 1,
                          append_time_ms, append_time_ms, -1, -1, -1, count)
    out = bytearray(header)
    out += body.buf
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[_CRC_FROM:])))
    return bytes(out)


def export_batch(batch: sparkraft_batch.Batch, level: int) -> bytes:
    """One sparkraft batch as Kafka's record batch at metadata.version ``level``: same offsets, epoch
    and time."""
    if batch.control:
        records = [control_value(r) for r in batch.records]
    else:
        # a partition change block goes out as the PartitionChangeRecords it stands for, one per offset
        records = [(None, record_value(r, level)) for r in change_block.unblocked(batch.records)]
    return encode_batch(batch.base_offset, batch.epoch, batch.append_time_ms, records, batch.control)


LevelAt = Callable[[int], int]  # an offset -> the metadata.version in force there (its batch's records' level)


def export_batches(data: bytes, level_at: LevelAt, cache: "ExportCache | None" = None,
                   max_bytes: Optional[int] = None) -> bytes:
    """sparkraft's encoded batches (a Fetch answer's ``records``) as Kafka's record batches, each at the
    metadata.version ``level_at(its base offset)``; through ``cache`` when given, so that several
    Kafka brokers fetching the same batches cost one export. ``max_bytes``: whole batches up to that
    many bytes of Kafka's format (which takes more bytes than sparkraft's), and always the first."""
    if cache is None:
        exported = (export_batch(b, level_at(b.base_offset)) for b in sparkraft_batch.decode(data, verify=False))
    else:
        exported = (cache.export(data, h, level_at(h.base_offset)) for h in sparkraft_batch.scan(data, verify=False))
    if max_bytes is None:
        return b"".join(exported)
    kept, size = [], 0
    for batch in exported:
        if kept and size + len(batch) > max_bytes:
            break
        kept.append(batch)
        size += len(batch)
    return b"".join(kept)


class ExportCache:
    """Exported batches by (base offset, epoch, record count), the newest ``max_bytes`` of them kept.
    Raft's log matching makes that key name one batch for good: a batch truncated away (a deposed
    leader's tail) can only come back as another epoch's."""

    def __init__(self, max_bytes: int = 64 << 20):
        import collections
        import threading

        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._batches: "collections.OrderedDict[tuple, bytes]" = collections.OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    def export(self, data: bytes, header, level: int) -> bytes:
        key = (header.base_offset, header.epoch, header.count, level)
        with self._lock:
            found = self._batches.get(key)
            if found is not None:
                self._batches.move_to_end(key)
                self.hits += 1
                return found
        exported = export_batch(sparkraft_batch.decode_one(data, header), level)
        with self._lock:
            self.misses += 1
            if key not in self._batches:
                self._batches[key] = exported
                self._bytes += len(exported)
                while self._bytes > self.max_bytes and len(self._batches) > 1:
                    _key, dropped = self._batches.popitem(last=False)
                    self._bytes -= len(dropped)
        return exported


# --- snapshots ------------------------------------------------------------------------------------

_SNAPSHOT_HEADER, _SNAPSHOT_FOOTER = 3, 4
SNAPSHOT_RECORDS_PER_BATCH = 2000


def _snapshot_header(last_contained_ms: int) -> tuple[bytes, bytes]:
    from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
    from kio.static.primitive import i64

    value = _kio(entity_writer(SnapshotHeaderRecord), SnapshotHeaderRecord(
        version=i16(0), last_contained_log_timestamp=i64(last_contained_ms)))
    return _CONTROL_KEY.pack(0, _SNAPSHOT_HEADER), value


def _snapshot_footer() -> tuple[bytes, bytes]:
    from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord

    return _CONTROL_KEY.pack(0, _SNAPSHOT_FOOTER), _kio(entity_writer(SnapshotFooterRecord),
                                                       SnapshotFooterRecord(version=i16(0)))


def export_snapshot(checkpoint: bytes, epoch: int, last_contained_ms: int = 0) -> bytes:
    """A sparkraft snapshot (the checkpoint format of quorum/snapshot/checkpoint.py) as Kafka's
    ``.checkpoint``: a SnapshotHeader batch, the quorum's KRaftVersion and KRaftVoters (if the
    snapshot holds them), the image's records in batches, a SnapshotFooter batch; offsets from 0.
    A checkpoint packs each topic's partitions in one record: they go out one PartitionRecord each,
    as Kafka's image writes them."""
    _header, image = decode_checkpoint(checkpoint)
    level = image.features.metadata_version or 0
    raft_records = [r for r in sparkraft_batch.decode(checkpoint)[0].records[1:]]
    out, offset = [], 0

    def put(records: list, control: bool) -> None:
        nonlocal offset
        out.append(encode_batch(offset, epoch, last_contained_ms, records, control))
        offset += len(records)

    put([_snapshot_header(last_contained_ms)], True)
    if raft_records:
        put([control_value(r) for r in raft_records], True)
    batch: list = []
    for message in image.records():
        if isinstance(message, _NOT_IN_KAFKA_SNAPSHOTS):  # the audit chain's head, log holds: nothing of Kafka's
            continue
        batch.append((None, message_value(message, level)))
        if len(batch) == SNAPSHOT_RECORDS_PER_BATCH:
            put(batch, False)
            batch = []
    if batch:
        put(batch, False)
    put([_snapshot_footer()], True)
    return b"".join(out)
