"""SASL/SCRAM on a controller's TLS listener: exchanges in flight and the session tokens they end in.

A client runs the exchange of quorum/security/scram.py in two ``Sasl.Authenticate`` calls and gets a
token, which it sends with each later call to this server (gRPC metadata ``authorization: Bearer
<token>``) until it expires; then it authenticates again. Kafka authenticates a connection once and
re-authenticates it after ``connections.max.reauth.ms``; a gRPC client's calls share connections the
server cannot see, so the token stands for the authenticated connection, for the same time.

A token is ``user, mechanism, expiry, a fingerprint of the user's ServerKey`` signed with HMAC under
a key this process draws at start and never writes anywhere. So a token:

- is accepted only by the server that issued it, and only until its expiry or that server's restart;
- dies with the credential: changing or deleting the user's password ends its sessions at once;
- cannot be made by a client (a client that knows the password knows ServerKey, not the node key).

A restarted controller checks no login until it has replayed the log it had before (its image is
empty or old until then): it answers NOT_CONTROLLER, so the client asks another controller, instead
of calling a valid password invalid. Kafka's metadata loader publishes nothing before it catches up,
for the same reason.

Bounded work: at most ``MAX_PENDING`` exchanges wait for their second message, each for at most
``PENDING_TIMEOUT_S``; a client-final message is accepted once (a replay finds no exchange).
Nothing here logs a token, a proof or a key.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from quorum.errors import Errors, SparkraftError, StillReplayingError
from quorum.metadata.scram import ScramCredential, ScramImage
from quorum.security.scram import MECHANISMS, ScramError, ServerExchange

DEFAULT_LIFETIME_MS = 300_000  # connections.max.reauth.ms
MAX_PENDING = 1024
PENDING_TIMEOUT_S = 30.0
TOKEN_PREFIX = "srt1"
AUTHORIZATION = "authorization"  # the gRPC metadata key a token travels in
BEARER = "Bearer "
_PAYLOAD = struct.Struct(">BQ8s")  # mechanism code, expiry (ms since the epoch), credential fingerprint


@dataclass(frozen=True)
class SaslLogin:
    """A listener whose clients log in with SASL/SCRAM before anything else: a broker's Kafka listener
    of protocol SASL_SSL or SASL_PLAINTEXT (quorum/kafka/sasl.py). A login lasts
    ``session_lifetime_ms`` (``connections.max.reauth.ms``; 0: as long as the connection)."""

    session_lifetime_ms: int = DEFAULT_LIFETIME_MS


@dataclass(frozen=True)
class AuthenticateReply:
    auth_bytes: bytes
    token: str = ""  # set when the exchange has succeeded
    lifetime_ms: int = 0


def _fingerprint(credential: ScramCredential) -> bytes:
    return hashlib.sha256(credential.server_key).digest()[:8]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ScramAuthenticator:
    def __init__(self, lifetime_ms: int = DEFAULT_LIFETIME_MS, clock: Callable[[], float] = time.time):
        self.lifetime_ms = lifetime_ms
        self._clock = clock
        self._key = secrets.token_bytes(32)  # signs tokens; never leaves this process
        self._image = ScramImage()
        self._loaded = False  # the image holds at least what this node's log held at its start
        self._pending: OrderedDict[str, tuple[float, ServerExchange]] = OrderedDict()
        self._lock = threading.Lock()

    def follow(self, image: ScramImage, loaded: bool = True) -> None:
        """The credentials the node has replayed (swapped whole: readers see one image or the next);
        ``loaded``: the node has replayed what its log held at start (once true, it stays true)."""
        self._image = image
        self._loaded = self._loaded or loaded

    # -- the exchange ---------------------------------------------------------------------------
    def authenticate(self, mechanism_name: str, auth_bytes: bytes) -> AuthenticateReply:
        """One step of an exchange: a client-first message starts one, a client-final one ends it.
        SparkraftError UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE or SASL_AUTHENTICATION_FAILED."""
        mechanism = MECHANISMS.get(mechanism_name.upper())
        if mechanism is None:
            raise SparkraftError(Errors.UNSUPPORTED_SASL_MECHANISM,
                                 f"Unsupported SASL mechanism {mechanism_name!r} (enabled: {', '.join(MECHANISMS)})")
        if not self._loaded:
            raise StillReplayingError("checks no login")
        try:
            if auth_bytes.startswith(b"c="):
                return self._final(mechanism.name, auth_bytes)
            exchange = ServerExchange(mechanism, lambda user: self._image.credential(user, mechanism.code),
                                      self._key)
            server_first = exchange.first(auth_bytes)
        except ScramError as e:
            raise SparkraftError(Errors.SASL_AUTHENTICATION_FAILED, str(e)) from None
        self._park(exchange)
        return AuthenticateReply(server_first)

    def _park(self, exchange: ServerExchange) -> None:
        now = time.monotonic()
        with self._lock:
            while self._pending and next(iter(self._pending.values()))[0] < now:
                self._pending.popitem(last=False)
            if len(self._pending) >= MAX_PENDING:
                raise SparkraftError(Errors.ILLEGAL_SASL_STATE, f"{MAX_PENDING} SCRAM exchanges are already "
                                     f"waiting for their second message here; try again shortly")
            self._pending[exchange.nonce] = (now + PENDING_TIMEOUT_S, exchange)

    def _final(self, mechanism_name: str, client_final: bytes) -> AuthenticateReply:
        nonce = _nonce_of(client_final)
        with self._lock:
            deadline, exchange = self._pending.pop(nonce, (0.0, None))
        if exchange is None or deadline < time.monotonic() or exchange.mechanism.name != mechanism_name:
            raise ScramError("no SCRAM exchange is waiting for this message here (it finished, failed or "
                             "expired): start again with a client-first message")
        server_final = exchange.final(client_final)
        credential = self._image.credential(exchange.username, exchange.mechanism.code)
        if credential is None:  # deleted during the exchange
            raise ScramError(ServerExchange.FAILED.format(mechanism_name))
        return AuthenticateReply(server_final, self._token(exchange.username, exchange.mechanism.code, credential),
                                 self.lifetime_ms)

    # -- tokens ---------------------------------------------------------------------------------
    def _token(self, user: str, mechanism_code: int, credential: ScramCredential) -> str:
        expiry = int(self._clock() * 1000) + self.lifetime_ms
        payload = _PAYLOAD.pack(mechanism_code, expiry, _fingerprint(credential)) + user.encode()
        signature = hmac.new(self._key, payload, "sha256").digest()
        return f"{TOKEN_PREFIX}.{_b64(payload)}.{_b64(signature)}"

    def principal_of(self, metadata: Sequence[tuple[str, str]]) -> Optional[str]:
        """The principal a request's token names; None if it carries none; SparkraftError
        SASL_AUTHENTICATION_FAILED if the token is not one this server accepts now."""
        value = next((v for k, v in metadata if k == AUTHORIZATION), None)
        if value is None:
            return None
        user = self._verify(value.removeprefix(BEARER) if isinstance(value, str) else "")
        if user is None:
            raise SparkraftError(Errors.SASL_AUTHENTICATION_FAILED,
                                 "the session token is not valid at this server (expired, issued by another "
                                 "server or before its restart, or the user's credential changed): "
                                 "authenticate again")
        return f"User:{user}"

    def _verify(self, token: str) -> Optional[str]:
        prefix, _, rest = token.partition(".")
        encoded, _, signature = rest.partition(".")
        if prefix != TOKEN_PREFIX or len(token) > 1024:
            return None
        try:
            payload, given = _unb64(encoded), _unb64(signature)
        except ValueError:
            return None
        if len(payload) < _PAYLOAD.size or not hmac.compare_digest(
                given, hmac.new(self._key, payload, "sha256").digest()):
            return None
        mechanism_code, expiry, fingerprint = _PAYLOAD.unpack_from(payload)
        user = payload[_PAYLOAD.size:].decode("utf-8", "replace")
        if expiry <= int(self._clock() * 1000):
            return None
        credential = self._image.credential(user, mechanism_code)
        if credential is None or not hmac.compare_digest(_fingerprint(credential), fingerprint):
            return None
        return user


def _nonce_of(client_final: bytes) -> str:
    for part in client_final.split(b",")[:3]:
        if part.startswith(b"r="):
            return part[2:].decode("utf-8", "replace")
    raise ScramError("malformed SCRAM message (no nonce)")
