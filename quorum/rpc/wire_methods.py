"""Every method the wire carries: Raft's (quorum/wire/methods.py) and each Controller request's,
numbered as its registry row says (quorum/controller/registry.py). Servers and clients of the wire
use these tables."""
from __future__ import annotations

from quorum.controller import registry
from quorum.gen.sparkraft.v1 import controller_pb2 as cpb
from quorum.wire.methods import HELLO, RAFT_METHODS, Method

CONTROLLER_METHODS: tuple[Method, ...] = tuple(
    Method(row.number, row.method, getattr(cpb, f"{row.method}Request"), getattr(cpb, f"{row.method}Response"))
    for row in registry.ROWS if row.method is not None)

METHODS: dict[int, Method] = {**RAFT_METHODS, **{m.number: m for m in CONTROLLER_METHODS}}
BY_NAME: dict[str, Method] = {m.name: m for m in METHODS.values()}

__all__ = ["BY_NAME", "HELLO", "METHODS", "Method"]
