"""A node's own view (role, epoch, leader, offsets), published after every round of the event loop
for any thread to read and wait on; role changes are logged here, once each."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from quorum.metrics.sources import election_latency

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """A node's own view, as of its last event-loop round."""

    node_id: int
    state: str  # the role's name: Leader, Follower, Candidate, Prospective, Voted, Unattached, Resigned
    epoch: int
    leader_id: Optional[int]
    high_watermark: int
    log_end_offset: int
    log_start_offset: int = 0  # the log holds nothing below it: a snapshot does
    snapshots_fetched: int = 0  # snapshots downloaded from the leader (FetchSnapshot) since start
    # the first high watermark a leader told the node since start (None: none has yet)
    first_leader_high_watermark: Optional[int] = None


class StatusBoard:
    """The latest NodeStatus (written by the event loop), a condition to wait on it, and the time
    from losing a leader to knowing the next one (``election_latency``)."""

    def __init__(self, initial: NodeStatus):
        self.current = initial
        self.changed = threading.Condition()
        self.election_latency = election_latency()  # leader lost -> next leader known (metrics)
        self._leaderless_since: Optional[float] = None
        self.leading_since: Optional[float] = None  # when this node last became leader (Unix time; metrics)

    def publish(self, st: NodeStatus) -> None:
        old = self.current
        if st == old:
            return
        self.current = st
        if st.state == "Leader" and (old.state, old.epoch) != (st.state, st.epoch):
            self.leading_since = time.time()
        if st.leader_id is None and old.leader_id is not None:
            self._leaderless_since = time.monotonic()
        elif st.leader_id is not None and self._leaderless_since is not None:
            self.election_latency.observe(time.monotonic() - self._leaderless_since)
            self._leaderless_since = None
        if (st.state, st.epoch, st.leader_id) != (old.state, old.epoch, old.leader_id):
            log.info("Node %d is %s in epoch %d (leader: %s)", st.node_id, st.state, st.epoch,
                     "none" if st.leader_id is None else st.leader_id)
            self.wake()

    def wake(self) -> None:
        with self.changed:
            self.changed.notify_all()

    def wait_for_leader(self, timeout: float, stopped: Callable[[], bool]) -> int:
        """The current leader's id, once one is known; TimeoutError if none within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                st = self.current
                if st.leader_id is not None and st.state in ("Leader", "Follower"):
                    return st.leader_id
                left = deadline - time.monotonic()
                if left <= 0 or stopped():
                    raise TimeoutError(f"node {st.node_id} knows no leader after {timeout:.1f}s "
                                       f"(state {st.state}, epoch {st.epoch})")
                self.changed.wait(left)
