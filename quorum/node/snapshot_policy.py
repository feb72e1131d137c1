"""When a controller snapshots its committed image, and the writing of it on a thread of its own."""
from __future__ import annotations

import concurrent.futures
import logging
import time
from pathlib import Path
from typing import Optional

from quorum.errors import NodeNotRunningError
from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import Batch
from quorum.log.meta_properties import metadata_partition_dir
from quorum.snapshot.checkpoint import read_checkpoint
from quorum.snapshot.files import SnapshotId, load_latest, remove_temporaries, write_snapshot

log = logging.getLogger(__name__)


class SnapshotPolicy:
    """When to snapshot the committed image, and the writing of it on a thread of its own.

    Every ``metadata.log.max.record.bytes.between.snapshots`` bytes of committed records (or after
    ``metadata.log.max.snapshot.interval.ms`` once records arrived), outside a transaction, the
    committed image (immutable, so no copy and no pause of the controller loop) is written as
    ``<end offset>-<epoch>.checkpoint`` beside the segments, and handed to the RaftNode, which
    serves it with FetchSnapshot and applies retention (old snapshots and the log below them go),
    short of what a reader holds (the image's log holds: quorum/controller/log_holds.py).
    On start the newest valid one is loaded and only the log after it is replayed.
    """

    def __init__(self, raft, core, max_bytes: int = 20 << 20, interval_ms: int = 3600_000):
        self.raft = raft
        self.core = core
        self.max_bytes = max_bytes
        self.interval_s = interval_ms / 1000 if interval_ms else None
        self.latest_offset = -1  # end offset of the newest snapshot written or loaded (metrics)
        self.latest_bytes = 0
        self.latest_at: Optional[float] = None  # when the newest snapshot was written (wall clock; metrics)
        self.loaded_from: Optional[int] = None
        self._bytes = 0
        self._since = time.monotonic()
        self._writer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"snapshot-{raft.node_id}")
        self._writing: Optional[concurrent.futures.Future] = None
        raft.log_hold = lambda: core.image.audit.floor(time.time() * 1000, core.settings.log_hold_max_ms)

    @property
    def directory(self) -> Path:
        return metadata_partition_dir(self.raft.log_dir)

    def load(self) -> None:
        remove_temporaries(self.directory)
        found = load_latest(self.directory, self.raft.cluster_id)
        if found is None:
            return
        snapshot, image = found
        self.core.load_snapshot(image, snapshot.end_offset)
        self.latest_offset, self.loaded_from = snapshot.end_offset, snapshot.end_offset
        stat = (self.directory / snapshot.name).stat()
        self.latest_bytes, self.latest_at = stat.st_size, stat.st_mtime
        log.info("Controller %d loaded snapshot %s; replaying the log after offset %d", self.raft.node_id,
                 snapshot.name, snapshot.end_offset - 1)

    def installed(self, load) -> None:
        """Raft installed the leader's snapshot (we were behind its log start): start from it."""
        started = time.monotonic()
        _header, image = read_checkpoint(load.path)
        self.core.load_snapshot(image, load.snapshot_id.offset)
        self.latest_offset, self.loaded_from = load.snapshot_id.offset, load.snapshot_id.offset
        stat = load.path.stat()
        self.latest_bytes, self.latest_at = stat.st_size, stat.st_mtime
        self._bytes, self._since = 0, time.monotonic()
        log.info("Controller %d loaded the leader's snapshot %s (%.2fs)", self.raft.node_id, load.path.name,
                 time.monotonic() - started)

    def replayed(self, batch: Batch) -> None:
        """After each committed batch (controller thread): start a snapshot if one is due."""
        if batch.last_offset < self.latest_offset:
            return
        self._bytes += sum(len(r) for r in batch.records)
        due = self._bytes >= self.max_bytes or (
            self.interval_s is not None and self._bytes and time.monotonic() - self._since >= self.interval_s)
        if not due or self.core.in_transaction or (self._writing is not None and not self._writing.done()):
            return
        snapshot = SnapshotId(self.core.last_committed_offset + 1, batch.epoch)
        self._bytes, self._since = 0, time.monotonic()
        self._writing = self._writer.submit(self._write, self.core.image, snapshot)

    def _write(self, image, snapshot) -> None:
        started = time.monotonic()
        try:
            size = write_snapshot(self.directory, image, snapshot, self.raft.cluster_id,
                                  self.raft.snapshot_raft_records(snapshot.end_offset))
        except NodeNotRunningError:
            return  # the node is stopping: the next start writes one if it is due
        except Exception as e:  # a full disk, or a bug: never silent, and the controller goes on
            log.error("Controller %d could not write snapshot %s: %s", self.raft.node_id, snapshot.name, e,
                      exc_info=not isinstance(e, OSError))
            return
        self.latest_offset, self.latest_bytes, self.latest_at = snapshot.end_offset, size, time.time()
        self.raft.snapshot_written(OffsetAndEpoch(snapshot.end_offset, snapshot.epoch), size)
        log.info("Controller %d wrote snapshot %s (%d bytes, %.2fs)", self.raft.node_id, snapshot.name, size,
                 time.monotonic() - started)

    def close(self) -> None:
        self._writer.shutdown(wait=True)
