"""The Raft core's structure, held: the transition table its docstring shows is the table
``_become`` enforces; the core asks roles for their answers rather than testing their types (at
most five type tests on roles in quorum/raft/: the two accessors that hand out the Leader's and a
Follower's own data, and the dispatch tables keyed by role); and each part of RaftCore declares
exactly what it reads, writes and calls of the others (``PART``, over state.py's RaftState)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from quorum.raft import transitions
from quorum.raft.roles import ROLES

RAFT = Path(transitions.__file__).parent
ROLE_NAMES = {r.__name__ for r in ROLES}


def _docstring_table() -> dict[str, set[str]]:
    """From each role (a row), the roles the docstring's table lets it move to (a cell not "-")."""
    doc = transitions.__doc__.splitlines()
    first = next(i for i, line in enumerate(doc) if line.strip().startswith("from \\ to"))
    indent = len(doc[first]) - len(doc[first].lstrip())
    lines = [line[indent:] for line in doc[first:]]
    header = lines[0]
    starts = [(m.start(), m.group()) for m in re.finditer(r"\w+", header)][2:]  # after "from", "to"
    table: dict[str, set[str]] = {}
    current = None
    for line in lines[1:]:
        if not line.strip():
            break
        name = line.split()[0] if line[:1].strip() else None
        if name in ROLE_NAMES:
            current = name
            table[current] = set()
        for i, (col, target) in enumerate(starts):
            end = starts[i + 1][0] if i + 1 < len(starts) else len(line)
            cell = line[col:end].strip()
            if cell and cell != "-" and current is not None:
                table[current].add(target)
    return table


def test_the_docstrings_transition_table_is_the_enforced_one():
    shown = _docstring_table()
    enforced = {old.__name__: {new.__name__ for new in news} for old, news in transitions._TRANSITIONS.items()}
    assert set(shown) == ROLE_NAMES
    assert shown == enforced


def _role_type_tests(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(getattr(k, "id", None) in ROLE_NAMES for k in kinds):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "type" and node.args:
            arg = node.args[0]
            text = ast.unparse(arg)
            if text in ("self.role", "role", "old", "r"):
                lines.append(node.lineno)
    return lines


def test_roles_answer_for_themselves():
    found = {path.name: _role_type_tests(ast.parse(path.read_text())) for path in sorted(RAFT.glob("*.py"))}
    total = sum(len(v) for v in found.values())
    assert total <= 5, f"{total} type tests on roles in quorum/raft/ (at most 5): " + \
        ", ".join(f"{name}:{lines}" for name, lines in found.items() if lines)
    assert total >= 2, "the accessors' own tests went missing: is the check still looking?"


PARTS = {"election": "ElectionRpcs", "replication": "ReplicationRpcs", "polls": "RolePolls",
         "transitions": "Transitions", "membership": "Membership"}


def _state_attributes() -> set[str]:
    from quorum.raft.state import RaftState

    return set(RaftState.__annotations__)


def _used(cls: ast.ClassDef, state: set[str]):
    own = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    names, writes = set(), set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            names.add(node.attr)
            if isinstance(node.ctx, ast.Store):
                writes.add(node.attr)
    return ({n for n in names if n in state and n not in writes}, writes,
            {n for n in names if n not in state and n not in own and n != "PART"})


def test_each_part_declares_what_it_uses_of_the_core():
    import importlib

    from quorum.raft.core import RaftCore

    state = _state_attributes()
    methods = {name for klass in RaftCore.__mro__ for name, v in vars(klass).items()
               if callable(v) or isinstance(v, property)}
    for module, name in PARTS.items():
        tree = ast.parse((RAFT / f"{module}.py").read_text())
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        reads, writes, calls = _used(cls, state)
        declared = vars(getattr(importlib.import_module(f"quorum.raft.{module}"), name))["PART"]
        assert (set(declared.reads), set(declared.writes), set(declared.calls)) == (reads, writes, calls), module
        assert writes <= state, f"{module} assigns attributes RaftState does not declare: {writes - state}"
        assert calls <= methods, f"{module} calls what no part has: {calls - methods}"


def test_the_core_sets_every_declared_attribute_and_no_other():
    """RaftCore.__init__ (with the parts it calls there) assigns exactly what RaftState declares."""
    import random

    from quorum.log.election_state import ElectionState
    from quorum.log.memory_log import MemoryLog
    from quorum.raft.core import RaftCore
    from quorum.snapshot.memory_store import MemorySnapshotStore

    core = RaftCore(1, [1, 2, 3], "c", MemoryLog(), ElectionState(0, None, None), 0,
                    rng=random.Random(0), snapshots=MemorySnapshotStore())
    assert set(vars(core)) == _state_attributes()
