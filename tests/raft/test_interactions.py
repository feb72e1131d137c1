"""Raft scenarios as readable text: each ``testdata/*.txt`` is run by interaction.py and its output
compared with the file, block by block.

A change of behaviour on purpose: ``SPARKRAFT_REWRITE=1 python -m pytest tests/raft`` rewrites the
expected outputs; read the diff before committing it.
"""
from __future__ import annotations

import os
import pathlib

import pytest
from interaction import render, run_file

TESTDATA = pathlib.Path(__file__).with_name("testdata")
FILES = sorted(TESTDATA.glob("*.txt"))


def test_there_are_scenarios():
    assert len(FILES) >= 7


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario(path: pathlib.Path):
    header, results = run_file(path.read_text())
    if os.environ.get("SPARKRAFT_REWRITE"):
        path.write_text(render(header, [(command, got) for command, _, got in results]))
        return
    for command, expected, got in results:
        assert got == expected, f"{path.name}: `{command}` printed\n{got}\n\nexpected\n{expected}"
