"""Run the longest test files first, so that no worker starts a five-minute file at the end.

With ``--dist loadfile`` xdist hands out whole files in collection order; a long file handed out
last sets the suite's length. ``tests/durations.txt`` lists the files that take longest (seconds on
one worker of a 2-core machine, from a ``--durations`` run), longest first; they are collected in
that order, every other file after them in pytest's own order. Refresh the list after a change
moves a file's time a lot: ``python tests/longest_first.py LOG`` reads a ``--durations=0`` log.
"""
from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.txt")
KEEP = 40  # files listed: the rest are short enough that their order does not matter


def ranks(path: Path = DURATIONS) -> dict[str, int]:
    """File (``tests/...py``) -> its place in the list."""
    if not path.exists():
        return {}
    files = [line.split()[1] for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {name: i for i, name in enumerate(files)}


def order(items: list) -> None:
    """Sort pytest's ``items`` in place: listed files first, in the list's order (stable within a file)."""
    rank = ranks()
    last = len(rank)
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))


def from_log(text: str) -> list[tuple[float, str]]:
    """(seconds, file) of a ``--durations`` report, longest first."""
    per_file: dict[str, float] = defaultdict(float)
    for m in re.finditer(r"^([\d.]+)s (?:call|setup|teardown)\s+(\S+?\.py)::", text, re.M):
        per_file[m.group(2)] += float(m.group(1))
    return sorted(((s, f) for f, s in per_file.items()), reverse=True)[:KEEP]


if __name__ == "__main__":
    rows = from_log(Path(sys.argv[1]).read_text())
    DURATIONS.write_text("# seconds file: the longest test files, longest first (tests/longest_first.py)\n"
                         + "".join(f"{s:.0f} {f}\n" for s, f in rows))
    print(f"{DURATIONS}: {len(rows)} files")
