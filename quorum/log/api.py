"""The log interface the Raft core is written against (Kafka's ReplicatedLog, trimmed).

Two implementations pass the same contract tests (``tests/unit/test_log_contract.py``):
:class:`~quorum.log.memory_log.MemoryLog`, whose ``crash()`` forgets unflushed
batches the way a power cut would, and :class:`~quorum.log.file_log.FileLog`, the
segmented files a node keeps on disk.

Offsets are record offsets. ``end_offset`` is one past the last record (Kafka's
log end offset, LEO). Appends are buffered until ``flush()``; ``flushed_offset``
says how much would survive a crash. Nothing here knows about elections: the
core decides what to append and when the log may be cut.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Iterator, Sequence

from quorum.log.batch import Batch


@dataclass(frozen=True, slots=True, order=True)
class OffsetAndEpoch:
    """A position in the log named by (end offset, epoch), as Kafka's diverging epoch and snapshot ids."""

    offset: int
    epoch: int


class LogError(Exception):
    """The caller broke the log's rules (appended out of order, truncated committed data...)."""


class ReplicatedLog(abc.ABC):
    @property
    @abc.abstractmethod
    def start_offset(self) -> int:
        """First offset still held (0 until snapshots move it)."""

    @property
    @abc.abstractmethod
    def start_epoch(self) -> int:
        """Epoch of the record just before ``start_offset`` (the snapshot the log starts from; 0 at 0)."""

    @property
    @abc.abstractmethod
    def end_offset(self) -> int:
        """One past the last record held, flushed or not."""

    @property
    @abc.abstractmethod
    def flushed_offset(self) -> int:
        """One past the last record that is durable."""

    @property
    @abc.abstractmethod
    def last_epoch(self) -> int:
        """Epoch of the last batch (0 for an empty log)."""

    @abc.abstractmethod
    def append_as_leader(self, records: Sequence[bytes], epoch: int, append_time_ms: int,
                         control: bool = False) -> Batch:
        """Append one batch at ``end_offset``; epoch must not go below ``last_epoch``."""

    @abc.abstractmethod
    def append_as_follower(self, data: bytes) -> int:
        """Append encoded batches fetched from a leader; they must start at ``end_offset``.

        Verifies every CRC first and appends nothing if any batch is bad
        (raises :class:`~quorum.log.batch.CorruptBatchError`). Returns the new end offset.
        """

    @abc.abstractmethod
    def read(self, offset: int, max_bytes: int) -> bytes:
        """Encoded whole batches from the one holding ``offset`` on, at most ``max_bytes``
        but always at least one batch if there is one. Empty at ``end_offset``."""

    @abc.abstractmethod
    def batches(self, start: int, end: int) -> Iterator[Batch]:
        """Decoded batches overlapping [start, end), in order."""

    @abc.abstractmethod
    def control_batches(self) -> Iterator[Batch]:
        """Every control batch that ends after ``start_offset``, decoded, in order: how the Raft core
        finds the voter sets in its log at start without decoding the rest."""

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after ``offset`` (rounded down to a batch boundary)."""

    @abc.abstractmethod
    def advance_start(self, snapshot: OffsetAndEpoch) -> None:
        """Let go of the records below ``snapshot.offset``, which a snapshot now holds (Kafka's
        log start offset increment): reads below it are refused, segments wholly below it are
        deleted. It must not be past ``end_offset``; use ``reset_to`` for that."""

    @abc.abstractmethod
    def reset_to(self, snapshot: OffsetAndEpoch) -> None:
        """Drop every record and start empty at ``snapshot`` (a downloaded snapshot was installed;
        Kafka's truncateFullyAndStartAt). Durable at the next ``flush``."""

    @abc.abstractmethod
    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch ``<= epoch`` held and the offset where it ends (Kafka's
        ``endOffsetForEpoch``): how a leader finds where a follower's log diverges."""

    @abc.abstractmethod
    def flush(self) -> None:
        """Make everything appended so far durable."""

    def close(self) -> None:
        """Release files; a no-op for memory logs."""


def epoch_end_offsets(epoch_starts: Sequence[tuple[int, int]], log_end: int, epoch: int,
                      base: OffsetAndEpoch = OffsetAndEpoch(0, 0)) -> OffsetAndEpoch:
    """``end_offset_for_epoch`` over an epoch -> start offset index, shared by both logs.

    ``epoch_starts`` is ``[(epoch, start_offset), ...]`` in increasing order;
    ``base`` is the (offset, epoch) below which the log holds nothing (its start,
    or the snapshot it starts from).
    """
    floor = -1
    for i, (e, _start) in enumerate(epoch_starts):
        if e > epoch:
            break
        floor = i
    if floor < 0:
        return base
    e = epoch_starts[floor][0]
    if floor + 1 < len(epoch_starts):
        return OffsetAndEpoch(epoch_starts[floor + 1][1], e)
    return OffsetAndEpoch(log_end, e)
