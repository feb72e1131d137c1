"""The voter set at every offset of this node's log (Kafka's VoterSetHistory and
KRaftControlRecordStateMachine).

A node uses the latest voter set in its log, committed or not (KIP-853, Raft's single-server
change). The log can lose its uncommitted tail (truncation after a leader change), so the
history keeps every KRAFT_VOTERS record by offset and falls back to the one before. Below the
first record is the voter set of the snapshot the log starts from and, without one, the static
set of ``controller.quorum.voters`` (kraft.version 0).

An entry at offset ``o`` is in force for the records after ``o``; a snapshot ending at ``E``
holds the set at offset ``E - 1``.
"""
from __future__ import annotations

import bisect
from typing import Optional

from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import HEADER_SIZE, Batch
from quorum.log.raft_state import first_batch_size, raft_state_in, raft_state_of
from quorum.log.voter_set import VoterSet
from quorum.snapshot.api import SnapshotStore


class VoterHistory:
    def __init__(self, static: VoterSet):
        self.static = static
        self._offsets: list[int] = []  # offsets of the KRAFT_VOTERS records, increasing
        self._sets: list[VoterSet] = []
        self._versions: list[tuple[int, int]] = []  # (offset, kraft.version level), increasing

    # -- reads --------------------------------------------------------------------------------
    @property
    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.static

    @property
    def offsets(self) -> tuple[int, ...]:
        """Offsets of the voter records held, oldest first."""
        return tuple(self._offsets)

    @property
    def latest_offset(self) -> Optional[int]:
        """Offset of the record that set ``latest`` (None: the static set)."""
        return self._offsets[-1] if self._offsets else None

    def at(self, offset: int) -> VoterSet:
        """The set in force after the record at ``offset``."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._sets[i] if i >= 0 else self.static

    @property
    def kraft_version(self) -> int:
        return self._versions[-1][1] if self._versions else 0

    def kraft_version_at(self, offset: int) -> int:
        i = bisect.bisect_right(self._versions, (offset, 1 << 30)) - 1
        return self._versions[i][1] if i >= 0 else 0

    # -- the log moved ------------------------------------------------------------------------
    def note_batch(self, batch: Batch) -> None:
        """A batch was appended (by the leader or from a fetch): keep its voter records."""
        if not batch.control:
            return
        for i, voters, level in raft_state_in(batch.records):
            if voters is not None:
                self.note(batch.base_offset + i, voters)
            else:
                self.note_version(batch.base_offset + i, level)

    def note(self, offset: int, voters: VoterSet) -> None:
        if self._offsets and offset <= self._offsets[-1]:
            raise ValueError(f"voter set at offset {offset} is not after the last one at {self._offsets[-1]}")
        self._offsets.append(offset)
        self._sets.append(voters)

    def note_version(self, offset: int, level: int) -> None:
        if self._versions and offset <= self._versions[-1][0]:
            raise ValueError(f"kraft.version at offset {offset} is not after the last one at {self._versions[-1][0]}")
        self._versions.append((offset, level))

    def truncate(self, end_offset: int) -> None:
        """The log lost every record at or after ``end_offset``."""
        keep = bisect.bisect_left(self._offsets, end_offset)
        del self._offsets[keep:], self._sets[keep:]
        del self._versions[bisect.bisect_left(self._versions, (end_offset, -1)):]

    def trim(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: entries before the one in force there go."""
        i = bisect.bisect_right(self._offsets, start_offset - 1) - 1
        if i > 0:
            del self._offsets[:i], self._sets[:i]
        j = bisect.bisect_right(self._versions, (start_offset - 1, 1 << 30)) - 1
        if j > 0:
            del self._versions[:j]

    def reset(self, snapshot_end: int, voters: Optional[VoterSet], kraft_version: int) -> None:
        """The log restarts empty after a snapshot ending at ``snapshot_end`` that holds
        ``voters`` (None: it holds none, so the static set applies) and ``kraft_version``."""
        self._offsets, self._sets, self._versions = [], [], []
        if voters is not None:
            self.note(snapshot_end - 1, voters)
        if kraft_version:
            self.note_version(snapshot_end - 1, kraft_version)


def read_raft_state(store: SnapshotStore, snapshot: OffsetAndEpoch) -> tuple[Optional[VoterSet], int]:
    """(voters, kraft.version) that ``snapshot`` carries; (None, 0) if it carries none."""
    size = first_batch_size(store.read(snapshot, 0, HEADER_SIZE) or b"")
    return (None, 0) if size is None else raft_state_of(store.read(snapshot, 0, size) or b"")
