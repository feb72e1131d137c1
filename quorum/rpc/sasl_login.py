"""A SASL_SSL client's side: one SCRAM login per server, and the token each login gives.

Before its first call to a server the client runs the exchange (quorum/security/scram.py) with that
server's ``Sasl.Authenticate`` on the same TLS channel, then sends the token with every call there
(see quorum/security/sasl_server.py). A token is renewed before it expires, and at once when the
server refuses it (it restarted, or the password changed). A wrong password is
SASL_AUTHENTICATION_FAILED, raised to the caller; the password stays in this object only.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

import grpc

from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2, controller_pb2_grpc
from quorum.rpc.convert import error_from_code
from quorum.security.client import ClientSecurity
from quorum.security.sasl_server import AUTHORIZATION, BEARER
from quorum.security.scram import ClientExchange, ScramError, mechanism

RENEW_AT = 0.8  # of a token's lifetime


class ScramLogin:
    def __init__(self, security: ClientSecurity, clock: Callable[[], float] = time.monotonic):
        self._security = security
        self._clock = clock
        self._tokens: dict[str, tuple[str, float]] = {}  # server -> (token, when to renew it)
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def metadata(self, target: str, channel: grpc.Channel, timeout: float) -> tuple[tuple[str, str], ...]:
        """The call metadata that authenticates a call to ``target`` (logging in first if needed)."""
        with self._lock:
            lock = self._locks.setdefault(target, threading.Lock())
        with lock:
            token, renew_at = self._tokens.get(target, ("", 0.0))
            if not token or self._clock() >= renew_at:
                token, lifetime_s = self._login(target, channel, timeout)
                self._tokens[target] = (token, self._clock() + lifetime_s * RENEW_AT)
        return ((AUTHORIZATION, BEARER + token),)

    def forget(self, target: str) -> None:
        """``target`` refused its token: log in again before the next call there."""
        self._tokens.pop(target, None)

    def _login(self, target: str, channel: grpc.Channel, timeout: float) -> tuple[str, float]:
        s = self._security
        exchange = ClientExchange(mechanism(s.sasl_mechanism), s.sasl_username, s.sasl_password or "")
        stub = controller_pb2_grpc.SaslStub(channel)
        deadline = self._clock() + timeout

        def step(auth_bytes: bytes) -> controller_pb2.SaslAuthenticateResponse:
            resp = stub.Authenticate(controller_pb2.SaslAuthenticateRequest(mechanism=s.sasl_mechanism,
                                                                            auth_bytes=auth_bytes),
                                     timeout=max(0.01, deadline - self._clock()))
            if resp.error:
                raise SparkraftError(error_from_code(resp.error), f"{target}: {resp.error_message}")
            return resp

        try:
            first = step(exchange.first())
            final = step(exchange.final(first.auth_bytes))
            exchange.verify(final.auth_bytes)
        except ScramError as e:
            raise SparkraftError(Errors.SASL_AUTHENTICATION_FAILED, f"{target}: {e}") from None
        if not final.token:
            raise SparkraftError(Errors.ILLEGAL_SASL_STATE, f"{target} finished the SCRAM exchange without a token")
        return final.token, final.session_lifetime_ms / 1000
