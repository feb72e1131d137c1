"""Applying a reviewed plan (``sparkraft revert --execute``): refuse what was not allowed, re-check
the plan against the cluster's state now (not only the newest cut: a cluster changed since the plan
was made is refused, naming what changed), apply it group by group through the cluster's admin API,
stop at the first refusal and say what was applied and what was not, then wait for the streaming
job's next cut and check that the chosen domains equal the target's.

``admin`` is a SparkraftAdmin or a KafkaAdmin: ``current_image()``, ``apply(group)`` (per step,
None or the cluster's error), ``committed`` (a log offset at or past what it applied).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from delta_tables.bootstrap import image_from_cut
from delta_tables.cut import CutError, latest_cut
from delta_tables.revert import Plan, Step, plan
from sparkraft.revert.requests import groups

SHOWN = 5  # what a refusal names of a long list


class RevertRefused(ValueError):
    """The plan is not applied (one line, nothing changed)."""


@dataclass
class Outcome:
    applied: list[Step] = field(default_factory=list)
    failed: list[tuple[Step, str]] = field(default_factory=list)
    not_tried: list[Step] = field(default_factory=list)
    committed: int = -1  # a log offset at or past every applied step


def refuse_unallowed(p: Plan, allow_topic_deletion: bool) -> None:
    doomed = [s.resource for s in p.steps if s.kind == "delete-topic"]
    if doomed and not allow_topic_deletion:
        raise RevertRefused(f"the plan deletes {len(doomed)} topic(s) ({_some(doomed)}): add --allow-topic-deletion "
                            f"to let it (their data is deleted with them)")


def recheck(p: Plan, admin, target) -> None:
    """The plan made again from the cluster's state now must be the plan reviewed."""
    now = admin.current_image()
    again = plan(now, target, p.domains, now.offset, p.to_offset)
    changed = p.differences(again)
    if changed:
        raise RevertRefused(f"the cluster changed since the plan was made (from offset {p.from_offset}): "
                            f"{_some(changed, SHOWN)}; make a new plan")


def apply(p: Plan, admin, progress: Callable[[int, int], None] = lambda done, total: None) -> Outcome:
    """Every step, in order; at the first group with a refused step, stops after it."""
    out = Outcome()
    todo = list(groups(p.steps))
    for i, group in enumerate(todo):
        for step, error in zip(group, admin.apply(group)):
            if error is None:
                out.applied.append(step)
            else:
                out.failed.append((step, error))
        progress(len(out.applied) + len(out.failed), len(p.steps))
        if out.failed:
            out.not_tried = [s for g in todo[i + 1:] for s in g]
            break
    out.committed = admin.committed
    return out


def verify(warehouse: str, p: Plan, target, committed: int, timeout_s: float) -> Optional[list[str]]:
    """What still differs from the target in the chosen domains once the job's cuts reach
    ``committed`` (None: no cut reached it within ``timeout_s``). What the plan said cannot be
    restored is not a difference."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cut = latest_cut(warehouse)
        except CutError:  # none yet
            cut = None
        if cut is not None and cut.offset >= committed:
            break
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.5)
    left = plan(image_from_cut(warehouse, cut)[0], target, p.domains, cut.offset, p.to_offset)
    return [s.describe() for s in left.steps]


def _some(items: list[str], shown: int = 3) -> str:
    more = len(items) - shown
    return "; ".join(items[:shown]) + (f" (and {more} more)" if more > 0 else "")
