"""SASL/SCRAM on a broker's Kafka listener (``SASL_SSL`` or ``SASL_PLAINTEXT``), as Kafka runs it.

A connection logs in before anything else: ApiVersions may come first, then SaslHandshake v1
names a mechanism (SCRAM-SHA-256 or SCRAM-SHA-512) and two SaslAuthenticate requests carry the
exchange of quorum/security/scram.py against the credentials in the broker's image. From then on
the connection's requests are the user's (``User:<name>``: the broker's authorizer decides its reads
and the controllers its forwarded writes). Any other request before that, an unknown mechanism or a
failed exchange closes the connection after its answer, as Kafka does.

Sessions end (KIP-368): with ``connections.max.reauth.ms`` > 0 the answer tells the client how long
its login lasts; a client logs in again on the same connection before then (as the same user), and
a connection that has not is closed at its next request. A credential changed or deleted meanwhile
therefore stops working within that time. Nothing here logs a password, proof or key.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from quorum.errors import Errors
from quorum.security.principal import Caller
from quorum.security.scram import MECHANISMS, Mechanism, ScramError, ServerExchange

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
API_VERSIONS_KEY = 18
BEFORE_LOGIN = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})


@dataclass
class SaslSession:
    """One connection's login: which step it is at, who it is once logged in, and until when."""

    session_lifetime_ms: int  # 0: a login lasts as long as the connection
    decoy_key: bytes  # the listener's: an unknown user gets the same made-up salt every time
    mechanism: Optional[Mechanism] = None  # named by the handshake, until the exchange ends
    exchange: Optional[ServerExchange] = None  # between the two SaslAuthenticate requests
    principal: Optional[str] = None  # once logged in
    expires_at: float = float("inf")  # monotonic; the login's end
    close: bool = False  # the answer just made ends the connection
    _clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def allows(self, api_key: int) -> bool:
        """Whether a request with this key may be served now (else the connection is closed)."""
        if api_key in BEFORE_LOGIN:
            return True
        return self.principal is not None and self._clock() < self.expires_at

    def log_in(self, principal: str) -> None:
        """The exchange succeeded for ``principal``: its login lasts ``session_lifetime_ms`` from now."""
        self.principal = principal
        lifetime = self.session_lifetime_ms
        self.expires_at = self._clock() + lifetime / 1000 if lifetime > 0 else float("inf")


def handshake(ctx, req, version: int) -> dict:
    session = ctx.sasl
    enabled = list(MECHANISMS)
    if session is None:  # a PLAINTEXT or SSL listener: there is nothing to log in to
        return {"error_code": Errors.ILLEGAL_SASL_STATE, "mechanisms": []}
    mechanism = MECHANISMS.get(str(req.mechanism).upper())
    if mechanism is None or session.exchange is not None:
        session.close = True
        error = Errors.UNSUPPORTED_SASL_MECHANISM if mechanism is None else Errors.ILLEGAL_SASL_STATE
        return {"error_code": error, "mechanisms": enabled}
    session.mechanism = mechanism
    return {"error_code": Errors.NONE, "mechanisms": enabled}


def authenticate(ctx, req, version: int) -> dict:
    session = ctx.sasl
    if session is None or session.mechanism is None:
        if session is not None:
            session.close = True
        return _failed(Errors.ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake")
    try:
        if session.exchange is None:  # client-first
            mechanism = session.mechanism
            exchange = ServerExchange(mechanism, lambda user: ctx.image().scram.credential(user, mechanism.code),
                                      session.decoy_key)
            server_first = exchange.first(bytes(req.auth_bytes))
            session.exchange = exchange
            return {"error_code": Errors.NONE, "error_message": None, "auth_bytes": server_first,
                    "session_lifetime": 0}
        exchange, session.exchange, session.mechanism = session.exchange, None, None
        server_final = exchange.final(bytes(req.auth_bytes))
    except ScramError as e:
        session.close = True
        return _failed(Errors.SASL_AUTHENTICATION_FAILED, str(e))
    principal = f"User:{exchange.username}"
    if session.principal is not None and principal != session.principal:  # a re-login must be the same user
        session.close = True
        return _failed(Errors.SASL_AUTHENTICATION_FAILED,
                       "a re-authentication must be for the principal the connection logged in as")
    session.log_in(principal)
    host = ctx.caller.host if ctx.caller is not None else ""
    ctx.caller = Caller(principal, host, authenticated=True)
    return {"error_code": Errors.NONE, "error_message": None, "auth_bytes": server_final,
            "session_lifetime": session.session_lifetime_ms}


def _failed(error: Errors, message: str) -> dict:
    return {"error_code": error, "error_message": message, "auth_bytes": b"", "session_lifetime": 0}
