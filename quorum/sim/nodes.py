"""A simulated node (its core, its disk, what it last persisted) and an acknowledged proposal: what
the cluster (cluster.py) runs and the invariants (invariants.py) read."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.raft.core import RaftCore
from quorum.snapshot.memory_store import MemorySnapshotStore


@dataclass
class SimNode:
    node_id: int
    log: MemoryLog = field(default_factory=MemoryLog)
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    persisted: ElectionState = field(default_factory=ElectionState.empty)
    core: Optional[RaftCore] = None
    incarnation: int = 0
    next_tick: Optional[int] = None
    last_epoch_seen: int = 0
    last_hw_seen: int = 0
    installs_seen: int = 0
    directory_id: Optional[str] = None  # a dynamic quorum's replica key; a new one for each disk
    due_again: int = 0  # rounds in a row after which the core said a deadline was still due (a livelock)

    @property
    def alive(self) -> bool:
        return self.core is not None


@dataclass
class Proposal:
    epoch: int
    last_offset: int
    records: tuple[bytes, ...]
