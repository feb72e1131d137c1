"""How a client reaches a listener: PLAINTEXT, SSL (optionally with a certificate of its own for
mutual TLS) or SASL_SSL (TLS, then a SCRAM login per server: quorum/rpc/sasl_login.py, done
by the quorum clients of quorum/rpc/leader_client.py).

Every gRPC channel of sparkraft (peers, clients, the streaming source, the log reader) is opened by
``ClientSecurity.channel``. Command-line tools read the client keys from ``--command-config FILE``
with Kafka's names:

    security.protocol=SSL
    ssl.truststore.location=/etc/sparkraft/ca.pem
    ssl.keystore.location=/etc/sparkraft/alice.pem      # mutual TLS
    sasl.mechanism=SCRAM-SHA-512                        # with security.protocol=SASL_SSL
    sasl.username=alice
    sasl.password=...

Key files are read when a channel is opened, so a client opened after a rotation uses the new ones.
"""
from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

import grpc

from quorum.properties import parse_properties
from quorum.security.tls import load_key_store, load_trust_store

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_KEYS = ("security.protocol", "ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location",
               "ssl.keystore.type", "sasl.mechanism", "sasl.username", "sasl.password",
               "ssl.endpoint.identification.algorithm")


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    truststore: Optional[str] = None
    keystore: Optional[str] = None
    sasl_mechanism: Optional[str] = None
    sasl_username: Optional[str] = None
    sasl_password: Optional[str] = field(default=None, repr=False)  # never printed

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}")
        if self.protocol == "SASL_SSL":
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(f"security.protocol=SASL_SSL needs sasl.mechanism "
                                 f"{' or '.join(SASL_MECHANISMS)} (got {self.sasl_mechanism!r})")
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError("security.protocol=SASL_SSL needs sasl.username and sasl.password")

    @property
    def tls(self) -> bool:
        return self.protocol != "PLAINTEXT"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], source: str = "client config") -> "ClientSecurity":
        for key in ("ssl.keystore.type", "ssl.truststore.type"):
            if props.get(key, "PEM").upper() != "PEM":
                raise ValueError(f"{source}: {key}={props[key]} is not supported; sparkraft reads PEM files")
        unknown = sorted(k for k in props if k not in CLIENT_KEYS)
        if unknown:
            raise ValueError(f"{source}: unknown client key {unknown[0]!r} (known: {', '.join(CLIENT_KEYS)})")
        try:
            return cls(protocol=props.get("security.protocol", "PLAINTEXT").upper(),
                       truststore=props.get("ssl.truststore.location") or None,
                       keystore=props.get("ssl.keystore.location") or None,
                       sasl_mechanism=(props.get("sasl.mechanism") or "").upper() or None,
                       sasl_username=props.get("sasl.username") or None,
                       sasl_password=props.get("sasl.password"))
        except ValueError as e:
            raise ValueError(f"{source}: {e}") from None

    @classmethod
    def from_file(cls, path: str) -> "ClientSecurity":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ValueError(f"cannot read --command-config {path}: {e.strerror or e}") from None
        return cls.from_properties(parse_properties(text), source=path)

    def options(self) -> dict[str, str]:
        """The client keys that rebuild this (for the streaming source's options)."""
        keys = {"security.protocol": self.protocol, "ssl.truststore.location": self.truststore,
                "ssl.keystore.location": self.keystore, "sasl.mechanism": self.sasl_mechanism,
                "sasl.username": self.sasl_username, "sasl.password": self.sasl_password}
        return {k: v for k, v in keys.items() if v is not None}

    @classmethod
    def from_command_config(cls, path: Optional[str]) -> "ClientSecurity":
        """``--command-config FILE``: its settings, or PLAINTEXT when no file is given."""
        return cls.from_file(path) if path else PLAINTEXT

    # -- channels -----------------------------------------------------------------------------------
    def channel_credentials(self) -> grpc.ChannelCredentials:
        roots = load_trust_store(self.truststore) if self.truststore else None
        if self.keystore:
            material = load_key_store(self.keystore)
            return grpc.ssl_channel_credentials(roots, material.private_key, material.chain)
        return grpc.ssl_channel_credentials(roots)

    def ssl_context(self, alpn: Optional[str] = "sparkraft-wire") -> Optional[ssl.SSLContext]:
        """For the wire (quorum/wire/): the same trust, client certificate and host name check as
        ``channel_credentials`` gives gRPC; None for PLAINTEXT. It offers ALPN ``alpn``: a
        controller's one port tells the wire's connections from Kafka's by it (quorum/wire/first_bytes.py);
        a Kafka client's context offers none (``alpn=None``), as Kafka's own clients."""
        if not self.tls:
            return None
        if self.truststore:
            load_trust_store(self.truststore)  # the same checks and messages as gRPC's
        context = ssl.create_default_context(cafile=self.truststore)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.keystore:
            load_key_store(self.keystore)
            context.load_cert_chain(self.keystore)
        if alpn:
            context.set_alpn_protocols([alpn])
        return context

    def channel(self, target: str, options=()) -> grpc.Channel:
        if not self.tls:
            return grpc.insecure_channel(target, options=options)
        return grpc.secure_channel(target, self.channel_credentials(), options=options)


