"""The part every quorum client shares: channels to the bootstrap servers, and the call loop
that finds the server that leads.

A call tries the last known leader, then every bootstrap server in order; an answer that names
the leader's endpoint (``leader_endpoint``) is followed at once; a retriable refusal or an
unreachable server is retried with a short backoff until the call's deadline. The final error
says which: NETWORK_EXCEPTION when nobody answered, else ``no_leader_error`` with the last answer.
"""
from __future__ import annotations

import random
import re
import threading
import time
from typing import Callable, Optional

import grpc

from quorum.config import parse_host_port
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc import nothing_listens
from quorum.rpc.peer_client import CHANNEL_OPTIONS, WIRE_ASK_NONE_AGAIN_S, WIRE_PROTOCOLS
from quorum.rpc.sasl_login import ScramLogin
from quorum.rpc.wire_methods import BY_NAME
from quorum.security.client import PLAINTEXT, ClientSecurity, handshake_problem, kafka_protocol_problem
from quorum.wire.client import WireCallError, WireChannelPool, answers_wire

# Larger requests take gRPC: a server may cap what a connection not yet known sends on the wire
# (sasl.server.max.receive.size, 512 KiB by default) and closes one that sends more, where gRPC
# answers RESOURCE_EXHAUSTED, which this client turns into a line saying to split the request.
WIRE_REQUEST_MAX_BYTES = 256 * 1024
# How a wire server says it has no such method (quorum/wire/server.py): an older version's
_NOT_SERVED = re.compile(r"^unknown method \d+$| is not served here$")

FAILED_SERVER_COOLDOWN_S = 10.0  # a server that timed out or refused is tried after the others this long
WAIT_NOTICE_S = 2.0  # a call still looking for its server after this long says what it waits for


def transport_reason(e: grpc.RpcError) -> str:
    """A short reason for a transport failure (gRPC's own details run to 200 characters)."""
    code, details = e.code(), e.details() or ""
    if "Connection refused" in details or "connection refused" in details:
        return "connection refused (is the controller running?)"
    if code is grpc.StatusCode.DEADLINE_EXCEEDED or "timed out" in details:  # (gRPC's connect timeout)
        return "no answer in time"
    name = code.name if code else "error"
    return f"{name}: {details[:80]}" if details else name


# Transport failures after which a request may have reached the server and been carried out.
_ANSWER_LOST = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)

