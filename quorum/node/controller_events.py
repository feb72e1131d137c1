"""What arrives on a ControllerNode's queue (controller_node.py), one type per kind: the loop
dispatches on the type through its table."""
from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass
from typing import Any, Callable, Optional

from quorum.controller.core import ControllerCore
from quorum.errors import SparkraftError
from quorum.log.batch import Batch
from quorum.node.listeners import SnapshotLoad
from quorum.node.pending_replies import Pending


@dataclass(frozen=True, slots=True)
class Committed:
    """Committed batches, handed off by the RaftNode's event loop; ``done()`` once replayed lets it
    hand off more (it keeps only a few deliveries out at once)."""

    batches: list[Batch]
    done: Callable[[], None]


@dataclass(frozen=True, slots=True)
class SnapshotInstalled:
    load: SnapshotLoad
    done: Callable[[], None]


# Authorization of a write: None to go on, else the error that refuses it (quorum/rpc/request_actions.py).
Check = Callable[[], Optional[SparkraftError]]


@dataclass(frozen=True, slots=True)
class Request:
    request: Any
    future: concurrent.futures.Future
    arrived_ms: int
    check: Optional[Check] = None  # runs on the controller thread once this node is active
    context: Any = None  # who sent it, for its audit entry (quorum/controller/audit.py AuditContext)


@dataclass(frozen=True, slots=True)
class Proposed:
    """One batch of a pending request's proposal is settled (committed or failed)."""

    pending: Pending
    index: int
    proposal: concurrent.futures.Future


@dataclass(frozen=True, slots=True)
class Call:
    fn: Callable[[ControllerCore], Any]
    future: concurrent.futures.Future


@dataclass(frozen=True, slots=True)
class Stop:
    pass


ITEMS = (Committed, SnapshotInstalled, Request, Proposed, Call)  # each handled by its handler (Stop ends the loop)
