"""SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512): the credential a server keeps and
the two-message exchange, sans I/O.

A user's credential is derived once from the password (``SaltedPassword = PBKDF2(password, salt,
iterations)``); the server keeps only ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``. In the exchange the client proves it knows the
ClientKey behind StoredKey without sending it, and the server proves it holds ServerKey:

    client-first   n,,n=alice,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
    client-final   c=biws,r=<both nonces>,p=<ClientKey XOR HMAC(StoredKey, AuthMessage), base64>
    server-final   v=<HMAC(ServerKey, AuthMessage), base64>     (or e=<error>)

``ClientExchange`` and ``ServerExchange`` hold one side's state between the messages; a failure is
``ScramError`` whose message may be shown to the other side (it never says which part was wrong,
nor whether the user exists). Channel binding is not used (gs2 header ``n,,``); the exchange runs
inside TLS. Iterations are bounded as Kafka bounds them (4096..16384).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Callable, Optional

from quorum.metadata.scram import MAX_ITERATIONS, MECHANISM_CODES, MIN_ITERATIONS, ScramCredential

DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32
_GS2_HEADER = "n,,"
_CHANNEL_BINDING = base64.b64encode(_GS2_HEADER.encode()).decode()  # "biws"
MAX_MESSAGE_BYTES = 4096  # a client message longer than this is not SCRAM


class ScramError(ValueError):
    """The exchange failed; the message is safe to show the other side."""


@dataclass(frozen=True)
class Mechanism:
    name: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    code: int  # Kafka's id (pb.ScramMechanism)
    hash_name: str  # hashlib's name

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    @property
    def key_bytes(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(Normalize(password), salt, i) of RFC 5802: PBKDF2 with HMAC of this hash. (SASLprep is
        not applied, as in Kafka: the password's UTF-8 bytes are used as they are.)"""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def credential(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(salt, self.hash(client_key), self.hmac(salted_password, b"Server Key"), iterations)

    def new_credential(self, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        check_iterations(iterations)
        salt = secrets.token_bytes(SALT_BYTES)
        return self.credential(self.salted_password(password, salt, iterations), salt, iterations)


MECHANISMS: dict[str, Mechanism] = {
    "SCRAM-SHA-256": Mechanism("SCRAM-SHA-256", MECHANISM_CODES["SCRAM-SHA-256"], "sha256"),
    "SCRAM-SHA-512": Mechanism("SCRAM-SHA-512", MECHANISM_CODES["SCRAM-SHA-512"], "sha512"),
}


def mechanism(name: str) -> Mechanism:
    try:
        return MECHANISMS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {name!r} (known: {', '.join(MECHANISMS)})") from None


def check_iterations(iterations: int) -> None:
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Too few iterations: {iterations} (at least {MIN_ITERATIONS})")
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"Too many iterations: {iterations} (at most {MAX_ITERATIONS})")


# -- message syntax -----------------------------------------------------------------------------
def escape_name(name: str) -> str:
    """saslname of RFC 5802: ',' and '=' escaped."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(saslname: str) -> str:
    rest = saslname.replace("=2C", "").replace("=3D", "")
    if "=" in rest or "," in rest:
        raise ScramError("invalid user name encoding")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, expected: str) -> dict[str, str]:
    """``a=x,b=y`` whose leading attributes are ``expected`` in order (extensions after them are kept)."""
    parts = message.split(",")
    if len(parts) < len(expected):
        raise ScramError("malformed SCRAM message")
    out: dict[str, str] = {}
    for i, part in enumerate(parts):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1 or (i < len(expected) and key != expected[i]):
            raise ScramError("malformed SCRAM message")
        out.setdefault(key, value)
    return out


def _b64decode(value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise ScramError("malformed SCRAM message") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def _text(data: bytes) -> str:
    if len(data) > MAX_MESSAGE_BYTES:
        raise ScramError("SCRAM message too long")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("SCRAM messages are UTF-8") from None


def _nonce() -> str:
    return secrets.token_urlsafe(24)  # printable, no ','


# -- the two sides ------------------------------------------------------------------------------
class ClientExchange:
    """The client's side: ``first()``, ``final(server_first)``, ``verify(server_final)``."""

    def __init__(self, mechanism_: Mechanism, username: str, password: str, nonce: Optional[str] = None):
        self.mechanism = mechanism_
        self._password = password
        self._nonce = nonce or _nonce()
        self._bare = f"n={escape_name(username)},r={self._nonce}"
        self._server_signature: Optional[bytes] = None

    def first(self) -> bytes:
        return (_GS2_HEADER + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first)
        if text.startswith("e="):
            raise ScramError(text[2:])
        attrs = _attributes(text, "rsi")
        if not attrs["r"].startswith(self._nonce) or len(attrs["r"]) == len(self._nonce):
            raise ScramError("the server's nonce does not extend the client's")
        try:
            iterations = int(attrs["i"])
        except ValueError:
            raise ScramError("malformed SCRAM message") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramError(f"the server asks for {iterations} iterations (allowed {MIN_ITERATIONS}..{MAX_ITERATIONS})")
        salted = self.mechanism.salted_password(self._password, _b64decode(attrs["s"]), iterations)
        without_proof = f"c={_CHANNEL_BINDING},r={attrs['r']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        self._server_signature = self.mechanism.hmac(self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        """Raise ScramError unless the server proved it holds this user's ServerKey."""
        text = _text(server_final)
        if text.startswith("e="):
            raise ScramError(text[2:])
        attrs = _attributes(text, "v")
        if self._server_signature is None or not hmac.compare_digest(_b64decode(attrs["v"]), self._server_signature):
            raise ScramError("the server's signature is wrong: it does not hold this user's credential")


CredentialLookup = Callable[[str], Optional[ScramCredential]]  # user name -> its credential


class ServerExchange:
    """The server's side of one exchange: ``first(client_first)`` then ``final(client_final)``.

    An unknown user gets a made-up salt (derived from ``decoy_key`` and the name, so it is the same
    every time) and fails only at the final step, as a wrong password does: the exchange does not
    tell who has an account."""

    FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"

    def __init__(self, mechanism_: Mechanism, lookup: CredentialLookup, decoy_key: bytes):
        self.mechanism = mechanism_
        self._lookup = lookup
        self._decoy_key = decoy_key
        self.username: Optional[str] = None
        self.nonce: Optional[str] = None  # both nonces, once the first message is answered
        self._credential: Optional[ScramCredential] = None
        self._auth_prefix = ""

    def first(self, client_first: bytes) -> bytes:
        text = _text(client_first)
        if not text.startswith(_GS2_HEADER):
            if text.startswith(("p=", "y,")):
                raise ScramError("channel binding is not supported (the exchange runs inside TLS)")
            raise ScramError("malformed SCRAM message (expected the gs2 header 'n,,')")
        bare = text[len(_GS2_HEADER):]
        attrs = _attributes(bare, "nr")
        if not attrs["r"] or not attrs["n"]:
            raise ScramError("malformed SCRAM message")
        self.username = unescape_name(attrs["n"])
        self._credential = self._lookup(self.username)
        credential = self._credential or self._decoy(self.username)
        self.nonce = attrs["r"] + _nonce()
        server_first = f"r={self.nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._auth_prefix = f"{bare},{server_first}"
        return server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """The server-final message; ScramError if the proof is wrong (or the user unknown)."""
        text = _text(client_final)
        attrs = _attributes(text, "cr")
        if "p" not in attrs or not text.endswith(",p=" + attrs["p"]):
            raise ScramError("malformed SCRAM message (no proof)")
        if attrs["c"] != _CHANNEL_BINDING:
            raise ScramError("channel binding data does not match the gs2 header")
        if attrs["r"] != self.nonce:
            raise ScramError("the nonce does not match the exchange")
        without_proof = text[:-len(",p=" + attrs["p"])]
        auth_message = f"{self._auth_prefix},{without_proof}".encode()
        proof = _b64decode(attrs["p"])
        credential = self._credential
        if credential is None or len(proof) != self.mechanism.key_bytes:
            raise ScramError(self.FAILED.format(self.mechanism.name))
        client_key = _xor(proof, self.mechanism.hmac(credential.stored_key, auth_message))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise ScramError(self.FAILED.format(self.mechanism.name))
        return f"v={_b64(self.mechanism.hmac(credential.server_key, auth_message))}".encode()

    def _decoy(self, username: str) -> ScramCredential:
        salt = self.mechanism.hmac(self._decoy_key, username.encode())[:SALT_BYTES]
        return ScramCredential(salt, b"", b"", DEFAULT_ITERATIONS)
