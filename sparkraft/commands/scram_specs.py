"""SCRAM credentials as Kafka's tools write them on the command line.

    storage format ... --add-scram 'SCRAM-SHA-512=[name=admin,password=secret]'
    configs alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=s1],SCRAM-SHA-512=[password=s2]'
    configs alter --entity-type users --entity-name alice --delete-config SCRAM-SHA-512

A password may hold commas: a piece without ``key=`` of a known key belongs to the value before it.
The password is salted and iterated here, so neither the controller nor the log ever sees it.
"""
from __future__ import annotations

import secrets

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.security.scram import DEFAULT_ITERATIONS, SALT_BYTES, Mechanism, check_iterations, mechanism


def _bad(message: str) -> SparkraftError:
    return SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, message)


def parse_spec(item: str, keys: tuple[str, ...]) -> tuple[Mechanism, dict[str, str]]:
    """``MECHANISM=[k=v,...]`` with keys among ``keys``; UNACCEPTABLE_CREDENTIAL if malformed."""
    name, sep, body = item.partition("=")
    try:
        m = mechanism(name.strip())
    except ValueError as e:
        raise SparkraftError(Errors.UNSUPPORTED_SASL_MECHANISM, str(e)) from None
    body = body.strip()
    if not sep or not (body.startswith("[") and body.endswith("]")):
        raise _bad(f"expected {m.name}=[{'=...,'.join(keys)}=...], not {item.split('=')[0]}=...")
    values: dict[str, str] = {}
    last = None
    for piece in body[1:-1].split(","):
        key, eq, value = piece.partition("=")
        if eq and key.strip().lower() in keys:
            last = key.strip().lower()
            if last in values:
                raise _bad(f"{m.name}: {last} given twice")
            values[last] = value
        elif last is not None:
            values[last] += "," + piece  # a comma inside the value
        else:
            raise _bad(f"{m.name}: unknown setting {key.strip()!r} (known: {', '.join(keys)})")
    if "iterations" in values:
        try:
            check_iterations(int(values["iterations"]))
        except ValueError as e:
            raise _bad(f"{m.name}: {e}" if values["iterations"].strip().isdigit()
                       else f"{m.name}: iterations must be a number") from None
    if not values.get("password"):
        raise _bad(f"{m.name}: a password is required")
    return m, values


def upsertion(m: Mechanism, user: str, values: dict[str, str]) -> api.ScramCredentialUpsertion:
    """The request item for one credential: a fresh salt, the password salted and iterated."""
    iterations = int(values.get("iterations", DEFAULT_ITERATIONS))
    salt = secrets.token_bytes(SALT_BYTES)
    return api.ScramCredentialUpsertion(user, m.name, iterations, salt,
                                        m.salted_password(values["password"], salt, iterations))
