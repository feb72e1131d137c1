"""The transports reach a node only through its port (quorum/rpc/ports.py): every member a port
names exists on the node class, and the transport modules use no member the port does not name
(an upward dependency the layering test cannot see, since the node is handed in, not imported)."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from quorum.node.controller_node import ControllerNode
from quorum.node.raft_node import RaftNode
from quorum.rpc.ports import ControllerPort, RaftPort

ROOT = Path(__file__).resolve().parent.parent.parent
TRANSPORTS = {
    ControllerPort: ("quorum/rpc/controller_service.py", "quorum/rpc/controller_wire.py"),
    RaftPort: ("quorum/rpc/raft_service.py", "quorum/rpc/raft_wire.py"),
}
NODES = {ControllerPort: ControllerNode, RaftPort: RaftNode}


def members(port) -> set[str]:
    names = set(getattr(port, "__annotations__", {}))
    names |= {n for n, v in vars(port).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    return names


def used_members(path: str) -> set[str]:
    """Attributes read off a node in ``path``: ``node.X``, ``self._node.X``, ``self.node.X``."""
    used = set()
    for n in ast.walk(ast.parse((ROOT / path).read_text())):
        if not isinstance(n, ast.Attribute):
            continue
        v = n.value
        if isinstance(v, ast.Name) and v.id == "node":
            used.add(n.attr)
        elif (isinstance(v, ast.Attribute) and v.attr in ("_node", "node") and isinstance(v.value, ast.Name)
              and v.value.id in ("self", "call")):
            used.add(n.attr)
    return used


@pytest.mark.parametrize("port", list(TRANSPORTS), ids=lambda p: p.__name__)
def test_the_node_class_has_every_member_its_port_names(port):
    node = NODES[port]
    source = inspect.getsource(node)
    for name in members(port):
        assert hasattr(node, name) or re.search(rf"self\.{name}\s*[:=]", source), f"{node.__name__} lacks {name}"


@pytest.mark.parametrize("port", list(TRANSPORTS), ids=lambda p: p.__name__)
def test_the_transports_use_only_what_the_port_names(port):
    allowed = members(port)
    for path in TRANSPORTS[port]:
        used = used_members(path)
        assert used, f"{path}: no node member found (is the pattern stale?)"
        assert used <= allowed, f"{path} uses {sorted(used - allowed)} of the node: add them to {port.__name__}"
