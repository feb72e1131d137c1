"""The wire's listener, on an asyncio event loop it is given (a node's event-loop thread, which
also runs the Raft core and the node's outbound wire connections: client.py).

A handler gets the connection and the decoded request, on the loop's thread, and returns the
response message at once, or a :class:`Deferred` whose future completes later (on any thread); or
raises :class:`WireRefusal`. Handlers must not block: the one thread serves every connection.

What one peer may cost is bounded: a request larger than ``max_request_bytes`` closes its
connection before it is read; past ``max_in_flight`` unanswered requests, or while the peer does
not read its answers, the connection is not read either (TCP pushes back on the sender).

What all peers together may cost is bounded by the listener's ``ConnectionLimits``
(quorum/connection_limits.py): connections past ``max.connections``, ``max.connections.per.ip`` or
``max.connection.creation.rate`` are closed as they arrive; a connection with no request for
``connections.max.idle.ms``, or whose request has not all arrived ``socket.request.arrival.timeout.ms``
after its first byte, is closed; while the bytes of requests still arriving over all connections
exceed ``queued.max.request.bytes``, connections holding part of a request are not read; and a
connection the listener has not authenticated (``authenticated(conn)`` false: an anonymous caller
where an authorizer runs) may send requests of at most ``sasl.server.max.receive.size`` bytes.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from google.protobuf.message import DecodeError

from quorum.connection_limits import DEFAULT_LIMITS, BufferBudget, ConnectionGate, ConnectionLimits
from quorum.wire.frames import FrameError, FrameReader, Status, encode_response
from quorum.wire.methods import HELLO, RAFT_METHODS, Method

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 256  # unanswered requests per connection before it is not read any more
LOG_EVERY_S = 10.0  # dropped connections are logged at most this often
HANDSHAKE_TIMEOUT_S = 10.0  # a TLS connection that has not finished its handshake by then is closed
SWEEP_S = 1.0  # how often the listener looks for idle connections and requests arriving too slowly


class WireRefusal(Exception):
    """Answer the request with a transport status (not carried out, or outcome unknown)."""

    def __init__(self, status: Status, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Deferred:
    """An answer that comes later: ``answer(future)`` (on the wire thread) makes the response once
    ``future`` is done; ``expired()`` makes it if the request's timeout passes first (default:
    DEADLINE_EXCEEDED). Either may raise WireRefusal."""

    future: concurrent.futures.Future
    answer: Callable[[concurrent.futures.Future], Any]
    expired: Optional[Callable[[], Any]] = None


Handler = Callable[["WireConnection", Any], Any]


def _deadline_exceeded() -> Any:
    raise WireRefusal(Status.DEADLINE_EXCEEDED, "no answer in time")


class WireConnection(asyncio.Protocol):
    """One accepted connection: reads requests, hands them to the handlers, writes the answers."""

    def __init__(self, server: "WireServer"):
        self._server = server
        self._reader = FrameReader(server.max_request_bytes, requests=True)
        self.transport: Optional[asyncio.Transport] = None
        self.host = ""  # the other end's address (what max.connections.per.ip counts)
        self.peer = ""  # "host:port" of the other end
        self.admitted = False  # counted by the listener's ConnectionGate
        self.last_request = 0.0  # monotonic time of the last request (or of the connection)
        self.partial_since: Optional[float] = None  # when the request still arriving began
        self._starved = False  # not read while the listener's BufferBudget is spent
        self.peer_certificate: Optional[bytes] = None  # DER, verified: a TLS listener's client certificate
        self.hello_peer = ""  # the peer credentials its Hello gave ("" for clients)
        self._in_flight = 0
        self._paused_reading = False
        self._writable = True
        self._closed = False
        self._deferred: dict[int, tuple[Deferred, Optional[asyncio.TimerHandle]]] = {}  # corr -> waiting

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        address = transport.get_extra_info("peername")
        self.host = address[0] if address else "?"
        self.peer = _endpoint(address[0], address[1]) if address else "?"
        server = self._server
        refusal = server.gate.admit(self.host)
        if refusal is not None:
            self._closed = True
            server.note_dropped(self.peer, f"refused a new connection: {refusal}")
            transport.abort()
            return
        self.admitted = True
        self.last_request = server.loop.time()
        tls = transport.get_extra_info("ssl_object")
        if tls is not None:  # the handshake is done: a certificate here was verified
            self.peer_certificate = tls.getpeercert(binary_form=True)
        if not server.authenticated(self):
            self._reader.max_frame_bytes = min(server.max_request_bytes, server.limits.max_unauthenticated_bytes)
        server.connections.add(self)

    def connection_lost(self, exc) -> None:
        self._closed = True
        server = self._server
        server.connections.discard(self)
        if self.admitted:
            self.admitted = False
            server.gate.release(self.host)
            server.budget.change(-self._reader.buffered)
            server.starved.discard(self)
            server.relieve()

    def data_received(self, data: bytes) -> None:
        server = self._server
        reader = self._reader
        held = reader.buffered
        try:
            requests = reader.feed(data)
        except FrameError as e:
            server.budget.change(reader.buffered - held)  # given back when the connection is lost
            server.note_dropped(self.peer, str(e))
            self.close()
            return
        now = server.loop.time()
        if requests:
            self.last_request = now
        buffered = reader.buffered
        server.budget.change(buffered - held)
        self.partial_since = None if buffered == 0 else (now if requests or self.partial_since is None
                                                           else self.partial_since)
        if buffered and server.budget.exhausted:
            self._starved = True
            server.starved.add(self)
            self._update_reading()
        elif buffered < held:
            server.relieve()
        for request in requests:
            self._handle(request)

    def close(self) -> None:
        """Close at once (what it held is released by connection_lost)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.abort()

    def feed_again(self) -> None:
        """The listener's budget has room again: read this connection as before."""
        self._starved = False
        self._update_reading()

    def busy(self) -> bool:
        """Has requests unanswered: not idle, whatever time has passed."""
        return bool(self._deferred)

    def pause_writing(self) -> None:
        self._writable = False
        self._update_reading()

    def resume_writing(self) -> None:
        self._writable = True
        self._update_reading()

    # -- requests --------------------------------------------------------------------------
    def _handle(self, request) -> None:
        method = self._server.methods.get(request.method)
        if method is None:
            self._respond(request.corr, Status.INVALID_REQUEST, f"unknown method {request.method}".encode())
            return
        try:
            msg = method.request.FromString(request.body)
        except DecodeError:
            self._respond(request.corr, Status.INVALID_REQUEST, f"{method.name}: the body does not decode".encode())
            return
        if method is HELLO:
            self.hello_peer = msg.peer
            self._respond(request.corr, Status.OK, b"")
            return
        if request.corr in self._deferred:  # one answer per corr: a reused one is refused, not run
            self._respond(request.corr, Status.INVALID_REQUEST, f"request {request.corr} is already in flight".encode())
            return
        handler = self._server.handlers.get(method.number)
        if handler is None:
            self._respond(request.corr, Status.INVALID_REQUEST, f"{method.name} is not served here".encode())
            return
        try:
            out = handler(self, msg)
        except WireRefusal as r:
            self._respond(request.corr, r.status, r.detail.encode())
            return
        except Exception as e:
            log.error("wire %s from %s failed", method.name, self.peer, exc_info=True)
            self._respond(request.corr, Status.INTERNAL, f"{type(e).__name__}: {e}".encode())
            return
        if isinstance(out, Deferred):
            self._defer(request.corr, request.timeout_ms, out)
        else:
            self._respond(request.corr, Status.OK, out.SerializeToString())

    def _defer(self, corr: int, timeout_ms: int, deferred: Deferred) -> None:
        """Answer when ``deferred.future`` is done or ``timeout_ms`` passes, whichever is first.

        The waiting request lives in ``_deferred`` until then, and the future's callback names only
        this connection and ``corr``: nothing of a request outlives its answer in a reference cycle.
        (A closure holding the Deferred, attached to the Deferred's own future, made every answered
        request cyclic garbage: ~50 objects a heartbeat, for the cyclic collector to find in pauses
        of 60-80 ms every second at 1,000 heartbeats/s.)"""
        loop = self._server.loop
        timer = loop.call_later(timeout_ms / 1000, self._expired, corr) if timeout_ms else None
        self._deferred[corr] = (deferred, timer)
        self._in_flight += 1
        self._update_reading()
        deferred.future.add_done_callback(functools.partial(self._future_done, corr))

    def _future_done(self, corr: int, future: concurrent.futures.Future) -> None:
        # Completed on the loop's own thread (the Raft core's round), the answer goes out at once;
        # from another thread, it is handed to the loop.
        loop_thread = self._server.loop_thread
        if loop_thread.in_loop():
            self._answered(corr, future)
        else:
            loop_thread.call_soon(self._answered, corr, future)

    def _answered(self, corr: int, future: concurrent.futures.Future) -> None:
        waiting = self._deferred.get(corr)
        if waiting is None or waiting[0].future is not future:
            return  # answered already by its timeout (``corr`` may be a newer request's by now)
        entry = self._finish(corr)
        self._respond_with(corr, lambda: entry.answer(future))

    def _expired(self, corr: int) -> None:
        entry = self._finish(corr)
        if entry is not None:
            entry.future.cancel()
            self._respond_with(corr, entry.expired or _deadline_exceeded)

    def _finish(self, corr: int) -> Optional[Deferred]:
        """The request ``corr`` is answered now: None if it already was (its timeout came first)."""
        entry = self._deferred.pop(corr, None)
        if entry is None:
            return None
        deferred, timer = entry
        if timer is not None:
            timer.cancel()
        self._in_flight -= 1
        self._update_reading()
        return deferred

    def _respond_with(self, corr: int, make: Callable[[], Any]) -> None:
        try:
            out = make()
        except WireRefusal as r:
            self._respond(corr, r.status, r.detail.encode())
        except Exception as e:
            log.error("wire answer to %s failed", self.peer, exc_info=True)
            self._respond(corr, Status.INTERNAL, f"{type(e).__name__}: {e}".encode())
        else:
            self._respond(corr, Status.OK, out.SerializeToString())

    def _respond(self, corr: int, status: Status, body: bytes) -> None:
        if not self._closed:
            self.transport.write(encode_response(corr, status, body))

    def _update_reading(self) -> None:
        pause = self._in_flight >= self._server.max_in_flight or not self._writable or self._starved
        if pause != self._paused_reading and not self._closed:
            self._paused_reading = pause
            (self.transport.pause_reading if pause else self.transport.resume_reading)()


