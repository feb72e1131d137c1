"""The ``sparkraft.v1.Controller`` gRPC service: thin, as the servicer of a sans-I/O core should be.

Every RPC does the same three things, so they are made by one function (:func:`_rpc`):

1. convert the protobuf request to its dataclass (quorum/rpc/controller_convert.py);
2. call the :class:`~quorum.node.controller_node.ControllerNode`: writes with ``submit`` (answered
   once their records are committed), reads with ``read_async`` (answered by any controller from
   what it has replayed);
3. convert the reply back, or map a failure to the response's error fields: a
   :class:`SparkraftError` keeps its Kafka code and message, NOT_CONTROLLER also names the active
   controller (``leader_id``, ``leader_endpoint``) so the client redirects at once; a call that is
   not answered before its deadline is REQUEST_TIMED_OUT (the records may still be committed).

Read answers also carry the active controller's id and endpoint (if known), so a client that asked
a standby can ask the active controller instead when it wants the newest state.

The service is created before its node (it must be on the gRPC server before the server starts,
and the RaftNode starts its server when it is built): :meth:`ControllerService.attach` hands it the
node later; until then, and once the node stops, every call is UNAVAILABLE.
"""
from __future__ import annotations

import concurrent.futures
import logging
from dataclasses import dataclass
from typing import Any, Callable, Optional

import grpc

from quorum.controller import registry
from quorum.controller.audit import MAX_NAME, AuditContext, software_of
from quorum.errors import ControllerNotRunningError, Errors, SparkraftError, StillReplayingError
from quorum.gen.sparkraft.v1 import controller_pb2_grpc
from quorum.rpc import controller_convert as cc
from quorum.rpc import request_actions
from quorum.rpc.deadline import time_left
from quorum.rpc.ports import ControllerPort
from quorum.security.principal import FORWARDED_LISTENER, FORWARDED_PRINCIPAL, FORWARDED_SOFTWARE, peer_host

log = logging.getLogger(__name__)



class ControllerService(controller_pb2_grpc.ControllerServicer):
    def __init__(self, node: Optional[ControllerPort] = None):
        """``node``: the ControllerNode (quorum/node/controller_node.py), or None until ``attach``."""
        self._node = node

    def attach(self, node: ControllerPort) -> None:
        self._node = node

    @property
    def node(self) -> Optional[ControllerPort]:
        """The ControllerNode, or None until ``attach``."""
        return self._node

    def add_to_server(self, server: grpc.Server) -> None:
        controller_pb2_grpc.add_ControllerServicer_to_server(self, server)

    def _serve(self, method: str, request_pb, context: grpc.ServicerContext):
        try:
            call = begin_call(self._node, method, request_pb, lambda: _authorizing_caller(self._node, context),
                              identify=lambda caller: _audit_context(self._node, context, caller))
        except ControllerNotRunningError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))
        if not isinstance(call, PendingCall):
            return call
        try:
            call.future.result(timeout=time_left(context))
        except concurrent.futures.TimeoutError:
            return call.timed_out()
        except Exception:
            pass  # call.answer() says what went wrong
        try:
            return call.answer(call.future)
        except ControllerNotRunningError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))


def _authorizing_caller(node: ControllerPort, context):
    return node.security.authorizing_caller(context)


def _who(identify: Optional[Callable[[Any], Any]], caller):
    """``identify(caller)``, or None if it cannot say (the entry is then the controller's own)."""
    try:
        return identify(caller) if identify is not None else None
    except SparkraftError:
        return None


def _audit_context(node: ControllerPort, context, caller=None) -> AuditContext:
    """Who sent a gRPC request: its caller (a forwarded request's client, with the software and
    listener the forwarding node names, and the address it came from as ``forwarded_by``)."""
    caller = caller or node.security.caller(context)
    named = dict(context.invocation_metadata() or ())
    if FORWARDED_PRINCIPAL not in named:
        return AuditContext(caller.principal, caller.host, "grpc")
    return AuditContext(caller.principal, caller.host, named.get(FORWARDED_LISTENER, "")[:MAX_NAME],
                        software_of(named.get(FORWARDED_SOFTWARE, "")), forwarded_by=peer_host(context.peer()))


