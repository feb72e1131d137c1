"""The simulation's traces, seed by seed, are part of the Raft core's behaviour: a refactoring of the
core must leave every one of them identical. Each scenario runs a few seeds with every delivered
message, crash and snapshot traced, plus each node's final state; the SHA-256 of that text is
compared with ``trace_digests.json``.

A change of behaviour on purpose: ``SPARKRAFT_REWRITE=1 python -m pytest tests/simulation/test_trace_digest.py``
rewrites the file; the diff then shows which scenarios changed.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib

import pytest

from quorum.sim.scenarios import SCENARIOS, chaos

DIGESTS = pathlib.Path(__file__).with_name("trace_digests.json")
SEEDS = range(4)
RUNS = {**SCENARIOS, "chaos": lambda seed: chaos(seed, duration_ms=8_000)}


def trace_digest(run, seed: int) -> str:
    from quorum.sim import cluster

    lines: list[str] = []
    saved = cluster.DEFAULT_TRACE
    cluster.DEFAULT_TRACE = lines.append
    try:
        c = run(seed)
    finally:
        cluster.DEFAULT_TRACE = saved
    for node_id, n in sorted(c.nodes.items()):
        core = n.core
        lines.append(f"final {node_id}: {type(core.role).__name__} epoch={core.epoch} "
                     f"hw={core.high_watermark} end={n.log.end_offset} alive={n.alive}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def current() -> dict[str, list[str]]:
    return {name: [trace_digest(run, seed) for seed in SEEDS] for name, run in sorted(RUNS.items())}


def test_every_scenario_traces_exactly_as_recorded():
    got = current()
    if os.environ.get("SPARKRAFT_REWRITE"):
        DIGESTS.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip(f"rewrote {DIGESTS.name}")
    want = json.loads(DIGESTS.read_text())
    changed = sorted(name for name in set(got) | set(want) if got.get(name) != want.get(name))
    assert not changed, (f"the simulation now behaves differently in {changed}; if on purpose, rerun with "
                         f"SPARKRAFT_REWRITE=1 and explain the change in the commit")
