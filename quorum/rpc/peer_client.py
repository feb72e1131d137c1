"""Outbound Raft requests from a node to its peers, without ever blocking the node's event loop.

One gRPC channel per peer, opened on first use and kept: HTTP/2 keepalive notices a dead
connection, and a short reconnect backoff (100 ms, growing to 1 s) brings a restarted peer back
quickly. Each request is started with ``stub.X.future(...)`` and a deadline equal to the core's
own timeout for it; the done-callback (on a gRPC thread) hands the outcome to ``deliver``, which
must be thread-safe (the node puts it on its inbound queue):

- ``deliver(PeerAnswer(src, corr, response_dataclass))`` when the peer answered;
- ``deliver(PeerNoAnswer(dest, corr))`` when there is no answer (peer down, deadline, cancelled).

Where a peer serves the wire (quorum/wire/: the same requests framed on plain TCP, at a fraction of
a gRPC call's cost), requests go there instead, from the node's wire thread: the peer is asked
once where (WireEndpoint, over gRPC); until it answers, and again after a wire connection fails
(a restarted peer listens on a new port), requests take gRPC.

Reachability changes are logged once per change (WARNING when a peer becomes unreachable, INFO
when it answers again), never per request.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Union

import grpc

from quorum.config import HostPort, parse_host_port
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    VoteRequest,
)
from quorum.rpc import convert
from quorum.rpc.wire_methods import BY_NAME
from quorum.security.client import PLAINTEXT, ClientSecurity
from quorum.wire.client import PeerWireConnection
from quorum.wire.server import WireServer

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a Fetch answer holds up to fetch_max_bytes of batches
METADATA_KEY = "sparkraft-peer"  # the peer credentials' metadata key (peer_identity.py)
WIRE_ASK_TIMEOUT_S = 2.0  # how long a WireEndpoint question may take
WIRE_ASK_AGAIN_S = 1.0  # after a failed wire connection or WireEndpoint, ask again after this
WIRE_ASK_NONE_AGAIN_S = 30.0  # a server without a wire listener (an older version) is asked this often
WIRE_PROTOCOLS = ("PLAINTEXT", "SSL")  # client security.protocols that take the wire (it has no SCRAM login)

CHANNEL_OPTIONS = (
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.enable_retries", 0),  # the core decides when to retry
)

_METHODS = {
    VoteRequest: "Vote",
    BeginQuorumEpochRequest: "BeginQuorumEpoch",
    EndQuorumEpochRequest: "EndQuorumEpoch",
    FetchRequest: "Fetch",
    FetchSnapshotRequest: "FetchSnapshot",
}



@dataclass(frozen=True, slots=True)
class PeerAnswer:
    src: int
    corr: int
    msg: Message
    leader_endpoint: Optional[HostPort] = None  # where the answer says its leader listens, if it says


@dataclass(frozen=True, slots=True)
class PeerNoAnswer:
    dest: int
    corr: int


Deliver = Callable[[Union[PeerAnswer, PeerNoAnswer]], None]


class _Peer:
    def __init__(self, node_id: int, address: HostPort, security: ClientSecurity):
        self.node_id = node_id
        self.address = address
        self.target = convert.format_endpoint(*address)
        self.channel = security.channel(self.target, options=CHANNEL_OPTIONS)
        self.stub = raft_pb2_grpc.RaftStub(self.channel)
        self.reachable: Optional[bool] = None  # unknown until the first answer or failure
        self.wire_port: Optional[int] = None  # None: not known yet; 0: the peer serves no wire
        self.wire_asked_at = float("-inf")
        self.wire: Optional[PeerWireConnection] = None  # wire thread only


class PeerClient:
    def __init__(self, addresses: Mapping[int, HostPort], deliver: Deliver,
                 metadata: tuple[tuple[str, str], ...] = (), security: ClientSecurity = PLAINTEXT,
                 wire: Optional[WireServer] = None):
        """``wire``: the node's own wire server, whose thread runs the wire connections (None: gRPC
        only). The wire carries no SCRAM login, so SASL_SSL peers take gRPC."""
        self._wire = wire if security.protocol in WIRE_PROTOCOLS else None
        self._wire_tls = security.ssl_context() if self._wire is not None else None
        self._hello = dict(metadata).get(METADATA_KEY, "")
        self._addresses = dict(addresses)
        self._security = security
        self._deliver = deliver
        self._metadata = metadata  # sent with every request: this node's peer credentials
        self._peers: dict[int, _Peer] = {}
        self._lock = threading.Lock()
        self._closed = False

    def set_addresses(self, addresses: Mapping[int, HostPort]) -> None:
        """Add or change peer addresses (once ephemeral ports are known; a dynamic quorum's voter set
        changed; an answer named where the leader listens)."""
        with self._lock:
            self._addresses.update(addresses)
            for node_id in list(self._peers):
                if self._peers[node_id].target != convert.format_endpoint(*self._addresses[node_id]):
                    self._forget(self._peers.pop(node_id))

    def address_of(self, node_id: int) -> Optional[HostPort]:
        with self._lock:
            return self._addresses.get(node_id)

    def send(self, dest: int, corr: int, msg: Message, timeout_ms: int) -> None:
        """Start ``msg`` to ``dest``; the outcome arrives later through ``deliver``. Never blocks."""
        peer = self._peer(dest)
        if peer is None:
            self._deliver(PeerNoAnswer(dest, corr))
            return
        if self._wire is not None:
            if peer.wire_port:
                # From the event loop's own thread (a Ready of the core's round) it goes out now: a
                # follower's next Fetch is the last hop but one of a commit.
                if self._wire.loop_thread.in_loop():
                    self._send_wire(peer, corr, msg, timeout_ms)
                else:
                    self._wire.call_soon(self._send_wire, peer, corr, msg, timeout_ms)
                return
            self._ask_wire_endpoint(peer)
        method = getattr(peer.stub, _METHODS[type(msg)])
        try:
            future = method.future(convert.to_proto(msg, dest), timeout=timeout_ms / 1000,
                                   metadata=self._metadata)
        except Exception as e:  # a closed channel raises here rather than failing the future
            log.debug("cannot send %s to node %d: %s", type(msg).__name__, dest, e)
            self._deliver(PeerNoAnswer(dest, corr))
            return
        future.add_done_callback(lambda f: self._done(peer, corr, f))

    def _done(self, peer: _Peer, corr: int, future: grpc.Future) -> None:
        try:
            response = future.result()
        except grpc.RpcError as e:
            self._note_reachable(peer, False, e)
            self._deliver(PeerNoAnswer(peer.node_id, corr))
            return
        except Exception as e:  # cancelled on close, or a bug: never lose the corr
            log.debug("request %d to node %d ended with %r", corr, peer.node_id, e)
            self._deliver(PeerNoAnswer(peer.node_id, corr))
            return
        self._answered(peer, corr, response)

    def _answered(self, peer: _Peer, corr: int, response) -> None:
        self._note_reachable(peer, True)
        try:
            msg = convert.from_proto(response)
        except Exception as e:
            log.warning("node %d sent an answer that cannot be read: %s", peer.node_id, e)
            self._deliver(PeerNoAnswer(peer.node_id, corr))
            return
        endpoint = None
        if getattr(response, "leader_endpoint", ""):
            try:
                endpoint = parse_host_port(response.leader_endpoint)
            except ValueError:
                log.debug("node %d named a leader endpoint that is not HOST:PORT: %r", peer.node_id,
                          response.leader_endpoint)
        self._deliver(PeerAnswer(peer.node_id, corr, msg, endpoint))

    # -- the wire ----------------------------------------------------------------------------
    def _ask_wire_endpoint(self, peer: _Peer) -> None:
        """Ask ``peer`` where its wire listener is (at most once per WIRE_ASK_AGAIN_S, or per
        WIRE_ASK_NONE_AGAIN_S if it said it has none); the answer is used from the next request on."""
        now = time.monotonic()
        if now - peer.wire_asked_at < (WIRE_ASK_NONE_AGAIN_S if peer.wire_port == 0 else WIRE_ASK_AGAIN_S):
            return
        peer.wire_asked_at = now
        try:
            future = peer.stub.WireEndpoint.future(raft_pb2.WireEndpointRequest(), timeout=WIRE_ASK_TIMEOUT_S)
        except Exception:
            return

        def answered(f: grpc.Future) -> None:
            try:
                peer.wire_port = f.result().port
            except grpc.RpcError as e:
                if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                    peer.wire_port = 0  # an older version: gRPC only
            except Exception:
                pass
        future.add_done_callback(answered)

    def _send_wire(self, peer: _Peer, corr: int, msg: Message, timeout_ms: int) -> None:
        """On the wire thread: send ``msg`` over ``peer``'s wire connection (opened if needed)."""
        if self._closed:
            self._deliver(PeerNoAnswer(peer.node_id, corr))
            return
        if peer.wire is None or peer.wire.closed:
            peer.wire = PeerWireConnection(self._wire.loop, peer.address[0], peer.wire_port, self._hello,
                                           on_lost=lambda conn, exc: self._wire_lost(peer, conn), tls=self._wire_tls)
        peer.wire.request(BY_NAME[_METHODS[type(msg)]], convert.to_proto(msg, peer.node_id), timeout_ms,
                          lambda response, error: self._wire_done(peer, corr, response, error))

    def _wire_done(self, peer: _Peer, corr: int, response, error: Optional[grpc.RpcError]) -> None:
        if error is None:
            self._answered(peer, corr, response)
            return
        self._note_reachable(peer, False, error)
        self._deliver(PeerNoAnswer(peer.node_id, corr))

    def _wire_lost(self, peer: _Peer, conn: PeerWireConnection) -> None:
        """A wire connection failed or closed: requests take gRPC until the peer says again where its
        wire listener is (a restarted peer has a new one)."""
        if peer.wire is conn:
            peer.wire = None
            peer.wire_port = None
            peer.wire_asked_at = time.monotonic()

    def _forget(self, peer: _Peer) -> None:
        peer.channel.close()
        if self._wire is not None:
            self._wire.call_soon(lambda: peer.wire.close() if peer.wire is not None else None)

    def _note_reachable(self, peer: _Peer, ok: bool, error: Optional[grpc.RpcError] = None) -> None:
        if ok:
            if peer.reachable is False:
                log.info("node %d at %s is reachable again", peer.node_id, peer.target)
            peer.reachable = True
            return
        code = error.code() if error is not None else None
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return  # a slow answer (or a long poll that outlived its deadline) says little
        if peer.reachable is not False and not self._closed:
            detail = error.details() if error is not None else ""
            log.warning("node %d at %s is unreachable: %s %s", peer.node_id, peer.target,
                        code.name if code else "", detail or "")
        peer.reachable = False

    def _peer(self, node_id: int) -> Optional[_Peer]:
        with self._lock:
            if self._closed:
                return None
            peer = self._peers.get(node_id)
            if peer is None:
                address = self._addresses.get(node_id)
                if address is None:
                    return None
                peer = self._peers[node_id] = _Peer(node_id, address, self._security)
            return peer

    def reopen(self) -> None:
        """Open new channels from now on (rotated key files are read again); requests in flight on
        the old ones fail as PeerNoAnswer and the core retries them."""
        with self._lock:
            peers, self._peers = list(self._peers.values()), {}
            if self._wire is not None and not self._closed:
                try:
                    self._wire_tls = self._security.ssl_context()
                except ValueError as e:
                    log.error("TLS reload for wire connections to the peers failed, keeping the current key "
                              "files' material: %s", e)
        for peer in peers:
            self._forget(peer)

    def close(self) -> None:
        """Close every channel; requests still running fail (and are delivered as failures)."""
        with self._lock:
            self._closed = True
        self.reopen()
