"""The audit trail's chain head and the log's holds.

The head: the hash of the last AUDIT_RECORD (quorum/controller/audit.py). The entries themselves
are not metadata (the lakehouse's ``audit`` table keeps them); the image keeps only what the next
entry chains on, and a snapshot carries it as one AuditRecord holding nothing but the hash, so a
controller started from a snapshot goes on with the same chain.

The holds: each LOG_HOLD_RECORD's reader and the offset it holds the log from
(quorum/controller/log_holds.py); every controller's retention keeps the log from the lowest live
one (``floor``), and a snapshot carries them so a node started from one holds as the others do."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb


class LogHold(NamedTuple):
    holder: str
    offset: int  # records from this offset on are kept
    time_ms: int  # when it was last renewed


@dataclass(frozen=True, slots=True)
class AuditImage:
    head: bytes = b""  # the last entry's hash; b"" before the first
    holds: tuple[LogHold, ...] = ()  # by holder

    def records(self) -> Iterator:
        if self.head:
            yield pb.AuditRecord(hash=self.head)
        for h in self.holds:
            yield pb.LogHoldRecord(holder=h.holder, offset=h.offset, time_ms=h.time_ms)

    def hold(self, holder: str) -> Optional[LogHold]:
        return next((h for h in self.holds if h.holder == holder), None)

    def floor(self, now_ms: float, max_age_ms: int) -> Optional[int]:
        """The lowest offset a hold renewed within ``max_age_ms`` keeps; None when none does
        (``max_age_ms`` < 0: holds never lapse)."""
        live = [h.offset for h in self.holds if max_age_ms < 0 or now_ms - h.time_ms <= max_age_ms]
        return min(live) if live else None


class AuditDelta:
    def __init__(self, image: AuditImage) -> None:
        self.image = image
        self.head = image.head
        self._holds: Optional[dict[str, LogHold]] = None  # copied on the first hold replayed

    def replay_audit(self, record: pb.AuditRecord) -> None:
        self.head = record.hash

    def replay_log_hold(self, record: pb.LogHoldRecord) -> None:
        if self._holds is None:
            self._holds = {h.holder: h for h in self.image.holds}
        if record.offset < 0:
            self._holds.pop(record.holder, None)
        else:
            self._holds[record.holder] = LogHold(record.holder, record.offset, record.time_ms)

    def apply(self) -> AuditImage:
        holds = self.image.holds if self._holds is None else tuple(sorted(self._holds.values()))
        if self.head == self.image.head and holds == self.image.holds:
            return self.image
        return AuditImage(self.head, holds)
