"""Where a node reaches the voters, and what it tells others their endpoints are.

A static quorum (kraft.version 0) has them from ``controller.quorum.voters``. A dynamic one
(kraft.version 1, formatted so or upgraded since) has them in its log: the endpoints of the latest
voter set, which this follows as the log changes. Until a node of a dynamic quorum knows any voter,
it asks its bootstrap servers (``controller.quorum.bootstrap.servers``) who leads, under Kafka's
pseudo ids -2, -3, ... (they are addresses, not voters).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from quorum.config import HostPort
from quorum.log.voter_set import Endpoint, VoterSet
from quorum.raft.voter_history import VoterHistory
from quorum.rpc import convert


class VoterAddresses:
    def __init__(self, configured: Mapping[int, HostPort], listener_name: str):
        self.voters: dict[int, HostPort] = dict(configured)  # node id -> where to reach it
        self.dynamic = not configured  # configured with bootstrap servers instead of voters
        self.bootstrap: dict[int, HostPort] = {}
        self.listener_name = listener_name
        self._voter_set: Optional[VoterSet] = None  # the log's set ``voters`` was last taken from

    def set_bootstrap(self, servers: Sequence[HostPort]) -> None:
        """The bootstrap servers other than this node, under pseudo ids -2, -3, ..."""
        self.bootstrap = {-2 - i: hp for i, hp in enumerate(servers)}

    def static_voter_set(self) -> VoterSet:
        """The configured voters as the Raft core takes them (ids, and endpoints for an upgrade)."""
        return VoterSet.static(self.voters, {v: (Endpoint(self.listener_name, *a),) for v, a in self.voters.items()})

    def follow(self, history: VoterHistory) -> Optional[dict[int, HostPort]]:
        """Take the voters from the log's latest set if the quorum keeps them there (kraft.version 1)
        and the set changed since; the new addresses then, else None."""
        voters = history.latest
        if (not self.dynamic and history.kraft_version < 1) or voters is self._voter_set:
            return None
        self._voter_set = voters
        addresses = {}
        for v in voters.values():
            ep = next((e for e in v.endpoints if e.name == self.listener_name), v.endpoints[0] if v.endpoints else None)
            if ep is not None:
                addresses[v.key.id] = (ep.host, ep.port)
        self.voters = addresses
        return addresses

    def endpoints_of(self, voter_id: int) -> tuple[Endpoint, ...]:
        """A voter's listeners (DescribeQuorum): the voter set's in a dynamic quorum, the configured
        address under the controller listener's name in a static one."""
        voters = self._voter_set
        if voters is not None and voter_id in voters:
            return voters[voter_id].endpoints
        address = self.voters.get(voter_id)
        return (Endpoint(self.listener_name, *address),) if address else ()

    def endpoint_of(self, node_id: Optional[int]) -> str:
        """``host:port`` of a voter, or "" if unknown."""
        address = self.voters.get(node_id) if node_id is not None else None
        return convert.format_endpoint(*address) if address else ""

    def text(self) -> str:
        """``1@host:port,2@host:port`` (a log line's)."""
        return ",".join(f"{v}@{convert.format_endpoint(*a)}" for v, a in sorted(self.voters.items()))

    def describe_set(self) -> str:
        """The voter set last followed, each with its address (a log line's)."""
        voters = self._voter_set or VoterSet()
        return ", ".join(f"{v.key}@{convert.format_endpoint(*self.voters[v.key.id])}" if v.key.id in self.voters
                         else str(v.key) for v in voters.values()) or "unknown (asking the bootstrap servers)"
