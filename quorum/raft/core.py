"""RaftCore: KRaft's pull-based Raft as a sans-I/O state machine.

Inputs: ``receive`` (a request or response from a peer), ``request_failed``
(the transport gave up on a request), ``propose`` (records to append),
``resign`` (graceful shutdown) and ``tick`` (time passed). Time is always an
argument. Outputs come out of ``ready()`` as one :class:`Ready`: the driver must

1. persist ``election_state`` (atomically) if it is set,
2. flush the log if ``flush`` is set,
3. only then send ``messages`` and expose ``high_watermark``,

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

Transitions (every one goes through ``_become``; it persists the election state)::

    from \\ to    Unattached  Prospective  Candidate  Leader  Follower  Resigned
    Unattached    epoch up    timeout      -          -       leader    -
    Prospective   lost/epoch  -            majority   -       leader    -
    Candidate     epoch up    timeout(*)   -          majority leader   -
    Leader        epoch up    -            -          -       epoch up  resign / no quorum
    Follower      epoch up,   fetch timeout -         -       epoch up  -
                  EndEpoch
    Resigned      epoch up    timeout      -          -       leader    -

    (*) a candidate whose election times out goes back to pre-vote.
    Observers only ever are Unattached or Follower.

"epoch up" means a message carried a higher epoch; "leader" means a message
named the leader of the current or a higher epoch.
"""
from __future__ import annotations

import random
from typing import Optional, Sequence

from quorum.errors import Errors, NotLeaderError
from quorum.log import control_records
from quorum.log.api import LogError, OffsetAndEpoch, ReplicatedLog
from quorum.log.batch import CorruptBatchError
from quorum.log.election_state import ElectionState
from quorum.raft.accumulator import BatchAccumulator
from quorum.raft.messages import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
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
from quorum.raft.progress import LeaderProgress
from quorum.raft.ready import Ready
from quorum.raft.roles import ROLES, Candidate, Follower, Leader, Prospective, Resigned, Role, Unattached
from quorum.raft.settings import RaftSettings
from quorum.snapshot.api import SnapshotError, SnapshotStore

NO_DEADLINE = 1 << 62
LEADER_UNREACHABLE_FAILURES = 3  # failed Fetches in a row that count as "the leader is gone"
MAX_EPOCH = (1 << 31) - 1  # epochs are int32, as in Kafka: a message beyond it is malformed
# A Vote may not move a voter's epoch further than this past what it knows (its epoch, its log's
# last epoch). A real candidate is its last leader's epoch plus its failed elections since, which
# pre-vote keeps to a handful; one message must not be able to spend the epoch space.
MAX_EPOCH_JUMP = 10_000


# Requests whose content vouches for the sender's log (a Fetch acknowledges up to its offset, a Vote
# request campaigns with its last offset): never sent before the log under them is flushed.
_CLAIMS_DURABLE_LOG = (FetchRequest, VoteRequest)


# Errors, as h11 splits them. Neither is ever a peer's doing: a peer's message that would break the
# protocol is refused without effect and reported in ``Ready.violations`` for the driver to log.
class RaftUsageError(ValueError):
    """The driver called the core wrongly (an empty proposal, a log start past the high watermark
    or at a snapshot it does not hold). The call changed nothing."""


class RaftSafetyError(AssertionError):
    """The core's own state would break Raft's guarantees (an epoch going back, a transition the
    table does not have, a high watermark past the log): a bug in the core, which stops here."""


