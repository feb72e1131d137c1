"""The leader's view of every replica and the high-watermark rule.

The high watermark is the largest offset that a majority of voters hold durably:
the majority-th largest voter end offset (the leader counts its *flushed* end).
It moves only once it passes ``epoch_start_offset`` (the leader's LeaderChange
record is committed, so everything before it is too) and never backwards.
Observers are tracked for DescribeQuorum but never count.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from quorum.raft.messages import QuorumDescription, ReplicaDescription


@dataclass(slots=True)
class ReplicaState:
    replica_id: int
    end_offset: int = 0
    last_fetch_ms: Optional[int] = None
    last_caught_up_ms: Optional[int] = None
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
        return ReplicaDescription(self.replica_id, self.end_offset, self.last_fetch_ms, self.last_caught_up_ms)


class LeaderProgress:
    def __init__(self, leader_id: int, voters: Iterable[int], epoch_start_offset: int, now_ms: int,
                 observer_idle_timeout_ms: int = 300_000, max_observers: int = 10_000):
        self.leader_id = leader_id
        self.epoch_start_offset = epoch_start_offset
        self.voters = {v: ReplicaState(v) for v in voters}
        for r in self.voters.values():
            r.last_fetch_ms = now_ms if r.replica_id != leader_id else None  # grace for check-quorum
        # Observers in the order of their last fetch (oldest first): expired from the front.
        self.observers: dict[int, ReplicaState] = {}
        self.observer_idle_timeout_ms = observer_idle_timeout_ms
        self.max_observers = max_observers
        self.high_watermark: Optional[int] = None

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def update_local(self, flushed_offset: int, now_ms: int) -> bool:
        """The leader flushed up to ``flushed_offset``; returns True if the high watermark moved."""
        me = self.voters[self.leader_id]
        me.end_offset = flushed_offset
        me.last_fetch_ms = me.last_caught_up_ms = now_ms
        return self._maybe_advance()

    def update_replica(self, replica_id: int, fetch_offset: int, leader_end: int, now_ms: int) -> bool:
        """A replica fetched from ``fetch_offset``; returns True if the high watermark moved."""
        if replica_id in self.voters:
            self.voters[replica_id].update(fetch_offset, leader_end, now_ms)
            return self._maybe_advance()
        if replica_id >= 0:
            state = self.observers.pop(replica_id, None) or ReplicaState(replica_id)
            state.update(fetch_offset, leader_end, now_ms)
            self.observers[replica_id] = state  # to the back: the most recent fetch
            self.expire_observers(now_ms)
        return False

    def expire_observers(self, now_ms: int) -> None:
        """Forget observers idle past the timeout, and the idlest beyond ``max_observers``: made-up
        replica ids must not grow the leader's memory or DescribeQuorum without bound."""
        cutoff = now_ms - self.observer_idle_timeout_ms
        while self.observers:
            oldest = next(iter(self.observers.values()))
            if len(self.observers) <= self.max_observers and (oldest.last_fetch_ms or 0) >= cutoff:
                break
            del self.observers[oldest.replica_id]

    def touch(self, replica_id: int, now_ms: int) -> None:
        """A voter fetched a snapshot chunk: alive (check-quorum), though its log did not move."""
        if replica_id in self.voters and replica_id != self.leader_id:
            self.voters[replica_id].last_fetch_ms = now_ms

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
                   if r.replica_id == self.leader_id or (r.last_fetch_ms is not None and r.last_fetch_ms >= cutoff_ms))
        return live >= self.majority

    def successors(self) -> tuple[int, ...]:
        """Voters other than the leader, most caught-up first: EndQuorumEpoch's preferred order."""
        others = [r for r in self.voters.values() if r.replica_id != self.leader_id]
        return tuple(r.replica_id for r in sorted(others, key=lambda r: (-r.end_offset, r.replica_id)))

    def describe(self, epoch: int, now_ms: int) -> QuorumDescription:
        return QuorumDescription(
            leader_id=self.leader_id, leader_epoch=epoch,
            high_watermark=self.high_watermark if self.high_watermark is not None else -1,
            voters=tuple(self.voters[v].describe() for v in sorted(self.voters)),
            observers=tuple(self.observers[o].describe() for o in sorted(self.observers)))
