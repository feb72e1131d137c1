"""Metadata records: Kafka's type ids, protobuf payloads, a 4-byte frame, and a JSON form.

One record inside a quorum batch is ``<u16 type id><u16 version><protobuf payload>`` (big endian).
The type id says which message the payload is (Kafka's ``apiKey``s, so the ids mean what they mean
in Kafka's tools and docs); the version says which revision of the message the writer used.
Protobuf gives the compatibility rules for free: a new field is optional and an old reader skips
it, so a record of any version decodes (its version is kept; unknown fields survive re-encoding).
A type id this reader does not know decodes to an ``UnknownRecord`` instead of failing: it was
written by a newer node, and the image ignores it (a newer metadata.version gates such records).

Corruption is caught by the batch CRC one layer down; ``DecodeError`` here means a frame that cannot
be a record at all (too short, or a payload protobuf cannot parse).
"""
from __future__ import annotations

import base64
import copy
import math
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Union

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError as _ProtobufDecodeError
from google.protobuf.message import Message

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.configs import is_sensitive
from quorum.uuids import validate_uuid

HEADER = struct.Struct(">HH")  # type id, version


class RecordType(IntEnum):
    """Kafka's metadata record type ids (``apiKey`` in metadata/src/main/resources/common/metadata),
    and two of sparkraft's own beyond Kafka's range (a block of partition changes).

    The protobuf message of each is the name in CamelCase (``TOPIC_RECORD`` -> ``TopicRecord``).
    Kafka's obsolete FENCE_BROKER_RECORD (7) and UNFENCE_BROKER_RECORD (8) are not used:
    BROKER_REGISTRATION_CHANGE_RECORD replaced them.
    """

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    REMOVE_TOPIC_RECORD = 9
    FEATURE_LEVEL_RECORD = 12
    USER_SCRAM_CREDENTIAL_RECORD = 11
    CLIENT_QUOTA_RECORD = 14
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    ACCESS_CONTROL_ENTRY_RECORD = 18
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
    NO_OP_RECORD = 20
    ZK_MIGRATION_STATE_RECORD = 21
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
    BEGIN_TRANSACTION_RECORD = 23
    END_TRANSACTION_RECORD = 24
    ABORT_TRANSACTION_RECORD = 25
    REGISTER_CONTROLLER_RECORD = 27
    UNREGISTER_CONTROLLER_RECORD = 29
    # sparkraft's own, outside Kafka's ids (quorum/metadata/change_block.py): never sent to Kafka
    PARTITION_CHANGE_BLOCK_RECORD = 0x7E01
    PARTITION_CHANGE_BLOCK_CONTINUATION_RECORD = 0x7E02
    AUDIT_RECORD = 0x7E03  # who changed what (quorum/controller/audit.py): Kafka's brokers get a NoOp
    LOG_HOLD_RECORD = 0x7E04  # a reader holds the log from an offset (quorum/controller/log_holds.py)

    @property
    def message_class(self) -> type[Message]:
        return _MESSAGE_CLASS[self]


# sparkraft's own record types: Kafka's log never holds them. What Kafka's brokers are sent or the
# lakehouse shows of a block is the PartitionChangeRecords it stands for; of an audit entry, a NoOp.
SPARKRAFT_ONLY = frozenset({RecordType.PARTITION_CHANGE_BLOCK_RECORD,
                            RecordType.PARTITION_CHANGE_BLOCK_CONTINUATION_RECORD, RecordType.AUDIT_RECORD,
                            RecordType.LOG_HOLD_RECORD})


_MESSAGE_CLASS: dict[RecordType, type[Message]] = {
    t: getattr(pb, "".join(word.capitalize() for word in t.name.split("_"))) for t in RecordType
}
_TYPE_OF: dict[type[Message], RecordType] = {cls: t for t, cls in _MESSAGE_CLASS.items()}
_BY_ID: dict[int, RecordType] = {int(t): t for t in RecordType}  # faster than RecordType(id)

# The version this code writes. Bump one when a writer starts filling a field added to its message.
WRITE_VERSION: dict[RecordType, int] = {t: 0 for t in RecordType}

