"""An in-memory snapshot store: the simulation's and the unit tests'.

Snapshots are opaque bytes checked by ``verify`` (by default a CRC32 trailer, what ``seal`` adds),
so the simulation can hand a node a damaged snapshot and see it refused.
"""
from __future__ import annotations

import zlib
from typing import Callable, Optional

from quorum.log.api import OffsetAndEpoch
from quorum.snapshot.api import SnapshotError, SnapshotStore


def seal(content: bytes) -> bytes:
    """``content`` with the CRC32 trailer ``check_seal`` verifies."""
    return content + zlib.crc32(content).to_bytes(4, "big")


def check_seal(snapshot: OffsetAndEpoch, data: bytes) -> None:
    if len(data) < 4 or zlib.crc32(data[:-4]).to_bytes(4, "big") != data[-4:]:
        raise SnapshotError(f"snapshot {snapshot} fails its CRC ({len(data)} bytes)")


def unseal(data: bytes) -> bytes:
    return data[:-4]


class MemorySnapshotStore(SnapshotStore):
    def __init__(self, verify: Callable[[OffsetAndEpoch, bytes], None] = check_seal):
        self.snapshots: dict[OffsetAndEpoch, bytes] = {}
        self.verify = verify
        self._download: Optional[tuple[OffsetAndEpoch, bytearray]] = None
        self.installed: list[OffsetAndEpoch] = []  # downloads that became snapshots, in order

    def add(self, snapshot: OffsetAndEpoch, data: bytes) -> None:
        """A snapshot the node wrote itself (trusted: it just made it)."""
        self.snapshots[snapshot] = data

    def ids(self) -> list[OffsetAndEpoch]:
        return sorted(self.snapshots)

    def size(self, snapshot: OffsetAndEpoch) -> Optional[int]:
        data = self.snapshots.get(snapshot)
        return None if data is None else len(data)

    def read(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> Optional[bytes]:
        data = self.snapshots.get(snapshot)
        return None if data is None else data[position:position + max_bytes]

    def delete(self, snapshot: OffsetAndEpoch) -> None:
        self.snapshots.pop(snapshot, None)

    @property
    def download(self) -> Optional[tuple[OffsetAndEpoch, int]]:
        return None if self._download is None else (self._download[0], len(self._download[1]))

    def begin_download(self, snapshot: OffsetAndEpoch) -> None:
        self._download = (snapshot, bytearray())

    def append_download(self, data: bytes) -> int:
        assert self._download is not None, "no download in progress"
        self._download[1].extend(data)
        return len(self._download[1])

    def finish_download(self) -> OffsetAndEpoch:
        assert self._download is not None, "no download in progress"
        snapshot, data = self._download
        self._download = None
        self.verify(snapshot, bytes(data))
        self.snapshots[snapshot] = bytes(data)
        self.installed.append(snapshot)
        return snapshot

    def abort_download(self) -> None:
        self._download = None

    def crash(self) -> None:
        """A download in progress lives in a temporary file that the next start removes."""
        self._download = None
