"""The Raft service's hot requests on the wire (quorum/wire/): the peers' Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch and FetchSnapshot, and clients' Append. The same checks and answers as the
gRPC servicer (raft_service.py); only the transport differs: each handler runs on the node's
wire thread, hands the request to the Raft event loop and answers when the loop's future is done,
without a thread waiting in between.

A caller is known as on the gRPC listener: by its verified certificate under mutual TLS (a request
naming voter N comes only from voter N's principal: request_actions.raft_refusal), else as
ANONYMOUS at its address; and a request claiming to come from a voter must also carry that voter's
session token in its connection's Hello, checked exactly as gRPC metadata is (peer_identity.py).
"""
from __future__ import annotations

import concurrent.futures
import threading
from typing import Callable

from quorum.errors import NodeNotRunningError
from quorum.gen.sparkraft.v1 import raft_pb2
from quorum.rpc import convert, request_actions
from quorum.rpc.peer_client import METADATA_KEY
from quorum.rpc.peer_identity import NEEDS_PROOF
from quorum.rpc.ports import RaftPort
from quorum.rpc.raft_service import PendingAppend, begin_append
from quorum.rpc.wire_methods import BY_NAME
from quorum.wire.frames import Status
from quorum.wire.server import Deferred, WireConnection, WireRefusal

_CHECK_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="wire-verify-peer")
MAX_PROOF_CHECKS = 16


def raft_handlers(node: RaftPort) -> dict[int, Callable]:
    """Method number -> handler for ``node`` (a RaftNode)."""
    to_core = _ToCore(node)
    handlers = {BY_NAME[name].number: to_core for name in
                ("Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot")}
    handlers[BY_NAME["Append"].number] = _Append(node)
    return handlers


class _ToCore:
    def __init__(self, node: RaftPort):
        self._node = node
        self._checks = threading.BoundedSemaphore(MAX_PROOF_CHECKS)

    def __call__(self, conn: WireConnection, request):
        node = self._node
        if not node.running:  # before any identity check: a node still probing its cluster id
            raise WireRefusal(Status.UNAVAILABLE, "node is not running")  # must not log refusals
        msg = convert.from_proto(request)
        src = convert.request_source(msg)
        security = node.security
        if security.mutual_tls:  # a voter's claim and a controller's role, by certificate first
            refusal = request_actions.raft_refusal(security, security.wire_caller(conn.peer, conn.peer_certificate),
                                                   type(msg).__name__.removesuffix("Request"), src, node.voters)
            if refusal is not None:
                self._refused(msg, src, conn.peer, refusal)
        metadata = ((METADATA_KEY, conn.hello_peer),) if conn.hello_peer else ()
        verdict = node.identities.check(src, metadata)
        if verdict is None:
            return Deferred(self._submit(msg), self._answer)
        if verdict is not NEEDS_PROOF:
            self._refused(msg, src, conn.peer, verdict)
        # A voter's session not proven yet: asking it (VerifyPeer) blocks, so not on this thread,
        # and at most MAX_PROOF_CHECKS at once (the rest are told to come back).
        if self._checks.acquire(blocking=False):
            outer: concurrent.futures.Future = concurrent.futures.Future()
            _CHECK_POOL.submit(self._check_then_submit, msg, src, metadata, conn.peer, outer)
            return Deferred(outer, self._answer)
        raise WireRefusal(Status.UNAVAILABLE, "too many unproven peer sessions at once; retry")

    def _refused(self, msg, src: int, peer: str, refusal: str):
        self._node.refusals.note(type(msg).__name__, src, peer, refusal)
        raise WireRefusal(Status.UNAUTHENTICATED, f"{type(msg).__name__} refused: {refusal}")

    def _submit(self, msg) -> concurrent.futures.Future:
        try:
            return self._node.submit_request(msg)
        except NodeNotRunningError as e:
            raise WireRefusal(Status.UNAVAILABLE, str(e)) from None

    def _answer(self, future: concurrent.futures.Future):
        try:
            response = future.result()
        except (NodeNotRunningError, concurrent.futures.CancelledError) as e:
            raise WireRefusal(Status.UNAVAILABLE, str(e) or "node is stopping") from None
        proto = convert.to_proto(response)
        if isinstance(proto, raft_pb2.FetchResponse) and proto.leader_id >= 0:
            proto.leader_endpoint = self._node.endpoint_of(proto.leader_id)
        return proto

    def _check_then_submit(self, msg, src: int, metadata, peer: str, outer: concurrent.futures.Future) -> None:
        """On the pool: ask the claimed voter (refusal() may block), then hand the request to the core;
        ``outer`` gets the core's answer or the refusal."""
        try:
            refusal = self._node.identities.refusal(src, metadata)
            if refusal is not None:
                self._refused(msg, src, peer, refusal)
            inner = self._submit(msg)
        except BaseException as e:
            _settle(outer, e)
            return
        finally:
            self._checks.release()
        inner.add_done_callback(lambda f: _copy(f, outer))


def _copy(source: concurrent.futures.Future, target: concurrent.futures.Future) -> None:
    if source.cancelled():
        target.cancel()
    else:
        _settle(target, source.exception(), None if source.exception() else source.result())


def _settle(target: concurrent.futures.Future, error: BaseException | None, result=None) -> None:
    """Complete ``target`` unless it is already done (the wire's timeout cancels it)."""
    try:
        if error is not None:
            target.set_exception(error)
        else:
            target.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass


class _Append:
    def __init__(self, node: RaftPort):
        self._node = node

    def __call__(self, conn: WireConnection, request):
        node = self._node
        call = begin_append(node, request, lambda: node.security.wire_caller(conn.peer, conn.peer_certificate),
                            wire=True)
        if not isinstance(call, PendingAppend):
            return call

        def answer(f: concurrent.futures.Future):
            try:
                return call.answer(f)
            except NodeNotRunningError as e:
                raise WireRefusal(Status.UNAVAILABLE, str(e) or "node is stopping") from None

        return Deferred(call.future, answer, call.timed_out)
