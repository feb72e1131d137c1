"""RaftNode: the driver that runs a sans-I/O RaftCore against real disks, clocks and gRPC.

A node owns

- its storage: ``meta.properties`` (checked, never written here), the metadata log
  (:class:`FileLog` in ``<metadata.log.dir>/__cluster_metadata-0``) and ``quorum-state``
  (:class:`FileElectionStore`, in that partition directory as in Kafka), and a ``.lock`` file that
  keeps a second process off the same directory;
- a gRPC server (:class:`RaftService`) and a :class:`PeerClient` for outbound requests;
- ONE event-loop thread, the only thread that touches the core and the log. It drains the inbound
  queue (requests from the servicer, answers and failures from the peer client, proposals, calls
  from the API), feeds the core, then carries out the core's Ready outputs in order::

      while core.has_ready():
          rd = core.ready()
          persist rd.election_state      # quorum-state, atomically
          flush the log if rd.flush      # fsync before anything is acknowledged
          send rd.messages               # requests -> peers, responses -> waiting servicer calls
          core.advance(rd, now)

  and then sleeps until the core's next deadline or the next inbound item;
- one thread per commit listener, so a slow listener never stalls Raft.

The clock is monotonic milliseconds anchored at the wall clock when the node was created, so
every time the core reports (DescribeQuorum's fetch and caught-up times, a batch's append time) is
wall-clock-like ms that never goes backwards.

The API (``propose``, ``add_commit_listener``, ``describe_quorum``, ``status``, ``wait_for_leader``,
``shutdown``) is thread-safe. Construction checks storage and binds the port (so a bad directory or
a busy port fails before anything is logged) and already serves RPCs (answering UNAVAILABLE until
``start``); ``start`` runs Raft. ``servicers`` adds more gRPC services to the same server and port
(each is called with the server before it starts): the controller's, for a ControllerNode.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import errno
import fcntl
import itertools
import logging
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

import grpc

from quorum.config import HostPort, NodeConfig
from quorum.errors import Errors, NotLeaderError, SparkraftError
from quorum.log.batch import Batch
from quorum.log.election_store import QUORUM_STATE_FILE, FileElectionStore
from quorum.log.errors import StorageError
from quorum.log.file_log import DEFAULT_SEGMENT_BYTES, FileLog
from quorum.log.api import OffsetAndEpoch
from quorum.log.meta_properties import check_storage, metadata_partition_dir
from quorum.metrics.registry import Histogram
from quorum.raft.core import RaftCore
from quorum.raft.messages import FetchRequest, QuorumDescription, REQUEST_TYPES
from quorum.raft.settings import RaftSettings
from quorum.rpc import convert
from quorum.rpc.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc.peer_client import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES, PeerClient
from quorum.rpc.peer_identity import PeerIdentities
from quorum.rpc.raft_service import NodeNotRunningError, RaftService
from quorum.snapshot.file_store import FileSnapshotStore
from quorum.snapshot.files import remove_temporaries
from quorum.snapshot.retention import Retention

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
RESIGN_WAIT_S = 1.5  # how long a leader waits for EndQuorumEpoch acknowledgements on shutdown
CLUSTER_PROBE_S = 0.5  # how long start() asks the other voters whether they share our cluster id
MAX_ITEMS_PER_ROUND = 512  # inbound items handled before the core's outputs are carried out
LISTENER_CHUNK_BYTES = 4 << 20  # committed bytes handed to a listener per delivery
LISTENER_MAX_PENDING = 4  # deliveries queued per listener before the loop stops reading for it
MAX_IDLE_WAIT_MS = 1000
DEFAULT_RPC_WORKERS = 256  # threads of the gRPC server (each RPC in flight holds one)
RAFT_RESERVED_WORKERS = 32  # of which client writes may never take these (Fetch, Vote, reads)

# The largest request a node takes (any service): Raft requests are small, and a controller request
# this size already makes several MiB of records. gRPC refuses a larger one (RESOURCE_EXHAUSTED)
# before reading it into memory.
MAX_REQUEST_BYTES = 8 * 1024 * 1024

SERVER_OPTIONS = (
    ("grpc.so_reuseport", 0),  # a second server on the same port must fail, not share it
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),  # what one request may cost (Limits)
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
)


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


class ProposalFuture(concurrent.futures.Future):
    """Resolves with the offset of the proposal's last record once committed; ``epoch`` is the
    leader epoch it was appended in (set when the leader accepted it)."""

    epoch: Optional[int] = None


@dataclass(slots=True)
class _Proposal:
    epoch: int
    last_offset: int
    future: ProposalFuture


@dataclass(frozen=True, slots=True)
class SnapshotLoad:
    """What a commit listener gets instead of batches it fell behind on: the log no longer holds
    them (they are in this snapshot, at ``path``); load it, then batches follow from its end."""

    snapshot_id: OffsetAndEpoch
    path: Path


class _Listener:
    """A commit listener: its own thread, fed batches in offset order by the event loop."""

    def __init__(self, node: "RaftNode", fn: Callable[[list[Batch]], None], index: int, start: int,
                 on_snapshot: Optional[Callable[[SnapshotLoad], None]] = None):
        self.fn = fn
        self.on_snapshot = on_snapshot
        self.next_offset = start  # first offset not yet handed over (event-loop thread only)
        self.pending = 0  # deliveries handed over but not yet done (event-loop thread only)
        self.queue: "queue.SimpleQueue[Optional[list[Batch]]]" = queue.SimpleQueue()
        self._node = node
        self.thread = threading.Thread(target=self._run, name=f"raft-{node.node_id}-listener-{index}",
                                       daemon=True)

    def _run(self) -> None:
        while True:
            batches = self.queue.get()
            if batches is None:
                return
            try:
                if isinstance(batches, SnapshotLoad):
                    if self.on_snapshot is None:
                        raise RuntimeError(f"the log no longer holds the records below {batches.snapshot_id.offset} "
                                           f"and this listener cannot load a snapshot")
                    self.on_snapshot(batches)
                else:
                    self.fn(batches)
            except Exception:
                if isinstance(batches, SnapshotLoad):
                    log.error("node %d: commit listener %r could not load snapshot %s", self._node.node_id,
                              self.fn, batches.path, exc_info=True)
                    self._node._inbox.put(("delivered", self))
                    continue
                log.warning("node %d: commit listener %r failed on offsets %d..%d", self._node.node_id,
                            self.fn, batches[0].base_offset, batches[-1].last_offset, exc_info=True)
            self._node._inbox.put(("delivered", self))


def _check_port_free(host: str, port: int) -> None:
    """Fail with one clear line if ``host:port`` cannot be listened on (before gRPC logs its own)."""
    if port == 0:
        return
    where = convert.format_endpoint(host, port)
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise OSError(f"cannot listen on {where}: {e.strerror}") from None
    family, kind, proto, _, address = infos[0]
    s = socket.socket(family, kind, proto)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(address)
    except OSError as e:
        why = "address already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        raise OSError(f"cannot listen on {where}: {why}") from None
    finally:
        s.close()


class ClientSlots:
    """How many client writes (Append, controller writes and heartbeats) may wait for their commit
    at once. ``with slots:`` takes one or raises REQUEST_TIMED_OUT, which clients retry."""

    def __init__(self, limit: int):
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

    def __enter__(self) -> None:
        if not self._free.acquire(blocking=False):
            raise SparkraftError(Errors.REQUEST_TIMED_OUT, f"{self.limit} client requests are already waiting "
                                 f"for their commit here; retry")

    def __exit__(self, *exc) -> None:
        self._free.release()


class RaftNode:
    def __init__(self, node_id: int, voters: Mapping[int, HostPort], listen: HostPort,
                 log_dir: str | os.PathLike, settings: RaftSettings = RaftSettings(),
                 segment_bytes: int = DEFAULT_SEGMENT_BYTES, max_rpc_workers: int = DEFAULT_RPC_WORKERS,
                 servicers: Sequence[Callable[[grpc.Server], None]] = (), raw_appends: bool = False,
                 retention: Retention = Retention()):
        self.node_id = node_id
        # The Append RPC writes opaque records. Only a quorum without a metadata controller
        # (``controller start --raft-only``: benchmarks, Raft tests) may take them; in a
        # controller's log they would be records the controller cannot read.
        self.raw_appends = raw_appends
        # A synchronous gRPC server gives every RPC in flight a worker thread, and a client write
        # holds its thread until its records are committed, which needs the followers' Fetches,
        # which need threads too. So client writes get at most all but RAFT_RESERVED_WORKERS of
        # them; past that they are refused at once (retriable), never queued in front of Raft.
        self.client_slots = ClientSlots(max(1, max_rpc_workers - RAFT_RESERVED_WORKERS))
        self.commit_latency = Histogram()  # proposal -> committed, on the leader (metrics)
        self.election_latency = Histogram()  # leader lost -> next leader known (metrics)
        self._leaderless_since: Optional[float] = None
        self.voters: dict[int, HostPort] = dict(voters)
        self.log_dir = Path(log_dir)
        self.settings = settings
        meta = check_storage(self.log_dir, node_id)
        self.cluster_id = meta.cluster_id
        # Who may speak as a voter: this node's session token, and its peers' proofs (peer_identity.py).
        self.identities = PeerIdentities(node_id, self.cluster_id, lambda: self.voters)
        self._anchor_ms = time.time() * 1000 - time.monotonic() * 1000
        self._inbox: "queue.SimpleQueue[tuple]" = queue.SimpleQueue()
        self._corrs = itertools.count(1)
        self._lock_fd = self._lock_directory()
        self._server: Optional[grpc.Server] = None
        self.log: Optional[FileLog] = None
        try:
            self._server, self.port = self._bind(listen, max_rpc_workers, servicers)
            partition = metadata_partition_dir(self.log_dir)
            partition.mkdir(exist_ok=True)
            self.store = FileElectionStore(partition / QUORUM_STATE_FILE)
            self._election = self.store.read()
            self.log = FileLog(partition, segment_bytes)
            self.snapshot_store = FileSnapshotStore(partition, self.cluster_id)
            self._open_snapshots(partition)
            self._check_election_state_kept()
        except BaseException:
            self._release_resources()
            raise
        self.retention = retention
        self.listen = (listen[0], self.port)
        self.peers = PeerClient({v: a for v, a in self.voters.items() if v != node_id}, self._inbox.put,
                                metadata=self.identities.metadata)
        self.core: Optional[RaftCore] = None
        self._status = NodeStatus(node_id, "Unstarted", self._election.epoch, None, 0, self.log.end_offset)
        self._status_cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._running = False  # the event loop accepts items
        self._stopped = threading.Event()  # the event loop has ended (or never started and shut down)
        self._shutdown_started = False
        self._lifecycle = threading.Lock()
        self.fatal_error: Optional[BaseException] = None
        # event-loop state
        self._waiting: dict[int, concurrent.futures.Future] = {}  # corr -> servicer call awaiting the core
        self._proposals: collections.deque[_Proposal] = collections.deque()
        self._listeners: list[_Listener] = []
        self._resign_outcome: Optional[concurrent.futures.Future] = None  # a shutdown waits on it
        self._cluster_rejections: dict[int, None] = {}  # voters that said we are in another cluster
        self._last_sweep = 0.0
        self._server.start()

    @classmethod
    def from_config(cls, config: NodeConfig, raw_appends: bool = False) -> "RaftNode":
        listen = config.controller_listener
        if listen is None or not config.voters:
            raise SparkraftError(Errors.INVALID_REQUEST, "a Raft node needs process.roles=controller, "
                                 "controller.quorum.voters and a controller listener")
        return cls(config.node_id, config.voters, listen, config.log_dir, config.raft_settings(),
                   config.log_segment_bytes, raw_appends=raw_appends, retention=Retention.from_config(config))

    # ------------------------------------------------------------------ construction helpers
    def _open_snapshots(self, partition: Path) -> None:
        """Line the log up with the snapshots beside it (KIP-630 recovery): it starts at the oldest
        one, or empty at the newest if that is past its end (a crash after a snapshot was installed
        and before the old log was gone). A log that starts past 0 with no valid snapshot reaching
        its start cannot be replayed: this voter then rejoins as if its disk were new (no vote until
        it has caught up) and fetches the leader's snapshot."""
        remove_temporaries(partition)
        ids = self.snapshot_store.ids()  # damaged ones are renamed *.corrupt here
        first = self.log.start_offset
        covering = [s for s in ids if s.offset >= first]
        if covering and covering[-1].offset > self.log.end_offset:
            log.warning("Node %d: snapshot %s is past the log end %d; the log restarts empty at it",
                        self.node_id, covering[-1], self.log.end_offset)
            self.log.reset_to(covering[-1])
        elif covering:
            self.log.advance_start(covering[0])
        elif first > 0:
            log.error("Node %d: the log starts at offset %d and no valid snapshot holds the records below "
                      "it; dropping the log and rejoining (no vote until caught up) to fetch the leader's "
                      "snapshot", self.node_id, first)
            self.log.reset_to(OffsetAndEpoch(0, 0))
            self.log.flush()
            self._election = dataclasses.replace(self._election, rejoining=True)
            self.store.write(self._election)
    def _lock_directory(self) -> int:
        path = self.log_dir / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StorageError(f"{self.log_dir} is in use by another sparkraft process") from None
        return fd

    def _bind(self, listen: HostPort, workers: int,
              servicers: Sequence[Callable[[grpc.Server], None]] = ()) -> tuple[grpc.Server, int]:
        host, port = listen
        _check_port_free(host, port)
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix=f"raft-{self.node_id}-rpc"), options=SERVER_OPTIONS)
        raft_pb2_grpc.add_RaftServicer_to_server(RaftService(self), server)
        for add in servicers:  # more services on the same port (the controller's), before it starts
            add(server)
        try:
            bound = server.add_insecure_port(convert.format_endpoint(host, port))
        except RuntimeError:
            bound = 0
        if bound == 0:
            server.stop(None)
            raise OSError(f"cannot listen on {convert.format_endpoint(host, port)}")
        return server, bound

    def _release_resources(self) -> None:
        if self._server is not None:
            self._server.stop(None)
        if self.log is not None:
            self.log.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _check_election_state_kept(self) -> None:
        """A node whose log holds records has written ``quorum-state`` (a follower persists its epoch
        and leader before it fetches). Without it the node would start in epoch 0 having forgotten
        whom it voted for and whom it followed, and could vote twice in one epoch: refuse."""
        if self.store.path.exists() or (self.log.end_offset == 0 and self.snapshot_store.latest() is None):
            return
        raise StorageError(
            f"{self.store.path} is missing but the log holds records up to offset {self.log.end_offset - 1} "
            f"(epoch {self.log.last_epoch}): this node forgot its votes and could vote twice in one epoch. "
            f"Restore the file, or move {self.log_dir} aside and re-format it with `sparkraft storage format "
            f"--rejoin` to copy the log back from the quorum")

    def set_voter_addresses(self, voters: Mapping[int, HostPort]) -> None:
        """Update voter addresses (before ``start``), e.g. once every node's ephemeral port is known."""
        self.voters.update(voters)
        self.peers.set_addresses({v: a for v, a in voters.items() if v != self.node_id})

    def endpoint_of(self, node_id: Optional[int]) -> str:
        """``host:port`` of a voter, or "" if unknown."""
        address = self.voters.get(node_id) if node_id is not None else None
        return convert.format_endpoint(*address) if address else ""

    # ------------------------------------------------------------------ lifecycle
    def now_ms(self) -> int:
        return int(time.monotonic() * 1000 + self._anchor_ms)

    def start(self, check_cluster_id: bool = True) -> "RaftNode":
        """Run Raft: ask the other voters whether they share our cluster id, then start the loop."""
        with self._lifecycle:
            if self._thread is not None or self._shutdown_started:
                raise RuntimeError("a RaftNode starts once")
            if check_cluster_id:
                self._probe_cluster_id()
            self.core = RaftCore(self.node_id, list(self.voters), self.cluster_id, self.log, self._election,
                                 self.now_ms(), self.settings, snapshots=self.snapshot_store)
            log.info("Node %d started: cluster %s, voters %s, listening on %s, log %s at offsets [%d, %d), "
                     "epoch %d", self.node_id, self.cluster_id, self._voters_text(),
                     convert.format_endpoint(*self.listen), self.log.directory, self.log.start_offset,
                     self.log.end_offset, self._election.epoch)
            self._publish_status()
            self._running = True
            self._thread = threading.Thread(target=self._run, name=f"raft-{self.node_id}-loop", daemon=True)
            self._inbox.put(("snapshot_written",))  # retention may have been lowered since the last run
            self._thread.start()
        return self

    def _voters_text(self) -> str:
        return ",".join(f"{v}@{convert.format_endpoint(*a)}" for v, a in sorted(self.voters.items()))

    def _probe_cluster_id(self) -> None:
        """Refuse to run if a majority of voters say they belong to another cluster (foreign storage)."""
        others = [v for v in self.voters if v != self.node_id]
        if not others:
            return
        channels, calls = [], {}
        request = raft_pb2.DescribeQuorumRequest(cluster_id=self.cluster_id)
        for v in others:
            ch = grpc.insecure_channel(convert.format_endpoint(*self.voters[v]), options=CHANNEL_OPTIONS)
            channels.append(ch)
            calls[v] = raft_pb2_grpc.RaftStub(ch).DescribeQuorum.future(request, timeout=CLUSTER_PROBE_S)
        theirs: dict[int, str] = {}
        for v, call in calls.items():
            try:
                resp = call.result()
            except grpc.RpcError:
                continue
            if resp.error == Errors.INCONSISTENT_CLUSTER_ID:
                theirs[v] = resp.cluster_id
        for ch in channels:
            ch.close()
        if len(theirs) > len(self.voters) - (len(self.voters) // 2 + 1):
            raise self._foreign_cluster_error(theirs)

    def _foreign_cluster_error(self, theirs: Mapping[int, str]) -> SparkraftError:
        ids = ", ".join(str(v) for v in sorted(theirs))
        others = sorted({c for c in theirs.values() if c})
        return SparkraftError(
            Errors.INCONSISTENT_CLUSTER_ID,
            f"{self.log_dir} belongs to cluster {self.cluster_id} but voters {ids} are in cluster "
            f"{', '.join(others) or 'another one'}; this node was formatted for another cluster")

    def shutdown(self, graceful: bool = True, timeout: float = RESIGN_WAIT_S) -> None:
        """Stop. A leader first resigns (EndQuorumEpoch) and waits up to ``timeout`` for the voters'
        acknowledgements, so a successor is elected at once instead of after a fetch timeout."""
        with self._lifecycle:
            if self._shutdown_started:
                return
            self._shutdown_started = True
        if graceful and self._running:
            outcome: concurrent.futures.Future = concurrent.futures.Future()
            self._inbox.put(("resign", outcome))
            try:
                result = outcome.result(timeout)
            except (concurrent.futures.TimeoutError, NodeNotRunningError):
                result = "not acknowledged in time"
            if result != "not leader":
                log.info("Node %d: resignation %s", self.node_id, result)
        if self._thread is not None:
            self._inbox.put(("stop",))
            self._thread.join()
        self._running = False
        self._fail_everything(NodeNotRunningError(f"node {self.node_id} is shutting down"))
        if self._server is not None:
            self._server.stop(grace=0.2).wait()
        self.peers.close()
        for lst in self._listeners:
            lst.queue.put(None)
        for lst in self._listeners:
            if lst.thread is not threading.current_thread():
                lst.thread.join(timeout=5)
        if self.log is not None:
            self.log.flush()
            self.log.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self._stopped.set()
        with self._status_cond:
            self._status_cond.notify_all()
        if self._thread is not None:
            log.info("Node %d stopped", self.node_id)

    def wait_stopped(self, timeout: Optional[float] = None) -> bool:
        """True once the event loop has ended (shutdown, or a fatal error: see ``fatal_error``)."""
        if self._thread is None:
            return self._stopped.wait(timeout)
        self._thread.join(timeout)
        return not self._thread.is_alive()

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
            st = self._status
            future.set_exception(NotLeaderError(None if st.leader_id == self.node_id else st.leader_id,
                                                st.epoch))
        else:
            started = time.monotonic()
            future.add_done_callback(
                lambda f: f.exception() is None and self.commit_latency.observe(time.monotonic() - started))
            self._inbox.put(("propose", records, future))
        return future

    def add_commit_listener(self, fn: Callable[[list[Batch]], None],
                            on_snapshot: Optional[Callable[[SnapshotLoad], None]] = None) -> None:
        """Call ``fn(batches)`` on a thread of its own with every committed batch, from the log start,
        in offset order, each exactly once (control batches included, flagged ``control``). When the
        log let go of batches it had not delivered yet (a snapshot was installed, or retention moved
        the log start), ``on_snapshot`` is called first with the snapshot that holds them."""
        done = threading.Event()
        self._inbox.put(("listen", fn, done, on_snapshot))
        if self._running:
            done.wait(5)

    def describe_quorum(self, timeout: Optional[float] = 5.0) -> QuorumDescription:
        """The leader's view of the quorum (times in wall-clock ms); NotLeaderError elsewhere."""
        return self._call(lambda core, now: core.describe_quorum(now)).result(timeout)

    def status(self) -> NodeStatus:
        return self._status

    def wait_for_leader(self, timeout: float) -> int:
        """The current leader's id, once one is known; TimeoutError if none within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._status_cond:
            while True:
                st = self._status
                if st.leader_id is not None and st.state in ("Leader", "Follower"):
                    return st.leader_id
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped.is_set():
                    raise TimeoutError(f"node {self.node_id} knows no leader after {timeout:.1f}s "
                                       f"(state {st.state}, epoch {st.epoch})")
                self._status_cond.wait(left)

    def submit_request(self, msg) -> concurrent.futures.Future:
        """For the servicer: hand a peer's request to the core; resolves with the core's response."""
        if not self._running:
            raise NodeNotRunningError(f"node {self.node_id} is not running")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put(("request", convert.request_source(msg), next(self._corrs), msg, future))
        return future

    def _call(self, fn: Callable[[RaftCore, int], object]) -> concurrent.futures.Future:
        if not self._running:
            raise NodeNotRunningError(f"node {self.node_id} is not running")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put(("call", fn, future))
        return future

    # ------------------------------------------------------------------ the event loop
    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:
            self.fatal_error = e
            if isinstance(e, SparkraftError):
                log.error("Node %d stops: %s", self.node_id, e)
            else:
                log.error("Node %d stops on an unexpected error", self.node_id, exc_info=True)
        finally:
            self._running = False
            self._fail_everything(NodeNotRunningError(f"node {self.node_id} stopped"))
            self._stopped.set()
            with self._status_cond:
                self._status_cond.notify_all()

    def _loop(self) -> None:
        core, inbox = self.core, self._inbox
        while True:
            self._process_ready()
            wait_ms = core.tick(self.now_ms())
            if core.has_ready():
                continue
            if any(lst.next_offset < core.high_watermark and lst.pending < LISTENER_MAX_PENDING
                   for lst in self._listeners):
                wait_ms = 0
            try:
                item = inbox.get(timeout=min(max(wait_ms, 1), MAX_IDLE_WAIT_MS) / 1000)
            except queue.Empty:
                continue
            for n in range(MAX_ITEMS_PER_ROUND):
                if n:
                    try:
                        item = inbox.get_nowait()
                    except queue.Empty:
                        break
                if item[0] == "stop":
                    self._process_ready()
                    return
                self._handle(item)

    def _handle(self, item: tuple) -> None:
        core, now = self.core, self.now_ms()
        kind = item[0]
        if kind == "response":
            _, src, corr, msg = item
            if msg.error is Errors.INCONSISTENT_CLUSTER_ID:
                # Do not let a node of another cluster move our epoch: treat it as no answer.
                self._note_cluster_rejection(src)
                core.request_failed(src, corr, now)
            else:
                self._cluster_rejections.pop(src, None)
                core.receive(src, corr, msg, now)
        elif kind == "failed":
            _, dest, corr = item
            core.request_failed(dest, corr, now)
        elif kind == "request":
            _, src, corr, msg, future = item
            if future.set_running_or_notify_cancel():
                self._waiting[corr] = future
                core.receive(src, corr, msg, now)
        elif kind == "propose":
            _, records, future = item
            if not future.set_running_or_notify_cancel():
                return
            try:
                last = core.propose(records, now)
            except Exception as e:
                future.set_exception(e)
                return
            future.epoch = core.epoch
            self._proposals.append(_Proposal(core.epoch, last, future))
        elif kind == "call":
            _, fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(core, now))
                except Exception as e:
                    future.set_exception(e)
        elif kind == "delivered":
            item[1].pending -= 1
        elif kind == "listen":
            _, fn, done, on_snapshot = item
            lst = _Listener(self, fn, len(self._listeners), self.log.start_offset, on_snapshot)
            self._listeners.append(lst)
            lst.thread.start()
            done.set()
        elif kind == "snapshot_written":
            self._apply_retention(now)
        elif kind == "resign":
            outcome = item[1]
            if core.is_leader:
                log.info("Node %d resigns as leader of epoch %d", self.node_id, core.epoch)
                core.resign(now)
                self._resign_outcome = outcome
            else:
                self._resolve(outcome, "not leader")
        else:
            raise AssertionError(f"unknown inbound item {kind!r}")

    def _process_ready(self) -> None:
        """Carry out the core's outputs in the order it requires: persist, flush, send, advance (a
        leader sends, then flushes: ``Ready.flush_after_send``)."""
        core = self.core
        while core.has_ready():
            rd = core.ready()
            for peer, what in rd.violations:
                log.warning("Node %d refused a message from node %d that breaks the Raft protocol: %s",
                            self.node_id, peer, what)
            if rd.election_state is not None:
                self.store.write(rd.election_state)
            if rd.flush and not rd.flush_after_send:
                self.log.flush()
            for out in rd.messages:
                msg = out.message
                if isinstance(msg, REQUEST_TYPES):
                    timeout = self.settings.request_timeout_ms
                    if isinstance(msg, FetchRequest):
                        timeout += msg.max_wait_ms
                    self.peers.send(out.dest, out.corr, msg, timeout)
                else:
                    future = self._waiting.pop(out.corr, None)
                    if future is not None and not future.done():
                        future.set_result(msg)
            if rd.flush_after_send:
                self.log.flush()
            core.advance(rd, self.now_ms())
        self._after_ready()

    def _after_ready(self) -> None:
        core = self.core
        if self._proposals:
            self._settle_proposals()
        if self._listeners:
            self._feed_listeners()
        if self._resign_outcome is not None:
            if core.resignation_acknowledged:
                self._resolve(self._resign_outcome, "acknowledged by every voter")
            elif core.state_name != "Resigned":
                self._resolve(self._resign_outcome, f"over: now {core.state_name} in epoch {core.epoch}")
            if self._resign_outcome.done():
                self._resign_outcome = None
        self._publish_status()
        if self._waiting and time.monotonic() - self._last_sweep > 5:
            self._last_sweep = time.monotonic()
            for corr in [c for c, f in self._waiting.items() if f.done()]:
                del self._waiting[corr]

    def _settle_proposals(self) -> None:
        core = self.core
        hw = core.high_watermark
        leading = core.is_leader
        while self._proposals:
            p = self._proposals[0]
            if leading and core.epoch == p.epoch:
                if hw <= p.last_offset:
                    return  # later proposals have higher offsets
                self._proposals.popleft()
                self._resolve(p.future, p.last_offset)
                continue
            self._proposals.popleft()
            if hw > p.last_offset and self._epoch_at(p.last_offset) == p.epoch:
                self._resolve(p.future, p.last_offset)  # committed before we noticed the change
            else:
                leader = core.leader_id if core.leader_id != self.node_id else None
                self._fail(p.future, NotLeaderError(leader, core.epoch))

    def _epoch_at(self, offset: int) -> Optional[int]:
        for b in self.log.batches(offset, offset + 1):
            return b.epoch
        return None

    @staticmethod
    def _resolve(future: concurrent.futures.Future, value) -> None:
        if not future.done():
            future.set_result(value)

    @staticmethod
    def _fail(future: concurrent.futures.Future, error: BaseException) -> None:
        if not future.done():
            future.set_exception(error)

    def snapshot_written(self, snapshot: OffsetAndEpoch, size: int) -> None:
        """A snapshot of committed records was written beside the log (by the controller's snapshot
        thread): serve it, and apply retention (delete old snapshots and the log below)."""
        self.snapshot_store.added(snapshot, size)
        self._inbox.put(("snapshot_written",))

    def _apply_retention(self, now: int) -> None:
        """Delete the oldest snapshots while over ``metadata.max.retention.*`` (one is always kept),
        moving the log start to the oldest one left: segments wholly below it are deleted."""
        store, core = self.snapshot_store, self.core
        while True:
            ids = store.ids()
            if len(ids) < 2 or ids[1].offset > core.high_watermark:
                break
            total = self.log.size_bytes + sum(store.size(s) or 0 for s in ids)
            age_ms = time.time() * 1000 - store.modified_ms(ids[0])
            if not self.retention.over(total, age_ms):
                break
            store.delete(ids[0])
            core.advance_log_start(ids[1], now)
            log.info("Node %d deleted snapshot %s (retention); the log starts at offset %d", self.node_id,
                     ids[0], self.log.start_offset)
        ids = store.ids()
        if ids and ids[0].offset > self.log.start_offset and ids[0].offset <= core.high_watermark \
                and self.log.start_offset > 0:
            core.advance_log_start(ids[0], now)  # an older snapshot went away by other means

    def _feed_listeners(self) -> None:
        hw = self.core.high_watermark
        for lst in self._listeners:
            if lst.next_offset >= hw or lst.pending >= LISTENER_MAX_PENDING:
                continue
            if lst.next_offset < self.log.start_offset:
                snapshot = self.snapshot_store.latest()
                lst.next_offset = snapshot.offset
                lst.pending += 1
                lst.queue.put(SnapshotLoad(snapshot, self.snapshot_store.path(snapshot)))
                continue
            batches, size = [], 0
            for b in self.log.batches(lst.next_offset, hw):
                if b.end_offset > hw or size >= LISTENER_CHUNK_BYTES:
                    break
                batches.append(b)
                size += sum(len(r) for r in b.records)
            if batches:
                lst.next_offset = batches[-1].end_offset
                lst.pending += 1
                lst.queue.put(batches)

    def _publish_status(self) -> None:
        core = self.core
        st = NodeStatus(self.node_id, core.state_name, core.epoch, core.leader_id, core.high_watermark,
                        self.log.end_offset, self.log.start_offset, core.snapshots_installed)
        old = self._status
        if st == old:
            return
        self._status = st
        if st.leader_id is None and old.leader_id is not None:
            self._leaderless_since = time.monotonic()
        elif st.leader_id is not None and self._leaderless_since is not None:
            self.election_latency.observe(time.monotonic() - self._leaderless_since)
            self._leaderless_since = None
        if (st.state, st.epoch, st.leader_id) != (old.state, old.epoch, old.leader_id):
            log.info("Node %d is %s in epoch %d (leader: %s)", self.node_id, st.state, st.epoch,
                     "none" if st.leader_id is None else st.leader_id)
            with self._status_cond:
                self._status_cond.notify_all()

    def _note_cluster_rejection(self, src: int) -> None:
        if src not in self.voters or src in self._cluster_rejections:
            return
        self._cluster_rejections[src] = None
        log.warning("Node %d: node %d rejects our cluster id %s", self.node_id, src, self.cluster_id)
        if len(self._cluster_rejections) > len(self.voters) - (len(self.voters) // 2 + 1):
            raise self._foreign_cluster_error({v: "" for v in self._cluster_rejections})

    def _fail_everything(self, error: Exception) -> None:
        """The loop is gone: fail whatever still waits on it."""
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                break
            if item[0] in ("request", "propose", "call", "resign"):
                self._fail(item[-1], error)
            elif item[0] == "listen":
                item[2].set()
        for future in self._waiting.values():
            self._fail(future, error)
        self._waiting.clear()
        st = self._status
        while self._proposals:
            self._fail(self._proposals.popleft().future, NotLeaderError(None, st.epoch))
        if self._resign_outcome is not None:
            self._fail(self._resign_outcome, error)
