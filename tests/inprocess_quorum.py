"""Three in-process RaftNodes on loopback (``raw_appends``: clients may append opaque records), for
the tests of the transports (test_wire*.py): every node's listener ephemeral, each node's security
and wire port as the test asks."""
from __future__ import annotations

import time
from typing import Callable, Optional

from quorum.log.meta_properties import format_storage, random_cluster_id
from quorum.node import RaftNode
from quorum.raft.settings import RaftSettings
from quorum.security.node_security import PLAINTEXT_NODE, NodeSecurity

SETTINGS = RaftSettings(election_timeout_ms=200, fetch_timeout_ms=1000, request_timeout_ms=1000)
VOTERS = (1, 2, 3)


class Quorum:
    def __init__(self, root, wire_ports=None, security: Optional[Callable[[int], NodeSecurity]] = None):
        """``wire_ports``: node id -> wire port (None: no wire; default 0, on the node's one port);
        ``security``: node id -> its NodeSecurity (default PLAINTEXT)."""
        self.root = root
        self.cluster_id = random_cluster_id()
        self.wire_ports = wire_ports or {}
        for i in VOTERS:
            format_storage(root / f"c{i}", self.cluster_id, i)
        self.nodes = {i: RaftNode(i, {v: ("127.0.0.1", 0) for v in VOTERS}, ("127.0.0.1", 0), root / f"c{i}",
                                  SETTINGS, raw_appends=True, wire_port=self.wire_ports.get(i, 0),
                                  security=security(i) if security else PLAINTEXT_NODE)
                      for i in VOTERS}
        self.addresses = {i: ("127.0.0.1", n.port) for i, n in self.nodes.items()}
        for n in self.nodes.values():
            n.set_voter_addresses(self.addresses)
            n.start()

    def restart(self, i, wire_port: Optional[int] = 0):
        """Node ``i`` stopped and started again on its port (``wire_port``: its wire's, as in __init__)."""
        self.nodes[i].shutdown(graceful=False)
        self.nodes[i] = RaftNode(i, self.addresses, self.addresses[i], self.root / f"c{i}", SETTINGS,
                                 raw_appends=True, wire_port=wire_port).start()

    def leader(self, timeout=10.0) -> RaftNode:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for n in self.nodes.values():
                if n.status().state == "Leader":
                    return n
            time.sleep(0.01)
        raise AssertionError("no leader")

    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for _, p in self.addresses.values())

    def wait_all_reach(self, offset, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(n.status().log_end_offset > offset and n.status().high_watermark > offset
                   for n in self.nodes.values()):
                return
            time.sleep(0.01)
        raise AssertionError(f"not every node reached {offset}: {[n.status() for n in self.nodes.values()]}")

    def close(self):
        for n in self.nodes.values():
            n.shutdown(graceful=False)


def running(q: Quorum):
    """A fixture's body: ``q`` for the test, closed after it."""
    try:
        yield q
    finally:
        q.close()
