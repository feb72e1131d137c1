"""What the fleet's driver and its streaming source tell each other, as two small files beside
each other in a private directory on the driver's host (streaming/fleet_job.py, fleet_source.py).

Spark runs a Python streaming source's planning (latestOffset, partitions) in a Python process of
its own, not in the driver's, so the two share no memory:

- the **plan** (driver -> source): the clusters to read, each with where its tables end (the next
  offset its materialiser needs: ranges are planned from there, so a range that failed is read
  again), a ``redo`` count that the driver raises to have a failed cluster tried again (it changes
  the source's offset, so Spark runs a micro-batch even where the log did not move), and whether it
  is ``paused`` (waiting out a failure's backoff);
- the **reach** (source -> driver): each cluster's high watermark as last seen, or the error that
  kept it from being seen, for the ``sources`` table, the metrics and the log.

No secret is in either: a cluster's credentials stay in its command-config file, which the source
reads itself. Each file is replaced whole (written beside, then renamed), so a reader never sees
half of one; both are a few hundred bytes a cluster, read whole each time.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class PlanEntry:
    name: str
    bootstrap: str
    protocol: str
    cluster_id: str
    applied: int  # the next offset the cluster's tables need
    command_config: Optional[str] = None
    trigger_s: float = 1.0
    idle_flush_s: Optional[float] = None
    max_records: Optional[int] = None
    redo: int = 0
    paused: bool = False


def _replace(path: Path, doc) -> None:
    """``path`` replaced whole by ``doc``. The file beside is each writer's own (the driver's batch
    and its tick both publish the plan): with one name for all, one writer's rename took the other's
    file away under it (a full run's FileNotFoundError)."""
    part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    part.write_text(json.dumps(doc, sort_keys=True))
    os.replace(part, path)


def write_plan(path: Path, entries: list[PlanEntry]) -> None:
    _replace(path, {"clusters": [asdict(e) for e in entries]})


def read_plan(path: Path) -> dict[str, PlanEntry]:
    return {e["name"]: PlanEntry(**e) for e in json.loads(path.read_text())["clusters"]}


def reach_path(plan: Path) -> Path:
    return plan.with_name("reach.json")


def write_reach(plan: Path, reach: dict[str, dict]) -> None:
    """``{cluster: {"hw": N or None, "error": text or None}}``."""
    _replace(reach_path(plan), reach)


def read_reach(plan: Path) -> dict[str, dict]:
    try:
        return json.loads(reach_path(plan).read_text())
    except (OSError, ValueError):  # not written yet
        return {}