# Fields holding Kafka Uuids (22 base64url characters); checked before a record is written.
_UUID_FIELDS: dict[RecordType, tuple[str, ...]] = {
    RecordType.REGISTER_BROKER_RECORD: ("incarnation_id",),
    RecordType.REGISTER_CONTROLLER_RECORD: ("incarnation_id",),
    RecordType.TOPIC_RECORD: ("topic_id",),
    RecordType.PARTITION_RECORD: ("topic_id",),
    RecordType.PARTITION_CHANGE_RECORD: ("topic_id",),
    RecordType.REMOVE_TOPIC_RECORD: ("topic_id",),
    RecordType.PARTITION_CHANGE_BLOCK_RECORD: ("topic_ids",),
    RecordType.ACCESS_CONTROL_ENTRY_RECORD: ("id",),
    RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: ("id",),
}


# Fields that hold credentials, and a password-type config's value (Kafka's ConfigDef.Type.PASSWORD,
# by the config's name). Their JSON form (dump-log, the records table, the shell) says "(redacted)",
# as Kafka's tools print them, and ``redacted()`` clears them in a record's copy.
SENSITIVE_FIELDS: dict[RecordType, tuple[str, ...]] = {
    RecordType.USER_SCRAM_CREDENTIAL_RECORD: ("salt", "stored_key", "server_key"),
    RecordType.CONFIG_RECORD: ("value",),  # only where sensitive_fields says so
}
REDACTED = "(redacted)"


def sensitive_fields(record: "AnyRecord") -> tuple[str, ...]:
    """The fields of ``record`` that must not leave the log: a SCRAM credential's, the value of a
    password-type config that is set."""
    fields = SENSITIVE_FIELDS.get(getattr(record, "type", None), ())
    if fields and record.type is RecordType.CONFIG_RECORD:
        m = record.message
        return fields if m.HasField("value") and is_sensitive(m.name) else ()
    return fields


class DecodeError(ValueError):
    """The bytes are not a metadata record frame."""


