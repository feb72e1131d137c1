"""Who is calling: a Kafka principal (``User:name``) and the address it calls from.

Over TLS with a client certificate the principal is ``User:`` + the certificate's distinguished
name (RFC 2253 order, ``CN=alice,OU=...,O=...``, as Kafka's X500Principal prints it) mapped by
``ssl.principal.mapping.rules``, which are Kafka's SslPrincipalMapper rules: a comma-separated list
of ``RULE:pattern/replacement/[LU]`` and ``DEFAULT``; the first rule whose pattern matches the
whole name gives the principal (``$1`` refers to the pattern's groups; ``L``/``U`` lower or upper
the result); ``DEFAULT`` is the name itself. Without a certificate (PLAINTEXT, or TLS without
client authentication) the caller is ``User:ANONYMOUS``, as in Kafka. A SCRAM session token, where
one is presented, names the principal instead (quorum/security/sasl_server.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from quorum import relay_origins

ANONYMOUS = "User:ANONYMOUS"
# gRPC metadata of a request a broker forwards for a Kafka client (KIP-590): the client's principal
# and host. A controller takes them only from a caller it trusts to forward (node_security.py).
FORWARDED_PRINCIPAL = "sparkraft-forwarded-principal"
FORWARDED_HOST = "sparkraft-forwarded-host"
# for the audit trail (quorum/controller/audit.py): the forwarded client's software ("name/version",
# from Kafka's ApiVersions) and the listener it reached
FORWARDED_SOFTWARE = "sparkraft-forwarded-software"
FORWARDED_LISTENER = "sparkraft-forwarded-listener"
DEFAULT_RULES = "DEFAULT"

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: Optional[re.Pattern]  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> Optional[str]:
        if self.pattern is None:
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        name = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _python_replacement(java: str, groups: int) -> str:
    """Java's ``$n`` back references as Python's ``\\g<n>``; one past the groups stays literal
    (Kafka truncates ``$12`` to ``$1`` when there are fewer than 12 groups, and so do we)."""
    out, last = [], 0
    for m in _BACK_REFERENCE.finditer(java):
        out.append(java[last:m.start()].replace("\\", "\\\\"))
        digits = m.group(1)
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if digits.startswith("0") or index > groups:
            out.append(m.group(0))
            last = m.end()
            continue
        out.append(f"\\g<{index}>" + digits[len(str(index)):])
        last = m.end()
    out.append(java[last:].replace("\\", "\\\\"))
    return "".join(out)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once; ValueError names a rule that cannot be read."""

    def __init__(self, rules: str = DEFAULT_RULES):
        self.rules_text = rules
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(rules.strip()):
            text = m.group(1)
            if not text:
                continue  # empty rules are ignored, as in Kafka
            parsed = _PARSER.match(text)
            if parsed is None or parsed.end() != len(text):
                raise ValueError(f"invalid rule {text!r}")
            if parsed.group(1):
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as e:
                    raise ValueError(f"invalid pattern in rule {text!r}: {e}") from None
                self.rules.append(_Rule(pattern, parsed.group(3), parsed.group(4)))
            elif parsed.group(5):
                raise ValueError(f"invalid rule {text!r} (expected RULE:pattern/replacement/[LU] or DEFAULT)")
        if not self.rules:
            raise ValueError("no rules (expected RULE:pattern/replacement/[LU] or DEFAULT, comma-separated)")

    def name(self, dn: str) -> Optional[str]:
        """The principal name for distinguished name ``dn``; None if no rule applies."""
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        return None

    def principal(self, dn: str) -> Optional[str]:
        name = self.name(dn)
        return None if name is None else f"User:{name}"


@dataclass(frozen=True, slots=True)
class Caller:
    """The principal of one request and the address it came from (for ACL host matching)."""

    principal: str
    host: str
    authenticated: bool = False  # by a certificate or a SCRAM token, not ANONYMOUS
    by_certificate: bool = False  # only a certificate proves a node (a SCRAM user may not pose as one)


def peer_host(peer: str) -> str:
    """The address in gRPC's ``context.peer()`` (``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``): the
    client's own where the connection came through a controller port's relay (relay_origins.py)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        host, _, port = rest[1:].partition("]:")
    elif kind == "ipv4":
        host, _, port = rest.rpartition(":")
    else:
        return rest or peer
    return relay_origins.origin_host(host, int(port)) if port.isdigit() else host


def endpoint_host(endpoint: str) -> str:
    """The host of a socket's ``host:port`` (``[::1]:5000`` for IPv6), as the wire and the Kafka
    listener name their peers."""
    host, _, _port = endpoint.rpartition(":")
    return host[1:-1] if host.startswith("[") and host.endswith("]") else (host or endpoint)


def der_subject(certificate: bytes) -> Optional[str]:
    """The distinguished name of a DER certificate (a wire connection's verified peer), in the
    RFC 2253 form gRPC's ``x509_subject`` gives, so the same mapping rules apply to both."""
    from cryptography import x509

    try:
        return x509.load_der_x509_certificate(certificate).subject.rfc4514_string()
    except ValueError:
        return None


def certificate_subject(auth_context: dict) -> Optional[str]:
    """The verified client certificate's distinguished name, if the peer presented one."""
    values = auth_context.get("x509_subject") or ()
    if not values:
        return None
    value = values[0]
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
