"""``controller.quorum.auto.join.enable`` (KIP-1186): a controller of a dynamic quorum that starts as
an observer makes itself a voter, as an operator running ``quorum add-controller`` would.

Once it follows a leader and holds what the leader committed, it asks the leader to add its replica
key (node id, directory id) with its controller listener. If its node id is in the voter set under
another directory id (its disk was replaced), it first asks for that old replica's removal. It
tries at most once a second, on a thread of its own (the event loop never waits on it), and stops
for good once it has been a voter during this run: a controller an operator removes later stays
removed (KIP-1186's "at most once per process" rule).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from quorum.errors import SparkraftError
from quorum.log.voter_set import ReplicaKey
from quorum.rpc import convert

log = logging.getLogger(__name__)

RETRY_S = 1.0


class AutoJoin:
    def __init__(self, node_id: int, listener_name: str, listen: tuple[str, int]):
        self.node_id = node_id
        self.listener_name = listener_name
        self.listen = listen
        self.done = False  # a voter once during this run: never again
        self._busy: Optional[threading.Thread] = None
        self._next_try = 0.0

    def poll(self, core, leader_address: Optional[tuple[str, int]], cluster_id: str) -> None:
        """After each round of the node's loop: start the next step if one is due."""
        if self.done:
            return
        if core.is_voter:
            self.done = True
            log.info("Node %d is a voter (auto-join done)", self.node_id)
            return
        voters = core.voter_history.latest
        if (core.voter_history.kraft_version < 1 or core.is_leader or core.leader_id is None
                or leader_address is None or (self._busy is not None and self._busy.is_alive())
                or time.monotonic() < self._next_try):
            return
        self._next_try = time.monotonic() + RETRY_S
        stale = voters.get(self.node_id)
        if stale is not None:
            step = ("remove", stale.key)
        else:
            step = ("add", core.key)
        self._busy = threading.Thread(target=self._ask, args=(step, leader_address, cluster_id),
                                      name=f"auto-join-{self.node_id}", daemon=True)
        self._busy.start()

    def _ask(self, step: tuple[str, ReplicaKey], leader: tuple[str, int], cluster_id: str) -> None:
        from quorum.rpc.raft_client import RaftClient

        what, key = step
        try:
            with RaftClient([leader], timeout=5, rpc_timeout=5, cluster_id=cluster_id) as client:
                if what == "remove":
                    client.remove_voter(key.id, key.directory_id or "")
                else:
                    client.add_voter(key.id, key.directory_id or "", [(self.listener_name, *self.listen)])
            log.info("Node %d (auto-join): %s %s done", self.node_id, "removed the old replica" if
                     what == "remove" else "added itself as", key)
        except SparkraftError as e:
            log.debug("Node %d (auto-join): %s %s at %s: %s (retrying)", self.node_id, what, key,
                      convert.format_endpoint(*leader), e)
