"""The node's gRPC server: one port for the Raft service and any other (the controller's), bounded
in what one request may cost, and refused with one clear line when the port cannot be had."""
from __future__ import annotations

import concurrent.futures
import errno
import socket
import threading
from typing import Callable, Optional, Sequence

import grpc

from quorum.config import HostPort
from quorum.connection_limits import DEFAULT_LIMITS, ConnectionLimits
from quorum.errors import Errors, SparkraftError
from quorum.rpc.convert import format_endpoint
from quorum.rpc.peer_client import MAX_MESSAGE_BYTES
from quorum.security.tls import ServerTls

DEFAULT_RPC_WORKERS = 256  # threads of the gRPC server (each RPC in flight holds one)
RAFT_RESERVED_WORKERS = 32  # of which client writes may never take these (Fetch, Vote, reads)
# Client writes waiting for their commit on the wire (quorum/wire/), where a waiting request holds
# no thread, only its answer's state (~1 KiB): past this many, refused at once as over gRPC.
WIRE_CLIENT_SLOTS = 4096

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

AddService = Callable[[grpc.Server], None]


def check_port_free(host: str, port: int) -> None:
    """Fail with one clear line if ``host:port`` cannot be listened on (before gRPC logs its own)."""
    if port == 0:
        return
    where = format_endpoint(host, port)
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


def grpc_limit_options(limits: ConnectionLimits) -> tuple:
    """What gRPC's own server options can say of a listener's ConnectionLimits: max.connections
    and connections.max.idle.ms (an idle connection gets GOAWAY; its client reconnects when it next
    calls). gRPC has no per-address cap, creation rate or whole-listener byte budget: its HTTP/2
    flow control bounds what each stream buffers, and max_receive_message_length each request."""
    return (("grpc.max_allowed_incoming_connections", min(limits.max_connections, 2**31 - 1)),
            ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
            ("grpc.server_handshake_timeout_ms", int(limits.request_arrival_s * 1000)))


def bind_server(listen: HostPort, workers: int, thread_prefix: str, services: Sequence[AddService],
                tls: Optional[ServerTls] = None, limits: ConnectionLimits = DEFAULT_LIMITS) -> tuple[grpc.Server, int]:
    """A gRPC server with ``services`` added, bound (not started) on ``listen``, over TLS if ``tls``
    (quorum/security/tls.py), within what gRPC can enforce of ``limits``; and its port."""
    host, port = listen
    check_port_free(host, port)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=thread_prefix),
                         options=SERVER_OPTIONS + grpc_limit_options(limits))
    for add in services:
        add(server)
    try:
        if tls is None:
            bound = server.add_insecure_port(format_endpoint(host, port))
        else:
            bound = server.add_secure_port(format_endpoint(host, port), tls.credentials())
    except RuntimeError:
        bound = 0
    if bound == 0:
        server.stop(None)
        raise OSError(f"cannot listen on {format_endpoint(host, port)}")
    return server, bound


class ClientSlots:
    """How many client writes (Append, controller writes and heartbeats) may wait for their commit
    at once. ``hold()`` takes one or raises REQUEST_TIMED_OUT, which clients retry. A node has one
    for gRPC (below) and one for the wire (WIRE_CLIENT_SLOTS).

    A synchronous gRPC server gives every RPC in flight a worker thread, and a client write holds
    its thread until its records are committed, which needs the followers' Fetches, which need
    threads too. So client writes get at most all but RAFT_RESERVED_WORKERS of them; past that they
    are refused at once (retriable), never queued in front of Raft."""

    def __init__(self, limit: int):
        self.limit = limit
        self._free = threading.BoundedSemaphore(limit)

    @classmethod
    def for_workers(cls, workers: int) -> "ClientSlots":
        return cls(max(1, workers - RAFT_RESERVED_WORKERS))

    def hold(self) -> Callable[[], None]:
        """Take a slot, or raise REQUEST_TIMED_OUT (retriable) at once if none is free; returns what
        gives it back, safe to call more than once (an answer and a timeout may both)."""
        if not self._free.acquire(blocking=False):
            raise SparkraftError(Errors.REQUEST_TIMED_OUT, f"{self.limit} client requests are already waiting "
                                 f"for their commit here; retry")
        once = threading.Lock()  # taken by the first call only, whichever thread makes it

        def give_back() -> None:
            if once.acquire(blocking=False):
                self._free.release()
        return give_back