@dataclass(eq=False)
class PendingCall:
    """A controller request handed to the ControllerNode: ``answer(future)`` makes the response once
    ``future`` is done (ControllerNotRunningError: the transport's UNAVAILABLE); ``timed_out()`` if
    the caller's deadline passes first. Either releases the client slot a write holds."""

    method: str
    future: concurrent.futures.Future
    finish: Callable[[Any], Any]  # the reply -> the response
    release: Callable[[], None]
    endpoint_of: Callable[[int], str]  # where a node listens (NOT_CONTROLLER names the active one)

    def answer(self, future: concurrent.futures.Future):
        self.release()
        try:
            reply = future.result()
        except SparkraftError as e:
            leader = e.details.get("leader_id")
            return cc.error_response(self.method, e.error, e.message, leader,
                                     self.endpoint_of(leader) if leader is not None else "")
        except (ControllerNotRunningError, concurrent.futures.CancelledError) as e:
            raise ControllerNotRunningError(str(e) or "the controller is stopping") from None
        except Exception as e:
            log.warning("controller %s failed", self.method, exc_info=True)
            return cc.error_response(self.method, Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")
        return self.finish(reply)

    def timed_out(self):
        self.future.cancel()
        self.release()
        return cc.error_response(self.method, Errors.REQUEST_TIMED_OUT,
                                 "not answered before the deadline; the change may still be committed")


def begin_call(node: Optional[ControllerPort], method: str, request_pb, authorizing_caller: Callable[[], Any],
               wire: bool = False, identify: Optional[Callable[[], Any]] = None):
    """Start a controller request, whatever the transport: the response at once (a refusal, a bad
    request), or a :class:`PendingCall`. ``authorizing_caller()`` is NodeSecurity's for the
    request's transport (``wire``: the wire's, else gRPC's). ControllerNotRunningError if there is no
    running controller here. ``identify(caller)``: who sent a write, for its audit entry (an
    AuditContext; ``caller``: the authorizing caller if there is one, not worked out twice).

    Writes wait for their commit holding one of the node's client slots: past that limit they are
    refused at once with REQUEST_TIMED_OUT (retriable), never queued (RaftNode's ClientSlots)."""
    if node is None or not node.running:
        raise ControllerNotRunningError("the controller is not running")
    try:
        request = cc.request_from_proto(request_pb)
    except (ValueError, TypeError) as e:
        return cc.error_response(method, Errors.INVALID_REQUEST, str(e))
    row = registry.row_of(request)
    is_read = row.read is not None
    security, check = node.security, None
    if row.secret is not None and row.secret(request) and security.tls is None:
        error = SparkraftError(Errors.INVALID_REQUEST, f"{method} carries secrets, taken only over TLS (this "
                               "listener is PLAINTEXT: they would cross the network in clear)")
        if node.refusal_reports is not None:  # for the active controller's audit trail, never waited for
            node.refusal_reports.report(row, request, error, _who(identify, None))
        return cc.error_response(method, error.error, error.message)
    try:
        caller = authorizing_caller()
    except SparkraftError as e:  # a SCRAM token that does not verify
        return cc.error_response(method, e.error, e.message)
    if is_read and not node.loaded:  # a restarted standby's image may lack what was committed
        leader = node.leader_id()        # while it was down: a topic would "not exist" (ask another)
        return cc.error_response(method, Errors.NOT_CONTROLLER, StillReplayingError("answers no read").message,
                                 leader, node.endpoint_of(leader) if leader is not None else "")
    if caller is not None:
        def check():
            return request_actions.refusal(security, caller, request, node.topic_name)

        if is_read:  # any loaded controller answers reads, by the ACLs it has replayed
            denied = check()
            if denied is not None:
                return cc.error_response(method, denied.error, denied.message)
    release = _no_slot
    if is_read:
        future = node.read_async(request)
    else:
        try:
            release = node.hold_client_slot(wire)
        except SparkraftError as e:
            return cc.error_response(method, e.error, e.message)
        future = node.submit(request, check, _who(identify, caller))  # writes: checked by the active controller
        future.add_done_callback(lambda f: release())

    def finish(reply):
        if check is not None and row.needs.kind == "listed":
            reply = request_actions.visible_topics(security, caller, reply)
        response = cc.reply_to_proto(method, reply, getattr(request_pb, "results_by_topic", False))
        if not is_read:  # answered once committed and replayed here: this is at or past its records
            response.committed_offset = node.last_committed_offset()
        if is_read:
            response.committed_offset = next(iter(getattr(future, "answered_at", ())), 0)
            leader = node.leader_id()
            if leader is not None:
                response.leader_id = leader
                response.leader_endpoint = node.endpoint_of(leader)
        return response

    return PendingCall(method, future, finish, release, node.endpoint_of)


def _no_slot() -> None:
    pass


def _rpc(method: str):
    def handler(self, request, context):
        return self._serve(method, request, context)

    handler.__name__ = method
    handler.__doc__ = f"{method}: see proto/sparkraft/v1/controller.proto."
    return handler


for _method in cc.METHODS:
    setattr(ControllerService, _method, _rpc(_method))
