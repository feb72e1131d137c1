"""How long old snapshots and the log below them are kept (``metadata.max.retention.*``).

Kafka's rule (KIP-630): while the log and snapshots together exceed ``metadata.max.retention.bytes``,
or the oldest snapshot is older than ``metadata.max.retention.ms``, the oldest snapshot is deleted
and the log start moves to the next one; the newest snapshot is always kept. -1 means no limit.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Retention:
    max_bytes: int = 100 * 1024 * 1024  # metadata.max.retention.bytes
    max_ms: int = 7 * 24 * 3600 * 1000  # metadata.max.retention.ms

    @classmethod
    def from_config(cls, config) -> "Retention":
        return cls(config.max_retention_bytes, config.max_retention_ms)

    def over(self, total_bytes: int, oldest_age_ms: float) -> bool:
        """Must the oldest snapshot (and the log below the next one) go?"""
        return (self.max_bytes >= 0 and total_bytes > self.max_bytes) or \
            (self.max_ms >= 0 and oldest_age_ms > self.max_ms)
