"""What the transports may use of a node: the servicers, the wire handlers and (through a client)
the brokers' Kafka listener reach a node only through these protocols, never its whole class.

The node classes live above this layer (quorum/node/), so the transports cannot import them; these
protocols name what they need instead. ``tests/unit/test_ports.py`` checks that the node classes
have every member, and that the transport modules use no other member of the node they are given.
"""
from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Callable, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from quorum.log.voter_set import Endpoint
    from quorum.raft.messages import QuorumDescription
    from quorum.rpc.peer_identity import PeerIdentities
    from quorum.security.node_security import NodeSecurity


class RefusalReporter(Protocol):
    """Where a controller sends the refusals it answers itself (quorum/node/refusal_reports.py)."""

    def report(self, row, request, error, context) -> None: ...


class RefusalNotes(Protocol):
    """Where refused impersonations are noted (raft_service.RefusalLog: logged without flooding)."""

    def note(self, kind: str, claimed: int, peer: str, why: str) -> None: ...


class ControllerPort(Protocol):
    """A controller node, to the Controller service's transports (gRPC, the wire)."""

    security: "NodeSecurity"
    loaded: bool  # replayed what its log held at start and what a leader said was committed: it answers reads
    refusal_reports: Optional["RefusalReporter"]  # refusals answered here, for the audit trail (None: not kept)

    @property
    def running(self) -> bool: ...

    def submit(self, request, check: Optional[Callable[[], object]] = None,
               context: object = None) -> concurrent.futures.Future:
        """A write, answered once its records are committed (``check``: its authorization, run by the
        active controller)."""

    def read_async(self, request) -> concurrent.futures.Future:
        """A read, answered from this controller's committed image."""

    def hold_client_slot(self, wire: bool) -> Callable[[], None]: ...

    def last_committed_offset(self) -> int: ...

    def leader_id(self) -> Optional[int]: ...

    def endpoint_of(self, node_id: int) -> str: ...

    def topic_name(self, topic_id: str) -> Optional[str]: ...


class RaftPort(Protocol):
    """A Raft node, to the Raft service's transports (gRPC, the wire)."""

    node_id: int
    cluster_id: str
    security: "NodeSecurity"
    identities: "PeerIdentities"  # voters' session tokens (peer_identity.py)

    @property
    def running(self) -> bool:
        """Started and not stopping: a node still asking the voters for their cluster id is not."""
    refusals: RefusalNotes
    raw_appends: bool  # `controller start --raft-only`: takes raw Append

    @property
    def wire_port(self) -> int: ...

    @property
    def voters(self) -> dict: ...

    def submit_request(self, msg) -> concurrent.futures.Future: ...

    def propose(self, records: Sequence[bytes]) -> concurrent.futures.Future: ...

    def change_voters(self, change) -> concurrent.futures.Future: ...

    def describe_quorum(self, timeout: Optional[float] = 5.0) -> "QuorumDescription": ...

    def status(self): ...

    def hold_client_slot(self, wire: bool) -> Callable[[], None]: ...

    def endpoint_of(self, node_id: Optional[int]) -> str: ...

    def endpoints_of(self, voter_id: int) -> tuple["Endpoint", ...]: ...
