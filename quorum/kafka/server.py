"""KafkaListener: a Kafka-protocol listener (a broker's, or a controller's: what it answers is its
context's ApiTable), on an asyncio loop of its own thread.

Per connection, requests are read, handled and answered one at a time, in order (Kafka mutes a
connection while its request is handled), so a connection costs at most one frame's bytes and one
handler thread. The handlers run on a small pool: forwarded requests block on the controller.

What a hostile or broken client gets:

- a frame size out of bounds (2 GiB, negative), bytes that do not decode, an API or version this
  broker does not implement (other than ApiVersions, which is answered with UNSUPPORTED_VERSION
  and the versions it does), or a handler failure: the connection is closed, nothing else changes;
- what connections may cost is bounded by the listener's ``ConnectionLimits`` (the wire's and
  gRPC's keys: quorum/connection_limits.py): past ``max.connections``, ``max.connections.per.ip``
  or ``max.connection.creation.rate`` a new connection is closed at once; a frame that has not
  arrived ``socket.request.arrival.timeout.ms`` after its first byte (a slowloris client), or no
  request for ``connections.max.idle.ms``, closes the connection; while the bytes of frames still
  arriving over all connections exceed ``queued.max.request.bytes``, a connection holding part of
  one is not read until others finish (many clients each sending the largest frame allowed,
  slowly, cannot exhaust the broker's memory); before its SASL login a client's frames may be at
  most ``sasl.server.max.receive.size`` bytes;
- on a SASL_ listener, a request other than ApiVersions before the client has logged in (or after
  its login expired), or a failed login: the connection is closed (after the answer, for a login).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import socket
import ssl
import threading
import time
from typing import Callable, Optional

from quorum.connection_limits import (
    ANSWER_BYTES,
    DEFAULT_LIMITS,
    AnswerBudget,
    BufferBudget,
    ConnectionGate,
    ConnectionLimits,
)
from quorum.kafka import apis
from quorum.kafka.codec import API_VERSIONS_KEY, MalformedRequest, UnsupportedRequest, decode_request, encode_response
from quorum.kafka.framing import DEFAULT_MAX_FRAME_BYTES, FrameError, FrameReader
from quorum.refusal_log import RefusalLog
from quorum.security.principal import Caller

log = logging.getLogger(__name__)
REFUSALS = RefusalLog(log)

READ_CHUNK = 64 * 1024
HANDSHAKE_TIMEOUT_S = 10.0


class KafkaListener:
    def __init__(self, ctx: apis.KafkaContext, host: str, port: Optional[int],
                 ssl_context: Optional[ssl.SSLContext] = None, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 limits: ConnectionLimits = DEFAULT_LIMITS, handler_threads: int = 8):
        """``port`` None: no socket of its own; connections come through ``adopt`` (a controller's
        one port hands them over)."""
        # the listener's own budget of answer bytes (Fetch answers of the log)
        self.ctx = dataclasses.replace(ctx, answer_budget=AnswerBudget(ANSWER_BYTES))
        self.host, self.port = host, port or 0
        self.adopt_only = port is None  # no socket of its own: connections come through ``adopt``
        self.ssl_context = ssl_context
        self.max_frame_bytes = max_frame_bytes
        self.limits = limits
        self.gate = ConnectionGate(limits)  # the loop's thread only
        self.budget = BufferBudget(limits.max_buffered_bytes)  # frames still arriving, over all connections
        self._room: Optional[asyncio.Event] = None  # set whenever the budget has room again
        self._pool = concurrent.futures.ThreadPoolExecutor(handler_threads, thread_name_prefix="kafka-handler")
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._server: Optional[asyncio.base_events.Server] = None
        self._thread: Optional[threading.Thread] = None
        self._started = threading.Event()
        self._error: Optional[BaseException] = None
        self.closed_for_cause = 0  # connections closed for breaking the protocol or a timeout

    def start(self) -> "KafkaListener":
        self._thread = threading.Thread(target=self._run, name=f"kafka-listener-{self.port}", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._error is not None:
            raise self._error
        return self

    @property
    def connections(self) -> int:
        return self.gate.open

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._room = asyncio.Event()
        try:
            if not self.adopt_only:
                self._server = loop.run_until_complete(asyncio.start_server(
                    self._connection, self.host, self.port, ssl=self.ssl_context, limit=READ_CHUNK))
                self.port = self._server.sockets[0].getsockname()[1]
        except BaseException as e:
            self._error = e
            self._started.set()
            loop.close()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def close():
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            loop.stop()
        if loop.is_running():
            asyncio.run_coroutine_threadsafe(close(), loop)
        self._thread.join(10)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def adopt(self, sock: socket.socket) -> None:
        """Serve a connection another listener accepted (a controller's one port:
        quorum/wire/shared_port.py), from any thread; the TLS handshake, if any, is done here."""
        loop = self._loop
        if loop is None or loop.is_closed():
            sock.close()
            return
        asyncio.run_coroutine_threadsafe(self._adopt(sock), loop)

    async def _adopt(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_CHUNK, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, self._connection, loop=loop)
        try:
            await loop.connect_accepted_socket(lambda: protocol, sock, ssl=self.ssl_context,
                                               ssl_handshake_timeout=HANDSHAKE_TIMEOUT_S if self.ssl_context else None)
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as e:
            log.debug("Kafka listener: an adopted connection failed its handshake: %s", e)
            sock.close()

    # --- one connection ---------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        refusal = self.gate.admit(host)
        if refusal is not None:
            self._refuse(peer, f"refused a new connection: {refusal}", level=logging.WARNING)
            writer.close()
            return
        try:
            await self._serve(reader, writer, peer, self.ctx.for_caller(self._caller_of(writer, peer)))
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        except asyncio.CancelledError:  # the listener stops: end quietly (asyncio logs a task that raises)
            pass
        finally:
            self.gate.release(host)
            writer.close()

    def _caller_of(self, writer: asyncio.StreamWriter, peer) -> Caller:
        """The connection's client: by its certificate on a mutual-TLS listener, else ANONYMOUS."""
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        ssl_object = writer.get_extra_info("ssl_object")
        certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        return self.ctx.security.connection_caller(host, certificate)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer, ctx) -> None:
        frames = FrameReader(self._frame_limit(ctx))
        try:
            await self._read_requests(reader, writer, peer, ctx, frames)
        finally:
            self._release(frames.buffered)

    def _frame_limit(self, ctx: apis.KafkaContext) -> int:
        """The largest frame the connection may send now: small until its SASL login."""
        if ctx.sasl is not None and ctx.sasl.principal is None:
            return min(self.max_frame_bytes, self.limits.max_unauthenticated_bytes)
        return self.max_frame_bytes

    def _release(self, nbytes: int) -> None:
        if nbytes:
            self.budget.change(-nbytes)
            if not self.budget.exhausted:
                self._room.set()

    async def _read_requests(self, reader, writer, peer, ctx, frames: FrameReader) -> None:
        loop = asyncio.get_running_loop()
        limits = self.limits
        partial_since = None
        while True:
            if frames.partial:
                partial_since = partial_since or time.monotonic()
                wait = limits.request_arrival_s - (time.monotonic() - partial_since)
            else:
                partial_since = None
                wait = limits.idle_timeout_s
            try:
                if frames.buffered and self.budget.exhausted:  # hold off until others release bytes
                    await asyncio.wait_for(self._wait_for_room(), max(wait, 0.0))
                    continue
                data = await asyncio.wait_for(reader.read(READ_CHUNK), max(wait, 0.0))
            except asyncio.TimeoutError:
                self._refuse(peer, f"a request not all arrived {limits.request_arrival_s:g} s after its first byte"
                             if frames.partial else f"idle for {limits.idle_timeout_s:g} s")
                return
            if not data:
                return
            held = frames.buffered
            try:
                payloads = frames.feed(data)
            except FrameError as e:
                self._refuse(peer, str(e))
                return
            finally:
                grown = frames.buffered - held
                if grown > 0:
                    self.budget.change(grown)
                else:
                    self._release(-grown)
            for payload in payloads:
                response = await loop.run_in_executor(self._pool, self._answer, payload, peer, ctx)
                held = 0
                try:
                    if isinstance(response, apis.Pending):  # a long poll: wait without a handler thread
                        held = response.held
                        try:
                            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(response.future)),
                                                   response.timeout)
                        except (asyncio.TimeoutError, Exception):  # finish() reads the outcome, whatever it is
                            pass
                        response = await loop.run_in_executor(self._pool, self._guarded, response.finish, peer)
                    if response is None:
                        return
                    writer.write(response)
                    await writer.drain()
                finally:
                    ctx.answer_budget.give(held)  # written out (or never will be)
                if ctx.sasl is not None and ctx.sasl.close:
                    self._refuse(peer, "its SASL login failed")
                    return
            frames.max_frame_bytes = self._frame_limit(ctx)

    async def _wait_for_room(self) -> None:
        while self.budget.exhausted:
            self._room.clear()
            await self._room.wait()

    def _refuse(self, peer, why: str, level: int = logging.INFO) -> None:
        """Counted always; logged once per client and kind of refusal every 30 s (refusal_log.py)."""
        self.closed_for_cause += 1
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        REFUSALS.note(host, " ".join(why.split()[:2]), level,
                      "Kafka listener %s:%d: closing the connection from %s: %s", self.host, self.port, peer, why)

    def _guarded(self, finish: Callable[[], bytes], peer) -> Optional[bytes]:
        """A Pending answer's framed response, or None to close the connection if it fails."""
        try:
            return finish()
        except Exception:
            log.warning("Kafka listener %s:%d: a waiting answer to %s failed; closing the connection", self.host,
                        self.port, peer, exc_info=True)
            self.closed_for_cause += 1
            return None

    def _answer(self, payload: bytes, peer, ctx: apis.KafkaContext):
        """The framed response, a Pending one, or None to close the connection."""
        try:
            request = decode_request(payload, ctx.apis.supported)
        except UnsupportedRequest as e:
            if e.api_key == API_VERSIONS_KEY:
                return encode_response(API_VERSIONS_KEY, e.correlation_id, ctx.apis.unsupported_api_versions_response())
            self._refuse(peer, str(e))
            return None
        except MalformedRequest as e:
            self._refuse(peer, f"a malformed request: {e}")
            return None
        if ctx.sasl is not None and not ctx.sasl.allows(request.api_key):
            self._refuse(peer, f"API key {request.api_key} before a SASL login" if ctx.sasl.principal is None
                         else f"API key {request.api_key} after its SASL login expired")
            return None
        try:
            answer = ctx.apis.handle(ctx, request)
            if isinstance(answer, apis.Pending):
                return dataclasses.replace(answer, finish=lambda: encode_response(
                    request.api_key, request.correlation_id, answer.finish()))
            return encode_response(request.api_key, request.correlation_id, answer)
        except Exception:
            log.warning("Kafka listener %s:%d: API key %d v%d from %s failed; closing the connection", self.host,
                        self.port, request.api_key, request.api_version, peer, exc_info=True)
            self.closed_for_cause += 1
            return None
