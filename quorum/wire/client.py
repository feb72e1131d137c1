"""Both ends that make wire requests: a blocking channel for the quorum clients (one request at a
time per channel, as a closed-loop caller makes them) and an asyncio connection for a node's peer
requests (many in flight, on the node's wire thread). Either speaks TLS when given an
``ssl.SSLContext`` (the caller's ClientSecurity's: quorum/security/client.py).

Failures are reported as :class:`WireCallError`, a ``grpc.RpcError`` with the gRPC status code
that means the same, so the callers' retry rules (quorum/rpc/leader_client.py, peer_client.py)
read both transports alike.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import ssl
import threading
import time
from typing import Callable, Optional

import grpc

from quorum.wire.frames import FrameError, FrameReader, Response, Status, encode_request
from quorum.wire.methods import HELLO, Method

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # a Fetch answer holds up to fetch_max_bytes of batches
# Bytes asked of one recv: below glibc's mmap threshold (128 KiB), so the buffer recv allocates
# comes from the heap. At 256 KiB every recv mapped and unmapped a fresh buffer: ~12 us a call,
# paid by every blocking client for every answer (a sixth of a core at 14,000 writes/s).
RECV_BYTES = 64 * 1024

_STATUS_CODES = {
    Status.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Status.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    Status.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    Status.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    Status.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    Status.INTERNAL: grpc.StatusCode.INTERNAL,
}


class WireCallError(grpc.RpcError):
    """A wire request that got no answer of the node's own, as the gRPC status it corresponds to."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def refused(response: Response) -> WireCallError:
    return WireCallError(_STATUS_CODES.get(response.status, grpc.StatusCode.UNKNOWN),
                         response.body.decode(errors="replace"))


class BlockingWireChannel:
    """One TCP connection to a node's wire listener; ``call`` sends a request and waits for its
    answer. Thread-safe (calls take turns). Any transport failure closes the connection: the next
    call opens a new one."""

    def __init__(self, host: str, port: int, peer_metadata: str = "", tls: Optional[ssl.SSLContext] = None):
        self.host, self.port = host, port
        self._hello = peer_metadata
        self._tls = tls
        self._sock: Optional[socket.socket] = None
        self._reader: Optional[FrameReader] = None
        self._corrs = itertools.count(1)
        self._lock = threading.Lock()

    def call(self, method: Method, request, timeout: float):
        with self._lock:
            deadline = time.monotonic() + timeout
            try:
                if self._sock is None:
                    self._open(deadline)
                return self._exchange(method, request.SerializeToString(), deadline)
            except WireCallError:
                self._close()
                raise
            except socket.timeout:
                self._close()
                raise WireCallError(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer in time") from None
            except (OSError, FrameError) as e:
                self._close()
                why = "Connection refused" if isinstance(e, ConnectionRefusedError) else str(e) or type(e).__name__
                raise WireCallError(grpc.StatusCode.UNAVAILABLE, why) from None

    def _open(self, deadline: float) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=max(0.01, deadline - time.monotonic()))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._tls is not None:
            try:
                sock = self._tls.wrap_socket(sock, server_hostname=self.host)  # the handshake, within the timeout
            except ssl.SSLError as e:
                sock.close()
                raise WireCallError(grpc.StatusCode.UNAVAILABLE, f"TLS handshake failed: {e.reason or e}") from None
        self._sock, self._reader = sock, FrameReader(MAX_RESPONSE_BYTES, requests=False)
        if self._hello:
            self._exchange(HELLO, HELLO.request(peer=self._hello).SerializeToString(), deadline)

    def _exchange(self, method: Method, body: bytes, deadline: float):
        corr = next(self._corrs) & 0xFFFFFFFF
        sock = self._sock
        timeout_ms = max(1, int((deadline - time.monotonic()) * 1000))
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        sock.sendall(encode_request(method.number, corr, timeout_ms, body))
        while True:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            data = sock.recv(RECV_BYTES)
            if not data:
                raise WireCallError(grpc.StatusCode.UNAVAILABLE, "the connection was closed")
            for response in self._reader.feed(data):
                if response.corr != corr:
                    continue  # an answer to a request given up on earlier
                if response.status is not Status.OK:
                    raise refused(response)
                return method.response.FromString(response.body)

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None

    def close(self) -> None:
        with self._lock:
            self._close()


def answers_wire(host: str, port: int, tls: Optional[ssl.SSLContext], timeout: float = 2.0) -> bool:
    """Whether ``host:port`` answers the wire's Hello: a controller's listener (its one port answers
    Kafka's protocol too), rather than a listener that speaks Kafka's protocol only."""
    channel = BlockingWireChannel(host, port, tls=tls)
    try:
        channel.call(HELLO, HELLO.request(), timeout)
        return True
    except WireCallError:
        return False
    finally:
        channel.close()


