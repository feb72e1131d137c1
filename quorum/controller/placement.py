"""Rack-aware striped replica placement: the semantics of Kafka's StripedReplicaPlacer.

Brokers are grouped by rack (no rack is a rack of its own). Each partition's first replica (its
preferred leader) is always an unfenced broker; the others are taken one per rack, round-robin over
the racks, preferring unfenced brokers of a rack and falling back to its fenced ones (a fenced
broker is still registered: during a roll it gets replicas, never a new leadership). Racks are
visited from an offset that advances by one per partition, and so are the brokers inside each
rack, so leaders and followers stripe evenly. After as many partitions as there are unfenced
brokers, racks and brokers are shuffled so the same replica sets do not repeat forever.

Errors (INVALID_REPLICATION_FACTOR) carry Kafka's messages:

- "Invalid replication factor 0: the replication factor must be positive."
- "All brokers are currently fenced." (followed by which ones and why a broker is fenced)
- "No brokers are registered." (followed by how to start one)
- "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."

Brokers in controlled shutdown are not usable (the caller leaves them out), as in Kafka.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from quorum.errors import Errors, SparkraftError


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: Optional[str]
    fenced: bool


def _invalid(message: str) -> SparkraftError:
    return SparkraftError(Errors.INVALID_REPLICATION_FACTOR, message)


class _BrokerList:
    """The brokers of one rack (fenced or unfenced): handed out once per iteration epoch each."""

    __slots__ = ("brokers", "index", "offset", "epoch")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: random.Random, previous: Optional[int] = None) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = (previous + 1) % len(self.brokers) if previous is not None \
                else rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        n = len(self.brokers)
        if n == 0:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % n
        if self.index >= n:
            return -1
        broker = self.brokers[(self.index + self.offset) % n]
        self.index += 1
        return broker


class _Rack:
    __slots__ = ("fenced", "unfenced")

    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        b = self.unfenced.next(epoch)
        return b if b >= 0 else self.fenced.next(epoch)


def _rack_key(rack: Optional[str]) -> tuple:
    return (rack is not None, rack or "")  # no rack sorts first, as Kafka's Optional comparator


class StripedPlacer:
    """One placement run over a fixed set of usable brokers (Kafka's RackList)."""

    def __init__(self, brokers: Iterable[UsableBroker], rng: random.Random,
                 existing: Sequence[Sequence[int]] = ()) -> None:
        self.rng = rng
        self.racks: dict[Optional[str], _Rack] = {}
        self.total = 0
        self.unfenced = 0
        rack_of: dict[int, Optional[str]] = {}
        for b in brokers:
            rack_of[b.broker_id] = b.rack
            rack = self.racks.get(b.rack)
            if rack is None:
                rack = self.racks[b.rack] = _Rack()
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.broker_id)
            self.total += 1
            if not b.fenced:
                self.unfenced += 1
        for name, rack in self.racks.items():
            rack.fenced.initialize(rng)
            rack.unfenced.brokers.sort()
            rack.unfenced.initialize(rng, _previous_broker_offset(rack_of, existing, name,
                                                                  rack.unfenced.brokers))
        self.names = sorted(self.racks, key=_rack_key)
        self.epoch = 0
        previous_rack = _previous_rack_offset(rack_of, existing, self.names)
        if previous_rack is not None:
            self.offset = (previous_rack + 1) % len(self.names)
        else:
            self.offset = rng.randrange(len(self.names)) if self.names else 0

    def check(self, replication_factor: int) -> None:
        if replication_factor <= 0:
            raise _invalid(f"Invalid replication factor {replication_factor}: the replication "
                           f"factor must be positive.")
        if self.total == 0:
            raise _invalid("No brokers are registered: start a broker (sparkraft broker start) first.")
        if self.unfenced == 0:
            fenced = sorted(b for rack in self.racks.values() for b in rack.fenced.brokers)
            raise _invalid(f"All brokers are currently fenced ({', '.join(map(str, fenced))}). A broker is "
                           f"fenced until its heartbeat reports metadata at or past its registration, and "
                           f"again after broker.session.timeout.ms without a heartbeat; `sparkraft brokers "
                           f"list --wait-unfenced N` waits for N unfenced brokers.")
        if replication_factor > self.total:
            raise _invalid(f"The target replication factor of {replication_factor} cannot be "
                           f"reached because only {self.total} broker(s) are registered.")

    def place(self, replication_factor: int) -> list[int]:
        """The replicas of the next partition (the first is its preferred leader)."""
        self.check(replication_factor)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        names, racks, epoch = self.names, self.racks, self.epoch
        out: list[int] = []
        first = self.offset
        while True:
            b = racks[names[first]].unfenced.next(epoch)
            if b >= 0:
                out.append(b)
                break
            first = (first + 1) % len(names)
        rack_index = self.offset
        for _ in range(1, replication_factor):
            b = -1
            while b < 0:
                if rack_index == first:
                    first = -1  # the leader's rack was used for this round already
                else:
                    b = racks[names[rack_index]].next(epoch)
                rack_index = (rack_index + 1) % len(names)
            out.append(b)
        self.epoch += 1
        self.offset += 1
        return out

    def _shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for rack in self.racks.values():
            self.rng.shuffle(rack.fenced.brokers)
            self.rng.shuffle(rack.unfenced.brokers)


def _previous_rack_offset(rack_of, existing, names) -> Optional[int]:
    if not existing:
        return None
    leader = existing[-1][0]
    if leader not in rack_of:
        return None
    rack = rack_of[leader]
    return names.index(rack) if rack in names else None


def _previous_broker_offset(rack_of, existing, rack, unfenced: list[int]) -> Optional[int]:
    for replicas in reversed(existing):
        for b in replicas:
            if b in rack_of and rack_of[b] == rack:
                return unfenced.index(b) if b in unfenced else None
    return None


def place(brokers: Iterable[UsableBroker], num_partitions: int, replication_factor: int,
          rng: random.Random, existing: Sequence[Sequence[int]] = ()) -> list[list[int]]:
    """Replica lists for ``num_partitions`` new partitions (after ``existing`` ones of the topic)."""
    placer = StripedPlacer(brokers, rng, existing)
    placer.check(replication_factor)
    return [placer.place(replication_factor) for _ in range(num_partitions)]
