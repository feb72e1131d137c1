"""Per-partition outcomes of a request that names many partitions (an election of every partition),
held as runs rather than one object each. Part of the controller's API (quorum/controller/api.py
names them too)."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Union

from quorum.errors import Errors


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ElectLeadersResult:
    partition: TopicPartition
    error: Errors = Errors.NONE
    message: str = ""


class PartitionResults(Sequence):
    """Per-partition outcomes (ElectLeadersResults), in order, held as runs: a topic's partitions
    that succeeded one after another are (topic, [partition ids]) until someone iterates.

    Why: an election of every partition after a rolling restart at 2M answers a million of them.
    One object per outcome cost the active controller about 2 us each to build and 1 us to
    encode, and a client 3 us each to decode (far more beside other busy threads), where a caller
    that wants the count or the failures needs none of them. Equal to any sequence of the same
    results (a tuple of them included). Built by its maker, then only read."""

    __slots__ = ("_runs",)

    def __init__(self, results: Sequence[ElectLeadersResult] = ()) -> None:
        # (topic, [partition ids]) for a run of successes, or an ElectLeadersResult with an error
        self._runs: list[Union[tuple[str, list[int]], ElectLeadersResult]] = []
        for r in results:
            self.add(r)

    # -- building ---------------------------------------------------------------------------
    def run(self, topic: str) -> list[int]:
        """The partition ids list of a run of ``topic``'s successes at the end, to append to."""
        runs = self._runs
        if runs:
            last = runs[-1]
            if type(last) is tuple and last[0] == topic:
                return last[1]
        pids: list[int] = []
        runs.append((topic, pids))
        return pids

    def add(self, result: ElectLeadersResult) -> None:
        if result.error is Errors.NONE and not result.message:
            self.run(result.partition.topic).append(result.partition.partition)
        else:
            self._runs.append(result)

    # -- reading ----------------------------------------------------------------------------
    def runs(self) -> Iterator[Union[tuple[str, list[int]], ElectLeadersResult]]:
        """The runs in order: (topic, partition ids) that succeeded, or one result with an error."""
        return iter(self._runs)

    def failures(self) -> list[ElectLeadersResult]:
        return [r for r in self._runs if type(r) is not tuple]

    def __len__(self) -> int:
        return sum(len(r[1]) if type(r) is tuple else 1 for r in self._runs)

    def __iter__(self) -> Iterator[ElectLeadersResult]:
        for r in self._runs:
            if type(r) is tuple:
                topic = r[0]
                for pid in r[1]:
                    yield ElectLeadersResult(TopicPartition(topic, pid))
            else:
                yield r

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        if i < 0:
            i += len(self)
        if i >= 0:
            for r in self._runs:  # a run at a time, not a million objects
                n = len(r[1]) if type(r) is tuple else 1
                if i < n:
                    return ElectLeadersResult(TopicPartition(r[0], r[1][i])) if type(r) is tuple else r
                i -= n
        raise IndexError("PartitionResults index out of range")

    def __reversed__(self) -> Iterator[ElectLeadersResult]:
        return reversed(tuple(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (PartitionResults, tuple, list)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PartitionResults({tuple(self)!r})" if len(self) <= 10 else f"PartitionResults({len(self)} results)"
