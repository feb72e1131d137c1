"""A node's config values, each parsed from its text (``str -> value``, or ValueError saying what
was expected): hosts and ports, listeners and their security protocols, voters, sizes and counts,
principals. quorum/config.py's table of keys names one of these per key."""
from __future__ import annotations

import re
from typing import Any, Callable

from quorum.security.node_security import NODE_ID_FIELD
from quorum.security.principal import PrincipalMapper
from quorum.security.tls import CLIENT_AUTH

HostPort = tuple[str, int]



def _int(minimum: int) -> Callable[[str], int]:
    def parse(s: str) -> int:
        try:
            value = int(s)
        except ValueError:
            raise ValueError(f"expected an integer >= {minimum}") from None
        if value < minimum:
            raise ValueError(f"expected an integer >= {minimum}")
        return value

    return parse


def _non_empty(s: str) -> str:
    if not s:
        raise ValueError("expected a non-empty value")
    return s


def _list(s: str) -> list[str]:
    items = [item.strip() for item in s.split(",")]
    if not s.strip() or any(not item for item in items):
        raise ValueError("expected a comma-separated list with no empty entries")
    return items


def parse_host_port(s: str, *, allow_port_zero: bool = False) -> HostPort:
    """``host:port`` or ``[ipv6]:port``; used for every address in a config and on the CLI."""
    m = re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[^:\[\]\s]*):(\d+)", s.strip())
    lowest = 0 if allow_port_zero else 1
    if not m or not lowest <= int(m.group(2)) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port in {lowest}..65535")
    return m.group(1).strip("[]"), int(m.group(2))


def _host_port(s: str) -> HostPort:
    return parse_host_port(s)


def _host_ports(s: str) -> tuple[HostPort, ...]:
    try:
        return tuple(parse_host_port(item) for item in _list(s))
    except ValueError:
        raise ValueError("expected HOST:PORT[,HOST:PORT...]") from None


def _zk_connect(s: str) -> str:
    """Kafka's zookeeper.connect: HOST:PORT[,HOST:PORT...][/chroot], checked here, kept as written."""
    hosts, slash, chroot = s.strip().partition("/")
    _host_ports(hosts)
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise ValueError("expected HOST:PORT[,HOST:PORT...][/chroot] with a chroot like /kafka")
    return s.strip()


def _bool(s: str) -> bool:
    """Java's Boolean.parseBoolean is lenient; a config typo should not silently mean false."""
    value = s.strip().lower()
    if value not in ("true", "false"):
        raise ValueError("expected true or false")
    return value == "true"


def _roles(s: str) -> frozenset[str]:
    roles = [role.strip() for role in s.split(",")]
    if any(role not in ("controller", "broker") for role in roles) or len(set(roles)) != len(roles):
        raise ValueError("expected 'controller', 'broker' or 'broker,controller'")
    return frozenset(roles)


def _keyed_list(s: str, item: Callable[[str], tuple[Any, Any]], expected: str) -> dict:
    """``A,B,...`` where ``item`` turns each entry into (key, value), keys distinct; else ``expected``."""
    out: dict = {}
    try:
        for entry in _list(s):
            key, value = item(entry)
            if key in out:
                raise ValueError
            out[key] = value
    except ValueError:
        raise ValueError(expected) from None
    return out


def _per_ip_override(entry: str) -> tuple[str, int]:
    host, sep, count = entry.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{entry!r} is not HOST:COUNT")
    return host.strip("[]"), _int(0)(count)


def _per_ip_overrides(s: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: HOST:COUNT,... (empty: none)."""
    return _keyed_list(s, _per_ip_override, "HOST:COUNT,...") if s.strip() else {}


def _voter(entry: str) -> tuple[int, HostPort]:
    node, _, address = entry.partition("@")
    if int(node) < 0:
        raise ValueError
    return int(node), parse_host_port(address)


def _voters(s: str) -> dict[int, HostPort]:
    return _keyed_list(s, _voter, "expected ID@HOST:PORT[,ID@HOST:PORT...] with distinct ids >= 0")


def _listener_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_]+", name):
        raise ValueError
    return name.upper()


def _listener_names(s: str) -> tuple[str, ...]:
    try:
        return tuple(_listener_name(name) for name in _list(s))
    except ValueError:
        raise ValueError("expected NAME[,NAME...] of letters, digits and '_'") from None


def _listener(entry: str) -> tuple[str, HostPort]:
    name, sep, address = entry.partition("://")
    if not sep:
        raise ValueError
    return _listener_name(name), parse_host_port(address, allow_port_zero=True)


def _listeners(s: str) -> dict[str, HostPort]:
    return _keyed_list(s, _listener, "expected NAME://HOST:PORT[,NAME://HOST:PORT...] with distinct names")


def _protocol(entry: str) -> tuple[str, str]:
    name, sep, protocol = entry.partition(":")
    if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
        raise ValueError
    return _listener_name(name), protocol.strip().upper()


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")  # the last two: brokers' Kafka listeners
TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def _protocol_map(s: str) -> dict[str, str]:
    return _keyed_list(s, _protocol, f"expected NAME:PROTOCOL[,NAME:PROTOCOL...] with distinct names, each "
                                     f"protocol one of {', '.join(SECURITY_PROTOCOLS)}")


def _pem(s: str) -> str:
    if s.strip().upper() != "PEM":
        raise ValueError("expected PEM (sparkraft reads PEM files: a private key with its certificate chain, "
                         "and CA certificates)")
    return "PEM"


def _client_auth(s: str) -> str:
    if s.strip().lower() not in CLIENT_AUTH:
        raise ValueError(f"expected one of {', '.join(CLIENT_AUTH)}")
    return s.strip().lower()


def _mapping_rules(s: str) -> str:
    PrincipalMapper(s)  # ValueError names the rule
    return s


def _principals(s: str) -> frozenset[str]:
    """``super.users``: principals separated by ';' (Kafka's separator: a DN holds commas)."""
    items = [item.strip() for item in s.split(";") if item.strip()]
    if any(":" not in item or item.startswith(":") for item in items):
        raise ValueError("expected TYPE:NAME[;TYPE:NAME...], e.g. User:admin;User:controller-1")
    return frozenset(items)


def _principal_template(s: str) -> str:
    if ":" not in s or NODE_ID_FIELD not in s:
        raise ValueError(f"expected a principal with {NODE_ID_FIELD} in it, e.g. User:controller-{NODE_ID_FIELD}")
    return s.strip()