class WireChannelPool:
    """Channels to one node's wire listener, one per call in flight. A BlockingWireChannel carries
    one call at a time, so callers sharing a client (a broker forwarding for many Kafka clients, a
    controller's Kafka listener) would wait for each other's calls, a slow one past their own
    deadlines; here each takes an idle channel or opens another, and up to MAX_IDLE stay open."""

    MAX_IDLE = 4

    def __init__(self, host: str, port: int, peer_metadata: str = "", tls: Optional[ssl.SSLContext] = None):
        self.host, self.port = host, port
        self._args = (host, port, peer_metadata, tls)
        self._idle: list[BlockingWireChannel] = []
        self._lock = threading.Lock()
        self._closed = False

    def call(self, method: Method, request, timeout: float):
        with self._lock:
            channel = self._idle.pop() if self._idle else None
        if channel is None:
            channel = BlockingWireChannel(*self._args)
        try:
            return channel.call(method, request, timeout)
        finally:
            with self._lock:
                keep = not self._closed and len(self._idle) < self.MAX_IDLE
                if keep:
                    self._idle.append(channel)
            if not keep:
                channel.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for channel in idle:
            channel.close()


Done = Callable[[Optional[object], Optional[WireCallError]], None]  # (response message, error)


class PeerWireConnection(asyncio.Protocol):
    """A node's connection to a peer's wire listener, on the node's wire thread: ``request``
    sends at once (or once connected) and calls ``done(response, None)`` or ``done(None, error)``
    exactly once, on the wire thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int, hello: str,
                 on_lost: Callable[["PeerWireConnection", Optional[Exception]], None],
                 tls: Optional[ssl.SSLContext] = None):
        self.loop = loop
        self.host, self.port = host, port
        self._hello = hello
        self._tls = tls
        self._on_lost = on_lost
        self._reader = FrameReader(MAX_RESPONSE_BYTES, requests=False)
        self._transport: Optional[asyncio.Transport] = None
        self._queued: list[bytes] = []  # frames written once connected
        self._waiting: dict[int, tuple[Method, Done, Optional[asyncio.TimerHandle]]] = {}
        self._corrs = itertools.count(1)
        self.closed = False
        loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            await self.loop.create_connection(lambda: self, self.host, self.port, ssl=self._tls,
                                              server_hostname=self.host if self._tls is not None else None)
        except OSError as e:  # ssl.SSLError is one
            self._lost(e)

    def connection_made(self, transport) -> None:
        if self.closed:
            transport.abort()
            return
        self._transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._hello:
            transport.write(encode_request(HELLO.number, 0, 0, HELLO.request(peer=self._hello).SerializeToString()))
        for frame in self._queued:
            transport.write(frame)
        self._queued.clear()

    def request(self, method: Method, request, timeout_ms: int, done: Done) -> None:
        if self.closed:
            done(None, WireCallError(grpc.StatusCode.UNAVAILABLE, "the connection was closed"))
            return
        corr = next(self._corrs) & 0xFFFFFFFF or next(self._corrs)
        timer = self.loop.call_later(timeout_ms / 1000, self._expire, corr) if timeout_ms else None
        self._waiting[corr] = (method, done, timer)
        frame = encode_request(method.number, corr, timeout_ms, request.SerializeToString())
        if self._transport is not None:
            self._transport.write(frame)
        else:
            self._queued.append(frame)

    def data_received(self, data: bytes) -> None:
        try:
            responses = self._reader.feed(data)
        except FrameError as e:
            log.warning("wire: %s:%d sent what is not this protocol: %s", self.host, self.port, e)
            self._transport.abort()
            return
        for response in responses:
            entry = self._waiting.pop(response.corr, None)
            if entry is None:
                continue  # the Hello's answer, or one given up on
            method, done, timer = entry
            if timer is not None:
                timer.cancel()
            if response.status is not Status.OK:
                done(None, refused(response))
                continue
            try:
                msg = method.response.FromString(response.body)
            except Exception as e:
                done(None, WireCallError(grpc.StatusCode.INTERNAL, f"an answer that does not decode: {e}"))
                continue
            done(msg, None)

    def _expire(self, corr: int) -> None:
        entry = self._waiting.pop(corr, None)
        if entry is not None:
            entry[1](None, WireCallError(grpc.StatusCode.DEADLINE_EXCEEDED, "no answer in time"))

    def connection_lost(self, exc) -> None:
        self._lost(exc)

    def _lost(self, exc: Optional[Exception]) -> None:
        if self.closed and not self._waiting:
            return
        self.closed = True
        waiting, self._waiting = self._waiting, {}
        why = "Connection refused" if isinstance(exc, ConnectionRefusedError) else (
            str(exc) if exc else "the connection was closed")
        for method, done, timer in waiting.values():
            if timer is not None:
                timer.cancel()
            done(None, WireCallError(grpc.StatusCode.UNAVAILABLE, why))
        self._on_lost(self, exc)

    def close(self) -> None:
        """Close (on the wire thread); requests still waiting fail as UNAVAILABLE."""
        if self._transport is not None:
            self._transport.abort()
        else:
            self._lost(None)
        self.closed = True
