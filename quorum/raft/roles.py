"""One small class per election role, holding that role's data and timers, as Kafka's EpochState.

``RaftCore`` performs the transitions between them (transitions.py has the table). Every role
answers the same questions, so the core asks instead of testing types: its ``epoch``, the
``leader_id`` it tells others, whom it ``voted_id`` for, its ``name`` (as DescribeQuorum and the
metrics report it), its ``deadlines`` (when its time next comes), whether it ``can_grant_vote`` to
a candidate and whether it would grant a pre-vote (``grants_pre_vote``), whether it knows a live
leader (``has_live_leader``), whether it ``follows`` a given leader, whether it ``led`` its epoch,
the ``followed_leader`` a pre-vote remembers, and the election state it must persist
(``election_state``). The campaigning roles (Prospective, Candidate) count their own ballots.

The core tests a role's type in two places only: ``RaftCore._leading`` and ``_following``, which
hand out the Leader's or Follower's own data to the code that works on it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from quorum.log.api import OffsetAndEpoch
from quorum.log.election_state import ElectionState
from quorum.raft.accumulator import BatchAccumulator
from quorum.raft.progress import LeaderProgress


class _Role:
    """What every role shares: no vote to give unless it says otherwise, one timer (``deadline``),
    no leader it follows, and an epoch it did not lead."""

    __slots__ = ()
    led = False  # this node leads or led the role's epoch (Leader, Resigned)
    campaigning = False  # it asks for ballots (Prospective, Candidate): each campaign asks afresh

    @property
    def timer(self) -> int:
        return self.deadline  # type: ignore[attr-defined]

    def deadlines(self, majority: int, check_quorum_timeout_ms: int, awaiting_leader: Callable[[], bool]) -> list[int]:
        """When this role's time next comes (``awaiting_leader()``: an observer's question to a voter
        is in flight, whose answer it waits for; the leader's check-quorum needs the other two)."""
        return [self.timer]

    def can_grant_vote(self, candidate_id: int) -> bool:
        return False

    def has_live_leader(self, now: int, fetch_timeout_ms: int) -> bool:
        """Whether this node knows a leader that is alive: it then refuses pre-votes for others."""
        return False

    def grants_pre_vote(self, log_up_to_date: bool, now: int, fetch_timeout_ms: int) -> bool:
        """KIP-996: a pre-vote is granted to an up-to-date candidate by a node that knows no live leader."""
        return log_up_to_date and not self.has_live_leader(now, fetch_timeout_ms)

    def follows(self, leader_id: Optional[int]) -> bool:
        """Whether this is a follower of ``leader_id``."""
        return False

    def counts(self, pre_vote: bool, epoch: int) -> bool:
        """Whether a ballot answering a ``pre_vote`` request for ``epoch`` counts here (only a
        campaign's own: Prospective, Candidate)."""
        return False

    def keeps_leader(self, leader_id: Optional[int]) -> bool:
        """Whether a message naming ``leader_id`` leader of this epoch changes nothing here: the
        follower's own leader, or the one a prospective node just lost (others may have lost it too)."""
        return self.follows(leader_id)

    @property
    def followed_leader(self) -> Optional[int]:
        """The leader this node follows (a pre-vote remembers it: quorum-state need not change)."""
        return None

    @property
    def last_leader(self) -> Optional[int]:
        """The leader of this epoch this node followed last, followed still or lost since."""
        return None

    def end_epoch_acknowledged(self, voter: int, epoch: int) -> None:
        """A voter acknowledged an EndQuorumEpoch of ``epoch`` (only a resigned leader waits for them)."""

    @property
    def handed_over(self) -> bool:
        """A resigned leader has told every voter it stepped down (safe to exit now)."""
        return False