@dataclass(slots=True)
class MetadataRecord:
    """A decoded record: which type, which version of it, and the protobuf message (shared, not
    copied: treat it as read-only; not a frozen dataclass only because one is made for every record
    replayed, and a frozen one costs twice as much to make)."""

    type: RecordType
    version: int
    message: Message

    @property
    def type_name(self) -> str:
        return self.type.name

    @property
    def type_id(self) -> int:
        return int(self.type)


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record of a type this reader does not know (a newer writer's); kept as raw bytes."""

    type_id: int
    version: int
    payload: bytes

    @property
    def type_name(self) -> str:
        return f"UNKNOWN_RECORD_{self.type_id}"


AnyRecord = Union[MetadataRecord, UnknownRecord]


def record_type(message: Message) -> RecordType:
    """The type id of a record message; TypeError for a message that is not a metadata record."""
    try:
        return _TYPE_OF[type(message)]
    except KeyError:
        raise TypeError(f"{type(message).__name__} is not a metadata record message") from None


def as_record(record: Message | AnyRecord) -> AnyRecord:
    """``record`` as a MetadataRecord (a bare message gets this writer's version)."""
    if isinstance(record, (MetadataRecord, UnknownRecord)):
        return record
    t = record_type(record)
    return MetadataRecord(t, WRITE_VERSION[t], record)


def redacted(record: AnyRecord) -> AnyRecord:
    """``record`` with its credential fields cleared (itself if it has none): what may leave the log
    for places that must not hold secrets, such as the ``records`` table's raw column."""
    fields = sensitive_fields(record)
    if not fields:
        return record
    message = copy.copy(record.message)
    for name in fields:
        if record.type is RecordType.CONFIG_RECORD:  # an unset value would read as the config deleted
            setattr(message, name, REDACTED)
        else:
            message.ClearField(name)
    return MetadataRecord(record.type, record.version, message)


def validate(record: MetadataRecord) -> None:
    """Raise ValueError if a field holding an id is not a Kafka Uuid string."""
    for name in _UUID_FIELDS.get(record.type, ()):
        value = getattr(record.message, name)
        for one in ([value] if isinstance(value, str) else value):
            validate_uuid(one, f"{record.type_name} {name}")


# -- bytes ------------------------------------------------------------------------------------
def encode_record(record: Message | AnyRecord) -> bytes:
    """The frame of one record. A bare message is written at this writer's version."""
    record = as_record(record)
    if isinstance(record, UnknownRecord):
        return HEADER.pack(record.type_id, record.version) + record.payload
    validate(record)
    return HEADER.pack(record.type, record.version) + record.message.SerializeToString()


def decode_record(data: bytes | bytearray | memoryview) -> AnyRecord:
    """One record from its frame; DecodeError if it cannot be one."""
    if len(data) < HEADER.size:
        raise DecodeError(f"a metadata record frame needs at least {HEADER.size} bytes, got {len(data)}")
    type_id, version = HEADER.unpack_from(data)
    payload = bytes(data[HEADER.size:])
    t = _BY_ID.get(type_id)
    if t is None:
        return UnknownRecord(type_id, version, payload)
    message = _MESSAGE_CLASS[t]()
    try:
        message.ParseFromString(payload)
    except _ProtobufDecodeError as e:
        raise DecodeError(f"cannot parse a {t.name} (version {version}) payload of "
                          f"{len(payload)} bytes: {e}") from None
    return MetadataRecord(t, version, message)


# -- JSON -------------------------------------------------------------------------------------
def to_json(record: Message | AnyRecord) -> dict[str, Any]:
    """``{"type": "TOPIC_RECORD", "version": 0, "data": {...}}`` with proto field names.

    Protobuf's JSON mapping, with two changes: 64-bit ints are JSON numbers, and broker id lists
    plain arrays. Every field without presence is shown (zeros included), fields with presence only
    when set (an absent PartitionChangeRecord field means "unchanged"), in the .proto's order; enums
    by Kafka's names; bytes in base64. An unknown record shows its payload in base64. Credential
    fields (SENSITIVE_FIELDS) show as "(redacted)".
    """
    record = as_record(record)
    if isinstance(record, UnknownRecord):
        data: dict[str, Any] = {"payload": base64.b64encode(record.payload).decode()}
    else:
        data = _plain(record.message)
        for name in sensitive_fields(record):
            data[name] = REDACTED
    return {"type": record.type_name, "version": record.version, "data": data}


def _plain(message: Message) -> dict[str, Any]:
    """A message's JSON form (see ``to_json``). The per-field work is decided once per message type
    (``_json_fields``): every record of a first materialisation passes here, and protobuf's own
    ``MessageToDict`` took a quarter of it."""
    out: dict[str, Any] = {}
    for name, presence, convert in _json_fields(message.DESCRIPTOR):
        if presence and not message.HasField(name):
            continue
        value = getattr(message, name)
        out[name] = value if convert is None else convert(value)
    return out


_JSON_FIELDS: dict[Descriptor, tuple] = {}


def _json_fields(descriptor: Descriptor) -> tuple:
    """``(name, has presence, converter or None)`` for each field of ``descriptor``, in order."""
    fields = _JSON_FIELDS.get(descriptor)
    if fields is None:
        fields = _JSON_FIELDS[descriptor] = tuple(
            (f.name, f.has_presence, _repeated(_converter(f)) if f.is_repeated else _converter(f))
            for f in descriptor.fields)
    return fields


def _repeated(convert):
    return list if convert is None else (lambda values: [convert(v) for v in values])


def _converter(field: FieldDescriptor):
    """How one value of ``field`` becomes JSON (None: as it is)."""
    if field.message_type is pb.BrokerIds.DESCRIPTOR:
        return lambda value: list(value.ids)
    if field.message_type is not None:
        return _plain
    if field.enum_type is not None:
        names = {v.number: v.name for v in field.enum_type.values}
        return lambda value: names.get(value, value)  # a number this reader has no name for stays one
    if field.type == FieldDescriptor.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode()
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return _json_float
    return None


def _json_float(value: float) -> Any:
    """Protobuf's JSON for a float: infinities and NaN by name."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def from_json(obj: dict[str, Any]) -> MetadataRecord:
    """The inverse of ``to_json`` for known record types (ValueError otherwise)."""
    try:
        t = RecordType[obj["type"]]
    except KeyError:
        raise ValueError(f"not a known metadata record type: {obj.get('type')!r}") from None
    if any(obj.get("data", {}).get(name) == REDACTED for name in SENSITIVE_FIELDS.get(t, ())):
        raise ValueError(f"a {t.name}'s credentials or password were redacted from its JSON form: it cannot be "
                         f"rebuilt")
    data = _from_plain(copy.deepcopy(obj.get("data", {})), t.message_class.DESCRIPTOR)
    message = json_format.ParseDict(data, t.message_class())
    return MetadataRecord(t, int(obj.get("version", WRITE_VERSION[t])), message)


def _from_plain(data: dict[str, Any], descriptor: Descriptor) -> dict[str, Any]:
    for field in descriptor.fields:
        value = data.get(field.name)
        if field.message_type is pb.BrokerIds.DESCRIPTOR and isinstance(value, list):
            data[field.name] = {"ids": value}
        elif field.message_type is not None and value is not None:
            items = value if field.is_repeated else [value]
            for item in items:
                _from_plain(item, field.message_type)
    return data
