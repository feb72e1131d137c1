"""RaftCore: KRaft's pull-based Raft as a sans-I/O state machine.

Inputs: ``receive`` (a request or response from a peer), ``request_failed``
(the transport gave up on a request), ``propose`` (records to append),
``resign`` (graceful shutdown) and ``tick`` (time passed). Time is always an
argument. Outputs come out of ``ready()`` as one :class:`Ready`: the driver must

1. persist ``election_state`` (atomically) if it is set,
2. flush the log if ``flush`` is set,
3. only then expose ``high_watermark`` and send ``messages``,

and call ``advance(ready)``. A crash between steps can therefore never forget a
granted vote or a record it acknowledged. One exception saves a leader's fsync
from every commit's path: when ``flush_after_send`` is set (a leader sending no
request that speaks for its log) the driver sends first and flushes second, so
the followers write the records while the leader does (Raft thesis §10.2.1).
That is safe because a leader's own records count towards the high watermark
only once flushed, and nothing it sends claims they are durable.

The log is written from inside the core, through :class:`ReplicatedLog` (append as leader or
follower, truncate, reset to a snapshot), as Kafka's KafkaRaftClient writes its ReplicatedLog;
etcd's raft instead hands new entries out in its Ready. The core reads back what it appends at
once (fetch answers, divergence checks, its last epoch for votes), so keeping the log behind the
interface saves a second, unstable copy of the tail. What the driver owns is durability: with a
:class:`FileLog` the core's writes reach the page cache only, nothing is fsynced but by the
driver (``Ready.flush``), and nothing the core sends claims records that are not yet flushed.

Snapshots (KIP-630): ``advance_log_start`` lets the log go below one of the node's snapshots
(retention). A fetcher below the log start is answered with the newest snapshot's id; it then
downloads that snapshot with FetchSnapshot through its :class:`SnapshotStore`, which verifies it,
and restarts its log empty at the snapshot. A leader never installs one.

The roles and the transitions between them are in roles.py and transitions.py (whose docstring is
the transition table); what each role does when its time comes is in polls.py; the RPC handlers
are in election.py and replication.py; the voter set in membership.py. RaftCore is assembled from
those parts; what they share is declared once in state.py (RaftState), and each part says in its
``PART`` what of it it reads and writes and which of the others' methods it calls. This module
keeps the inputs, the outputs, the checks common to every message, and the dispatch tables.
"""
from __future__ import annotations

import random
from typing import Optional, Sequence

from quorum.errors import Errors, NotLeaderError
from quorum.log.api import OffsetAndEpoch, ReplicatedLog
from quorum.log.election_state import ElectionState
from quorum.log.voter_set import ReplicaKey, VoterSet
from quorum.raft import limits
from quorum.raft.election import ElectionRpcs
from quorum.raft.errors import RaftUsageError
from quorum.raft.membership import Membership
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Outbound,
    QuorumDescription,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.polls import RolePolls
from quorum.raft.ready import Ready
from quorum.raft.replication import ReplicationRpcs
from quorum.raft.roles import Follower, Leader, Role
from quorum.raft.settings import RaftSettings
from quorum.raft.transitions import Transitions
from quorum.raft.voter_history import VoterHistory, read_raft_state
from quorum.snapshot.api import SnapshotStore

LEADER_UNREACHABLE_FAILURES = 3  # failed Fetches in a row that count as "the leader is gone"


# Requests whose content vouches for the sender's log (a Fetch acknowledges up to its offset, a Vote
# request campaigns with its last offset): never sent before the log under them is flushed.
_CLAIMS_DURABLE_LOG = (FetchRequest, VoteRequest)


