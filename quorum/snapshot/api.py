"""The snapshot store the Raft core is written against: hold, serve and download snapshots.

Like the log (quorum/log/api.py), the store is the core's disk; the core calls it synchronously and
never knows what a snapshot holds. A snapshot is named by its id, (end offset, epoch): it holds the
state after every record below ``end offset``, the last of which has ``epoch``. Two implementations:
:class:`~quorum.snapshot.memory_store.MemorySnapshotStore` (the simulation's) and
:class:`~quorum.snapshot.file_store.FileSnapshotStore` (``.checkpoint`` files beside the segments).

A download (FetchSnapshot) is one file growing chunk by chunk; it becomes a snapshot only when
``finish_download`` has verified it whole and made it durable, so a crash or a bad chunk leaves
no half snapshot behind.
"""
from __future__ import annotations

import abc
from typing import Optional

from quorum.log.api import OffsetAndEpoch


class SnapshotError(ValueError):
    """A snapshot (or a download) is damaged, foreign or not the one it claims to be."""


class SnapshotStore(abc.ABC):
    @abc.abstractmethod
    def ids(self) -> list[OffsetAndEpoch]:
        """The complete, valid snapshots held, oldest first."""

    def latest(self) -> Optional[OffsetAndEpoch]:
        ids = self.ids()
        return ids[-1] if ids else None

    @abc.abstractmethod
    def size(self, snapshot: OffsetAndEpoch) -> Optional[int]:
        """Its size in bytes; None if it is not held (never was, or deleted)."""

    @abc.abstractmethod
    def read(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> Optional[bytes]:
        """Up to ``max_bytes`` from ``position``; None if it is not held."""

    @abc.abstractmethod
    def delete(self, snapshot: OffsetAndEpoch) -> None:
        """Delete it (retention): a download of it then fails with SNAPSHOT_NOT_FOUND."""

    # -- downloading ------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def download(self) -> Optional[tuple[OffsetAndEpoch, int]]:
        """The download in progress, if any: (snapshot id, bytes received so far)."""

    @abc.abstractmethod
    def begin_download(self, snapshot: OffsetAndEpoch) -> None:
        """Start downloading ``snapshot`` from byte 0 (dropping any other download)."""

    @abc.abstractmethod
    def append_download(self, data: bytes) -> int:
        """Add the next chunk; the bytes received so far."""

    @abc.abstractmethod
    def finish_download(self) -> OffsetAndEpoch:
        """Verify the download whole and make it a durable snapshot; its id. Raises
        :class:`SnapshotError` (the download is dropped) if it does not verify."""

    @abc.abstractmethod
    def abort_download(self) -> None:
        """Drop the download in progress, if any."""
