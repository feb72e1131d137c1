"""The in-memory bookkeeping both logs keep, so they round, check and answer alike.

Batches in a log are contiguous (each starts where the previous one ends), so a
sorted list of base offsets is enough to find the batch holding any offset.
"""
from __future__ import annotations

import bisect
from typing import Iterable, Protocol, Sequence

from quorum.log.api import LogError, OffsetAndEpoch, epoch_end_offsets


def batch_holding(bases: Sequence[int], offset: int) -> int:
    """Index of the batch holding ``offset`` (the first batch if ``offset`` is below it)."""
    return max(bisect.bisect_right(bases, offset) - 1, 0)


def batches_below(bases: Sequence[int], log_end: int, offset: int) -> int:
    """How many leading batches end at or before ``offset``: what ``truncate_to(offset)`` keeps.

    A batch straddling ``offset`` goes, so truncation rounds down to a batch boundary.
    """
    if offset >= log_end:
        return len(bases)
    return max(bisect.bisect_right(bases, offset) - 1, 0)


class _Positioned(Protocol):
    base_offset: int
    epoch: int

    @property
    def end_offset(self) -> int: ...


class EpochIndex:
    """Where each leader epoch starts in the log: Kafka's leader-epoch checkpoint, in memory.

    ``starts`` is ``[(epoch, start offset), ...]``, both strictly increasing. ``base`` is the
    snapshot the log starts from (offset 0, epoch 0 until one is installed or the start moved):
    an empty log's last epoch, and the answer for epochs older than any batch held.
    """

    def __init__(self) -> None:
        self.starts: list[tuple[int, int]] = []
        self.base = OffsetAndEpoch(0, 0)

    @property
    def last_epoch(self) -> int:
        return self.starts[-1][0] if self.starts else self.base.epoch

    def reset(self, base: OffsetAndEpoch) -> None:
        """The log now starts empty at ``base`` (a snapshot was installed)."""
        self.starts, self.base = [], base

    def trim(self, base: OffsetAndEpoch) -> None:
        """The log now starts at ``base``: forget epochs that end at or before it."""
        while len(self.starts) > 1 and self.starts[1][1] <= base.offset:
            self.starts.pop(0)
        self.base = base

    def check_epoch(self, epoch: int) -> None:
        """Refuse an append that would take the log's epoch backwards."""
        if epoch < self.last_epoch:
            raise LogError(f"append in epoch {epoch} below the log's last epoch {self.last_epoch}")

    def check_continues(self, batches: Iterable[_Positioned], log_end: int) -> None:
        """Refuse fetched batches that do not start at ``log_end``, leave gaps or lower the epoch."""
        expect, last_epoch = log_end, self.last_epoch
        for b in batches:
            if b.base_offset != expect:
                raise LogError(f"fetched batch starts at {b.base_offset}, log ends at {expect}")
            if b.epoch < last_epoch:
                raise LogError(f"fetched batch epoch {b.epoch} below the log's last epoch {last_epoch}")
            expect, last_epoch = b.end_offset, b.epoch

    def note(self, epoch: int, base_offset: int) -> None:
        """Record a batch appended at ``base_offset``; only the first batch of an epoch matters."""
        if not self.starts or self.starts[-1][0] != epoch:
            self.starts.append((epoch, base_offset))

    def truncate(self, log_end: int) -> None:
        """Forget epochs that start at or after the new ``log_end``."""
        while self.starts and self.starts[-1][1] >= log_end:
            self.starts.pop()

    def end_offset_for(self, epoch: int, log_end: int) -> OffsetAndEpoch:
        return epoch_end_offsets(self.starts, log_end, epoch, self.base)


class LogStartFromEpochs:
    """``start_offset`` and ``start_epoch`` of a log (FileLog, MemoryLog) whose EpochIndex
    ``_epochs`` has the log start as its base."""

    _epochs: EpochIndex

    @property
    def start_offset(self) -> int:
        return self._epochs.base.offset

    @property
    def start_epoch(self) -> int:
        return self._epochs.base.epoch
