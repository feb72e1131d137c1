"""The Controller service's requests on the wire (quorum/wire/): those the request registry puts
there (RequestRow.wire), the admin path and the broker heartbeats alike. The same checks and answers
as the gRPC servicer (``begin_call`` in controller_service.py); each handler runs on the node's
event-loop thread and answers when the controller thread's future is done, with no thread waiting
for it (gRPC's synchronous server holds one of its threads per request in flight).

A caller is its certificate's principal under mutual TLS, else ANONYMOUS at its address (the wire
has no SCRAM login: SASL_SSL clients take gRPC).
"""
from __future__ import annotations

import concurrent.futures
from typing import Callable, Optional

from google.protobuf.message import DecodeError

from quorum.controller import registry
from quorum.controller.audit import MAX_NAME, AuditContext, software_of
from quorum.errors import ControllerNotRunningError
from quorum.gen.sparkraft.v1 import controller_pb2 as cpb
from quorum.rpc.controller_service import ControllerService, PendingCall, begin_call
from quorum.rpc.ports import ControllerPort
from quorum.rpc.wire_methods import BY_NAME
from quorum.wire.frames import Status
from quorum.wire.server import Deferred, WireConnection, WireRefusal

WIRE_METHODS = tuple(row.method for row in registry.ROWS if row.method is not None and row.wire)


def controller_handlers(service: ControllerService) -> dict[int, Callable]:
    """Method number -> handler, for the controller that ``service`` is (or will be) attached to."""
    return {**{BY_NAME[name].number: _Handler(service, name) for name in WIRE_METHODS},
            BY_NAME["Forward"].number: _Forwarded(service)}


class _Handler:
    def __init__(self, service: ControllerService, method: str):
        self._service = service
        self._method = method

    def __call__(self, conn: WireConnection, request):
        node = self._service.node
        return _serve(node, self._method, request, lambda: _caller(node, conn),
                      identify=lambda caller: _audit_context(node, conn, caller))


class _Forwarded:
    """A request a broker forwards for its Kafka client (the ``Forward`` envelope): authorized as
    that client's principal if the connection's own caller may forward (``forwarded_caller``: a
    node's principal, a super user, or CLUSTER_ACTION), as gRPC's forwarded metadata is; answered
    as the inner method's response in the envelope's."""

    def __init__(self, service: ControllerService):
        self._service = service

    def __call__(self, conn: WireConnection, envelope):
        if envelope.method not in WIRE_METHODS:
            raise WireRefusal(Status.INVALID_REQUEST, f"{envelope.method!r} is not forwarded on the wire")
        inner = BY_NAME[envelope.method]
        try:
            request = inner.request.FromString(envelope.request)
        except DecodeError:
            raise WireRefusal(Status.INVALID_REQUEST, f"{envelope.method}: the body does not decode") from None
        node = self._service.node

        def caller():
            if node.security.authorizer is None:
                return None
            return node.security.forwarded_caller(_caller(node, conn), envelope.principal, envelope.host)

        def identify(_caller):
            return AuditContext(envelope.principal[:1024], envelope.host[:256], envelope.listener[:MAX_NAME],
                                software_of(envelope.software), forwarded_by=_audit_context(node, conn).principal)

        return _serve(node, envelope.method, request, caller, _enveloped, identify)


def _serve(node, method: str, request, caller: Callable, wrap: Callable = lambda response: response,
           identify: Optional[Callable] = None):
    """``begin_call`` on the wire: the response at once, or a Deferred one; ``wrap(response)`` is
    what goes back (a forwarded request's response travels inside the envelope's)."""
    try:
        call = begin_call(node, method, request, caller, wire=True, identify=identify)
    except ControllerNotRunningError as e:
        raise WireRefusal(Status.UNAVAILABLE, str(e)) from None
    if not isinstance(call, PendingCall):
        return wrap(call)
    return Deferred(call.future, lambda f: wrap(_answer(call, f)), lambda: wrap(call.timed_out()))


def _enveloped(response) -> cpb.ForwardedResponse:
    return cpb.ForwardedResponse(response=response.SerializeToString())


def _caller(node: ControllerPort, conn: WireConnection):
    """NodeSecurity.authorizing_caller for a wire connection: by its certificate under mutual TLS."""
    if node.security.authorizer is None:
        return None
    return node.security.wire_caller(conn.peer, conn.peer_certificate)


def _audit_context(node: ControllerPort, conn: WireConnection, caller=None) -> AuditContext:
    """Who is on a wire connection, for the audit trail (by its certificate under mutual TLS)."""
    caller = caller or node.security.wire_caller(conn.peer, conn.peer_certificate)
    return AuditContext(caller.principal, caller.host, "wire")


def _answer(call: PendingCall, future: concurrent.futures.Future):
    try:
        return call.answer(future)
    except ControllerNotRunningError as e:
        raise WireRefusal(Status.UNAVAILABLE, str(e)) from None