class RaftCore:
    def __init__(self, node_id: int, voters: Sequence[int], cluster_id: str, log: ReplicatedLog,
                 election: ElectionState, now_ms: int, settings: RaftSettings = RaftSettings(),
                 rng: Optional[random.Random] = None, *, snapshots: SnapshotStore):
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.is_voter = node_id in self.voters
        self.cluster_id = cluster_id
        self.log = log
        # Snapshots: served to fetchers below the log start, downloaded when we are below the leader's.
        self.snapshots = snapshots
        self.snapshots_installed = 0
        self.snapshot_failures = 0  # downloads refused because they did not verify
        self.settings = settings
        self.rng = rng or random.Random(node_id)
        # Never moves backwards while this core lives. Everything below the log start is in a
        # snapshot, so committed.
        self.high_watermark = log.start_offset
        self._exposed_hw = self.high_watermark
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
            elif not 0 <= msg.epoch <= MAX_EPOCH:
                self._violation(src, f"{type(msg).__name__} with epoch {msg.epoch}, outside 0..{MAX_EPOCH}")
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
            if not 0 <= msg.epoch <= MAX_EPOCH:
                self._violation(src, f"{type(msg).__name__} with epoch {msg.epoch}, outside 0..{MAX_EPOCH}")
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
        role = self.role
        if not isinstance(role, Leader):
            raise NotLeaderError(role.leader_id, role.epoch)
        if not records:
            raise RaftUsageError("propose needs at least one record")
        last = role.accumulator.append(records, now_ms)
        self._poll(now_ms)
        return last

    def resign(self, now_ms: int) -> None:
        """Graceful step-down: a leader hands over with EndQuorumEpoch (used on SIGTERM)."""
        if isinstance(self.role, Leader):
            self._become_resigned(now_ms)
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
        else:
            self.log.advance_start(snapshot)
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
                     flush_after_send=flush and isinstance(self.role, Leader) and not any(
                         isinstance(o.message, _CLAIMS_DURABLE_LOG) for o in msgs),
                     violations=violations)

    def advance(self, ready: Ready, now_ms: int) -> None:
        """The driver carried out ``ready``: the election state is on disk and the log flushed."""
        if ready.election_state is not None:
            self._persisted = ready.election_state
        if ready.high_watermark is not None:
            self._exposed_hw = ready.high_watermark
        role = self.role
        if isinstance(role, Leader) and role.progress.update_local(self.log.flushed_offset, now_ms):
            self._on_leader_hw_moved(role)
        self._poll(now_ms)

    # ------------------------------------------------------------------ rejoining
    @property
    def _campaigns(self) -> bool:
        """Whether this node may stand for election (and so times out into pre-vote)."""
        return self.is_voter and not self.rejoining

    def _maybe_finish_rejoin(self, leader_hw: Optional[int]) -> None:
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
        return isinstance(self.role, Leader)

    @property
    def state_name(self) -> str:
        return self.role.name

    def describe_quorum(self, now_ms: int) -> QuorumDescription:
        role = self.role
        if not isinstance(role, Leader):
            raise NotLeaderError(role.leader_id, role.epoch)
        role.progress.expire_observers(now_ms)
        return role.progress.describe(role.epoch, now_ms)

    # ------------------------------------------------------------------ transitions
    def _initial_role(self, st: ElectionState, now: int) -> Role:
        if st.leader_id == self.node_id:
            # We led this epoch before a restart; we cannot know what we appended
            # after the last flush, so we must not lead it again.
            return Resigned(st.epoch, self._election_deadline(now), (), set())
        if st.leader_id is not None:
            return Follower(st.epoch, st.leader_id, st.voted_id, self._fetch_deadline(now))
        if self._campaigns and self.voters == {self.node_id}:
            return Unattached(st.epoch, st.voted_id, now)  # sole voter: campaign at once
        return Unattached(st.epoch, st.voted_id, self._election_deadline(now) if self._campaigns else now)

    def _election_state(self) -> ElectionState:
        return self.role.election_state(self.node_id, self._persisted, self.rejoining)

    def _become(self, role: Role) -> None:
        """Every role change: checked against the transition table (the module docstring, and
        _TRANSITIONS below), never to a lower epoch; leaving leadership answers parked fetches."""
        old = self.role
        if old.epoch > role.epoch:
            raise RaftSafetyError(f"epoch would go back from {old.epoch} to {role.epoch}")
        if type(role) not in _TRANSITIONS[type(old)]:
            raise RaftSafetyError(f"no transition from {old.name} to {role.name} (epoch {old.epoch} -> {role.epoch})")
        if isinstance(old, Leader) and not isinstance(role, Leader):
            self._abandon_leadership(old, role)
        self.role = role

    def _become_unattached(self, epoch: int, now: int, voted_id: Optional[int] = None,
                           deadline: Optional[int] = None) -> None:
        if deadline is None:
            deadline = self._election_deadline(now) if self._campaigns else now
        self._become(Unattached(epoch, voted_id, deadline))

    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        voted = self.role.voted_id if self.role.epoch == epoch else None
        self._become(Follower(epoch, leader_id, voted, self._fetch_deadline(now)))

    def _become_prospective(self, now: int) -> None:
        r = self.role
        leader = r.leader_id if isinstance(r, Follower) else None
        voted = self._persisted.voted_id if self._persisted.epoch == r.epoch else None
        self._become(Prospective(r.epoch, leader, voted, self._election_deadline(now), granted={self.node_id}))
        self._maybe_win_prevote(now)

    def _maybe_win_prevote(self, now: int) -> None:
        r = self.role
        if isinstance(r, Prospective) and len(r.granted) >= self._majority():
            if r.epoch >= MAX_EPOCH:  # never in practice: refuse to overflow, say why, stay put
                self._violation(self.node_id, f"epoch {r.epoch} is the last one: no election can be held")
                return self._become_unattached(r.epoch, now, r.voted_id)
            self._become(Candidate(r.epoch + 1, self._election_deadline(now), granted={self.node_id}))
            self._maybe_win_election(now)

    def _maybe_win_election(self, now: int) -> None:
        r = self.role
        if isinstance(r, Candidate) and len(r.granted) >= self._majority():
            self._become_leader(r, now)

    def _become_leader(self, cand: Candidate, now: int) -> None:
        start = self.log.end_offset
        self.log.append_as_leader([control_records.leader_change(self.node_id, self.voters, cand.granted)],
                                  cand.epoch, now, control=True)
        self._become(Leader(
            epoch=cand.epoch, leader_id=self.node_id, epoch_start_offset=start,
            progress=LeaderProgress(self.node_id, self.voters, start, now,
                                    self.settings.observer_idle_timeout_ms, self.settings.max_observers),
            accumulator=BatchAccumulator(cand.epoch, self.log.end_offset, self.settings.append_linger_ms,
                                         self.settings.max_batch_bytes),
            begin_epoch_unacked=set(self.voters - {self.node_id})))

    def _become_resigned(self, now: int) -> None:
        r = self.role
        assert isinstance(r, Leader)
        successors = r.progress.successors()
        self._become(Resigned(r.epoch, self._election_deadline(now), successors, set(successors)))

    def _abandon_leadership(self, old: Leader, new: Role) -> None:
        old.accumulator.drain()  # unappended proposals are dropped; their callers see NOT_CONTROLLER
        for (src, corr) in old.parked:
            self._send(src, corr, FetchResponse(Errors.NOT_LEADER_OR_FOLLOWER, new.epoch, new.leader_id))
        old.parked.clear()

    # ------------------------------------------------------------------ polling
    def _poll(self, now: int) -> None:
        """Fire whatever deadlines have passed and send whatever the role owes."""
        self._expire_requests(now)
        _POLLS[type(self.role)](self, now)

    def _next_deadline(self) -> int:
        r = self.role
        times = [d for (_dest, _msg, d) in self._inflight.values()]
        times += list(self._backoff.values())
        if isinstance(r, Leader):
            times += r.timers(self.node_id, self._majority(), self.settings.check_quorum_timeout_ms)
        elif not (isinstance(r, Unattached) and not self._campaigns and self._fetch_in_flight()):
            times.append(r.timer)  # an observer asking a voter for the leader waits for the answer
        return min(times, default=NO_DEADLINE)

    def _expire_requests(self, now: int) -> None:
        for corr, (dest, msg, deadline) in list(self._inflight.items()):
            if now >= deadline:
                del self._inflight[corr]
                self._backoff[(type(msg), dest)] = now + self.settings.retry_backoff_ms
        for key, t in list(self._backoff.items()):
            if now >= t:
                del self._backoff[key]

    def _can_send(self, kind: type, dest: int) -> bool:
        if (kind, dest) in self._backoff:
            return False
        return not any(d == dest and type(m) is kind for (d, m, _t) in self._inflight.values())

    def _request(self, dest: int, msg: Message, now: int, timeout_ms: Optional[int] = None) -> None:
        corr = self._next_corr
        self._next_corr += 1
        self._inflight[corr] = (dest, msg, now + (timeout_ms or self.settings.request_timeout_ms))
        self._outbox.append(Outbound(dest, corr, msg))

    def _send(self, dest: int, corr: int, msg: Message) -> None:
        self._outbox.append(Outbound(dest, corr, msg))

    def _poll_unattached(self, now: int) -> None:
        r = self.role
        if self._campaigns:
            if now >= r.election_deadline:
                self._become_prospective(now)
                self._poll(now)
        else:
            self._maybe_discover_leader(now)

    def _poll_prospective(self, now: int) -> None:
        r = self.role
        if now >= r.deadline:
            # Pre-vote lost or nobody answered: back off, try again later.
            self._become_unattached(r.epoch, now, r.voted_id)
            return
        for v in self.voters - r.granted - r.rejected - {self.node_id}:
            if self._can_send(VoteRequest, v):
                self._request(v, VoteRequest(self.cluster_id, r.epoch + 1, self.node_id, self.log.last_epoch,
                                             self.log.end_offset, pre_vote=True), now)

    def _poll_candidate(self, now: int) -> None:
        r = self.role
        if now >= r.deadline:
            self._become_prospective(now)
            self._poll(now)
            return
        for v in self.voters - r.granted - r.rejected - {self.node_id}:
            if self._can_send(VoteRequest, v):
                self._request(v, VoteRequest(self.cluster_id, r.epoch, self.node_id, self.log.last_epoch,
                                             self.log.end_offset), now)

    def _poll_leader(self, now: int) -> None:
        r = self.role
        if not r.progress.has_quorum_since(now - self.settings.check_quorum_timeout_ms):
            self._become_resigned(now)  # check-quorum: we may be on the wrong side of a partition
            self._poll(now)
            return
        idle = self.high_watermark >= self.log.end_offset
        if r.accumulator.should_drain(now, idle):
            for records in r.accumulator.drain():
                self.log.append_as_leader(records, r.epoch, now)
            self._complete_parked(r, now, only_expired=False)
        for v in list(r.begin_epoch_unacked):
            if self._can_send(BeginQuorumEpochRequest, v):
                self._request(v, BeginQuorumEpochRequest(self.cluster_id, r.epoch, self.node_id), now)
        self._complete_parked(r, now, only_expired=True)

    def _poll_follower(self, now: int) -> None:
        r = self.role
        if now >= r.fetch_deadline:
            if self._campaigns:
                self._become_prospective(now)
            else:
                self._become_unattached(r.epoch, now)
            self._poll(now)
            return
        if r.snapshot is not None and (self.snapshots.download or (None,))[0] != r.snapshot:
            r.snapshot = None  # the download was dropped (a bad chunk): Fetch again
        if r.snapshot is not None:
            if self._can_send(FetchSnapshotRequest, r.leader_id):
                self._send_fetch_snapshot(r, now)
        elif self._can_send(FetchRequest, r.leader_id):
            self._send_fetch(r.leader_id, r.epoch, now)

    def _poll_resigned(self, now: int) -> None:
        r = self.role
        if now >= r.deadline:
            self._become_prospective(now)
            self._poll(now)
            return
        for v in list(r.unacked):
            if self._can_send(EndQuorumEpochRequest, v):
                self._request(v, EndQuorumEpochRequest(self.cluster_id, r.epoch, self.node_id,
                                                       r.preferred_successors), now)

    def _maybe_discover_leader(self, now: int) -> None:
        """An observer without a leader asks a voter; the answer names the leader."""
        r = self.role
        if now < r.election_deadline or self._fetch_in_flight():
            return
        ready = [v for v in sorted(self.voters) if v != self.node_id and self._can_send(FetchRequest, v)]
        if ready:
            self._send_fetch(self.rng.choice(ready), r.epoch, now)
        r.election_deadline = now + self.settings.retry_backoff_ms

    def _fetch_in_flight(self) -> bool:
        return any(isinstance(m, FetchRequest) for (_d, m, _t) in self._inflight.values())

    def _send_fetch_snapshot(self, r: Follower, now: int) -> None:
        position = self.snapshots.download[1]
        self._request(r.leader_id, FetchSnapshotRequest(self.cluster_id, r.epoch, self.node_id, r.snapshot, position,
                                                        self.settings.fetch_max_bytes), now)

    def _send_fetch(self, dest: int, epoch: int, now: int) -> None:
        s = self.settings
        self._request(dest, FetchRequest(self.cluster_id, epoch, self.node_id, self.log.end_offset,
                                         self.log.last_epoch, s.fetch_max_wait_ms, s.fetch_max_bytes),
                      now, timeout_ms=s.fetch_max_wait_ms + s.request_timeout_ms)

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
        if msg.leader_id is not None and msg.leader_id != self.node_id \
                and not (isinstance(r, Follower) and r.leader_id == msg.leader_id) \
                and not (isinstance(r, Prospective) and r.lost_leader_id == msg.leader_id):
            # (A prospective node does not go back to the leader it just lost because
            # others still name it: they may have lost it too.)
            if isinstance(r, (Leader, Resigned)):
                self._violation(src, f"its {type(msg).__name__} names node {msg.leader_id} leader of epoch "
                                     f"{r.epoch}, which this node leads or led")
                return False
            self._become_follower(msg.epoch, msg.leader_id, now)
            return False
        return True

    def _refuse_epoch_jump(self, src: int, corr: int, req: Message) -> bool:
        """Refuse (and report) a Vote, BeginQuorumEpoch or EndQuorumEpoch that would move this node's
        epoch more than MAX_EPOCH_JUMP past what it knows; True if it was refused."""
        known = max(self.role.epoch, self.log.last_epoch)
        if req.epoch <= known + MAX_EPOCH_JUMP:
            return False
        self._violation(src, f"{type(req).__name__} for epoch {req.epoch}, more than {MAX_EPOCH_JUMP} past "
                             f"epoch {known}")
        self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        return True

    def _violation(self, src: int, what: str) -> None:
        """A message from ``src`` broke the protocol: it is refused, and reported (Ready.violations)."""
        self._violations.append((src, what))

    def _reply_error(self, src: int, corr: int, req: Message, error: Errors) -> None:
        r = self.role
        if isinstance(req, VoteRequest):
            resp = VoteResponse(error, r.epoch, r.leader_id, False, req.pre_vote)
        elif isinstance(req, BeginQuorumEpochRequest):
            resp = BeginQuorumEpochResponse(error, r.epoch, r.leader_id)
        elif isinstance(req, EndQuorumEpochRequest):
            resp = EndQuorumEpochResponse(error, r.epoch, r.leader_id)
        elif isinstance(req, FetchSnapshotRequest):
            resp = FetchSnapshotResponse(error, r.epoch, r.leader_id, req.snapshot_id, position=req.position)
        else:
            resp = FetchResponse(error, r.epoch, r.leader_id, log_start_offset=self.log.start_offset)
        self._send(src, corr, resp)

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
        r = self.role
        if not isinstance(r, Follower) or r.leader_id != dest:
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

    def _has_live_leader(self, now: int) -> bool:
        r = self.role
        if isinstance(r, Leader):
            return True
        return isinstance(r, Follower) and r.last_fetch_ok_ms is not None \
            and now - r.last_fetch_ok_ms < self.settings.fetch_timeout_ms

    # ------------------------------------------------------------------ Vote
    def _handle_vote_request(self, src: int, corr: int, req: VoteRequest, now: int) -> None:
        r = self.role
        if req.candidate_id not in self.voters or not self.is_voter:
            return self._reply_error(src, corr, req, Errors.INCONSISTENT_VOTER_SET)
        if req.epoch < r.epoch:
            return self._send(src, corr, VoteResponse(Errors.NONE, r.epoch, r.leader_id, False, req.pre_vote))
        if self._refuse_epoch_jump(src, corr, req):
            return
        if req.last_epoch > req.epoch:
            self._violation(src, f"Vote for epoch {req.epoch} behind its own log's last epoch {req.last_epoch}")
            return self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        up_to_date = self._log_up_to_date(req.last_epoch, req.last_offset)
        if req.pre_vote:
            granted = up_to_date and not self._has_live_leader(now) and not self.rejoining
            return self._send(src, corr, VoteResponse(Errors.NONE, r.epoch, r.leader_id, granted, True))
        if req.epoch > r.epoch:
            self._become_unattached(req.epoch, now)
            r = self.role
        granted = False
        if r.can_grant_vote(req.candidate_id) and up_to_date and not self.rejoining:
            granted = True
            self._become_unattached(r.epoch, now, voted_id=req.candidate_id)
        self._send(src, corr, VoteResponse(Errors.NONE, self.role.epoch, self.role.leader_id, granted, False))

    def _handle_vote_response(self, src: int, resp: VoteResponse, req: VoteRequest, now: int) -> None:
        r = self.role
        if resp.error is not Errors.NONE:
            self._backoff[(VoteRequest, src)] = now + self.settings.retry_backoff_ms
            return
        if resp.pre_vote and isinstance(r, Prospective) and req.epoch == r.epoch + 1:
            (r.granted if resp.granted else r.rejected).add(src)
            if len(r.rejected) > len(self.voters) - self._majority():
                self._become_unattached(r.epoch, now, r.voted_id)  # cannot win; back off
            else:
                self._maybe_win_prevote(now)
        elif not resp.pre_vote and isinstance(r, Candidate) and req.epoch == r.epoch:
            (r.granted if resp.granted else r.rejected).add(src)
            self._maybe_win_election(now)

    # ------------------------------------------------------------------ BeginQuorumEpoch
    def _handle_begin_quorum_epoch_request(self, src: int, corr: int, req: BeginQuorumEpochRequest, now: int) -> None:
        r = self.role
        if req.leader_id not in self.voters:
            return self._reply_error(src, corr, req, Errors.INCONSISTENT_VOTER_SET)
        if req.epoch < r.epoch:
            return self._reply_error(src, corr, req, Errors.FENCED_LEADER_EPOCH)
        if self._refuse_epoch_jump(src, corr, req):
            return
        if req.epoch == r.epoch and isinstance(r, (Leader, Resigned)) and req.leader_id != self.node_id:
            self._violation(src, f"BeginQuorumEpoch names node {req.leader_id} leader of epoch {r.epoch}, "
                                 f"which this node leads or led")
            return self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        if not (isinstance(r, Follower) and r.epoch == req.epoch and r.leader_id == req.leader_id):
            self._become_follower(req.epoch, req.leader_id, now)
        self._send(src, corr, BeginQuorumEpochResponse(Errors.NONE, self.role.epoch, self.role.leader_id))

    def _handle_begin_quorum_epoch_response(self, src: int, resp: BeginQuorumEpochResponse,
                                         req: BeginQuorumEpochRequest, now: int) -> None:
        r = self.role
        if isinstance(r, Leader) and resp.error is Errors.NONE and req.epoch == r.epoch:
            r.begin_epoch_unacked.discard(src)

    # ------------------------------------------------------------------ EndQuorumEpoch
    def _handle_end_quorum_epoch_request(self, src: int, corr: int, req: EndQuorumEpochRequest, now: int) -> None:
        r = self.role
        if req.leader_id not in self.voters:
            return self._reply_error(src, corr, req, Errors.INCONSISTENT_VOTER_SET)
        if req.epoch < r.epoch:
            return self._reply_error(src, corr, req, Errors.FENCED_LEADER_EPOCH)
        if self._refuse_epoch_jump(src, corr, req):
            return
        if req.epoch > r.epoch or (r.leader_id == req.leader_id and isinstance(r, Follower)):
            # The leader stepped down: campaign soon, the most caught-up successor first.
            if self._campaigns:
                pos = req.preferred_successors.index(self.node_id) if self.node_id in req.preferred_successors else -1
                if pos == 0:
                    delay = 0
                elif pos > 0:
                    delay = min(self.settings.election_backoff_max_ms, self.settings.retry_backoff_ms << pos)
                else:
                    delay = self._election_deadline(now) - now
                voted = r.voted_id if r.epoch == req.epoch else None
                self._become_unattached(req.epoch, now, voted_id=voted, deadline=now + delay)
            else:
                self._become_unattached(req.epoch, now)
        self._send(src, corr, EndQuorumEpochResponse(Errors.NONE, self.role.epoch, self.role.leader_id))

    def _handle_end_quorum_epoch_response(self, src: int, resp: EndQuorumEpochResponse,
                                       req: EndQuorumEpochRequest, now: int) -> None:
        r = self.role
        if isinstance(r, Resigned) and req.epoch == r.epoch:
            r.unacked.discard(src)

    @property
    def resignation_acknowledged(self) -> bool:
        """A resigned leader has told every voter it stepped down (safe to exit now)."""
        return isinstance(self.role, Resigned) and not self.role.unacked

    # ------------------------------------------------------------------ Fetch (leader side)
    def _handle_fetch_request(self, src: int, corr: int, req: FetchRequest, now: int) -> None:
        r = self.role
        if not isinstance(r, Leader):
            return self._reply_error(src, corr, req, Errors.NOT_LEADER_OR_FOLLOWER if req.epoch >= r.epoch
                                     else Errors.FENCED_LEADER_EPOCH)
        if req.epoch < r.epoch:
            return self._reply_error(src, corr, req, Errors.FENCED_LEADER_EPOCH)
        if req.epoch > r.epoch:
            return self._reply_error(src, corr, req, Errors.UNKNOWN_LEADER_EPOCH)
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0 or req.last_fetched_epoch > r.epoch:
            return self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        start = self.log.start_offset
        if start > 0 and (req.fetch_offset < start or req.last_fetched_epoch < self.log.start_epoch):
            # What the fetcher needs next is only in a snapshot now (or its log diverges below it).
            snapshot = self.snapshots.latest()
            if snapshot is None or snapshot.offset < start:
                raise RaftSafetyError(f"log starts at {start} but no snapshot reaches it (newest: {snapshot})")
            if src in self.voters:
                r.begin_epoch_unacked.discard(src)
                r.progress.touch(src, now)
            return self._send(src, corr, FetchResponse(Errors.NONE, r.epoch, self.node_id, r.progress.high_watermark,
                                                       start, snapshot_id=snapshot))
        end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset:
            # The fetcher's log has records this leader does not: tell it where to cut.
            return self._send(src, corr, FetchResponse(Errors.NONE, r.epoch, self.node_id, r.progress.high_watermark,
                                                       self.log.start_offset, diverging=end))
        if src in self.voters:
            r.begin_epoch_unacked.discard(src)  # fetching in our epoch acknowledges it
        hw_moved = r.progress.update_replica(req.replica_id, req.fetch_offset, self.log.end_offset, now)
        if hw_moved:
            self._on_leader_hw_moved(r)
        if req.fetch_offset < self.log.end_offset or req.max_wait_ms <= 0 or hw_moved:
            self._send(src, corr, self._fetch_response(r, req))
        else:
            r.parked[(src, corr)] = (req, now + req.max_wait_ms)

    def _fetch_response(self, r: Leader, req: FetchRequest) -> FetchResponse:
        data = self.log.read(req.fetch_offset, req.max_bytes) if req.fetch_offset < self.log.end_offset else b""
        return FetchResponse(Errors.NONE, r.epoch, self.node_id, r.progress.high_watermark,
                             self.log.start_offset, data)

    def _on_leader_hw_moved(self, r: Leader) -> None:
        self._set_high_watermark(r.progress.high_watermark)
        # Followers learn the new high watermark from answers to their parked fetches.
        for (src, corr), (req, _deadline) in r.parked.items():
            self._send(src, corr, self._fetch_response(r, req))
        r.parked.clear()

    def _complete_parked(self, r: Leader, now: int, only_expired: bool) -> None:
        for (src, corr), (req, deadline) in list(r.parked.items()):
            if (only_expired and now >= deadline) or (not only_expired and req.fetch_offset < self.log.end_offset):
                del r.parked[(src, corr)]
                self._send(src, corr, self._fetch_response(r, req))

    def _set_high_watermark(self, hw: Optional[int]) -> None:
        if hw is not None and hw > self.high_watermark:
            if hw > self.log.end_offset:
                raise RaftSafetyError(f"high watermark {hw} beyond log end {self.log.end_offset}")
            self.high_watermark = hw

    # ------------------------------------------------------------------ Fetch (follower side)
    def _handle_fetch_response(self, src: int, resp: FetchResponse, req: FetchRequest, now: int) -> None:
        r = self.role
        if not isinstance(r, Follower) or r.leader_id != src:
            return
        r.fetch_failures = 0  # it answered: alive
        if resp.error is not Errors.NONE:
            self._backoff[(FetchRequest, src)] = now + self.settings.retry_backoff_ms
            return
        if req.fetch_offset != self.log.end_offset:
            return  # our log moved since we asked (truncated); ask again
        r.fetch_deadline = self._fetch_deadline(now)
        r.last_fetch_ok_ms = now
        if resp.diverging is not None:
            target = min(resp.diverging.offset, self.log.end_offset_for_epoch(resp.diverging.epoch).offset)
            if target < self.high_watermark:
                return self._violation(src, f"the leader asked to truncate to {target}, below the high "
                                            f"watermark {self.high_watermark} (committed records are never cut)")
            self.log.truncate_to(target)
            return
        if resp.snapshot_id is not None:
            # Either our log ends below the leader's log start, or it diverges from the leader's
            # below it (our last epoch is older than the start's): nothing we hold after what we
            # committed is of use, and the snapshot holds what we committed.
            if resp.snapshot_id.offset < self.high_watermark:
                return self._violation(src, f"the leader named snapshot {resp.snapshot_id}, below the high "
                                            f"watermark {self.high_watermark}")
            # Download from byte 0 from this leader: another node's file of the same snapshot may
            # differ byte for byte, so a download never resumes across leaders.
            r.snapshot = resp.snapshot_id  # the next poll sends FetchSnapshot
            self.snapshots.begin_download(resp.snapshot_id)
            return
        if resp.records:
            try:
                self.log.append_as_follower(resp.records)
            except (CorruptBatchError, LogError):
                self._backoff[(FetchRequest, src)] = now + self.settings.retry_backoff_ms
                return
        if resp.high_watermark is not None:
            self._set_high_watermark(min(resp.high_watermark, self.log.end_offset))
        self._maybe_finish_rejoin(resp.high_watermark)

    # ------------------------------------------------------------------ FetchSnapshot (leader side)
    def _handle_fetch_snapshot_request(self, src: int, corr: int, req: FetchSnapshotRequest, now: int) -> None:
        r = self.role
        if not isinstance(r, Leader):
            return self._reply_error(src, corr, req, Errors.NOT_LEADER_OR_FOLLOWER if req.epoch >= r.epoch
                                     else Errors.FENCED_LEADER_EPOCH)
        if req.epoch < r.epoch:
            return self._reply_error(src, corr, req, Errors.FENCED_LEADER_EPOCH)
        if req.epoch > r.epoch:
            return self._reply_error(src, corr, req, Errors.UNKNOWN_LEADER_EPOCH)
        if src in self.voters:
            r.begin_epoch_unacked.discard(src)
            r.progress.touch(src, now)
        size = self.snapshots.size(req.snapshot_id)
        if size is None:
            return self._reply_error(src, corr, req, Errors.SNAPSHOT_NOT_FOUND)
        if req.position < 0 or req.position > size or req.max_bytes <= 0:
            return self._reply_error(src, corr, req, Errors.POSITION_OUT_OF_RANGE)
        data = self.snapshots.read(req.snapshot_id, req.position, req.max_bytes)
        if data is None:  # deleted since size() answered
            return self._reply_error(src, corr, req, Errors.SNAPSHOT_NOT_FOUND)
        self._send(src, corr, FetchSnapshotResponse(Errors.NONE, r.epoch, self.node_id, req.snapshot_id, size,
                                                    req.position, data))

    # ------------------------------------------------------------------ FetchSnapshot (follower side)
    def _handle_fetch_snapshot_response(self, src: int, resp: FetchSnapshotResponse, req: FetchSnapshotRequest,
                                      now: int) -> None:
        r = self.role
        if not isinstance(r, Follower) or r.leader_id != src or r.snapshot != req.snapshot_id:
            return
        r.fetch_failures = 0
        if resp.error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
            # Deleted by retention meanwhile (or we lost our place): Fetch again for the newest one.
            self.snapshots.abort_download()
            r.snapshot = None
            return
        if resp.error is not Errors.NONE:
            self._backoff[(FetchSnapshotRequest, src)] = now + self.settings.retry_backoff_ms
            return
        download = self.snapshots.download
        if download is None or download != (req.snapshot_id, req.position) or resp.position != req.position:
            return  # an answer to a request from before a restarted download
        r.fetch_deadline = self._fetch_deadline(now)
        r.last_fetch_ok_ms = now
        received = self.snapshots.append_download(resp.data)
        if received < resp.size and resp.data:
            return  # the next poll asks for the next chunk
        if received != resp.size:
            self.snapshots.abort_download()
            r.snapshot = None
            self._backoff[(FetchRequest, src)] = now + self.settings.retry_backoff_ms
            return
        self._install_snapshot(r, src, now)

    def _install_snapshot(self, r: Follower, src: int, now: int) -> None:
        """The download is whole: verify it, make it our snapshot, and start the log after it."""
        r.snapshot = None
        try:
            snapshot = self.snapshots.finish_download()
        except SnapshotError:
            # Damaged on the way or on the leader's disk: refuse it and ask again.
            self.snapshot_failures += 1
            self._backoff[(FetchRequest, src)] = now + self.settings.fetch_timeout_ms // 4
            return
        if isinstance(self.role, Leader):
            raise RaftSafetyError("a leader never loads a snapshot")
        if snapshot.offset < self.high_watermark:
            raise RaftSafetyError(f"snapshot {snapshot} is below the high watermark {self.high_watermark}")
        self.log.reset_to(snapshot)
        self.snapshots_installed += 1
        self._set_high_watermark(snapshot.offset)


