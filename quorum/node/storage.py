"""A node's storage, opened and checked before anything runs: the directory lock, ``meta.properties``,
the metadata log, ``quorum-state`` and the snapshots beside the log, lined up with one another.

Everything here refuses rather than guesses: a directory in use, a foreign or missing
``meta.properties``, or a log without the ``quorum-state`` that must come with it raises
StorageError before the node binds a port or logs a line.
"""
from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from quorum.log.api import OffsetAndEpoch
from quorum.log.election_state import ElectionState
from quorum.log.election_store import QUORUM_STATE_FILE, FileElectionStore
from quorum.log.errors import StorageError
from quorum.log.file_log import FileLog
from quorum.log.meta_properties import check_storage, metadata_partition_dir
from quorum.snapshot.file_store import FileSnapshotStore
from quorum.snapshot.files import remove_temporaries

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"


def lock_directory(log_dir: Path) -> int:
    """An exclusive ``flock`` on ``<log_dir>/.lock`` (its file descriptor; closing it releases the
    lock), so a second process cannot open the same log."""
    fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StorageError(f"{log_dir} is in use by another sparkraft process") from None
    return fd


@dataclass(eq=False)
class NodeStorage:
    """What a node keeps on disk, open: its log, its snapshots and its election state."""

    log_dir: Path
    cluster_id: str
    lock_fd: Optional[int]  # see lock_directory; None once closed
    log: FileLog
    snapshots: FileSnapshotStore
    election_store: FileElectionStore
    election: ElectionState  # as read at open (rejoining set if the log had to be dropped)
    directory_id: Optional[str] = None  # meta.properties' directory.id: this replica's half of its key

    @classmethod
    def open(cls, log_dir: Path, node_id: int, segment_bytes: int) -> "NodeStorage":
        """Check ``meta.properties`` says this node, lock the directory, then open the partition
        directory's files; everything is closed again if any of it fails."""
        meta = check_storage(log_dir, node_id)
        cluster_id = meta.cluster_id
        lock_fd = lock_directory(log_dir)
        file_log = None
        try:
            partition = metadata_partition_dir(log_dir)
            partition.mkdir(exist_ok=True)
            store = FileElectionStore(partition / QUORUM_STATE_FILE)
            election = store.read()
            file_log = FileLog(partition, segment_bytes)
            storage = cls(log_dir, cluster_id, lock_fd, file_log, FileSnapshotStore(partition, cluster_id), store,
                          election, meta.directory_id)
            storage._line_up_snapshots(node_id)
            storage._check_election_state_kept()
        except BaseException:
            if file_log is not None:
                file_log.close()
            os.close(lock_fd)
            raise
        return storage

    def close(self) -> None:
        """Flush and close the log, then release the directory lock."""
        self.log.flush()
        self.log.close()
        if self.lock_fd is not None:
            os.close(self.lock_fd)  # releases the flock
            self.lock_fd = None

    def _line_up_snapshots(self, node_id: int) -> None:
        """Line the log up with the snapshots beside it (KIP-630 recovery): it starts at the oldest
        one, or empty at the newest if that is past its end (a crash after a snapshot was installed
        and before the old log was gone). A log that starts past 0 with no valid snapshot reaching
        its start cannot be replayed: this voter then rejoins as if its disk were new (no vote until
        it has caught up) and fetches the leader's snapshot."""
        remove_temporaries(self.log.directory)
        ids = self.snapshots.ids()  # damaged ones are renamed *.corrupt here
        first = self.log.start_offset
        covering = [s for s in ids if s.offset >= first]
        if covering and covering[-1].offset > self.log.end_offset:
            if self.log.end_offset == 0:  # a log restored from a warehouse (storage format --from-warehouse)
                log.info("Node %d: the log starts at snapshot %s", node_id, covering[-1])
            else:
                log.warning("Node %d: snapshot %s is past the log end %d; the log restarts empty at it",
                            node_id, covering[-1], self.log.end_offset)
            self.log.reset_to(covering[-1])
        elif covering:
            self.log.advance_start(covering[0])
        elif first > 0:
            log.error("Node %d: the log starts at offset %d and no valid snapshot holds the records below "
                      "it; dropping the log and rejoining (no vote until caught up) to fetch the leader's "
                      "snapshot", node_id, first)
            self.log.reset_to(OffsetAndEpoch(0, 0))
            self.log.flush()
            self.election = dataclasses.replace(self.election, rejoining=True)
            self.election_store.write(self.election)

    def _check_election_state_kept(self) -> None:
        """A node whose log holds records has written ``quorum-state`` (a follower persists its epoch
        and leader before it fetches). Without it the node would start in epoch 0 having forgotten
        whom it voted for and whom it followed, and could vote twice in one epoch: refuse."""
        path = self.election_store.path
        latest = self.snapshots.latest()
        if path.exists() or (self.log.end_offset == 0 and (latest is None or latest.offset == 0)):
            return  # (a dynamic quorum's bootstrap snapshot, at offset 0, holds no records)
        raise StorageError(
            f"{path} is missing but the log holds records up to offset {self.log.end_offset - 1} "
            f"(epoch {self.log.last_epoch}): this node forgot its votes and could vote twice in one epoch. "
            f"Restore the file, or move {self.log_dir} aside and re-format it with `sparkraft storage format "
            f"--rejoin` to copy the log back from the quorum")
