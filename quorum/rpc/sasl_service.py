"""The ``sparkraft.v1.Sasl`` gRPC service: one step of a SCRAM login per call, answered by the node's
ScramAuthenticator (quorum/security/sasl_server.py). Any controller with a TLS listener serves it;
a PLAINTEXT listener refuses (a token must not cross the network in clear)."""
from __future__ import annotations

import logging
import threading
import time

import grpc

from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.gen.sparkraft.v1 import controller_pb2_grpc
from quorum.security.principal import peer_host

log = logging.getLogger(__name__)
LOG_EVERY_S = 10.0  # failed logins are logged at most this often, with a count: a guessing client cannot flood the log


class SaslService(controller_pb2_grpc.SaslServicer):
    def __init__(self, security=None):
        """``security``: the node's NodeSecurity, or None until ``attach``."""
        self._security = security
        self._lock = threading.Lock()
        self._last_logged = float("-inf")
        self._failed_since = 0

    def attach(self, security) -> None:
        self._security = security

    def add_to_server(self, server: grpc.Server) -> None:
        controller_pb2_grpc.add_SaslServicer_to_server(self, server)

    def Authenticate(self, request, context):
        scram = None if self._security is None else self._security.scram
        if scram is None:
            return pb.SaslAuthenticateResponse(error=int(Errors.UNSUPPORTED_SASL_MECHANISM),
                                               error_message="SASL is served only on a controller's TLS listener "
                                                             "(this one is PLAINTEXT or not a controller's)")
        try:
            reply = scram.authenticate(request.mechanism, request.auth_bytes)
        except SparkraftError as e:
            self._note_failure(request.mechanism, context.peer(), e.message)
            return pb.SaslAuthenticateResponse(error=int(e.error), error_message=e.message)
        return pb.SaslAuthenticateResponse(auth_bytes=reply.auth_bytes, token=reply.token,
                                           session_lifetime_ms=reply.lifetime_ms)

    def _note_failure(self, mechanism: str, peer: str, why: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last_logged < LOG_EVERY_S:
                self._failed_since += 1
                return
            self._last_logged, count, self._failed_since = now, self._failed_since, 0
        log.warning("SASL %s login from %s failed: %s%s", mechanism[:20], peer_host(peer), why,
                    f" ({count} more failed since the last report)" if count else "")
