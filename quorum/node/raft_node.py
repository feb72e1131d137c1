"""RaftNode: the driver that runs a sans-I/O RaftCore against real disks, clocks and gRPC.

A node owns its storage (storage.py: the directory lock, ``meta.properties``, the log, the
snapshots and ``quorum-state``), a gRPC server (server.py) serving :class:`RaftService` and any
other service given in ``servicers``, a :class:`PeerClient` for outbound requests, and ONE
event-loop thread (an asyncio loop, loop_thread.py), the only thread that touches the core and the
log. The same loop serves the wire (quorum/wire/: peers' Raft requests and clients' appends framed
on plain TCP) and runs the node's own wire connections to its peers, so the hot path from a socket
to the core and back has no thread hand-off. Each round on the loop drains the inbound items
(inbox.py: requests, answers from peers, proposals, calls), feeds the core, carries out its
Readies (quorum/raft/ready.py: persist, flush, send, advance), settles proposals (proposals.py),
feeds the commit listeners (listeners.py, one thread each) and publishes the node's status
(status.py); a timer wakes the next round at the core's next deadline.

The clock is monotonic milliseconds anchored at the wall clock when the node was created, so
every time the core reports (DescribeQuorum's fetch and caught-up times, a batch's append time) is
wall-clock-like ms that never goes backwards.

The API (``propose``, ``add_commit_listener``, ``describe_quorum``, ``status``, ``wait_for_leader``,
``shutdown``) is thread-safe. Construction checks storage and binds the port (so a bad directory or
a busy port fails before anything is logged) and already serves RPCs (answering UNAVAILABLE until
``start``); ``start`` runs Raft.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from quorum import failpoints
from quorum.config import HostPort, NodeConfig
from quorum.connection_limits import DEFAULT_LIMITS, ConnectionLimits
from quorum.errors import Errors, NodeNotRunningError, NotLeaderError, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2_grpc
from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import Batch
from quorum.log.election_state import ElectionState
from quorum.log.file_log import DEFAULT_SEGMENT_BYTES
from quorum.log.voter_set import Endpoint
from quorum.metrics.sources import commit_latency
from quorum.node.cluster_probe import probe_cluster_id
from quorum.node.inbox import Call, Listen, PeerRequest, Propose, Resign, SnapshotWritten, Stop
from quorum.node.listeners import CommitListener, SnapshotLoad
from quorum.node.loop_thread import LoopThread
from quorum.node.proposals import ProposalFuture, Proposals, fail
from quorum.node.raft_rounds import RaftRounds
from quorum.node.self_membership import SelfMembership
from quorum.node.server import (
    DEFAULT_RPC_WORKERS,
    MAX_REQUEST_BYTES,
    WIRE_CLIENT_SLOTS,
    AddService,
    ClientSlots,
    bind_server,
)
from quorum.node.status import NodeStatus, StatusBoard
from quorum.node.storage import NodeStorage
from quorum.node.voter_addresses import VoterAddresses
from quorum.raft.core import RaftCore
from quorum.raft.messages import QuorumDescription
from quorum.raft.settings import RaftSettings
from quorum.rpc import convert
from quorum.rpc.peer_client import PeerClient
from quorum.rpc.peer_identity import PeerIdentities
from quorum.rpc.raft_service import RaftService, RefusalLog
from quorum.rpc.raft_wire import raft_handlers
from quorum.rpc.wire_methods import METHODS as WIRE_METHODS
from quorum.security.node_security import PLAINTEXT_NODE, NodeSecurity
from quorum.snapshot.retention import Retention
from quorum.wire.first_bytes import Protocol
from quorum.wire.server import WireServer
from quorum.wire.shared_port import SharedPort

log = logging.getLogger(__name__)

SHARED_WIRE_PORT = 0  # wire_port: the wire on the controller listener's own port, with everything else
RESIGN_WAIT_S = 1.5  # how long a leader waits for EndQuorumEpoch acknowledgements on shutdown


class RaftNode(RaftRounds):
    def __init__(self, node_id: int, voters: Mapping[int, HostPort], listen: HostPort,
                 log_dir: str | os.PathLike, settings: RaftSettings = RaftSettings(),
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES, max_rpc_workers: int = DEFAULT_RPC_WORKERS,
                 servicers: Sequence[AddService] = (), raw_appends: bool = False,
                 retention: Retention = Retention(), bootstrap: Sequence[HostPort] = (),
                 listener_name: str = "CONTROLLER", auto_join: bool = False,
                 security: NodeSecurity = PLAINTEXT_NODE, wire_port: Optional[int] = 0,
                 wire_handlers: Optional[Mapping[int, Callable]] = None,
                 limits: ConnectionLimits = DEFAULT_LIMITS, more_listeners: Sequence[tuple[str, str, int]] = ()):
        """``wire_port``: where to serve the wire (quorum/wire/): SHARED_WIRE_PORT (0) on the listener's
        own port, with gRPC and Kafka's protocol (quorum/wire/shared_port.py); a port number, a port
        of its own; None, none. Over TLS where the listener is SSL. ``wire_handlers``: more of the
        wire's methods (the controller's), as ``servicers`` are more gRPC services. ``limits``: what
        connections may cost the listeners (quorum/connection_limits.py). ``more_listeners``: the controller's other
        listeners (Kafka's protocol), announced with its own when it joins a dynamic quorum."""
        self.node_id = node_id
        self.security = security  # TLS, principals, authorizer (quorum/security/node_security.py)
        # The Append RPC writes opaque records. Only a quorum without a metadata controller
        # (``controller start --raft-only``: benchmarks, Raft tests) may take them; in a
        # controller's log they would be records the controller cannot read.
        self.raw_appends = raw_appends
        self.client_slots = ClientSlots.for_workers(max_rpc_workers)  # gRPC's: each holds a server thread
        self.wire_slots = ClientSlots(WIRE_CLIENT_SLOTS)  # the wire's: each holds only its answer's state
        self.commit_latency = commit_latency()  # proposal -> committed, on the leader (metrics)
        # Where the voters are (voter_addresses.py); the bootstrap servers are set once the port is bound.
        self.addresses = VoterAddresses(voters, listener_name)
        self.listener_name = listener_name
        self.log_dir = Path(log_dir)
        self.settings = settings
        self.retention = retention
        # the lowest offset a reader holds the log from (None: none); a controller node reads its image's holds
        self.log_hold: Callable[[], Optional[int]] = lambda: None
        self._anchor_ms = time.time() * 1000 - time.monotonic() * 1000
        self._inbox: collections.deque = collections.deque()  # appended from any thread; drained by rounds
        self._round_pending = False  # a round is scheduled on the loop
        self._timer: Optional[asyncio.TimerHandle] = None  # the next round at the core's deadline
        self._loop_ended = threading.Event()  # no more rounds (stopped, or a fatal error)
        self._corrs = itertools.count(1)
        self.storage = storage = NodeStorage.open(self.log_dir, node_id, segment_bytes)
        self.cluster_id = storage.cluster_id
        self.log, self.snapshot_store, self.store = storage.log, storage.snapshots, storage.election_store
        self._election: ElectionState = storage.election
        # Who may speak as a voter: this node's session token, and its peers' proofs (peer_identity.py).
        self.identities = PeerIdentities(node_id, self.cluster_id, lambda: self.voters, security=security.client)
        self.refusals = RefusalLog(node_id)  # refused impersonations, logged without flooding
        services = [lambda server: raft_pb2_grpc.add_RaftServicer_to_server(RaftService(self), server), *servicers]
        # One port for every protocol (quorum/wire/shared_port.py) unless the wire has a port of its
        # own: gRPC then listens on loopback only, behind the shared port's relay.
        self.shared_port: Optional[SharedPort] = None
        shared = wire_port == SHARED_WIRE_PORT
        self._loop = LoopThread(f"raft-{node_id}-loop")
        self._port_loop = LoopThread(f"raft-{node_id}-port") if shared else None
        self._server = None
        self.wire: Optional[WireServer] = None
        try:
            self._server, grpc_port = bind_server(("127.0.0.1", 0) if shared else listen, max_rpc_workers,
                                                  f"raft-{node_id}-rpc", services, tls=security.tls, limits=limits)
            if shared:
                self.shared_port = SharedPort(listen[0], listen[1], self._port_loop, tls=security.tls is not None,
                                              grpc_address=("127.0.0.1", grpc_port))
            self.port = self.shared_port.port if shared else grpc_port
            # The wire (quorum/wire/): the same Raft requests and appends at a fraction of gRPC's cost.
            if wire_port is not None:
                self.wire = WireServer(listen[0], None if shared else wire_port,
                                       {**raft_handlers(self), **(wire_handlers or {})}, self._loop, MAX_REQUEST_BYTES,
                                       tls=security.tls.wire_context() if security.tls is not None else None,
                                       limits=limits, authenticated=self._wire_authenticated,
                                       methods=WIRE_METHODS).start()
            if shared:
                self.wire.port = self.port
                self.shared_port.route(Protocol.WIRE, self.wire.adopt)
                self.shared_port.route(Protocol.KAFKA, None, "this node serves no Kafka protocol (a Raft-only node)"
                                       if raw_appends else "the controller is loading its log")
        except BaseException:
            if self._server is not None:
                self._server.stop(None)
            if self.shared_port is not None:
                self.shared_port.stop()
            for loop in (self._loop, self._port_loop):
                if loop is not None:
                    loop.stop()
            storage.close()
            raise
        self.listen = (listen[0], self.port)
        others = [hp for hp in bootstrap if hp != self.listen and hp != listen]  # the list may name us
        self.addresses.set_bootstrap(others)
        # Announcing its endpoints needs an address others can reach: not a wildcard bind address.
        announce = self.listen[0] not in ("", "0.0.0.0", "::", "[::]")
        self.self_membership = (SelfMembership(node_id, listener_name, self.listen,
                                               auto_join and self.addresses.dynamic, security.client,
                                               tuple(Endpoint(*e) for e in more_listeners))
                                if announce or auto_join else None)
        self.peers = PeerClient({**{v: a for v, a in self.voters.items() if v != node_id},
                                 **self.addresses.bootstrap},
                                self._put, metadata=self.identities.metadata, security=security.client,
                                wire=self.wire)
        self.core: Optional[RaftCore] = None
        self._status = StatusBoard(NodeStatus(node_id, "Unstarted", self._election.epoch, None, 0,
                                              self.log.end_offset))
        self.election_latency = self._status.election_latency
        self._started = False
        self._running = False  # the event loop accepts items
        self._stopped = threading.Event()  # the event loop has ended (or never started and shut down)
        self._shutdown_started = False
        self._lifecycle = threading.Lock()
        self.fatal_error: Optional[BaseException] = None
        # event-loop state
        self._waiting: dict[int, concurrent.futures.Future] = {}  # corr -> servicer call awaiting the core
        self._proposals = Proposals()
        self._listeners: list[CommitListener] = []
        self._resign_outcome: Optional[concurrent.futures.Future] = None  # a shutdown waits on it
        self._cluster_rejections: dict[int, None] = {}  # voters that said we are in another cluster
        self._last_sweep = 0.0
        self._server.start()
        if self.shared_port is not None:
            self.shared_port.start()

    def _wire_authenticated(self, conn) -> bool:
        """A wire connection's caller is known, or need not be: where an authorizer runs, an
        anonymous connection may send only small requests (sasl.server.max.receive.size)."""
        security = self.security
        return security.authorizer is None or security.wire_caller(conn.peer, conn.peer_certificate).authenticated

    @classmethod
    def from_config(cls, config: NodeConfig, raw_appends: bool = False) -> "RaftNode":
        listen = config.controller_listener
        if listen is None or not (config.voters or config.bootstrap_servers):
            raise SparkraftError(Errors.INVALID_REQUEST, "a Raft node needs process.roles=controller, "
                                 "controller.quorum.voters or .bootstrap.servers and a controller listener")
        return cls(config.node_id, config.voters or {}, listen, config.log_dir, config.raft_settings(),
                   config.log_segment_bytes, raw_appends=raw_appends, retention=Retention.from_config(config),
                   bootstrap=config.bootstrap_servers or (), listener_name=config.controller_listener_name,
                   auto_join=config.auto_join_enable,
                   security=config.node_security(config.controller_listener_name),
                   wire_port=config.wire_port if config.wire_port >= 0 else None,
                   limits=config.connection_limits(), more_listeners=config.more_controller_listeners())

    def reload_tls(self) -> None:
        """SIGHUP: read the key and trust stores again, for the listener's next handshakes and for new
        connections to the peers; open connections stay up, so the quorum goes on."""
        if self.security.tls is not None:
            self.security.tls.reload()
        if self.security.client.tls:
            self.peers.reopen()
        log.info("Node %d: SIGHUP: TLS key material is read again for new connections", self.node_id)

    def set_voter_addresses(self, voters: Mapping[int, HostPort]) -> None:
        """Update voter addresses (before ``start``), e.g. once every node's ephemeral port is known."""
        self.voters.update(voters)
        self.peers.set_addresses({v: a for v, a in voters.items() if v != self.node_id})

    @property
    def wire_port(self) -> int:
        """The wire listener's port (0: none)."""
        return self.wire.port if self.wire is not None else 0

    @property
    def voters(self) -> dict[int, HostPort]:
        """Where each voter is reached (VoterAddresses)."""
        return self.addresses.voters

    def endpoints_of(self, voter_id: int) -> tuple[Endpoint, ...]:
        return self.addresses.endpoints_of(voter_id)

    def hold_client_slot(self, wire: bool) -> Callable[[], None]:
        """A slot for a write waiting for its commit (the wire's pool, or gRPC's); SparkraftError
        REQUEST_TIMED_OUT when none is free."""
        return (self.wire_slots if wire else self.client_slots).hold()

    def endpoint_of(self, node_id: Optional[int]) -> str:
        return self.addresses.endpoint_of(node_id)

    # ------------------------------------------------------------------ lifecycle
    def now_ms(self) -> int:
        return int(time.monotonic() * 1000 + self._anchor_ms)

    def in_loop(self) -> bool:
        """True on this node's event-loop thread (where the wire's requests and commits arrive)."""
        return self._loop.in_loop()

    @property
    def running(self) -> bool:
        """The event loop accepts work (started and not stopping)."""
        return self._running

    def start(self, check_cluster_id: bool = True) -> "RaftNode":
        """Run Raft: ask the other voters whether they share our cluster id, then start the loop."""
        with self._lifecycle:
            if self._started or self._shutdown_started:
                raise RuntimeError("a RaftNode starts once")
            if check_cluster_id:
                probe_cluster_id(self.node_id, self.cluster_id, self.voters, self.log_dir, self.security.client)
            self.core = RaftCore(self.node_id, self.addresses.static_voter_set(), self.cluster_id, self.log,
                                 self._election, self.now_ms(), self.settings, snapshots=self.snapshot_store,
                                 directory_id=self.storage.directory_id, bootstrap=list(self.addresses.bootstrap))
            self._follow_voter_set()
            log.info("Node %d started: cluster %s, voters %s, listening on %s, log %s at offsets [%d, %d), "
                     "epoch %d", self.node_id, self.cluster_id, self.addresses.text(),
                     convert.format_endpoint(*self.listen), self.log.directory, self.log.start_offset,
                     self.log.end_offset, self._election.epoch)
            self._publish_status()
            self._running = self._started = True
            self._put(SnapshotWritten())  # retention may have been lowered since the last run
        return self

    def shutdown(self, graceful: bool = True, timeout: float = RESIGN_WAIT_S) -> None:
        """Stop. A leader first resigns (EndQuorumEpoch) and waits up to ``timeout`` for the voters'
        acknowledgements, so a successor is elected at once instead of after a fetch timeout."""
        with self._lifecycle:
            if self._shutdown_started:
                return
            self._shutdown_started = True
        if graceful and self._running:
            outcome: concurrent.futures.Future = concurrent.futures.Future()
            self._put(Resign(outcome))
            try:
                result = outcome.result(timeout)
            except (concurrent.futures.TimeoutError, NodeNotRunningError):
                result = "not acknowledged in time"
            if result != "not leader":
                log.info("Node %d: resignation %s", self.node_id, result)
        if self._started:
            self._put(Stop())
            self._loop_ended.wait()
        self._running = False
        if self.shared_port is not None:
            self.shared_port.stop()
            self._port_loop.stop()
        self._server.stop(grace=0.2).wait()
        self.peers.close()
        if self.wire is not None:
            self.wire.stop()
        self._loop.stop()
        self._fail_everything(NodeNotRunningError(f"node {self.node_id} is shutting down"))
        for lst in self._listeners:
            lst.stop()
        for lst in self._listeners:
            if lst.thread is not None and lst.thread is not threading.current_thread():
                lst.thread.join(timeout=5)
        self.storage.close()
        self._stopped.set()
        self._status.wake()
        if self._started:
            log.info("Node %d stopped", self.node_id)

    def wait_stopped(self, timeout: Optional[float] = None) -> bool:
        """True once the event loop has ended (shutdown, or a fatal error: see ``fatal_error``)."""
        if not self._started:
            return self._stopped.wait(timeout)
        return self._loop_ended.wait(timeout)

    # ------------------------------------------------------------------ the API (any thread)
    def propose(self, records: Sequence[bytes]) -> ProposalFuture:
        """Append ``records`` as one batch through this node, which must lead.

        The future resolves with the last record's offset once committed, or fails with
        :class:`NotLeaderError` (leader id and epoch) if this node does not lead, loses leadership
        before the records commit, or a new leader replaced them. It is resolved on the event-loop
        thread, so a done-callback must be quick and must not block.
        """
        future = ProposalFuture()
        records = [bytes(r) for r in records]
        if not records:
            future.set_exception(ValueError("propose needs at least one record"))
        elif not self._running:
            st = self._status.current
            future.set_exception(NotLeaderError(None if st.leader_id == self.node_id else st.leader_id,
                                                st.epoch))
        else:
            started = time.monotonic()
            future.add_done_callback(
                lambda f: not f.cancelled() and f.exception() is None
                and self.commit_latency.observe(time.monotonic() - started))
            self._put(Propose(records, future))
        return future

    def add_commit_listener(self, fn: Callable[[list[Batch]], None],
                            on_snapshot: Optional[Callable[[SnapshotLoad], None]] = None) -> None:
        """Call ``fn(batches)`` on a thread of its own with every committed batch, from the log start,
        in offset order, each exactly once (control batches included, flagged ``control``). When the
        log let go of batches it had not delivered yet (a snapshot was installed, or retention moved
        the log start), ``on_snapshot`` is called first with the snapshot that holds them."""
        done = threading.Event()
        self._put(Listen(fn, on_snapshot, done))
        if self._running:
            done.wait(5)

    def add_commit_hand_off(self, hand_off) -> None:
        """As ``add_commit_listener``, but each delivery (a list of batches, or a SnapshotLoad first
        where the log let go of what was not delivered yet) goes to ``hand_off(delivery, done)`` on
        the event loop, which queues it for a thread of the caller's own; that thread calls
        ``done()`` when through with it. At most a few deliveries are out at once, as for a listener."""
        done = threading.Event()
        self._put(Listen(None, None, done, hand_off))
        if self._running:
            done.wait(5)

    def describe_quorum(self, timeout: Optional[float] = 5.0) -> QuorumDescription:
        """The leader's view of the quorum (times in wall-clock ms); NotLeaderError elsewhere."""
        return self._call(lambda core, now: core.describe_quorum(now)).result(timeout)

    @property
    def leading_since(self) -> Optional[float]:
        """When this node last became leader (Unix time), None if it never has."""
        return self._status.leading_since

    def status(self) -> NodeStatus:
        return self._status.current

    def kraft_version(self) -> concurrent.futures.Future:
        """The kraft.version this node's log is at (0: static voters; 1: voters in the log)."""
        return self._call(lambda core, now: core.voter_history.kraft_version)

    def wait_for_leader(self, timeout: float) -> int:
        """The current leader's id, once one is known; TimeoutError if none within ``timeout`` seconds."""
        return self._status.wait_for_leader(timeout, self._stopped.is_set)

    def submit_request(self, msg) -> concurrent.futures.Future:
        """For the servicer: hand a peer's request to the core; resolves with the core's response."""
        if not self._running:
            raise NodeNotRunningError(f"node {self.node_id} is not running")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(PeerRequest(convert.request_source(msg), next(self._corrs), msg, future))
        return future

    def read_committed(self, offset: int, max_bytes: int) -> concurrent.futures.Future:
        """(log start, high watermark, the batches from the one holding ``offset``, about
        ``max_bytes`` of them) of this node's log, read on the event loop as a Fetch is."""
        def read(core: RaftCore, now: int):
            log, hw = core.log, core.high_watermark
            start = max(offset, log.start_offset)
            return log.start_offset, hw, log.read(start, max_bytes) if start < min(hw, log.end_offset) else b""

        return self._call(read)

    def snapshot_written(self, snapshot: OffsetAndEpoch, size: int) -> None:
        """A snapshot of committed records was written beside the log (by the controller's snapshot
        thread): serve it, and apply retention (delete old snapshots and the log below)."""
        self.snapshot_store.added(snapshot, size)
        self._put(SnapshotWritten())

    def change_voters(self, change: Callable[[RaftCore, int], int]) -> concurrent.futures.Future:
        """Run ``change`` (the core's ``add_voter`` or ``remove_voter``, which returns the offset of the
        new voter set) on the loop; the future resolves with that offset once it is committed, or fails
        with the core's refusal (VoterChangeError, NotLeaderError) or NotLeaderError if leadership moves
        first."""
        committed = ProposalFuture()

        def run(core: RaftCore, now: int) -> int:
            offset = change(core, now)
            failpoints.hit("voter-change-appended")
            committed.set_running_or_notify_cancel()
            self._proposals.accepted(core.epoch, offset, committed)
            return offset

        def refused(call: concurrent.futures.Future) -> None:
            if call.exception() is not None:
                fail(committed, call.exception())

        self._call(run).add_done_callback(refused)
        return committed

    def snapshot_raft_records(self, end_offset: int, timeout: float = 30.0) -> list[bytes]:
        """The quorum's control records a snapshot ending at ``end_offset`` must carry (the voter set
        then), asked of the core on its own thread."""
        return self._call(lambda core, now: core.snapshot_raft_records(end_offset)).result(timeout)

    def _call(self, fn: Callable[[RaftCore, int], object]) -> concurrent.futures.Future:
        if not self._running:
            raise NodeNotRunningError(f"node {self.node_id} is not running")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._put(Call(fn, future))
        return future
