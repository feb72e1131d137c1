"""Linger batching on the leader: many small proposals become one appended batch.

A proposal's records always land in one batch (never split), so a proposal is
atomic. The leader drains when the pipeline is idle (everything appended is
committed: nothing to wait for, so lingering would only add latency), when the
batch is full, or when the oldest record has lingered ``linger_ms``.
"""
from __future__ import annotations

from typing import Optional, Sequence


class BatchAccumulator:
    def __init__(self, epoch: int, next_offset: int, linger_ms: int, max_batch_bytes: int):
        self.epoch = epoch
        self.next_offset = next_offset  # offset the next proposed record will get
        self._linger_ms = linger_ms
        self._max_bytes = max_batch_bytes
        self._batches: list[list[bytes]] = []  # closed batches, then the open one
        self._open_bytes = 0
        self._first_ms: Optional[int] = None

    def __len__(self) -> int:
        return sum(len(b) for b in self._batches)

    def append(self, records: Sequence[bytes], now_ms: int) -> int:
        """Queue one proposal; returns the offset of its last record."""
        size = sum(len(r) for r in records)
        if not self._batches or (self._open_bytes + size > self._max_bytes and self._batches[-1]):
            self._batches.append([])
            self._open_bytes = 0
        self._batches[-1].extend(records)
        self._open_bytes += size
        if self._first_ms is None:
            self._first_ms = now_ms
        self.next_offset += len(records)
        return self.next_offset - 1

    def deadline(self) -> Optional[int]:
        return None if self._first_ms is None else self._first_ms + self._linger_ms

    def should_drain(self, now_ms: int, pipeline_idle: bool) -> bool:
        if not self._batches:
            return False
        return pipeline_idle or len(self._batches) > 1 or self._open_bytes >= self._max_bytes \
            or now_ms >= self._first_ms + self._linger_ms

    def drain(self) -> list[list[bytes]]:
        out, self._batches, self._open_bytes, self._first_ms = self._batches, [], 0, None
        return out
