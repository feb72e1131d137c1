"""A controller's own place in a dynamic quorum's voter set (KIP-853, KIP-1186).

Two duties, each asked of the leader as an operator would ask it:

- **Announce its endpoints** (UpdateRaftVoter, always): a voter whose entry in the voter set names
  other endpoints than its controller listener (it was restarted on another host or port) asks the
  leader to write the set with its own.
- **Join** (``controller.quorum.auto.join.enable``, KIP-1186): a controller that starts as an
  observer makes itself a voter. Once it follows a leader, it asks the leader to add its replica key
  (node id, directory id) with its controller listener; the leader adds only a caught-up observer,
  so until then the answer is "try again". If its node id is in the voter set under another
  directory id (its disk was replaced), it first asks for that old replica's removal. It stops for
  good once it has been a voter during this run: a controller an operator removes later stays
  removed (KIP-1186's "at most once per process" rule).

It asks at most once a second, on a thread of its own (the event loop never waits on it).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional, Sequence

from quorum.errors import SparkraftError
from quorum.log.voter_set import Endpoint, ReplicaKey
from quorum.rpc import convert
from quorum.rpc.raft_client import RaftClient
from quorum.security.client import ClientSecurity

log = logging.getLogger(__name__)

RETRY_S = 1.0


class SelfMembership:
    def __init__(self, node_id: int, listener_name: str, listen: tuple[str, int], auto_join: bool,
                 security: Optional[ClientSecurity] = None, more_listeners: Sequence[Endpoint] = ()):
        self.node_id = node_id
        self.security = security  # how it reaches the leader's listener
        self.listener_name = listener_name
        self.listen = listen
        # the quorum's listener first, then its Kafka listeners (DescribeCluster names them, KIP-919)
        self.endpoints = (Endpoint(listener_name, *listen), *more_listeners)
        self.joining = auto_join  # cleared once a voter during this run: never again
        self._busy: Optional[threading.Thread] = None
        self._next_try = 0.0

    def poll(self, core, leader_address: Optional[tuple[str, int]], cluster_id: str) -> None:
        """After each round of the node's loop: start the next step if one is due."""
        if core.voter_history.kraft_version < 1 or core.leader_id is None:
            return
        voters = core.voter_history.latest
        if core.is_voter:
            if self.joining:
                self.joining = False
                log.info("Node %d is a voter (auto-join done)", self.node_id)
            if voters[self.node_id].endpoints == self.endpoints:
                return
            step = ("update", core.key)
        elif self.joining:
            stale = voters.get(self.node_id)
            step = ("remove", stale.key) if stale is not None else ("add", core.key)
        else:
            return
        if core.is_leader:  # the leader asks itself: the same request, on its own endpoint
            leader_address = self.listen
        if (leader_address is None or (self._busy is not None and self._busy.is_alive())
                or time.monotonic() < self._next_try):
            return
        self._next_try = time.monotonic() + RETRY_S
        self._busy = threading.Thread(target=self._ask, args=(step, leader_address, cluster_id),
                                      name=f"self-membership-{self.node_id}", daemon=True)
        self._busy.start()

    def _ask(self, step: tuple[str, ReplicaKey], leader: tuple[str, int], cluster_id: str) -> None:
        what, key = step
        listeners = [(e.name, e.host, e.port) for e in self.endpoints]
        try:
            with RaftClient([leader], timeout=5, rpc_timeout=5, cluster_id=cluster_id,
                            security=self.security) as client:
                if what == "remove":
                    client.remove_voter(key.id, key.directory_id or "")
                elif what == "add":
                    client.add_voter(key.id, key.directory_id or "", listeners)
                else:
                    client.update_voter(key.id, key.directory_id or "", listeners)
            done = {"remove": "removed the old replica", "add": "added itself as",
                    "update": "announced its endpoint as"}[what]
            log.info("Node %d: %s %s", self.node_id, done, key if what != "update"
                     else convert.format_endpoint(*self.listen))
        except SparkraftError as e:
            log.debug("Node %d: %s %s at %s: %s (retrying)", self.node_id, what, key,
                      convert.format_endpoint(*leader), e)
