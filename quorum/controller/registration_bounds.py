"""What a broker's registration may hold, checked where it arrives (the Kafka listener's handler,
the gRPC service's conversion of the message, on its counts before its items become objects), so
that an oversized one never reaches the controller's loop; the controller checks it again, which
costs little once it is bounded (in-process callers come in there).

A real broker registers a handful of listeners and features; one unauthenticated registration of
2,500,000 listeners (a 45 MB Kafka frame) used to be accepted after 12 s of the Raft loop's time,
cost the quorum its leader twice and every controller a GB for good. The bounds here are far above
any real broker and far below what could hurt; the names and hosts they allow are what a client
could connect to, and nothing a terminal or a browser would render as markup or a new line.
"""
from __future__ import annotations

import re
from typing import Optional

MAX_LISTENERS = 64
MAX_FEATURES = 64
MAX_LOG_DIRS = 256  # Kafka's registration (v2+) names its log directories; sparkraft keeps none
MAX_HOST = 255  # a DNS name's limit (RFC 1035)
MAX_LISTENER_NAME = 249
MAX_RACK = 255
MAX_FEATURE_NAME = 249
MAX_BROKER_ID = 2**31 - 2  # Kafka's ids are int32; the last one is left as a sentinel, never a node

# a DNS name, an IPv4 address or an IPv6 one (in brackets or not, with a %zone)
_HOST = re.compile(r"[A-Za-z0-9._:%\[\]-]+")
_LISTENER_NAME = re.compile(r"[A-Za-z0-9._-]+")  # Kafka's listener names: letters, digits, _ . -
_RACK = re.compile(r"[A-Za-z0-9._:/-]+")  # rack ids as clouds and operators write them (us-east-1a, /dc1/r2)
_FEATURE_NAME = re.compile(r"[a-z0-9._-]+")  # metadata.version, kraft.version, group.version, ...


def count_refusal(listeners: int, features: int, log_dirs: int = 0) -> Optional[str]:
    """Why a registration naming this many listeners, features and log directories is refused
    (None: it is not): checked on the counts alone, before the items are made into objects."""
    if listeners > MAX_LISTENERS:
        return f"a broker registers at most {MAX_LISTENERS} listeners, not {listeners}"
    if features > MAX_FEATURES:
        return f"a broker registers at most {MAX_FEATURES} features, not {features}"
    if log_dirs > MAX_LOG_DIRS:
        return f"a broker registers at most {MAX_LOG_DIRS} log directories, not {log_dirs}"
    return None


def _shown(text: str, limit: int = 40) -> str:
    """``text`` as a refusal may quote it: short, and with no control character left raw."""
    quoted = repr(text[:limit])
    return quoted + ("..." if len(text) > limit else "")


def refusal(req) -> Optional[str]:
    """Why the RegisterBrokerRequest ``req`` is refused before the controller sees it, or None."""
    why = count_refusal(len(req.endpoints), len(req.features))
    if why is not None:
        return why
    if not 0 <= req.broker_id <= MAX_BROKER_ID:
        return f"Invalid broker id {req.broker_id}: a broker id is in 0..{MAX_BROKER_ID}"
    why = _endpoints_refusal(req.endpoints)
    if why is not None:
        return why
    if req.rack is not None and (len(req.rack) > MAX_RACK or not _RACK.fullmatch(req.rack)):
        return f"Invalid rack {_shown(req.rack)}: at most {MAX_RACK} letters, digits, '_', '.', ':', '/' or '-'"
    return _features_refusal(req.features)


def controller_refusal(req) -> Optional[str]:
    """Why the RegisterControllerRequest ``req`` is refused, or None: a broker's bounds."""
    why = count_refusal(len(req.endpoints), len(req.features))
    if why is not None:
        return why.replace("a broker", "a controller")
    if not 0 <= req.controller_id <= MAX_BROKER_ID:
        return f"Invalid controller id {req.controller_id}: a node id is in 0..{MAX_BROKER_ID}"
    return _endpoints_refusal(req.endpoints) or _features_refusal(req.features)


def _endpoints_refusal(endpoints) -> Optional[str]:
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        return "Duplicate listener name in the endpoints"
    for e in endpoints:
        if not 0 <= e.port <= 65535 or not e.name or not e.host:
            return (f"Invalid endpoint {_shown(e.name or '(no name)')}://{_shown(e.host or '(no host)')}:{e.port}: "
                    f"a listener needs a name, a host and a port in 0..65535")
        if len(e.name) > MAX_LISTENER_NAME or not _LISTENER_NAME.fullmatch(e.name):
            return (f"Invalid listener name {_shown(e.name)}: at most {MAX_LISTENER_NAME} letters, digits, "
                    f"'_', '.' or '-'")
        if len(e.host) > MAX_HOST or not _HOST.fullmatch(e.host):
            return (f"Invalid host {_shown(e.host)} for listener {e.name}: a DNS name or an IP address of at "
                    f"most {MAX_HOST} characters")
    return None


def _features_refusal(features) -> Optional[str]:
    feature_names = [name for name, _, _ in features]
    if len(set(feature_names)) != len(feature_names):
        return "The supported features repeat a name"
    for name, lo, hi in features:
        if len(name) > MAX_FEATURE_NAME or not _FEATURE_NAME.fullmatch(name):
            return f"Invalid feature name {_shown(name)}"
        if not 0 <= lo <= hi <= 32767:
            return f"Invalid range {lo}..{hi} of feature {name}: levels are in 0..32767, lowest first"
    return None
