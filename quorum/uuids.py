"""Kafka's UUIDs as text: 22 base64url characters for 16 random bytes (``Uuid.toString()``).

Cluster ids, directory ids, incarnation ids and topic ids all use this form.
"""
from __future__ import annotations

import base64
import re
import uuid

_UUID_STRING = re.compile(r"[A-Za-z0-9_-]{22}")


def random_uuid() -> str:
    """A random UUID as Kafka prints one (``Uuid.randomUuid().toString()``)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not s.startswith("-"):  # Kafka avoids ids that read like command-line flags
            return s


def validate_uuid(s: str, what: str) -> str:
    """``s`` if it is a UUID string, else ValueError naming ``what``."""
    # 22 base64url characters always decode to 16 bytes (the last one carries 4 unused bits).
    if not isinstance(s, str) or not _UUID_STRING.fullmatch(s):
        raise ValueError(f"invalid {what} {s!r}: expected 22 base64url characters "
                         f"(a UUID as printed by `sparkraft storage random-uuid`)")
    return s
