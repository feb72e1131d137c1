"""Timeouts and sizes the core runs with (Kafka's controller.quorum.* defaults)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftSettings:
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 25  # controller.quorum.append.linger.ms
    fetch_max_wait_ms: int = 500  # how long a leader holds an empty Fetch (long poll)
    # ...and how long at most once the high watermark has moved, so the next records carry it
    # (0: answered at once, as Kafka's leader does; replication.py says why not)
    high_watermark_linger_ms: int = 1
    fetch_max_bytes: int = 8 * 1024 * 1024
    max_batch_bytes: int = 1024 * 1024  # a lingering batch is appended once it grows past this
    # The leader forgets an observer (DescribeQuorum's CurrentObservers) that has not fetched for
    # this long (Kafka: 5 minutes), and never tracks more than max_observers of them.
    observer_idle_timeout_ms: int = 300_000  # controller.quorum.observer.idle.timeout.ms
    max_observers: int = 10_000

    def __post_init__(self) -> None:
        # An idle follower must hear back well within its fetch timeout, or it would call an
        # election between two long polls.
        if self.fetch_max_wait_ms > self.fetch_timeout_ms // 2:
            object.__setattr__(self, "fetch_max_wait_ms", max(1, self.fetch_timeout_ms // 2))

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader not fetched from by a majority for this long resigns."""
        return self.fetch_timeout_ms * 3 // 2
