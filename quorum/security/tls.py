"""TLS key material in Kafka's PEM form, for a node's listener and for clients.

A key store (``ssl.keystore.location``, ``ssl.keystore.type=PEM``) is one file holding a private key
and its certificate chain; a trust store (``ssl.truststore.location``) is a file of CA certificates.
Both are read and checked here (key and certificate belong together, the certificate is in date)
so a bad file is one clear line at start, not a handshake failure later.

The server's credentials are gRPC's dynamic ones: gRPC asks ``ServerTls.fetch`` before each new
handshake, and ``reload()`` (a node calls it on SIGHUP) makes the next ask read the files again.
Connections already open keep their session; new ones get the new certificate, so certificates
are rotated without a restart and without dropping the quorum. A reload that finds bad files logs
why and keeps the old material.
"""
from __future__ import annotations

import datetime
import logging
import re
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import grpc

log = logging.getLogger(__name__)

CLIENT_AUTH = ("none", "requested", "required")
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----\r?\n?", re.S)


@dataclass(frozen=True, slots=True)
class KeyMaterial:
    """A private key and its certificate chain (PEM bytes), and what the certificate says."""

    private_key: bytes
    chain: bytes
    subject: str
    not_after: datetime.datetime


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read the {what} {path}: {e.strerror or e}") from None


def load_key_store(path: str) -> KeyMaterial:
    """The key store at ``path``; ValueError saying what is wrong with it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    data = _read(path, "key store")
    blocks = [(m.group(1).decode(), m.group(0)) for m in _PEM_BLOCK.finditer(data)]
    keys = [b for kind, b in blocks if kind.endswith("PRIVATE KEY")]
    certs = [b for kind, b in blocks if kind == "CERTIFICATE"]
    if len(keys) != 1 or not certs:
        raise ValueError(f"the key store {path} must hold one PEM private key and its certificate chain "
                         f"(found {len(keys)} keys and {len(certs)} certificates)")
    if "ENCRYPTED" in blocks[[b for _, b in blocks].index(keys[0])][0]:
        raise ValueError(f"the key store {path} holds an encrypted private key; sparkraft takes an unencrypted "
                         f"PEM key (keep the file readable by the node's user only)")
    try:
        key = serialization.load_pem_private_key(keys[0], password=None)
        cert = x509.load_pem_x509_certificate(certs[0])
    except (ValueError, TypeError) as e:
        raise ValueError(f"the key store {path} cannot be read: {e}") from None
    if key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != \
            cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ValueError(f"the key store {path}: the private key does not belong to the first certificate")
    now = datetime.datetime.now(datetime.timezone.utc)
    if cert.not_valid_after_utc < now:
        raise ValueError(f"the key store {path}: its certificate expired at {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    return KeyMaterial(keys[0], b"".join(certs), cert.subject.rfc4514_string(), cert.not_valid_after_utc)


def load_trust_store(path: str) -> bytes:
    """The CA certificates at ``path`` (PEM bytes); ValueError if there are none."""
    from cryptography import x509

    data = _read(path, "trust store")
    certs = [m.group(0) for m in _PEM_BLOCK.finditer(data) if m.group(1) == b"CERTIFICATE"]
    if not certs:
        raise ValueError(f"the trust store {path} holds no PEM certificate")
    for pem in certs:
        try:
            x509.load_pem_x509_certificate(pem)
        except ValueError as e:
            raise ValueError(f"the trust store {path} cannot be read: {e}") from None
    return b"".join(certs)


class ServerTls:
    """One SSL listener's credentials, reloadable."""

    def __init__(self, key_store: str, trust_store: Optional[str], client_auth: str = "none"):
        if client_auth not in CLIENT_AUTH:
            raise ValueError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}, not {client_auth!r}")
        if client_auth == "required" and not trust_store:
            raise ValueError("ssl.client.auth=required needs ssl.truststore.location (the CAs that sign clients)")
        self.key_store, self.trust_store, self.client_auth = key_store, trust_store, client_auth
        self._config = self._load()  # raises ValueError on bad files: a node refuses to start
        self._wire_listener: Optional[ssl.SSLContext] = None  # the wire's listening context...
        self._wire_current: Optional[ssl.SSLContext] = None  # ...and the one its handshakes switch to
        self._reload = threading.Event()
        self.reloads = 0  # successful reloads (tests, metrics)
        if client_auth == "requested":
            log.warning("ssl.client.auth=requested: gRPC listeners cannot ask for an optional client "
                        "certificate, so clients are not asked for one (use 'required' for mutual TLS)")

    @property
    def mutual(self) -> bool:
        return self.client_auth == "required"

    def _load(self):
        material = load_key_store(self.key_store)
        roots = load_trust_store(self.trust_store) if self.trust_store else None
        self.subject, self.not_after = material.subject, material.not_after
        return grpc.ssl_server_certificate_configuration([(material.private_key, material.chain)], roots)

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(self._config, self.fetch,
                                                   require_client_authentication=self.mutual)

    def reload(self) -> None:
        """Read the files again before the next handshake (SIGHUP): gRPC's when it asks (``fetch``),
        the wire's now (the handshakes that follow use a context made from the new files)."""
        self._reload.set()
        if self._wire_listener is not None:
            try:
                self._wire_current = self._new_wire_context()
            except Exception as e:
                log.error("TLS reload for the wire listener failed, keeping the current certificate: %s", e)

    def wire_context(self) -> ssl.SSLContext:
        """The same credentials as an ``ssl.SSLContext`` for the wire's listener (quorum/wire/): the
        same key store, trust store and client authentication as the gRPC listener. Each handshake
        switches to the context made from the files as last (re)loaded, so a rotated trust store
        also stops trusting what it dropped (loading into one context would only add CAs)."""
        if self._wire_listener is None:
            self._wire_current = self._new_wire_context()
            listener = self._new_wire_context()
            listener.sni_callback = self._pick_wire_context  # called on every handshake, SNI or not
            self._wire_listener = listener
        return self._wire_listener

    def _pick_wire_context(self, tls_object, server_name, listener_context) -> None:
        tls_object.context = self._wire_current

    def _new_wire_context(self) -> ssl.SSLContext:
        load_key_store(self.key_store)  # the same checks as gRPC's material, with the same messages
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.key_store)  # key and chain in one PEM file
        if self.trust_store:
            context.load_verify_locations(cafile=self.trust_store)
        # "requested" asks for nothing, as on gRPC's listener (see __init__)
        context.verify_mode = ssl.CERT_REQUIRED if self.mutual else ssl.CERT_NONE
        return context

    def fetch(self):
        """gRPC's question before a handshake: new material, or None to keep the current."""
        if not self._reload.is_set():
            return None
        self._reload.clear()
        try:
            self._config = self._load()
        except Exception as e:  # gRPC's thread must get an answer, whatever the files hold
            log.error("TLS reload failed, keeping the current certificate: %s", e)
            return None
        self.reloads += 1
        log.info("TLS key material reloaded from %s: %s, valid until %s", self.key_store, self.subject,
                 f"{self.not_after:%Y-%m-%d %H:%M} UTC")
        return self._config