class WireServer:
    """Listens on ``host:port`` (bound at construction, so a busy port fails at once; ``port`` None:
    no socket of its own, only connections handed to ``adopt``) and serves
    ``handlers`` (method number -> Handler) from ``start`` on, on ``loop_thread``'s loop (a node's
    LoopThread: ``loop``, ``run(coroutine, timeout)``, ``call_soon(fn, *args)``); over TLS with
    ``tls`` (the node's listener's context: quorum/security/tls.py); within ``limits``, where
    ``authenticated(conn)`` says whether a new connection's caller is known (see the module's
    docstring). ``methods`` (number -> Method) is what the server can decode: Raft's unless given
    (a node passes quorum/rpc/wire_methods.py's, the Controller's requests too)."""

    def __init__(self, host: str, port: Optional[int], handlers: Mapping[int, Handler], loop_thread,
                 max_request_bytes: int, max_in_flight: int = MAX_IN_FLIGHT,
                 tls: Optional[ssl.SSLContext] = None, limits: ConnectionLimits = DEFAULT_LIMITS,
                 authenticated: Callable[[WireConnection], bool] = lambda conn: True,
                 methods: Mapping[int, Method] = RAFT_METHODS):
        self.handlers = dict(handlers)
        self.methods = methods
        self.tls = tls
        self.max_request_bytes = max_request_bytes
        self.max_in_flight = max_in_flight
        self.limits = limits
        self.authenticated = authenticated
        self.gate = ConnectionGate(limits)
        self.budget = BufferBudget(limits.max_buffered_bytes)
        self.starved: set[WireConnection] = set()  # not read until the budget has room
        self.connections: set[WireConnection] = set()
        self._sweeper: Optional[asyncio.TimerHandle] = None
        self._socket: Optional[socket.socket] = None
        self.port = 0  # with ``port`` None: the port that hands it connections (a SharedPort's) is set here
        if port is not None:
            try:
                self._socket = socket.create_server((host or "", port), family=_family(host))
            except OSError as e:
                raise OSError(f"cannot listen on {_endpoint(host, port)} (wire): {e.strerror or e}") from None
            self.port = self._socket.getsockname()[1]
        self.loop_thread = loop_thread
        self.loop = loop_thread.loop
        self._server: Optional[asyncio.base_events.Server] = None
        self._dropped_logged = float("-inf")
        self._dropped_since = 0

    def start(self) -> "WireServer":
        self.loop_thread.run(self._serve(), 10)
        return self

    async def _serve(self) -> None:
        if self._socket is not None:
            self._server = await self.loop.create_server(
                lambda: WireConnection(self), sock=self._socket, ssl=self.tls,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if self.tls else None)
        self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    def adopt(self, sock: socket.socket) -> None:
        """Serve a connection another listener accepted (a controller's one port: shared_port.py),
        from any thread; its TLS handshake, if the listener has TLS, is done here."""
        self.loop_thread.call_soon(self._adopt, sock)

    def _adopt(self, sock: socket.socket) -> None:
        async def connect() -> None:
            try:
                await self.loop.connect_accepted_socket(
                    lambda: WireConnection(self), sock, ssl=self.tls,
                    ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if self.tls else None)
            except (OSError, ssl.SSLError, asyncio.TimeoutError) as e:
                log.debug("wire: an adopted connection failed its handshake: %s", e)
                sock.close()
        asyncio.ensure_future(connect(), loop=self.loop)

    def _sweep(self) -> None:
        """Close the connections idle too long and those whose request is arriving too slowly."""
        now = self.loop.time()
        limits = self.limits
        for conn in list(self.connections):
            if conn.partial_since is not None:
                if now - conn.partial_since > limits.request_arrival_s:
                    self.note_dropped(conn.peer, f"a request not all arrived {limits.request_arrival_s:g} s after "
                                                 "its first byte (socket.request.arrival.timeout.ms)")
                    conn.close()
            elif not conn.busy() and now - conn.last_request > limits.idle_timeout_s:
                log.debug("wire: closing %s, idle for %g s (connections.max.idle.ms)", conn.peer, limits.idle_timeout_s)
                conn.close()
        self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    def relieve(self) -> None:
        """Bytes were released: if the budget has room, read the starved connections again."""
        if self.starved and not self.budget.exhausted:
            starved, self.starved = self.starved, set()
            for conn in starved:
                conn.feed_again()

    def call_soon(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on the loop's thread (from any thread)."""
        self.loop_thread.call_soon(fn, *args)

    def note_dropped(self, peer: str, why: str) -> None:
        """A connection broke the protocol and was closed: logged at most once per LOG_EVERY_S."""
        now = time.monotonic()
        if now - self._dropped_logged < LOG_EVERY_S:
            self._dropped_since += 1
            return
        since, self._dropped_since, self._dropped_logged = self._dropped_since, 0, now
        log.warning("wire: closed the connection from %s: %s%s", peer, why,
                    f" ({since} more closed since the last report)" if since else "")

    def stop(self) -> None:
        """Close the listener and every connection (the loop goes on)."""
        async def close() -> None:
            if self._sweeper is not None:
                self._sweeper.cancel()
            if self._server is not None:
                self._server.close()
            for conn in list(self.connections):
                conn.transport.abort()

        try:
            self.loop_thread.run(close(), 5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        if self._socket is not None:
            self._socket.close()


def _endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in (host or "") else socket.AF_INET