PLAINTEXT = ClientSecurity()


def handshake_problem(target: str, security: ClientSecurity, timeout: float = 2.0) -> Optional[str]:
    """Why a TLS connection to ``target`` fails, in one line, by trying it with Python's ``ssl``
    (gRPC only says the socket closed); None if the handshake works or the server is not there.
    For a PLAINTEXT client it tells whether the listener wants TLS."""
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.set_alpn_protocols(["h2"])  # as gRPC does: its server closes a connection without it
    if security.tls:
        if security.truststore:
            context.load_verify_locations(cafile=security.truststore)
        if security.keystore:
            context.load_cert_chain(security.keystore)
    else:
        context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            with context.wrap_socket(raw, server_hostname=host) as tls:
                tls.settimeout(0.5)
                try:
                    # TLS 1.3 tells a refused client certificate only after the handshake, and gRPC's
                    # server just closes the connection then; an accepted client hears nothing.
                    closed = tls.recv(1) == b""
                except (socket.timeout, TimeoutError):
                    closed = False
                if closed and security.tls:
                    if not security.keystore:
                        return f"{target} requires a client certificate (set ssl.keystore.location)"
                    return (f"{target} refused this client's certificate (is it signed by a CA the server "
                            f"trusts, and in date?)")
    except ssl.SSLCertVerificationError as e:
        return f"the server's certificate at {target} is not trusted: {e.verify_message}"
    except ssl.SSLError as e:
        reason = e.reason or str(e)
        if not security.tls:
            return None
        if "CERTIFICATE_REQUIRED" in reason:
            return f"{target} requires a client certificate (set ssl.keystore.location)"
        if "UNKNOWN_CA" in reason or "BAD_CERTIFICATE" in reason or "CERTIFICATE" in reason:
            return f"{target} refused this client's certificate ({reason})"
        if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER" in reason:
            return f"{target} does not speak TLS (is its listener PLAINTEXT? set security.protocol=PLAINTEXT)"
        return f"TLS handshake with {target} failed: {reason}"
    except (OSError, ValueError):
        return None
    if not security.tls:
        return f"{target} speaks TLS (set security.protocol=SSL and ssl.truststore.location in --command-config)"
    return None


# ApiVersions v0 (api key 18), correlation id 0x5350524b ("SPRK"), client id "sparkraft-probe"
_KAFKA_PROBE_CORRELATION = 0x5350524B
_KAFKA_PROBE = (lambda body: struct.pack(">i", len(body)) + body)(
    struct.pack(">hhih", 18, 0, _KAFKA_PROBE_CORRELATION, 15) + b"sparkraft-probe")


def kafka_protocol_problem(target: str, security: ClientSecurity, timeout: float = 2.0) -> Optional[str]:
    """One line if ``target`` answers Kafka's protocol (a broker's Kafka listener, or Apache Kafka)
    where a controller's gRPC listener was expected; None otherwise. Asks it ApiVersions v0, the one
    request every Kafka server answers whatever it supports, over TLS where the client uses TLS."""
    host, _, port = target.rpartition(":")
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as raw:
            conn = raw
            if security.tls:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE  # only asking what it speaks
                conn = context.wrap_socket(raw, server_hostname=host)
            conn.settimeout(timeout)
            conn.sendall(_KAFKA_PROBE)
            head = _read(conn, 8)
            size, correlation = struct.unpack(">ii", head) if len(head) == 8 else (0, 0)
            if correlation != _KAFKA_PROBE_CORRELATION or not 4 <= size < 1 << 20:
                return None
            body = _read(conn, size - 4)
    except (OSError, ValueError):
        return None
    if _BROKER_REGISTRATION in _api_keys(body):  # what only a controller answers
        return (f"{target} speaks only Kafka's protocol: it is a controller's second listener (for Kafka's "
                f"brokers and tools), not its first controller listener, which serves sparkraft's clients too "
                f"(give --bootstrap-controller the addresses in controller.quorum.voters)")
    return (f"{target} speaks Kafka's protocol: it is a broker's Kafka listener, not a controller's listener "
            f"(give --bootstrap-controller a controller's address, as in controller.quorum.voters)")


_BROKER_REGISTRATION = 62


def _read(conn, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _api_keys(body: bytes) -> set[int]:
    """The API keys of an ApiVersions v0 response's body (after its correlation id); empty if cut short."""
    if len(body) < 6:
        return set()
    count = struct.unpack_from(">i", body, 2)[0]
    keys, at = set(), 6
    for _ in range(max(0, min(count, 1000))):
        if at + 6 > len(body):
            break
        keys.add(struct.unpack_from(">h", body, at)[0])
        at += 6
    return keys
