"""A plan's steps grouped into the admin requests that carry them: consecutive steps of one kind
go in one request (many topics in one CreateTopics, many resources in one IncrementalAlterConfigs),
at most GROUP steps each, so thousands of config changes go at the controllers' write rate rather
than a round trip each. Each group keeps its steps in order, so the answer's items map back to them."""
from __future__ import annotations

from itertools import groupby
from typing import Iterator

from delta_tables.revert import Step

GROUP = 500


def groups(steps: list[Step]) -> Iterator[list[Step]]:
    """Runs of steps of one kind (configs: set and delete together), at most GROUP each."""
    def family(step: Step) -> str:
        return "config" if step.kind in ("set-config", "delete-config") else step.kind

    for _, run in groupby(steps, key=family):
        run = list(run)
        for i in range(0, len(run), GROUP):
            yield run[i:i + GROUP]


def config_resources(steps: list[Step]) -> list[tuple[str, list[Step]]]:
    """A config group's steps by resource label, in first-seen order (one entry per resource in
    IncrementalAlterConfigs, whose answer is per resource)."""
    out: dict[str, list[Step]] = {}
    for s in steps:
        out.setdefault(s.resource, []).append(s)
    return list(out.items())
