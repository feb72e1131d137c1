"""The leader's view of every replica and the high-watermark rule.

The high watermark is the largest offset that a majority of voters hold durably:
the majority-th largest voter end offset (the leader counts its *flushed* end).
It moves only once it passes ``epoch_start_offset`` (the leader's LeaderChange
record is committed, so everything before it is too) and never backwards.
Observers are tracked for DescribeQuorum but never count; neither does a fetch under a voter's
node id from another directory (a replaced disk, KIP-853). The voter set may change while the
leader leads (``set_voters``); a leader being removed keeps leading but no longer counts itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from quorum.log.voter_set import ReplicaKey, VoterSet
from quorum.raft.messages import QuorumDescription, ReplicaDescription


@dataclass(slots=True)
class ReplicaState:
    replica_id: int
    directory_id: Optional[str] = None
    end_offset: int = 0
    last_fetch_ms: Optional[int] = None
    last_caught_up_ms: Optional[int] = None
    # when a voter that has not fetched yet joined this leader's progress: check-quorum counts it
    # alive from then (a grace), while DescribeQuorum still says it never fetched
    grace_from_ms: Optional[int] = None
    _leader_end_at_last_fetch: int = -1  # leader's end offset when this replica last fetched

    def update(self, fetch_offset: int, leader_end: int, now_ms: int) -> None:
        # Kafka's rule: caught up now if it has everything; else caught up as of the
        # previous fetch if it now holds what the leader had back then.
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = now_ms
        elif self._leader_end_at_last_fetch >= 0 and fetch_offset >= self._leader_end_at_last_fetch:
            self.last_caught_up_ms = self.last_fetch_ms
        self.end_offset = fetch_offset
        self.last_fetch_ms = now_ms
        self._leader_end_at_last_fetch = leader_end

    def describe(self) -> ReplicaDescription:
        return ReplicaDescription(self.replica_id, self.end_offset, self.last_fetch_ms, self.last_caught_up_ms,
                                  self.directory_id)

    @property
    def last_heard_ms(self) -> Optional[int]:
        """Its last fetch, or (never fetched) the start of its grace: what check-quorum goes by."""
        return self.last_fetch_ms if self.last_fetch_ms is not None else self.grace_from_ms


# An observer that names no directory id could be anyone: any client picks the replica id its
# Fetch names (300 made-up ids stayed in DescribeQuorum for minutes). It is kept only while it keeps
# fetching (a broker long-polls every 500 ms), and only so many of them at once.
ANONYMOUS_IDLE_TIMEOUT_MS = 10_000
MAX_ANONYMOUS_OBSERVERS = 1_000


class LeaderProgress:
    def __init__(self, leader: ReplicaKey, voters: VoterSet, epoch_start_offset: int, now_ms: int,
                 observer_idle_timeout_ms: int = 300_000, max_observers: int = 10_000):
        self.leader_id = leader.id
        self.leader = leader
        self.epoch_start_offset = epoch_start_offset
        self.local = ReplicaState(leader.id, directory_id=leader.directory_id)
        self.voters: dict[int, ReplicaState] = {}
        # Observers in the order of their last fetch (oldest first): expired from the front. Those
        # with a directory id (Kafka's brokers, controllers about to join) for observer_idle_timeout_ms;
        # the anonymous ones (no directory id) for seconds (ANONYMOUS_IDLE_TIMEOUT_MS).
        self.observers: dict[ReplicaKey, ReplicaState] = {}
        self.anonymous_observers: dict[ReplicaKey, ReplicaState] = {}
        self.observer_idle_timeout_ms = observer_idle_timeout_ms
        self.max_observers = max_observers
        self.high_watermark: Optional[int] = None
        self.set_voters(voters, now_ms)

    def set_voters(self, voters: VoterSet, now_ms: int) -> None:
        """The voter set changed (the leader appended a KRAFT_VOTERS record; it takes effect at once,
        committed or not). A new voter brings the progress it made as an observer; a voter that
        left is forgotten (it shows up as an observer when it fetches again)."""
        new: dict[int, ReplicaState] = {}
        for key in voters.replica_keys:
            if voters[key.id].matches(self.leader):
                new[key.id] = self.local
                continue
            state = self.voters.get(key.id)
            if state is None or not voters[key.id].matches(ReplicaKey(key.id, state.directory_id)):
                state = self._observers_like(key).pop(key, None) or ReplicaState(key.id, directory_id=key.directory_id)
                if state.last_fetch_ms is None:
                    state.grace_from_ms = now_ms
            new[key.id] = state
        self.voters = new

    @property
    def leader_votes(self) -> bool:
        return self.voters.get(self.leader_id) is self.local

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def update_local(self, flushed_offset: int, now_ms: int) -> bool:
        """The leader flushed up to ``flushed_offset``; returns True if the high watermark moved."""
        me = self.local
        me.end_offset = flushed_offset
        me.last_fetch_ms = me.last_caught_up_ms = now_ms
        return self._maybe_advance()

    def update_replica(self, key: ReplicaKey, is_voter: bool, fetch_offset: int, leader_end: int,
                       now_ms: int) -> bool:
        """A replica fetched from ``fetch_offset``; returns True if the high watermark moved. Only a
        fetch from a voter's own directory (``is_voter``) counts."""
        if is_voter and key.id in self.voters:
            state = self.voters[key.id]
            state.update(fetch_offset, leader_end, now_ms)
            state.directory_id = key.directory_id or state.directory_id  # a static voter's, as it says
            return self._maybe_advance()
        if key.id >= 0:
            observers = self._observers_like(key)
            state = observers.pop(key, None) or ReplicaState(key.id, directory_id=key.directory_id)
            state.update(fetch_offset, leader_end, now_ms)
            observers[key] = state  # to the back: the most recent fetch
            self.expire_observers(now_ms)
        return False

    def _observers_like(self, key: ReplicaKey) -> dict[ReplicaKey, ReplicaState]:
        return self.observers if key.directory_id else self.anonymous_observers

    def directory_id_of(self, voter_id: int) -> Optional[str]:
        """The directory id voter ``voter_id`` fetched with (None: not known)."""
        state = self.voters.get(voter_id)
        return None if state is None else state.directory_id

    def caught_up(self, key: ReplicaKey, now_ms: int, within_ms: int) -> bool:
        """Has observer ``key`` held everything the leader had, as of at most ``within_ms`` ago?
        (Only such a replica may be added as a voter: a lagging one would hold the high watermark.)"""
        state = self._observers_like(key).get(key)
        return state is not None and state.last_caught_up_ms is not None \
            and now_ms - state.last_caught_up_ms <= within_ms

    def expire_observers(self, now_ms: int) -> None:
        """Forget observers idle past the timeout, and the idlest beyond ``max_observers``: made-up
        replica ids must not grow the leader's memory or DescribeQuorum without bound."""
        for observers, idle_ms, most in ((self.observers, self.observer_idle_timeout_ms, self.max_observers),
                                         (self.anonymous_observers, min(ANONYMOUS_IDLE_TIMEOUT_MS,
                                                                        self.observer_idle_timeout_ms),
                                          min(MAX_ANONYMOUS_OBSERVERS, self.max_observers))):
            cutoff = now_ms - idle_ms
            while observers:
                oldest = next(iter(observers.values()))
                if len(observers) <= most and (oldest.last_fetch_ms or 0) >= cutoff:
                    break
                del observers[ReplicaKey(oldest.replica_id, oldest.directory_id)]

    def touch(self, replica_id: int, now_ms: int) -> None:
        """A voter fetched a snapshot chunk: alive (check-quorum), though its log did not move."""
        state = self.voters.get(replica_id)
        if state is not None and state is not self.local:
            state.last_fetch_ms = now_ms

    def _maybe_advance(self) -> bool:
        ends = sorted((r.end_offset for r in self.voters.values()), reverse=True)
        candidate = ends[self.majority - 1]
        if candidate > self.epoch_start_offset and (self.high_watermark is None or candidate > self.high_watermark):
            self.high_watermark = candidate
            return True
        return False

    def has_quorum_since(self, cutoff_ms: int) -> bool:
        """Check-quorum: has a majority (the leader included) fetched since ``cutoff_ms``?"""
        live = sum(1 for r in self.voters.values()
                   if r is self.local or (r.last_heard_ms is not None and r.last_heard_ms >= cutoff_ms))
        return live >= self.majority

    def successors(self) -> tuple[ReplicaKey, ...]:
        """Voters other than the leader, most caught-up first: EndQuorumEpoch's preferred order."""
        others = [r for r in self.voters.values() if r is not self.local]
        return tuple(ReplicaKey(r.replica_id, r.directory_id)
                     for r in sorted(others, key=lambda r: (-r.end_offset, r.replica_id)))

    def describe(self, epoch: int, now_ms: int) -> QuorumDescription:
        return QuorumDescription(
            leader_id=self.leader_id, leader_epoch=epoch,
            high_watermark=self.high_watermark if self.high_watermark is not None else -1,
            voters=tuple(self.voters[v].describe() for v in sorted(self.voters)),
            observers=tuple(o.describe() for o in sorted(
                (*self.observers.values(), *self.anonymous_observers.values()),
                key=lambda o: (o.replica_id, o.directory_id or ""))))
