"""The audit trail's chain head: the hash of the last AUDIT_RECORD (quorum/controller/audit.py).
The entries themselves are not metadata (the lakehouse's ``audit`` table keeps them); the image
keeps only what the next entry chains on, and a snapshot carries it as one AuditRecord holding
nothing but the hash, so a controller started from a snapshot goes on with the same chain."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb


@dataclass(frozen=True, slots=True)
class AuditImage:
    head: bytes = b""  # the last entry's hash; b"" before the first

    def records(self) -> Iterator[pb.AuditRecord]:
        if self.head:
            yield pb.AuditRecord(hash=self.head)


class AuditDelta:
    def __init__(self, image: AuditImage) -> None:
        self.image = image
        self.head = image.head

    def replay_audit(self, record: pb.AuditRecord) -> None:
        self.head = record.hash

    def apply(self) -> AuditImage:
        return self.image if self.head == self.image.head else AuditImage(self.head)