# The module docstring's transition table: from each role, the roles _become may go to.
_TRANSITIONS: dict[type, frozenset[type]] = {
    Unattached: frozenset({Unattached, Prospective, Follower}),
    Prospective: frozenset({Unattached, Candidate, Follower}),
    Candidate: frozenset({Unattached, Prospective, Leader, Follower}),
    Leader: frozenset({Unattached, Follower, Resigned}),
    Follower: frozenset({Unattached, Prospective, Follower}),
    Resigned: frozenset({Unattached, Prospective, Follower}),
}
assert set(_TRANSITIONS) == set(ROLES), "a role has no row in the transition table"

# Dispatch: one table per kind of input, each checked complete when the module is imported.
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
_POLLS = {
    Unattached: RaftCore._poll_unattached,
    Prospective: RaftCore._poll_prospective,
    Candidate: RaftCore._poll_candidate,
    Leader: RaftCore._poll_leader,
    Follower: RaftCore._poll_follower,
    Resigned: RaftCore._poll_resigned,
}
assert set(_REQUEST_HANDLERS) == set(REQUEST_TYPES), "a request type has no handler"
assert set(_RESPONSE_HANDLERS) == set(RESPONSE_TYPES), "a response type has no handler"
assert set(_POLLS) == set(ROLES), "a role has no poll"


def _claimed_sender(msg: Message) -> int:
    """The node a request says it comes from (-1: an anonymous observer's Fetch)."""
    if isinstance(msg, VoteRequest):
        return msg.candidate_id
    if isinstance(msg, (BeginQuorumEpochRequest, EndQuorumEpochRequest)):
        return msg.leader_id
    return msg.replica_id
