"""Control records: what the quorum itself writes into the log (Kafka's ControlRecordType).

They live in batches flagged ``control`` so the metadata layer can skip or read
them without guessing. The payload is a 2-byte type then compact JSON: control
records are rare, and JSON keeps ``dump-log`` readable.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass

LEADER_CHANGE = 2  # Kafka's numbering
SNAPSHOT_HEADER = 3
SNAPSHOT_FOOTER = 4
KRAFT_VERSION = 5  # the kraft.version feature: 0 static voters, 1 voters in the log (KIP-853)
KRAFT_VOTERS = 6  # the whole voter set from this offset on (quorum/log/voter_set.py)
NAMES = {LEADER_CHANGE: "LEADER_CHANGE", SNAPSHOT_HEADER: "SNAPSHOT_HEADER", SNAPSHOT_FOOTER: "SNAPSHOT_FOOTER",
         KRAFT_VERSION: "KRAFT_VERSION", KRAFT_VOTERS: "KRAFT_VOTERS"}
_TYPE = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class ControlRecord:
    type: int
    data: dict

    @property
    def type_name(self) -> str:
        return NAMES.get(self.type, f"UNKNOWN_CONTROL_{self.type}")


def encode_control(record_type: int, data: dict) -> bytes:
    return _TYPE.pack(record_type) + json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def decode_control(raw: bytes) -> ControlRecord:
    (t,) = _TYPE.unpack_from(raw)
    return ControlRecord(t, json.loads(raw[2:]) if len(raw) > 2 else {})


def leader_change(leader_id: int, voters, granting_voters) -> bytes:
    """The record a new leader appends first: committing it commits everything before it."""
    return encode_control(LEADER_CHANGE, {"version": 0, "leader_id": leader_id,
                                          "voters": sorted(voters), "granting_voters": sorted(granting_voters)})


def kraft_version(level: int) -> bytes:
    return encode_control(KRAFT_VERSION, {"version": 0, "kraft_version": level})