class RaftCore(Transitions, RolePolls, ElectionRpcs, ReplicationRpcs, Membership):
    def __init__(self, node_id: int, voters: Sequence[int] | VoterSet, cluster_id: str, log: ReplicatedLog,
                 election: ElectionState, now_ms: int, settings: RaftSettings = RaftSettings(),
                 rng: Optional[random.Random] = None, *, snapshots: SnapshotStore,
                 directory_id: Optional[str] = None, bootstrap: Sequence[int] = ()):
        self.node_id = node_id
        self.key = ReplicaKey(node_id, directory_id)
        # Nodes an observer that knows no voter asks for the leader (controller.quorum.bootstrap.servers).
        self.bootstrap = tuple(b for b in bootstrap if b != node_id)
        self.cluster_id = cluster_id
        self.log = log
        # Snapshots: served to fetchers below the log start, downloaded when we are below the leader's.
        self.snapshots = snapshots
        # The voter set: the latest in the log, committed or not (voter_history.py).
        self.voter_history = VoterHistory(voters if isinstance(voters, VoterSet) else VoterSet.static(voters))
        self._load_voter_history()
        self.snapshots_installed = 0
        self.records_appended = 0  # records this node appended as leader (metrics)
        self.records_fetched = 0  # records this node took from a leader's Fetch answers (metrics)
        self.snapshot_failures = 0  # downloads refused because they did not verify
        self.settings = settings
        self.rng = rng or random.Random(node_id)
        # Never moves backwards while this core lives. Everything below the log start is in a
        # snapshot, so committed.
        self.high_watermark = log.start_offset
        self._exposed_hw = self.high_watermark
        # The first high watermark a leader told this core since it started (its own, leading):
        # what was committed when it first heard from a quorum, which it may not hold yet. None
        # until then: a node alone knows nothing of what the others committed while it was down.
        self.first_leader_high_watermark: Optional[int] = None
        self._persisted = election
        self._outbox: list[Outbound] = []
        self._violations: list[tuple[int, str]] = []  # see Ready.violations
        self._next_corr = 1
        # corr -> (dest, request, deadline): requests waiting for an answer
        self._inflight: dict[int, tuple[int, Message, int]] = {}
        # (kind, dest) -> earliest time to (re)send, after a failure
        self._backoff: dict[tuple[type, int], int] = {}
        # A voter whose disk was replaced forgot its votes and the records it acknowledged;
        # voting before it caught up could elect a stale leader and lose committed data.
        # Until it holds the high watermark the leader first tells it, it acts as an observer.
        self.rejoining = election.rejoining and self.is_voter
        self._rejoin_target: Optional[int] = None
        self.role: Role = self._initial_role(election, now_ms)
        self._poll(now_ms)

    # ------------------------------------------------------------------ public inputs
    def receive(self, src: int, corr: int, msg: Message, now_ms: int) -> None:
        """A message arrived from ``src``. Requests are answered with the same ``corr``."""
        if type(msg) in _REQUEST_HANDLERS:
            if msg.cluster_id != self.cluster_id:
                self._reply_error(src, corr, msg, Errors.INCONSISTENT_CLUSTER_ID)
            elif not 0 <= msg.epoch <= limits.MAX_EPOCH:
                self._violation(src, f"{type(msg).__name__} with epoch {msg.epoch}, outside 0..{limits.MAX_EPOCH}")
                self._reply_error(src, corr, msg, Errors.INVALID_REQUEST)
            elif src == self.node_id:
                self._violation(src, f"{type(msg).__name__} from this node itself (a node sends no request to itself)")
                self._reply_error(src, corr, msg, Errors.INVALID_REQUEST)
            elif _claimed_sender(msg) not in (src, -1):
                # The driver authenticates ``src`` (peer_identity.py); a message naming someone else
                # as its sender is a forgery.
                self._violation(src, f"{type(msg).__name__} names node {_claimed_sender(msg)} as its sender")
                self._reply_error(src, corr, msg, Errors.INVALID_REQUEST)
            else:
                _REQUEST_HANDLERS[type(msg)](self, src, corr, msg, now_ms)
        else:
            entry = self._inflight.pop(corr, None)
            if entry is None or entry[0] != src:
                return  # an answer to a request we gave up on
            if not 0 <= msg.epoch <= limits.MAX_EPOCH:
                self._violation(src, f"{type(msg).__name__} with epoch {msg.epoch}, outside 0..{limits.MAX_EPOCH}")
            elif self._handle_common_response(src, msg, entry[1], now_ms):
                _RESPONSE_HANDLERS[type(msg)](self, src, msg, entry[1], now_ms)
        self._poll(now_ms)

    def request_failed(self, dest: int, corr: int, now_ms: int) -> None:
        """The transport could not get an answer for request ``corr``."""
        entry = self._inflight.pop(corr, None)
        if entry is not None:
            self._backoff[(type(entry[1]), dest)] = now_ms + self.settings.retry_backoff_ms
            if isinstance(entry[1], (FetchRequest, FetchSnapshotRequest)):
                self._leader_fetch_failed(dest, now_ms)
        self._poll(now_ms)

    def propose(self, records: Sequence[bytes], now_ms: int) -> int:
        """Queue records for appending as one atomic batch; returns the last record's offset.

        The records are committed once the high watermark passes that offset *and*
        the batch there carries this leader's epoch (a new leader may replace it).
        """
        role = self._leading()
        if role is None:
            raise NotLeaderError(self.role.leader_id, self.role.epoch)
        if not records:
            raise RaftUsageError("propose needs at least one record")
        last = role.accumulator.append(records, now_ms)
        self._poll(now_ms)
        return last

    def resign(self, now_ms: int) -> None:
        """Graceful step-down: a leader hands over with EndQuorumEpoch (used on SIGTERM)."""
        leader = self._leading()
        if leader is not None:
            self._become_resigned(leader, now_ms)
        self._poll(now_ms)

    def advance_log_start(self, snapshot: OffsetAndEpoch, now_ms: int) -> None:
        """Let the log go below ``snapshot``, one of our snapshots of committed records (retention:
        Kafka's deleteBeforeSnapshot). Fetchers below it are then sent the newest snapshot."""
        if snapshot not in self.snapshots.ids():
            raise RaftUsageError(f"snapshot {snapshot} is not held; the log start may only move to one")
        if snapshot.offset > self.high_watermark:
            raise RaftUsageError(f"snapshot {snapshot} is beyond the high watermark {self.high_watermark}")
        if snapshot.offset > self.log.end_offset:
            self.log.reset_to(snapshot)
            self.voter_history.reset(snapshot.offset, *read_raft_state(self.snapshots, snapshot))
        else:
            self.log.advance_start(snapshot)
            self.voter_history.trim(self.log.start_offset)
        self._poll(now_ms)

    def tick(self, now_ms: int) -> int:
        """Let time pass; returns milliseconds until the next deadline.

        Timers may append or send, so a driver calls ``tick`` *before* draining ``ready()``.
        """
        self._poll(now_ms)
        return max(0, self._next_deadline() - now_ms)

    # ------------------------------------------------------------------ outputs
    def has_ready(self) -> bool:
        return bool(self._outbox) or bool(self._violations) or self._election_state() != self._persisted \
            or self.log.end_offset > self.log.flushed_offset or self.high_watermark != self._exposed_hw

    def ready(self) -> Ready:
        state = self._election_state()
        msgs, self._outbox = tuple(self._outbox), []
        violations, self._violations = tuple(self._violations), []
        flush = self.log.end_offset > self.log.flushed_offset
        return Ready(election_state=state if state != self._persisted else None,
                     flush=flush,
                     messages=msgs,
                     high_watermark=self.high_watermark if self.high_watermark != self._exposed_hw else None,
                     flush_after_send=flush and self._leading() is not None and not any(
                         isinstance(o.message, _CLAIMS_DURABLE_LOG) for o in msgs),
                     violations=violations)

    def advance(self, ready: Ready, now_ms: int) -> None:
        """The driver carried out ``ready``: the election state is on disk and the log flushed."""
        if ready.election_state is not None:
            self._persisted = ready.election_state
        if ready.high_watermark is not None:
            self._exposed_hw = ready.high_watermark
        role = self._leading()
        if role is not None and role.progress.update_local(self.log.flushed_offset, now_ms):
            self._on_leader_hw_moved(role, now_ms)
        self._poll(now_ms)

    # ------------------------------------------------------------------ rejoining
    @property
    def _campaigns(self) -> bool:
        """Whether this node may stand for election (and so times out into pre-vote)."""
        return self._in_recent_voter_sets(self.key) and not self.rejoining

    def _maybe_finish_rejoin(self, leader_hw: Optional[int]) -> None:
        if self.first_leader_high_watermark is None and leader_hw is not None:
            self.first_leader_high_watermark = leader_hw
        if not self.rejoining or leader_hw is None:
            return
        if self._rejoin_target is None:
            self._rejoin_target = leader_hw
        if self.high_watermark >= self._rejoin_target:
            self.rejoining = False

    # ------------------------------------------------------------------ queries
    @property
    def epoch(self) -> int:
        return self.role.epoch

    @property
    def leader_id(self) -> Optional[int]:
        return self.role.leader_id

    @property
    def is_leader(self) -> bool:
        return self._leading() is not None

    def _leading(self) -> Optional[Leader]:
        """The Leader role while this node leads, else None: one of the two places the core asks a
        role's type, to hand its own data to the leader's work (every other answer is the role's)."""
        role = self.role
        return role if isinstance(role, Leader) else None

    def _following(self, leader_id: int) -> Optional[Follower]:
        """The Follower role while this node follows ``leader_id``, else None (the other place)."""
        role = self.role
        return role if isinstance(role, Follower) and role.leader_id == leader_id else None

    @property
    def state_name(self) -> str:
        return self.role.name

    def describe_quorum(self, now_ms: int) -> QuorumDescription:
        role = self._leading()
        if role is None:
            raise NotLeaderError(self.role.leader_id, self.role.epoch)
        role.progress.expire_observers(now_ms)
        return role.progress.describe(role.epoch, now_ms)

    # ------------------------------------------------------------------ common checks
    def _handle_common_response(self, src: int, msg: Message, req: Message, now: int) -> bool:
        """Settle the epoch a response carries; returns False if it needs no more handling."""
        r = self.role
        if msg.error is Errors.INCONSISTENT_CLUSTER_ID:
            # A node of another cluster: nothing it says about epochs or leaders applies to us.
            self._backoff[(type(req), src)] = now + self.settings.request_timeout_ms
            return False
        if msg.epoch > r.epoch:
            if msg.leader_id is not None and msg.leader_id != self.node_id:
                self._become_follower(msg.epoch, msg.leader_id, now)
            else:
                self._become_unattached(msg.epoch, now)
            return False
        if msg.epoch < r.epoch:
            return False  # stale
        if msg.leader_id is not None and msg.leader_id != self.node_id and not r.keeps_leader(msg.leader_id):
            # (A prospective node does not go back to the leader it just lost because
            # others still name it: they may have lost it too.)
            if r.led:
                self._violation(src, f"its {type(msg).__name__} names node {msg.leader_id} leader of epoch "
                                     f"{r.epoch}, which this node leads or led")
                return False
            self._become_follower(msg.epoch, msg.leader_id, now)
            return False
        return True

    def _refuse_epoch_jump(self, src: int, corr: int, req: Message) -> bool:
        """Refuse (and report) a Vote, BeginQuorumEpoch or EndQuorumEpoch that would move this node's
        epoch more than limits.MAX_EPOCH_JUMP past what it knows; True if it was refused."""
        known = max(self.role.epoch, self.log.last_epoch)
        if req.epoch <= known + limits.MAX_EPOCH_JUMP:
            return False
        self._violation(src, f"{type(req).__name__} for epoch {req.epoch}, more than {limits.MAX_EPOCH_JUMP} past "
                             f"epoch {known}")
        self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        return True

    def _violation(self, src: int, what: str) -> None:
        """A message from ``src`` broke the protocol: it is refused, and reported (Ready.violations)."""
        self._violations.append((src, what))

    def _reply_error(self, src: int, corr: int, req: Message, error: Errors) -> None:
        r = self.role
        self._send(src, corr, req.error_response(error, r.epoch, r.leader_id, self.log.start_offset))

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _election_deadline(self, now: int) -> int:
        t = self.settings.election_timeout_ms
        return now + t + self.rng.randrange(t)

    def _leader_fetch_failed(self, dest: int, now: int) -> None:
        """A dead leader's process refuses connections at once; waiting out the whole fetch
        timeout after that only delays the failover. After LEADER_UNREACHABLE_FAILURES failed
        Fetches in a row the follower stops vouching for the leader (it grants pre-votes) and
        gives up on it after a jittered pause of at most half an election timeout, so one
        follower usually wins before the other starts. Safe: it only moves a timeout, and the
        pre-vote still needs a majority that cannot reach the leader either."""
        r = self._following(dest)
        if r is None:
            return
        r.fetch_failures += 1
        if r.fetch_failures == LEADER_UNREACHABLE_FAILURES:
            r.last_fetch_ok_ms = None
            pause = self.rng.randrange(max(1, self.settings.election_timeout_ms // 2))
            r.fetch_deadline = min(r.fetch_deadline, now + pause)

    def _fetch_deadline(self, now: int) -> int:
        """When a follower gives up on its leader. The jitter spreads the followers of a dead
        leader apart, so one usually wins its pre-vote and election before the others
        start theirs, instead of all splitting the vote and waiting out an election timeout."""
        return now + self.settings.fetch_timeout_ms + self.rng.randrange(max(1, self.settings.election_timeout_ms // 2))

    def _log_up_to_date(self, last_epoch: int, last_offset: int) -> bool:
        return (last_epoch, last_offset) >= (self.log.last_epoch, self.log.end_offset)



# Dispatch: one table per kind of input, each checked complete by tests/unit/test_dispatch_tables.py.
_REQUEST_HANDLERS = {
    VoteRequest: RaftCore._handle_vote_request,
    BeginQuorumEpochRequest: RaftCore._handle_begin_quorum_epoch_request,
    EndQuorumEpochRequest: RaftCore._handle_end_quorum_epoch_request,
    FetchRequest: RaftCore._handle_fetch_request,
    FetchSnapshotRequest: RaftCore._handle_fetch_snapshot_request,
}
_RESPONSE_HANDLERS = {
    VoteResponse: RaftCore._handle_vote_response,
    BeginQuorumEpochResponse: RaftCore._handle_begin_quorum_epoch_response,
    EndQuorumEpochResponse: RaftCore._handle_end_quorum_epoch_response,
    FetchResponse: RaftCore._handle_fetch_response,
    FetchSnapshotResponse: RaftCore._handle_fetch_snapshot_response,
}


def _claimed_sender(msg: Message) -> int:
    """The node a request says it comes from (-1: an anonymous observer's Fetch)."""
    return msg.sender
