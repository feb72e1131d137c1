"""What one record of Apache Kafka's metadata log says: a metadata record (its value is Kafka's
frame ``uvarint 1, uvarint api key, uvarint version`` and the message, read by the generated
readers of gen/records.py) or a control record (key ``int16 version, int16 type``, the value a
message kio reads: LeaderChange, SnapshotHeader, SnapshotFooter, KRaftVersion, KRaftVoters).

``describe`` gives the JSON form kafka-dump-log prints for it (camelCase fields, UUIDs in Kafka's
text form), with credentials shown as "(redacted)". A record type or version newer than this
sparkraft knows is no error: it comes back as ``UNKNOWN`` with its bytes in base64, and counted.
"""
from __future__ import annotations

import base64
import dataclasses
import struct
import threading
import uuid
from dataclasses import dataclass
from typing import Optional

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.schema.voters_record.v0.data import VotersRecord
from kio.serial import entity_reader

from quorum.kafka_log.gen.records import RECORDS
from quorum.kafka_log.wire import Reader, uuid_text

REDACTED = "(redacted)"
SENSITIVE = {"USER_SCRAM_CREDENTIAL_RECORD": ("salt", "storedKey", "serverKey")}
# control record type -> (its name, the kio message its value is)
CONTROL = {
    2: ("LEADER_CHANGE", LeaderChangeMessage),
    3: ("SNAPSHOT_HEADER", SnapshotHeaderRecord),
    4: ("SNAPSHOT_FOOTER", SnapshotFooterRecord),
    5: ("KRAFT_VERSION", KRaftVersionRecord),
    6: ("KRAFT_VOTERS", VotersRecord),
}
_CONTROL_KEY = struct.Struct(">hh")


@dataclass(frozen=True, slots=True)
class Described:
    type: str  # TOPIC_RECORD, LEADER_CHANGE, ... or UNKNOWN
    version: int
    data: Optional[dict]  # None: not decoded (UNKNOWN)
    raw: Optional[bytes] = None  # an UNKNOWN record's value


class Unknown:
    """How many records were of a type or version newer than this sparkraft knows (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_type: dict[str, int] = {}

    def note(self, what: str) -> None:
        with self._lock:
            self.by_type[what] = self.by_type.get(what, 0) + 1

    def summary(self) -> str:
        return ", ".join(f"{n} x {what}" for what, n in sorted(self.by_type.items()))


UNKNOWN = Unknown()


def describe(control: bool, key: Optional[bytes], value: Optional[bytes]) -> Described:
    """The record's type, version and JSON data (ValueError if its bytes are damaged)."""
    if control:
        return _describe_control(key, value)
    if value is None:
        raise ValueError("a metadata record without a value")
    r = Reader(value)
    frame, api_key, version = r.uvarint(), r.uvarint(), r.uvarint()
    if frame != 1:
        raise ValueError(f"metadata record frame version {frame}; Kafka writes 1")
    known = RECORDS.get(api_key)
    if known is None or version > known[1]:
        what = f"api key {api_key} v{version}" if known is None else f"{known[0]} v{version}"
        UNKNOWN.note(what)
        return Described("UNKNOWN", version, None, value)
    type_name, _, read = known
    data = read(r, version)
    for name in SENSITIVE.get(type_name, ()):
        data[name] = REDACTED
    return Described(type_name, version, data)


def _describe_control(key: Optional[bytes], value: Optional[bytes]) -> Described:
    if key is None or len(key) < 4 or value is None:
        raise ValueError("a control record without its key or value")
    _key_version, kind = _CONTROL_KEY.unpack_from(key)
    known = CONTROL.get(kind)
    if known is None:
        UNKNOWN.note(f"control type {kind}")
        return Described("UNKNOWN", 0, None, value)
    name, message = known
    entity, _ = entity_reader(message)(value, 0)
    data = _json(entity)
    return Described(name, data.get("version", 0), data)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _json(value):
    if dataclasses.is_dataclass(value):
        return {_camel(f.name): _json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, uuid.UUID):
        return uuid_text(value.bytes)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value
