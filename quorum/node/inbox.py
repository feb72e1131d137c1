"""What arrives on a RaftNode's inbound queue: one small type per kind of item, so the event loop
dispatches by type through one table (raft_node.py) that is checked complete at import."""
from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from quorum.rpc.peer_client import PeerAnswer, PeerNoAnswer


@dataclass(frozen=True, slots=True)
class PeerRequest:
    """A peer's request, from the servicer; ``future`` gets the core's response."""

    src: int
    corr: int
    msg: Any
    future: concurrent.futures.Future


@dataclass(frozen=True, slots=True)
class Propose:
    records: list
    future: concurrent.futures.Future


@dataclass(frozen=True, slots=True)
class Call:
    """Run ``fn(core, now_ms)`` on the event loop (reads of the core's state)."""

    fn: Callable
    future: concurrent.futures.Future


@dataclass(frozen=True, slots=True)
class Delivered:
    """A commit listener finished one delivery."""

    listener: Any


@dataclass(frozen=True, slots=True)
class Listen:
    fn: Optional[Callable]
    on_snapshot: Optional[Callable]
    done: threading.Event
    hand_off: Optional[Callable] = None  # listeners.HandOff: deliveries go to the owner's thread


@dataclass(frozen=True, slots=True)
class SnapshotWritten:
    """A snapshot was added beside the log: apply retention."""


@dataclass(frozen=True, slots=True)
class Resign:
    """Graceful shutdown of a leader: ``outcome`` says how the resignation went."""

    outcome: concurrent.futures.Future


@dataclass(frozen=True, slots=True)
class Stop:
    pass


# Items that hold a future (or an event) someone waits on: failed if the loop goes away first.
AWAITED = (PeerRequest, Propose, Call, Resign)
INBOX_ITEMS = (PeerAnswer, PeerNoAnswer, PeerRequest, Propose, Call, Delivered, Listen, SnapshotWritten, Resign)
