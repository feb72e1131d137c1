"""Where a connection relayed over loopback came from: a controller's one port hands gRPC
connections to its gRPC server through a loopback relay (quorum/wire/shared_port.py), so gRPC sees
every such client at 127.0.0.1. The relay notes each connection's loopback source port here, and
the principal's host (ACLs' host matching) is read through :func:`origin_host`."""
from __future__ import annotations

import threading

_lock = threading.Lock()
_origins: dict[int, str] = {}  # loopback source port of a relayed connection -> the client's host


def note(port: int, host: str) -> None:
    with _lock:
        _origins[port] = host


def forget(port: int) -> None:
    with _lock:
        _origins.pop(port, None)


def origin_host(host: str, port: int) -> str:
    """The client behind a loopback connection from ``port`` if it is a relayed one, else ``host``."""
    if host not in ("127.0.0.1", "::1") or not _origins:
        return host
    with _lock:
        return _origins.get(port, host)
