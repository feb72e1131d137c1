"""The snapshot store a node keeps on disk: the ``.checkpoint`` files beside its log segments.

What it serves was verified: a file found at start (or placed by hand) is checked whole (every
batch's CRC, header, footer, cluster, id; quorum/snapshot/files.py) the first time it is listed,
and a damaged one is renamed ``<name>.corrupt`` (kept as evidence, never served or counted). The
ones this node writes itself are announced with ``added`` and trusted.

A download is written to ``.<name>.download.tmp`` (a name ``remove_temporaries`` clears at the
next start), then verified, fsynced and renamed: only a whole, valid snapshot ever gets its name.
Thread-safe: the event loop serves and downloads, the snapshot writer announces and deletes.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Optional

from quorum.log.api import OffsetAndEpoch
from quorum.log.durable import fsync_directory
from quorum.snapshot.api import SnapshotError, SnapshotStore
from quorum.snapshot.files import SnapshotId, list_snapshots, verify_checkpoint

log = logging.getLogger(__name__)

CORRUPT_SUFFIX = ".corrupt"


def _name(snapshot: OffsetAndEpoch) -> str:
    return SnapshotId(snapshot.offset, snapshot.epoch).name


class FileSnapshotStore(SnapshotStore):
    def __init__(self, directory: str | os.PathLike, cluster_id: str):
        self.directory = Path(directory)
        self.cluster_id = cluster_id
        self._lock = threading.Lock()
        self._valid: dict[OffsetAndEpoch, int] = {}  # verified snapshot -> size
        self._download: Optional[tuple[OffsetAndEpoch, int, int]] = None  # (id, fd, bytes so far)

    def path(self, snapshot: OffsetAndEpoch) -> Path:
        return self.directory / _name(snapshot)

    def _download_path(self, snapshot: OffsetAndEpoch) -> Path:
        return self.directory / f".{_name(snapshot)}.download.tmp"

    # -- held snapshots -----------------------------------------------------------------------
    def ids(self) -> list[OffsetAndEpoch]:
        found = [OffsetAndEpoch(s.end_offset, s.epoch) for s in list_snapshots(self.directory)]
        with self._lock:
            for gone in set(self._valid) - set(found):
                del self._valid[gone]
            unknown = [s for s in found if s not in self._valid]
        for s in unknown:
            self._check(s)
        with self._lock:
            return sorted(self._valid)

    def _check(self, snapshot: OffsetAndEpoch) -> None:
        path = self.path(snapshot)
        try:
            data = path.read_bytes()
            verify_checkpoint(data, self.cluster_id, SnapshotId(snapshot.offset, snapshot.epoch))
        except FileNotFoundError:
            return
        except SnapshotError as e:
            aside = path.with_name(path.name + CORRUPT_SUFFIX)
            log.error("%s; renamed it to %s and will not use it", e, aside.name)
            os.replace(path, aside)
            return
        with self._lock:
            self._valid[snapshot] = len(data)

    def added(self, snapshot: OffsetAndEpoch, size: int) -> None:
        """This node wrote ``snapshot`` itself (atomically): trust it without reading it back."""
        with self._lock:
            self._valid[snapshot] = size

    def size(self, snapshot: OffsetAndEpoch) -> Optional[int]:
        with self._lock:
            return self._valid.get(snapshot)

    def modified_ms(self, snapshot: OffsetAndEpoch) -> float:
        """When it was written (retention by age); now if it is gone."""
        try:
            return self.path(snapshot).stat().st_mtime * 1000
        except FileNotFoundError:
            return time.time() * 1000

    def read(self, snapshot: OffsetAndEpoch, position: int, max_bytes: int) -> Optional[bytes]:
        if self.size(snapshot) is None:
            return None
        try:
            with open(self.path(snapshot), "rb") as f:
                f.seek(position)
                return f.read(max_bytes)
        except FileNotFoundError:
            with self._lock:
                self._valid.pop(snapshot, None)
            return None

    def delete(self, snapshot: OffsetAndEpoch) -> None:
        with self._lock:
            self._valid.pop(snapshot, None)
        try:
            self.path(snapshot).unlink()
        except FileNotFoundError:
            pass

    # -- downloading ----------------------------------------------------------------------------
    @property
    def download(self) -> Optional[tuple[OffsetAndEpoch, int]]:
        d = self._download
        return None if d is None else (d[0], d[2])

    def begin_download(self, snapshot: OffsetAndEpoch) -> None:
        self.abort_download()
        fd = os.open(self._download_path(snapshot), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self._download = (snapshot, fd, 0)

    def append_download(self, data: bytes) -> int:
        snapshot, fd, size = self._download
        view, done = memoryview(data), 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], size + done)
        self._download = (snapshot, fd, size + len(data))
        return size + len(data)

    def finish_download(self) -> OffsetAndEpoch:
        snapshot, fd, size = self._download
        tmp = self._download_path(snapshot)
        try:
            data = os.pread(fd, size, 0)
            verify_checkpoint(data, self.cluster_id, SnapshotId(snapshot.offset, snapshot.epoch))
            os.fsync(fd)
        except BaseException:
            self.abort_download()
            raise
        os.close(fd)
        self._download = None
        os.replace(tmp, self.path(snapshot))
        fsync_directory(self.directory)
        self.added(snapshot, size)
        return snapshot

    def abort_download(self) -> None:
        if self._download is None:
            return
        snapshot, fd, _size = self._download
        self._download = None
        os.close(fd)
        try:
            self._download_path(snapshot).unlink()
        except FileNotFoundError:
            pass