@dataclass(slots=True)
class Unattached(_Role):
    """No leader known in ``epoch``. A voter campaigns when ``election_deadline`` passes;
    an observer keeps asking voters who the leader is. With ``voted_id`` set this is
    the *voted* state: the vote for this epoch is spent."""

    epoch: int
    voted_id: Optional[int]
    election_deadline: int  # ms; observers: when to ask the next voter
    leader_id: None = None
    lost_leader_id: Optional[int] = None  # the leader of this epoch it lost, after a pre-vote it lost

    @property
    def name(self) -> str:
        return "Voted" if self.voted_id is not None else "Unattached"

    @property
    def last_leader(self) -> Optional[int]:
        return self.lost_leader_id

    @property
    def timer(self) -> int:
        return self.election_deadline

    def deadlines(self, majority: int, check_quorum_timeout_ms: int, awaiting_leader: Callable[[], bool]) -> list[int]:
        return [] if awaiting_leader() else [self.election_deadline]

    def can_grant_vote(self, candidate_id: int) -> bool:
        return self.voted_id in (None, candidate_id)

    def election_state(self, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
        return ElectionState(self.epoch, None, self.voted_id, rejoining)


class _Campaign(_Role):
    """A role that asks the voters for their ballots and counts them (``granted``, ``rejected``)."""

    __slots__ = ()
    campaigning = True

    def record(self, voter: int, granted: bool) -> None:
        (self.granted if granted else self.rejected).add(voter)  # type: ignore[attr-defined]

    def has_majority(self, majority: int) -> bool:
        return len(self.granted) >= majority  # type: ignore[attr-defined]


@dataclass(slots=True)
class Prospective(_Campaign):
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

    def can_grant_vote(self, candidate_id: int) -> bool:
        return self.voted_id in (None, candidate_id)

    def keeps_leader(self, leader_id: Optional[int]) -> bool:
        return self.lost_leader_id == leader_id

    @property
    def last_leader(self) -> Optional[int]:
        return self.lost_leader_id

    def counts(self, pre_vote: bool, epoch: int) -> bool:
        return pre_vote and epoch == self.epoch + 1

    def cannot_win(self, voters: int, majority: int) -> bool:
        """More voters rejected it than can be spared: back off rather than wait out the deadline."""
        return len(self.rejected) > voters - majority

    def tally(self, core, now: int) -> None:
        core._after_pre_vote(self, now)

    def election_state(self, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
        return ElectionState(self.epoch, self.lost_leader_id, self.voted_id, rejoining)


@dataclass(slots=True)
class Candidate(_Campaign):
    """Voted for itself in ``epoch`` and asks the other voters for theirs."""

    epoch: int
    deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    leader_id: None = None
    voted_id: None = None  # it voted for itself; a follower of this epoch does not carry that vote over
    name = "Candidate"

    def counts(self, pre_vote: bool, epoch: int) -> bool:
        return not pre_vote and epoch == self.epoch

    def tally(self, core, now: int) -> None:
        core._maybe_win_election(self, now)

    def election_state(self, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
        return ElectionState(self.epoch, None, node_id, rejoining)


@dataclass(slots=True)
class Leader(_Role):
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
    voted_id: None = None  # what it persists keeps its own vote (election_state)
    name = "Leader"
    timer = None
    led = True

    def has_live_leader(self, now: int, fetch_timeout_ms: int) -> bool:
        return True

    def deadlines(self, majority: int, check_quorum_timeout_ms: int, awaiting_leader: Callable[[], bool]) -> list[int]:
        """Parked fetches' expiries, the accumulator's linger, and when check-quorum next looks:
        just after the majority's oldest fetch is check_quorum_timeout_ms old."""
        times = [d for (_req, d) in self.parked.values()]
        if self.accumulator.deadline() is not None:
            times.append(self.accumulator.deadline())
        fetched = sorted((v.last_heard_ms for v in self.progress.voters.values() if v.last_heard_ms is not None
                          and v.replica_id != self.leader_id), reverse=True)
        # Fetches needed besides the leader's own vote; all of a majority if it removed itself (it
        # leads until that commits, and must notice if the new set has moved on without it).
        need = majority - (1 if self.progress.leader_votes else 0)
        if need > 0 and len(fetched) >= need:
            times.append(fetched[need - 1] + check_quorum_timeout_ms + 1)
        return times

    def election_state(self, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
        return _led_epoch(self.epoch, node_id, persisted, rejoining)


@dataclass(slots=True)
class Follower(_Role):
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

    @property
    def timer(self) -> int:
        return self.fetch_deadline

    @property
    def last_leader(self) -> Optional[int]:
        return self.leader_id

    def has_live_leader(self, now: int, fetch_timeout_ms: int) -> bool:
        return self.last_fetch_ok_ms is not None and now - self.last_fetch_ok_ms < fetch_timeout_ms

    def follows(self, leader_id: Optional[int]) -> bool:
        return self.leader_id == leader_id

    @property
    def followed_leader(self) -> Optional[int]:
        return self.leader_id

    def election_state(self, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id, rejoining)


@dataclass(slots=True)
class Resigned(_Role):
    """A leader that gave up ``epoch`` (shutdown or lost quorum): tells voters with
    EndQuorumEpoch, accepts no writes, and campaigns again after its deadline."""

    epoch: int
    deadline: int
    preferred_successors: tuple[int, ...]
    unacked: set[int]
    preferred_directory_ids: tuple[Optional[str], ...] = ()  # the successors', in the same order
    leader_id: None = None  # told to others as "no leader": they should elect, not follow us
    voted_id: None = None  # what it persists keeps its own vote (election_state)
    name = "Resigned"
    led = True

    def end_epoch_acknowledged(self, voter: int, epoch: int) -> None:
        if epoch == self.epoch:
            self.unacked.discard(voter)

    @property
    def handed_over(self) -> bool:
        return not self.unacked

    def election_state(self, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
        return _led_epoch(self.epoch, node_id, persisted, rejoining)


def _led_epoch(epoch: int, node_id: int, persisted: ElectionState, rejoining: bool) -> ElectionState:
    """A leader's (or resigned leader's) election state: a restart must know it led this epoch,
    and keeps whatever vote it had persisted in it."""
    voted = persisted.voted_id if persisted.epoch == epoch else None
    return ElectionState(epoch, node_id, voted, rejoining)


Role = Unattached | Prospective | Candidate | Leader | Follower | Resigned
ROLES = (Unattached, Prospective, Candidate, Leader, Follower, Resigned)
