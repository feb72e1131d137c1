"""What the parts of the Raft core share, declared once: every attribute RaftCore holds, with its
type and what it is for. RaftCore (core.py) is assembled from parts, one file each: the roles'
changes (transitions.py), what each role does when its time comes (polls.py), the election RPCs
(election.py), the replication RPCs (replication.py), the voter set (membership.py). Each part
inherits this declaration and says in its ``PART`` which of these it reads and writes and which
methods of the other parts it calls; tests/unit/test_raft_structure.py holds each ``PART`` equal to
what the file's code does, so a file can be read on its own."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from quorum.log.api import ReplicatedLog
    from quorum.log.election_state import ElectionState
    from quorum.log.voter_set import ReplicaKey
    from quorum.raft.messages import Message, Outbound
    from quorum.raft.roles import Role
    from quorum.raft.settings import RaftSettings
    from quorum.raft.voter_history import VoterHistory
    from quorum.snapshot.api import SnapshotStore


@dataclass(frozen=True)
class Part:
    """What one part of the core uses of the others: attributes of RaftState it reads (and does
    not write), those it writes, and the other parts' methods it calls."""

    reads: frozenset[str]
    writes: frozenset[str]
    calls: frozenset[str]


def part(reads: str = "", writes: str = "", calls: str = "") -> Part:
    return Part(frozenset(reads.split()), frozenset(writes.split()), frozenset(calls.split()))


class RaftState:
    """The attributes RaftCore.__init__ sets (no behaviour here)."""

    # who and where
    node_id: int
    key: "ReplicaKey"  # this replica: node id and directory id (KIP-853)
    cluster_id: str
    bootstrap: tuple[int, ...]  # whom an observer that knows no voter asks for the leader
    settings: "RaftSettings"
    rng: random.Random  # the only randomness (timeouts' jitter, whom an observer asks): seeded in tests
    # the log, its snapshots, the voter sets it holds
    log: "ReplicatedLog"
    snapshots: "SnapshotStore"
    voter_history: "VoterHistory"
    high_watermark: int  # never moves backwards while this core lives
    first_leader_high_watermark: Optional[int]  # the first one a leader told this core (see core.py)
    # the election
    role: "Role"  # replaced only through Transitions._become
    rejoining: bool  # a voter whose disk was replaced acts as an observer until it caught up
    _rejoin_target: Optional[int]
    # what the driver has carried out of the last Ready
    _persisted: "ElectionState"
    _exposed_hw: int
    # outputs and requests in flight
    _outbox: list["Outbound"]
    _violations: list[tuple[int, str]]
    _next_corr: int
    _inflight: dict[int, tuple[int, "Message", int]]  # corr -> (dest, request, deadline)
    _backoff: dict[tuple[type, int], int]  # (request kind, dest) -> earliest time to send again
    # counters (metrics)
    snapshots_installed: int
    records_appended: int
    records_fetched: int
    snapshot_failures: int
