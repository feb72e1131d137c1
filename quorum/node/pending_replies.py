"""Requests the active controller has proposed the records of, answered in the order they were
handled, each once its last batch is committed *and* replayed (so a read right after sees the
write), or failed when leadership is lost before then: REQUEST_TIMED_OUT (it may still be committed)
for a request whose records were appended."""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from quorum import failpoints
from quorum.errors import Errors, SparkraftError

log = logging.getLogger(__name__)

# an operation answered this long after it was taken up is logged with where its time went (Kafka's
# controller.performance.always.log.threshold.ms has the same default): a balance or a fencing at
# 2M partitions, or a commit held up by a slow quorum, shows in the log without a profiler
SLOW_OPERATION_S = 2.0


def not_controller(node_id: int, leader_id: Optional[int], activating: bool = False) -> SparkraftError:
    """NOT_CONTROLLER with the active controller's id in ``details['leader_id']`` (None if unknown)."""
    if activating:
        why = f"node {node_id} is becoming the active controller; retry shortly"
    elif leader_id is not None and leader_id != node_id:
        why = f"node {node_id} is not the active controller; the active controller is node {leader_id}"
    else:
        why = f"node {node_id} is not the active controller; no active controller is known"
    return SparkraftError(Errors.NOT_CONTROLLER, why,
                          leader_id=leader_id if leader_id != node_id else None)


@dataclass(eq=False)
class Pending:
    """A handled request whose records are proposed; answered when they are committed and replayed."""

    op: Any  # the core's Operation
    future: Optional[concurrent.futures.Future]  # None for operations from tick()
    epoch: int
    last_offsets: list = field(default_factory=list)  # per batch, once committed (None until then)
    first_offset: Optional[int] = None  # offset of the first record of the first batch
    failed: bool = False
    arrived: float = 0.0  # time.monotonic() when the request was queued
    started: float = 0.0  # ... when it was taken up
    handled: float = 0.0  # ... when its records were ready to propose
    committed_at: float = 0.0  # ... when its last batch was committed

    @property
    def committed(self) -> bool:
        return all(o is not None for o in self.last_offsets)

    @property
    def last_offset(self) -> int:
        return max(self.last_offsets) if self.last_offsets else -1

    def batch_committed(self, index: int, last_offset: int) -> None:
        self.last_offsets[index] = last_offset
        self.committed_at = time.monotonic()
        if index == 0:
            self.first_offset = last_offset - len(self.op.batches[0]) + 1

    def fail(self, error: BaseException) -> None:
        self.failed = True
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)


class PendingReplies:
    """The pending requests, oldest first (controller thread only)."""

    def __init__(self, node_id: int = -1) -> None:
        self._queue: collections.deque[Pending] = collections.deque()
        self._node_id = node_id

    def __bool__(self) -> bool:
        return bool(self._queue)

    def add(self, op, future: Optional[concurrent.futures.Future], epoch: int,
            arrived: Optional[float] = None, started: Optional[float] = None) -> Pending:
        """``arrived``, ``started``: when the request was queued and taken up (time.monotonic();
        default now)."""
        now = time.monotonic()
        started = now if started is None else started
        pending = Pending(op, future, epoch, [None] * len(op.batches), arrived=started if arrived is None else arrived,
                          started=started, handled=now)
        self._queue.append(pending)
        if future is not None and op.reply_fn is None and failpoints.enabled("ack-before-commit"):
            future.set_result(op.reply)  # the deliberate bug the linearizability tests must catch
        return pending

    def settle(self, replayed: int) -> None:
        """Answer pending requests, in order, whose records are committed and replayed up to ``replayed``."""
        while self._queue:
            p = self._queue[0]
            if p.failed:
                self._queue.popleft()
                continue
            if not p.committed or p.last_offset > replayed:
                return
            self._queue.popleft()
            self._log_if_slow(p)
            if p.future is None or p.future.done():
                continue
            try:
                reply = p.op.reply_fn(p.first_offset) if p.op.reply_fn is not None else p.op.reply
            except SparkraftError as e:
                p.future.set_exception(e)
            except Exception as e:
                p.future.set_exception(SparkraftError(Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}"))
            else:
                if p.op.batches:
                    failpoints.hit("controller-before-answer")
                p.future.set_result(reply)

    def _log_if_slow(self, p: Pending) -> None:
        """One line for an operation that wrote records and took long (one that wrote none only
        waited for those before it, which are logged themselves)."""
        answered = time.monotonic()
        if not p.op.batches or answered - p.arrived < SLOW_OPERATION_S:
            return
        records = sum(len(b) for b in p.op.batches)
        log.info("Controller %d: slow operation %s (%d records in %d batches) took %.2fs: queued %.2fs, handled "
                 "in %.2fs, committed %.2fs later, replayed and answered %.2fs after that", self._node_id,
                 p.op.name or "operation", records, len(p.op.batches), answered - p.arrived,
                 p.started - p.arrived, p.handled - p.started, max(0.0, p.committed_at - p.handled),
                 max(0.0, answered - p.committed_at))

    def fail_all(self, error: BaseException) -> None:
        """Fail every pending request: one whose records were appended gets REQUEST_TIMED_OUT
        instead of ``error``, since they may still be committed by the next leader (a client that
        retries it then knows its first attempt may have been carried out); one that appended none
        gets ``error``."""
        while self._queue:
            p = self._queue.popleft()
            if p.op.batches and isinstance(error, SparkraftError) and error.error is Errors.NOT_CONTROLLER:
                p.fail(SparkraftError(Errors.REQUEST_TIMED_OUT, f"{error.message}; this request's records were "
                                      f"appended before and may still be committed", **error.details))
            else:
                p.fail(error)
