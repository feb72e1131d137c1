"""A controller's one port: every protocol on one listening socket, as one Apache Kafka controller
listener carries Raft, the brokers' requests and Kafka's admin tools.

Each accepted connection is held, unread, until its first bytes say which protocol it speaks
(first_bytes.py: read with MSG_PEEK, so nothing is consumed and a TLS session stays end to end);
then the socket itself is handed to the server of that protocol, on that server's own event loop:

- sparkraft's wire (Raft between the controllers, the CLI's and materialize's requests): the
  node's WireServer, which adopts it (``adopt(sock)``) as if it had accepted it;
- Kafka's protocol (Kafka's brokers and tools): the controller's Kafka listener, once it is open
  (the controller has loaded its log); before that, or on a Raft-only node, the connection is
  closed and the client retries, as it would against a Kafka controller not yet listening;
- gRPC: grpcio cannot be handed an accepted connection, so its server listens on a loopback port
  of its own and the connection's bytes are relayed to it unchanged (TLS included: the gRPC
  server checks the client's certificate itself). The relay notes where each relayed connection
  came from (quorum/relay_origins.py) so that gRPC's callers keep their own address.

A connection whose first bytes begin no protocol here (or that sends none in FIRST_BYTES_TIMEOUT_S)
is closed; an HTTP/1 request gets one line saying what this port is. At most MAX_UNSORTED
connections wait to be told apart at once: past that a new one is closed at once.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import socket
from typing import Callable, Optional

from quorum import relay_origins
from quorum.refusal_log import RefusalLog
from quorum.wire.first_bytes import MAX_TLS_RECORD, NEED_MORE, Protocol, Unknown, classify

log = logging.getLogger(__name__)
REFUSALS = RefusalLog(log)

FIRST_BYTES_TIMEOUT_S = 10.0
MAX_UNSORTED = 1024
PEEK_BYTES = 5 + MAX_TLS_RECORD
RELAY_CHUNK = 256 * 1024
HTTP1_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC")

Adopt = Callable[[socket.socket], None]


class SharedPort:
    """Listens on ``host:port`` (bound at construction: a busy port fails at once) and hands each
    connection to ``routes[protocol]``, or relays it to ``grpc_address``; on ``loop_thread``'s loop
    (``loop``, ``run``) from ``start`` on. ``tls``: whether the listener's security protocol is SSL
    (its servers do the handshakes; this only reads the ClientHello)."""

    def __init__(self, host: str, port: int, loop_thread, tls: bool, grpc_address: tuple[str, int],
                 name: str = "controller"):
        self.tls = tls
        self.grpc_address = grpc_address
        self.name = name
        self.routes: dict[Protocol, Adopt] = {}
        self.not_served: dict[Protocol, str] = {}  # why a protocol without a route is not (yet) served
        try:
            self._socket = socket.create_server((host or "", port), family=socket.AF_INET6 if ":" in (host or "")
                                                else socket.AF_INET, backlog=1024)
        except OSError as e:
            why = "address already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
            raise OSError(f"cannot listen on {_endpoint(host, port)}: {why}") from None
        self._socket.setblocking(False)
        self.host = host
        self.port = self._socket.getsockname()[1]
        self.loop_thread = loop_thread
        self.loop = loop_thread.loop
        self._accepting: Optional[asyncio.Task] = None
        self._tasks: set[asyncio.Task] = set()
        self._unsorted = 0
        self.counts = {p: 0 for p in Protocol}  # connections handed on, by protocol
        self.refused = 0

    def route(self, protocol: Protocol, adopt: Optional[Adopt], why_not: str = "") -> None:
        """From now on hand ``protocol``'s connections to ``adopt`` (None: close them, saying ``why_not``)."""
        if adopt is None:
            self.routes.pop(protocol, None)
            self.not_served[protocol] = why_not
        else:
            self.routes[protocol] = adopt

    def start(self) -> "SharedPort":
        async def begin() -> None:
            self._accepting = asyncio.ensure_future(self._accept())
        self.loop_thread.run(begin(), 10)
        return self

    def stop(self) -> None:
        """Stop accepting; close the connections not yet handed on and the relays."""
        async def close() -> None:
            if self._accepting is not None:
                self._accepting.cancel()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            self.loop_thread.run(close(), 5)
        except Exception:  # the loop is gone already
            pass
        self._socket.close()

    # --- accepting and sorting ---------------------------------------------------------------------
    async def _accept(self) -> None:
        loop = self.loop
        while True:
            try:
                sock, address = await loop.sock_accept(self._socket)
            except asyncio.CancelledError:
                raise
            except OSError as e:  # out of file descriptors, for one: keep serving those we have
                log.warning("%s port %d: accept failed: %s", self.name, self.port, e)
                await asyncio.sleep(0.1)
                continue
            if self._unsorted >= MAX_UNSORTED:
                self._refuse(sock, address, f"{MAX_UNSORTED} connections are already waiting to be told apart")
                continue
            sock.setblocking(False)
            self._spawn(self._sort(sock, address))

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sort(self, sock: socket.socket, address) -> None:
        self._unsorted += 1
        try:
            protocol = await self._first_bytes(sock, address)
        except BaseException:
            sock.close()
            raise
        finally:
            self._unsorted -= 1
        if protocol is None:
            return
        if protocol is Protocol.GRPC:
            self.counts[protocol] += 1
            await self._relay(sock, address)
            return
        adopt = self.routes.get(protocol)
        if adopt is None:
            why = self.not_served.get(protocol, "nothing serves it on this port")
            self._refuse(sock, address, f"{protocol.value} is not served here now: {why}")
            return
        self.counts[protocol] += 1
        try:
            adopt(sock)
        except Exception:
            log.warning("%s port %d: handing a connection to %s failed", self.name, self.port, protocol.value,
                        exc_info=True)
            sock.close()

    async def _first_bytes(self, sock: socket.socket, address):
        """The connection's Protocol, or None once it is closed (it sent nothing sortable in time)."""
        loop = self.loop
        deadline = loop.time() + FIRST_BYTES_TIMEOUT_S
        pause = 0.001
        while True:
            try:
                head = sock.recv(PEEK_BYTES, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                head = None
            except OSError:
                sock.close()
                return None
            if head == b"":
                sock.close()
                return None
            if head:
                found = classify(head, self.tls)
                if isinstance(found, Unknown):
                    self._refuse(sock, address, found.why, http1=head[:4] in HTTP1_METHODS)
                    return None
                if found is not NEED_MORE:
                    return found
            left = deadline - loop.time()
            if left <= 0:
                self._refuse(sock, address, f"no protocol's first bytes within {FIRST_BYTES_TIMEOUT_S:g} s")
                return None
            if head:  # part of what is needed: the socket stays readable, so look again shortly
                await asyncio.sleep(min(pause, left))
                pause = min(pause * 2, 0.05)
            else:
                await self._readable(sock, left)

    async def _readable(self, sock: socket.socket, timeout: float) -> None:
        ready = self.loop.create_future()
        fd = sock.fileno()
        self.loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self.loop.remove_reader(fd)

    def _refuse(self, sock: socket.socket, address, why: str, http1: bool = False) -> None:
        self.refused += 1
        host = address[0] if isinstance(address, tuple) else str(address)
        REFUSALS.note(host, " ".join(why.split()[:3]), logging.INFO, "%s port %d: closing the connection from %s: %s",
                      self.name, self.port, host, why)
        try:  # what has arrived is read first: closing with unread bytes would reset the connection
            sock.recv(PEEK_BYTES)
        except OSError:
            pass
        if http1:
            try:
                sock.send(f"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                          f"this is a sparkraft {self.name} port (Raft, sparkraft's wire and gRPC, Kafka's "
                          f"protocol), not HTTP/1\n".encode())
            except OSError:
                pass
        sock.close()

    # --- gRPC's relay --------------------------------------------------------------------------------
    async def _relay(self, client: socket.socket, address) -> None:
        loop = self.loop
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.setblocking(False)
        source_port = None
        try:
            upstream.bind(("127.0.0.1", 0))
            source_port = upstream.getsockname()[1]
            relay_origins.note(source_port, address[0] if isinstance(address, tuple) else str(address))
            await loop.sock_connect(upstream, self.grpc_address)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.gather(self._pump(client, upstream), self._pump(upstream, client))
        except OSError:
            pass
        finally:
            if source_port is not None:
                relay_origins.forget(source_port)
            client.close()
            upstream.close()

    async def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        loop = self.loop
        try:
            while True:
                data = await loop.sock_recv(source, RELAY_CHUNK)
                if not data:
                    break
                await loop.sock_sendall(sink, data)
        except OSError:
            pass
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in (host or "") else f"{host}:{port}"
