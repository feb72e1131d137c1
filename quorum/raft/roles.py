"""One small class per election role, holding only that role's data and timers.

``RaftCore`` owns the transitions between them (see its docstring for the table).
Every role answers the same questions: its epoch, the leader it knows, whom it
voted for, and its name as DescribeQuorum and the metrics report it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from quorum.log.api import OffsetAndEpoch
from quorum.raft.accumulator import BatchAccumulator
from quorum.raft.progress import LeaderProgress


@dataclass(slots=True)
class Unattached:
    """No leader known in ``epoch``. A voter campaigns when ``election_deadline`` passes;
    an observer keeps asking voters who the leader is. With ``voted_id`` set this is
    the *voted* state: the vote for this epoch is spent."""

    epoch: int
    voted_id: Optional[int]
    election_deadline: int  # ms; observers: when to ask the next voter
    leader_id: None = None

    @property
    def name(self) -> str:
        return "Voted" if self.voted_id is not None else "Unattached"


@dataclass(slots=True)
class Prospective:
    """Pre-vote (KIP-996): asks voters whether they *would* vote for ``epoch + 1``
    without anyone changing state, so a node cut off from the leader cannot
    disrupt a healthy quorum when it comes back."""

    epoch: int
    lost_leader_id: Optional[int]  # the leader it followed, kept only so quorum-state need not change
    voted_id: Optional[int]
    deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    leader_id: None = None  # it has lost the leader: telling others about it would keep them following a corpse
    name = "Prospective"


@dataclass(slots=True)
class Candidate:
    """Voted for itself in ``epoch`` and asks the other voters for theirs."""

    epoch: int
    deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    leader_id: None = None
    name = "Candidate"


@dataclass(slots=True)
class Leader:
    """The active leader of ``epoch``: appends, serves fetches, moves the high watermark."""

    epoch: int
    leader_id: int
    epoch_start_offset: int  # offset of this epoch's LeaderChange record
    progress: LeaderProgress
    accumulator: BatchAccumulator
    begin_epoch_unacked: set[int]
    # Fetches with nothing to return yet, held up to their max wait (long poll):
    # (replica id, corr) -> (request, deadline ms)
    parked: dict = field(default_factory=dict)
    name = "Leader"


@dataclass(slots=True)
class Follower:
    """Knows the leader of ``epoch`` and pulls from it; no fetch answer for
    ``fetch_timeout`` means the leader is gone."""

    epoch: int
    leader_id: int
    voted_id: Optional[int]
    fetch_deadline: int
    last_fetch_ok_ms: Optional[int] = None  # a live leader rejects pre-votes for others
    fetch_failures: int = 0  # Fetches to the leader the transport failed in a row (see core)
    snapshot: Optional[OffsetAndEpoch] = None  # being downloaded: FetchSnapshot instead of Fetch
    name = "Follower"


@dataclass(slots=True)
class Resigned:
    """A leader that gave up ``epoch`` (shutdown or lost quorum): tells voters with
    EndQuorumEpoch, accepts no writes, and campaigns again after its deadline."""

    epoch: int
    deadline: int
    preferred_successors: tuple[int, ...]
    unacked: set[int]
    leader_id: None = None  # told to others as "no leader": they should elect, not follow us
    name = "Resigned"


Role = Unattached | Prospective | Candidate | Leader | Follower | Resigned
