"""Commit listeners: each on a thread of its own, fed committed batches in offset order by the
event loop, a few chunks ahead at most, so a slow listener never stalls Raft and never falls
unboundedly behind in memory."""
from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import Batch

log = logging.getLogger(__name__)

LISTENER_CHUNK_BYTES = 4 << 20  # committed bytes handed to a listener per delivery
LISTENER_MAX_PENDING = 4  # deliveries queued per listener before the loop stops reading for it


@dataclass(frozen=True, slots=True)
class SnapshotLoad:
    """What a commit listener gets instead of batches it fell behind on: the log no longer holds
    them (they are in this snapshot, at ``path``); load it, then batches follow from its end."""

    snapshot_id: OffsetAndEpoch
    path: Path


Delivery = Union[list[Batch], SnapshotLoad]


# A listener with a thread of its own elsewhere: ``hand_off(delivery, done)`` queues the delivery
# there (it must not block) and that thread calls ``done()`` once it is through with it.
HandOff = Callable[[Delivery, Callable[[], None]], None]


class CommitListener:
    """One listener: ``fn(batches)`` (or ``on_snapshot(load)``) runs on its thread; ``delivered(self)``
    is called after each delivery, done or failed, so the event loop can send the next.

    With ``hand_off`` instead, the event loop hands each delivery to the owner's own thread at once
    (the controller's event loop): no thread of the listener's between them, one thread switch
    less on every commit's way to the reply."""

    def __init__(self, node_id: int, fn: Optional[Callable[[list[Batch]], None]], index: int, start: int,
                 on_snapshot: Optional[Callable[[SnapshotLoad], None]],
                 delivered: Callable[["CommitListener"], None], hand_off: Optional[HandOff] = None):
        self.node_id = node_id
        self.fn = fn
        self.on_snapshot = on_snapshot
        self.hand_off = hand_off
        self.next_offset = start  # first offset not yet handed over (event-loop thread only)
        self.pending = 0  # deliveries handed over but not yet done (event-loop thread only)
        self.queue: "queue.SimpleQueue[Optional[Delivery]]" = queue.SimpleQueue()
        self._delivered = delivered
        self.thread: Optional[threading.Thread] = None if hand_off is not None else threading.Thread(
            target=self._run, name=f"raft-{node_id}-listener-{index}", daemon=True)

    @property
    def wants_more(self) -> bool:
        return self.pending < LISTENER_MAX_PENDING

    def feed(self, file_log, snapshots, high_watermark: int) -> None:
        """Hand over the next chunk of committed batches below ``high_watermark`` (event-loop thread),
        or the newest snapshot if the log no longer holds the next offset."""
        if self.next_offset >= high_watermark or not self.wants_more:
            return
        if self.next_offset < file_log.start_offset:
            snapshot = snapshots.latest()
            self.next_offset = snapshot.offset
            self._hand_over(SnapshotLoad(snapshot, snapshots.path(snapshot)))
            return
        batches, size = [], 0
        for b in file_log.batches(self.next_offset, high_watermark):
            if b.end_offset > high_watermark or size >= LISTENER_CHUNK_BYTES:
                break
            batches.append(b)
            size += sum(len(r) for r in b.records)
        if batches:
            self.next_offset = batches[-1].end_offset
            self._hand_over(batches)

    def _hand_over(self, delivery: Delivery) -> None:
        self.pending += 1
        if self.hand_off is not None:
            self.hand_off(delivery, lambda: self._delivered(self))
        else:
            self.queue.put(delivery)

    def stop(self) -> None:
        if self.thread is not None:
            self.queue.put(None)

    def _run(self) -> None:
        while True:
            delivery = self.queue.get()
            if delivery is None:
                return
            try:
                if isinstance(delivery, SnapshotLoad):
                    self._load(delivery)
                else:
                    self.fn(delivery)
            except Exception:
                log.warning("node %d: commit listener %r failed on offsets %d..%d", self.node_id, self.fn,
                            delivery[0].base_offset, delivery[-1].last_offset, exc_info=True)
            self._delivered(self)

    def _load(self, load: SnapshotLoad) -> None:
        try:
            if self.on_snapshot is None:
                raise RuntimeError(f"the log no longer holds the records below {load.snapshot_id.offset} "
                                   f"and this listener cannot load a snapshot")
            self.on_snapshot(load)
        except Exception:
            log.error("node %d: commit listener %r could not load snapshot %s", self.node_id, self.fn, load.path,
                      exc_info=True)
