"""Serving the console: uvicorn on 127.0.0.1 by default; anywhere else only over TLS with a login.

The console shows a cluster's metadata to whoever reaches it, so an address other than loopback is
refused unless ``--tls-config`` gives the same ``ssl.*`` keys as the listeners (a PEM key store, a
trust store) with ``ssl.client.auth=required``: each browser then logs in with a client certificate
the trust store's CAs signed. (The cluster's SCRAM users as a login is not built yet.)
"""
from __future__ import annotations

import contextlib
import errno
import ipaddress
import signal
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from quorum.properties import parse_properties
from quorum.security.tls import CLIENT_AUTH, load_key_store, load_trust_store

DEFAULT_LISTEN = "127.0.0.1:8080"


@dataclass(frozen=True)
class TlsSettings:
    key_store: str
    trust_store: Optional[str]
    client_auth: str


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    try:
        return all(ipaddress.ip_address(info[4][0]).is_loopback
                   for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except (socket.gaierror, ValueError):
        return False


def tls_settings(path: Optional[str]) -> Optional[TlsSettings]:
    """The console's TLS from a properties file (ssl.keystore.location, ssl.truststore.location,
    ssl.client.auth), each file checked now: a bad one is one line at start."""
    if path is None:
        return None

    props = parse_properties(Path(path).read_text())
    key_store = props.get("ssl.keystore.location")
    if not key_store:
        raise ValueError(f"{path}: ssl.keystore.location is missing (a PEM file with the console's key and certificate)")
    load_key_store(key_store)
    trust_store = props.get("ssl.truststore.location")
    if trust_store:
        load_trust_store(trust_store)
    client_auth = props.get("ssl.client.auth", "none")
    if client_auth not in CLIENT_AUTH:
        raise ValueError(f"{path}: ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}, not {client_auth!r}")
    if client_auth == "required" and not trust_store:
        raise ValueError(f"{path}: ssl.client.auth=required needs ssl.truststore.location (the CAs that sign logins)")
    return TlsSettings(key_store, trust_store, client_auth)


def check_exposure(host: str, tls: Optional[TlsSettings]) -> None:
    """Refuse to show the cluster to a network without TLS and a login."""
    if is_loopback(host):
        return
    if tls is None or tls.client_auth != "required":
        raise ValueError(f"--listen {host}: the console listens beyond this machine only over TLS with a login: "
                         f"--tls-config FILE with ssl.keystore.location, ssl.truststore.location and "
                         f"ssl.client.auth=required (or listen on 127.0.0.1)")


def bind_listener(host: str, port: int) -> socket.socket:
    """The console's listening socket, bound before anything says the console is up: a port that is
    taken is one line and exit 1, not a "Console at" line followed by uvicorn's own error."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise OSError(f"--listen {host}:{port}: cannot resolve {host}: {e.strerror}") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        why = "the port is taken" if e.errno == errno.EADDRINUSE else e.strerror
        raise OSError(f"--listen {host}:{port}: cannot listen there: {why}") from None
    sock.set_inheritable(True)
    return sock


def serve(app, sock: socket.socket, tls: Optional[TlsSettings]) -> str:
    """Serve on ``sock`` (from :func:`bind_listener`) until SIGINT or SIGTERM; the signal's name.
    Open streams are closed and the process exits 0, as the other long-running commands do (uvicorn
    would re-raise the signal instead)."""
    import uvicorn

    class Server(uvicorn.Server):
        stopped_by = ""

        @contextlib.contextmanager
        def capture_signals(self):
            def stop(signum, frame) -> None:
                self.stopped_by = signal.Signals(signum).name
                self.should_exit = True

            previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, handler in previous.items():
                    signal.signal(s, handler)

    options = {}
    if tls is not None:
        options = {"ssl_certfile": tls.key_store, "ssl_keyfile": tls.key_store, "ssl_ca_certs": tls.trust_store,
                   "ssl_cert_reqs": ssl.CERT_REQUIRED if tls.client_auth == "required" else ssl.CERT_NONE}
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            timeout_graceful_shutdown=2, lifespan="on", **options)
    server = Server(config)
    server.run(sockets=[sock])
    if not server.started:
        raise OSError(f"the console could not listen on {host}:{port} (is the port taken?)")
    return server.stopped_by
