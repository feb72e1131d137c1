"""Proposals in flight on a leader, settled in offset order as the high watermark passes them:
resolved with their last offset once committed in the epoch they were appended in, failed with
NotLeaderError when leadership moved and a new leader replaced them."""
from __future__ import annotations

import collections
import concurrent.futures
from dataclasses import dataclass
from typing import Callable, Optional

from quorum.errors import NotLeaderError


class ProposalFuture(concurrent.futures.Future):
    """Resolves with the offset of the proposal's last record once committed; ``epoch`` is the
    leader epoch it was appended in (set when the leader accepted it)."""

    epoch: Optional[int] = None


@dataclass(slots=True)
class _Proposal:
    epoch: int
    last_offset: int
    future: ProposalFuture


def resolve(future: concurrent.futures.Future, value) -> None:
    if not future.done():
        future.set_result(value)


def fail(future: concurrent.futures.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


class Proposals:
    """The leader's accepted proposals, oldest first (event-loop thread only)."""

    def __init__(self) -> None:
        self._queue: collections.deque[_Proposal] = collections.deque()

    def __bool__(self) -> bool:
        return bool(self._queue)

    def accepted(self, epoch: int, last_offset: int, future: ProposalFuture) -> None:
        future.epoch = epoch
        self._queue.append(_Proposal(epoch, last_offset, future))

    def settle(self, core, node_id: int, epoch_at: Callable[[int], Optional[int]]) -> None:
        """Resolve what is committed; fail what this node can no longer commit. ``epoch_at(offset)``
        reads the epoch of the batch now at ``offset`` in the log (None if it is gone)."""
        hw = core.high_watermark
        leading = core.is_leader
        while self._queue:
            p = self._queue[0]
            if leading and core.epoch == p.epoch:
                if hw <= p.last_offset:
                    return  # later proposals have higher offsets
                self._queue.popleft()
                resolve(p.future, p.last_offset)
                continue
            self._queue.popleft()
            if hw > p.last_offset and epoch_at(p.last_offset) == p.epoch:
                resolve(p.future, p.last_offset)  # committed before we noticed the change
            else:
                leader = core.leader_id if core.leader_id != node_id else None
                fail(p.future, NotLeaderError(leader, core.epoch))

    def fail_all(self, epoch: int) -> None:
        while self._queue:
            fail(self._queue.popleft().future, NotLeaderError(None, epoch))