class LeaderFollowingClient:
    # Called once per call that has waited WAIT_NOTICE_S, with one line saying what for; the CLI
    # sets it when stderr is a terminal, so a person is never left in silence (None: quiet).
    notify_waiting: Optional[Callable[[str], None]] = None
    stub_class: type  # the generated gRPC stub
    leader_noun = "leader"  # what the error messages call the server that answers
    no_leader_error = Errors.NOT_LEADER_OR_FOLLOWER
    retriable: frozenset[Errors] = frozenset()  # refusals that mean "ask again, here or elsewhere"
    retriable_codes: Optional[frozenset[grpc.StatusCode]] = None  # None: every transport error
    # Methods sent over a server's wire listener (quorum/wire/) where it has one and this client
    # connects in PLAINTEXT; the rest, and every call where there is none, take gRPC.
    wire_methods: frozenset[str] = frozenset()

    def __init__(self, servers: list[str], timeout: float, rpc_timeout: float, backoff: float,
                 security: Optional[ClientSecurity] = None):
        self.servers = servers
        self.security = security or PLAINTEXT
        self._login = ScramLogin(self.security) if self.security.protocol == "SASL_SSL" else None
        self.timeout = timeout  # for a whole call, retries included
        self.rpc_timeout = rpc_timeout  # for one attempt
        self.backoff = backoff
        self._leader: Optional[str] = None  # endpoint that last answered as leader
        start = random.randrange(len(servers)) if servers else 0
        self._rotated = servers[start:] + servers[:start]
        self._failed_until: dict[str, float] = {}  # server -> until when it is tried last
        self._probed: set[str] = set()  # servers asked whether they speak Kafka's protocol
        self._stubs: dict[str, tuple[grpc.Channel, object]] = {}
        self._wires: dict[str, tuple[Optional[WireChannelPool], float]] = {}  # target -> (channels, asked at)
        self._not_on_wire: set[tuple[str, str]] = set()  # (target, method) an older server's wire does not serve
        self._wire_context = None  # ssl.SSLContext of the wire channels, with TLS
        self._lock = threading.Lock()
        self._closed = False
        # How many attempts of the last call may have been carried out though their answer was lost:
        # an attempt timed out, the known leader dropped the connection, or a server answered
        # REQUEST_TIMED_OUT (done but not yet committed, or its leadership moved after it appended:
        # the voter changes say so). Each may take effect besides the attempt that answered, so a
        # write that is not idempotent may have been applied more than once. A single-threaded
        # caller's: the voter changes, the histories of tests/histories.py.
        self.lost_answers = 0

    @property
    def maybe_applied(self) -> bool:
        """Whether the last call may have been carried out by an attempt whose answer was lost."""
        return self.lost_answers > 0

    def response_error(self, resp) -> Optional[SparkraftError]:
        """The refusal a response carries, or None for success."""
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def leader_endpoint(self) -> Optional[str]:
        return self._leader

    def reopen(self) -> None:
        """Open new channels from the next call on (rotated key files are read again)."""
        with self._lock:
            stubs, self._stubs = list(self._stubs.values()), {}
            wires, self._wires = list(self._wires.values()), {}
        for channel, _ in stubs:
            channel.close()
        for wire, _ in wires:
            if wire is not None:
                wire.close()

    def close(self) -> None:
        """Close the channels; a call still running fails, later calls raise ValueError."""
        with self._lock:
            self._closed = True
        self.reopen()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- attempts ----------------------------------------------------------------------------
    def _channel(self, target: str) -> tuple[grpc.Channel, object]:
        """The channel to ``target`` and its stub."""
        with self._lock:
            if self._closed:
                raise ValueError(f"the {type(self).__name__} is closed")
            entry = self._stubs.get(target)
            if entry is None:
                channel = self.security.channel(target, options=CHANNEL_OPTIONS)
                entry = self._stubs[target] = (channel, self.stub_class(channel))
            return entry

    def _candidates(self) -> list[str]:
        """The known leader first, then the other servers from this client's own starting point
        (clients spread over the quorum instead of all trying the first-listed server first), those
        that failed lately last: a paused or dead server must not take every call's whole budget."""
        now = time.monotonic()
        rest = [s for s in self._rotated if s != self._leader]
        rest.sort(key=lambda s: self._failed_until.get(s, 0.0) > now)  # stable: healthy ones keep their order
        return ([self._leader] if self._leader else []) + rest

    def _attempt_timeout(self, deadline: float) -> float:
        return max(0.01, min(self.rpc_timeout, deadline - time.monotonic()))

    def _wire(self, target: str, deadline: float) -> Optional[WireChannelPool]:
        """The wire channels to ``target``, asking it once where its wire listener is (None: it has
        none, or is an older version; asked again after WIRE_ASK_NONE_AGAIN_S)."""
        with self._lock:
            known = self._wires.get(target)
        if known is not None and (known[0] is not None or time.monotonic() - known[1] < WIRE_ASK_NONE_AGAIN_S):
            return known[0]
        channel, _ = self._channel(target)
        try:
            port = raft_pb2_grpc.RaftStub(channel).WireEndpoint(raft_pb2.WireEndpointRequest(),
                                                                 timeout=self._attempt_timeout(deadline)).port
        except grpc.RpcError as e:
            if e.code() is not grpc.StatusCode.UNIMPLEMENTED:
                raise
            port = 0
        wire = WireChannelPool(parse_host_port(target)[0], port, tls=self._wire_tls()) if port else None
        with self._lock:
            if self._closed:
                raise ValueError(f"the {type(self).__name__} is closed")
            self._wires[target] = (wire, time.monotonic())
        return wire

    def _wire_tls(self):
        """The SSL context of this client's wire channels (made once: it reads the key files)."""
        with self._lock:
            if self._wire_context is None and self.security.tls:
                self._wire_context = self.security.ssl_context()
            return self._wire_context

    def _on_wire(self, target: str, method: str, request) -> bool:
        """Whether this call to ``target`` goes on the wire (where ``target`` has one)."""
        return method in self.wire_methods and self._login is None and self.security.protocol in WIRE_PROTOCOLS \
            and request.ByteSize() <= WIRE_REQUEST_MAX_BYTES and (target, method) not in self._not_on_wire

    def _attempt_wire(self, target: str, method: str, request, deadline: float):
        """The response over the wire, or None: ``target`` has no wire, or its wire does not serve
        ``method`` (a wire method's name: a request's own, or ``Forward``)."""
        wire = self._wire(target, deadline)
        if wire is None:
            return None
        try:
            return wire.call(BY_NAME[method], request, self._attempt_timeout(deadline))
        except WireCallError as e:
            if e.code() is grpc.StatusCode.INVALID_ARGUMENT and _NOT_SERVED.search(e.details() or ""):
                # a server of an older version, whose wire has no such method: gRPC has it
                with self._lock:
                    self._not_on_wire.add((target, method))
                return None
            if e.code() is grpc.StatusCode.UNAVAILABLE:  # a restarted server listens elsewhere: ask again
                with self._lock:
                    if self._wires.get(target, (None,))[0] is wire:
                        del self._wires[target]
                wire.close()
            raise

    def _attempt(self, target: str, method: str, request, deadline: float, metadata: tuple = ()):
        """``metadata``: more gRPC metadata for this call (a broker forwarding names its client)."""
        if not metadata and self._on_wire(target, method, request):
            resp = self._attempt_wire(target, method, request, deadline)
            if resp is not None:
                return resp
        channel, stub = self._channel(target)
        call = getattr(stub, method)
        if self._login is None:
            return call(request, timeout=self._attempt_timeout(deadline), metadata=metadata or None)
        for renewed in (False, True):  # a refused token (the server restarted...) is renewed once
            login = self._login.metadata(target, channel, self._attempt_timeout(deadline))
            try:
                resp = call(request, timeout=self._attempt_timeout(deadline), metadata=tuple(login) + tuple(metadata))
            except grpc.RpcError as e:
                if renewed or e.code() is not grpc.StatusCode.UNAUTHENTICATED:
                    raise
            else:
                error = self.response_error(resp)
                if renewed or error is None or error.error is not Errors.SASL_AUTHENTICATION_FAILED:
                    return resp
            self._login.forget(target)

    def _note_login_refused(self, target: str, e: SparkraftError, refused: dict[str, SparkraftError],
                            final: bool = False) -> Optional[str]:
        """``target`` refused this client's SCRAM login; the call goes on to the next server unless
        this raises. A retriable refusal (a restarted controller still replaying its log checks no
        login) is returned as the answer to report if no server takes the call. A standby may not
        have replayed a new user or password yet, so SASL_AUTHENTICATION_FAILED is final (raised)
        only from the leader or once every server has given it."""
        if e.error in self.retriable:
            return f"{target} answered {e}"
        if e.error is not Errors.SASL_AUTHENTICATION_FAILED:
            raise e
        refused[target] = e
        if final or len(refused) >= len(set(self.servers)):
            raise e
        return None

    def _unreachable(self, target: str, method: str, e: grpc.RpcError) -> str:
        """Why ``target`` did not answer; raises if the transport error is not worth a retry."""
        code = e.code()
        if code is grpc.StatusCode.RESOURCE_EXHAUSTED:  # no other server would take it either
            raise SparkraftError(Errors.INVALID_REQUEST, f"{method} refused by {target}: the request is larger "
                                 f"than a controller accepts ({e.details()}); split it into smaller ones")
        if code is grpc.StatusCode.UNAVAILABLE and "onnection refused" not in (e.details() or ""):
            if target not in self._probed:  # what the server speaks: asked once per server
                self._probed.add(target)
                problem = kafka_protocol_problem(target, self.security, timeout=1.0)
                host, port = parse_host_port(target)
                # an address to fix, not a server to wait for; but a controller's one port answers
                # Kafka's protocol too, and a lossy network fails calls: asked a few times
                if problem is not None and not any(answers_wire(host, port, self._wire_tls(), timeout=2.0)
                                                   for _ in range(3)):
                    raise SparkraftError(Errors.INVALID_REQUEST, problem)
            problem = handshake_problem(target, self.security)
            if problem is not None:  # a configuration to fix, not a server to wait for
                raise SparkraftError(Errors.SSL_HANDSHAKE_FAILED, problem)
        if self.retriable_codes is not None and code not in self.retriable_codes:
            raise SparkraftError(Errors.UNKNOWN_SERVER_ERROR,
                                 f"{method} failed at {target}: {code.name}: {e.details()}")
        if self._leader == target:
            self._leader = None
        self._failed_until[target] = time.monotonic() + FAILED_SERVER_COOLDOWN_S
        return transport_reason(e)

    def _call_leader(self, method: str, request, timeout: Optional[float] = None, metadata: tuple = ()):
        waited = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + waited
        unreachable: dict[str, str] = {}  # target -> why, for the final error
        answered: Optional[str] = None  # the last refusal, if any server answered
        login_refused: dict[str, SparkraftError] = {}  # servers that refused this client's SCRAM login
        redirects = 0
        self.lost_answers = 0
        notice_at = self._notice_at()
        while True:
            redirected = False
            for target in self._candidates():
                if time.monotonic() >= deadline:
                    break
                to_leader = target == self._leader
                try:
                    resp = self._attempt(target, method, request, deadline, metadata)
                except SparkraftError as e:
                    answered = self._note_login_refused(target, e, login_refused, final=to_leader) or answered
                    continue
                except grpc.RpcError as e:
                    why = unreachable[target] = self._unreachable(target, method, e)
                    # any server may have been the leader (one we did not know of) unless it was
                    # never reached: a refused connection carried nothing
                    self.lost_answers += e.code() is grpc.StatusCode.DEADLINE_EXCEEDED or (
                        e.code() in _ANSWER_LOST and (to_leader or not why.startswith("connection refused")))
                    continue
                unreachable.pop(target, None)
                self._failed_until.pop(target, None)
                error = self.response_error(resp)
                if error is None:
                    self._leader = target
                    return resp
                if error.error not in self.retriable:
                    raise error
                self.lost_answers += error.error is Errors.REQUEST_TIMED_OUT
                answered = f"{target} answered {error}"
                if self._leader == target:
                    self._leader = None
                hint = getattr(resp, "leader_endpoint", "")
                if hint and hint != target and redirects < 3:
                    self._leader = hint  # ask the named leader next, at once
                    redirects += 1
                    redirected = True
                    break
            if time.monotonic() >= deadline:
                raise self._give_up(method, unreachable, answered, waited)
            if self._nothing_listens(started, unreachable, answered):
                self._raise_nothing_listens(started, unreachable)
            notice_at = self._maybe_notify(notice_at, waited, answered, unreachable)
            if not redirected:
                redirects = 0
                time.sleep(min(self.backoff, max(0.0, deadline - time.monotonic())))

    def _nothing_listens(self, started: float, unreachable: dict[str, str], answered: Optional[str]) -> bool:
        give_up = nothing_listens.give_up_s  # the one rule (quorum/rpc/nothing_listens.py)
        return (give_up is not None and answered is None and time.monotonic() - started >= give_up
                and set(unreachable) >= set(self.servers)
                and all(why.startswith("connection refused") for why in unreachable.values()))

    def _raise_nothing_listens(self, started: float, unreachable: dict[str, str]):
        raise nothing_listens.error(self.servers, time.monotonic() - started)

    def _notice_at(self) -> Optional[float]:
        """When a call started now should say what it waits for (None: never)."""
        return time.monotonic() + WAIT_NOTICE_S if type(self).notify_waiting is not None else None

    def _maybe_notify(self, notice_at: Optional[float], waited: float, answered: Optional[str],
                      unreachable: dict[str, str]) -> Optional[float]:
        """Say once what a slow call is waiting for; returns the next ``notice_at``."""
        if notice_at is None or time.monotonic() < notice_at:
            return notice_at
        last = answered or "; ".join(f"{t}: {w}" for t, w in unreachable.items()) or "no answer yet"
        type(self).notify_waiting(f"waiting up to {waited:g}s (--timeout) for the {self.leader_noun} at "
                                  f"{','.join(self.servers)}: {last}")
        return None

    def _give_up(self, method: str, unreachable: dict[str, str], answered: Optional[str],
                 waited: float) -> SparkraftError:
        servers = ",".join(self.servers)
        if answered is None:
            why = "; ".join(f"{t}: {w}" for t, w in unreachable.items()) or "no answer"
            return SparkraftError(Errors.NETWORK_EXCEPTION,
                                  f"no controller reachable at {servers} within {waited:g}s ({why})")
        return SparkraftError(self.no_leader_error, f"{method}: no {self.leader_noun} found via {servers} "
                                                    f"within {waited:g}s (last: {answered})")
