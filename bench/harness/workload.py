"""What a replicated-log benchmark asks of every system it measures, so systems are driven alike."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Load:
    """Closed-loop load: ``writers`` concurrent appenders, each waiting for its append to commit
    before sending the next; every append carries ``records_per_append`` records of ``record_bytes``.
    ``writers * records_per_append`` records are in flight at any time."""

    writers: int
    records_per_append: int
    record_bytes: int = 100

    @property
    def in_flight(self) -> int:
        return self.writers * self.records_per_append

    def describe(self) -> str:
        return (f"{self.writers} writers x {self.records_per_append} records/append "
                f"x {self.record_bytes} B")


class ReplicatedLogUnderTest(Protocol):
    """A running 3-voter cluster, as the quorum benchmark drives it."""

    def pids(self) -> dict[str, int]:
        """Processes whose CPU use is worth reporting, by role (``leader``, ``follower-2``...)."""

    def throughput(self, load: Load, seconds: float, warmup: float) -> dict:
        """Run ``load`` for ``warmup + seconds``; ``records_per_s`` committed in the last ``seconds``,
        plus ``cpu_percent`` per process over that window."""

    def latency(self, count: int, warmup: int, record_bytes: int, max_seconds: float) -> list[float]:
        """Seconds per append of one record by a single writer, one append at a time; stops after
        ``count`` measured appends or ``max_seconds``, whichever comes first."""

    def failover(self, record_bytes: int, timeout: float) -> float:
        """SIGKILL the leader; seconds until an append commits again (client-observed), or
        TimeoutError after ``timeout``. The killed node is restarted and caught up either way."""
