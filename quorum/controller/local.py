"""LocalController: a ControllerCore whose proposals commit at once, in memory.

For unit tests and benchmarks of the controller logic without a quorum: it plays the driver's part
(activate after a LeaderChange, propose each Operation's batches in order, replay them as committed,
answer with the reply) with a log that is a list of batches.
"""
from __future__ import annotations

from typing import Optional

from quorum.controller.core import ControllerCore, Operation
from quorum.controller.settings import ControllerSettings
from quorum.errors import SparkraftError
from quorum.log import control_records
from quorum.log.batch import Batch

CLUSTER_ID = "Ab3dEfGhIjKlMnOpQrStUv"


class LocalController:
    def __init__(self, settings: ControllerSettings = ControllerSettings(), node_id: int = 1,
                 cluster_id: str = CLUSTER_ID, epoch: int = 1, now_ms: int = 0, activate: bool = True):
        self.core = ControllerCore(node_id, cluster_id, settings)
        self.cluster_id = cluster_id
        self.epoch = epoch
        self.now = now_ms
        self.log: list[Batch] = []
        self.end_offset = 0
        self.hold = False  # True: proposals wait in ``uncommitted`` until ``commit()``
        self.uncommitted: list[Batch] = []
        if activate:
            self.elect(epoch)

    def elect(self, epoch: int) -> None:
        """A new leader epoch: append its LeaderChange, commit, activate."""
        self.core.deactivate()
        self.epoch = epoch
        self.uncommitted.clear()
        self._append([control_records.leader_change(self.core.node_id, [self.core.node_id], [self.core.node_id])],
                     control=True)
        self.commit()
        self.core.activate(epoch, self.now)
        for op in self.core.tick(self.now):  # activation records
            self.propose(op)

    def _append(self, records, control: bool = False) -> Batch:
        b = Batch(self.end_offset, self.epoch, self.now, tuple(records), control)
        self.end_offset = b.end_offset
        self.uncommitted.append(b)
        return b

    def propose(self, op: Operation) -> Optional[int]:
        """Append an op's batches; the first offset (None if no batches)."""
        first = None
        for records in op.batches:
            b = self._append(records)
            first = b.base_offset if first is None else first
        if not self.hold:
            self.commit()
        return first

    def commit(self) -> None:
        for b in self.uncommitted:
            self.log.append(b)
            self.core.replay_committed(b)
        self.uncommitted.clear()

    def request(self, request, now_ms: Optional[int] = None):
        """Handle, propose, commit; the reply (or raise the operation's error)."""
        if now_ms is not None:
            self.now = now_ms
        op = self.core.handle(request, self.now)
        if op.error is not None:
            self.propose(op)  # a refusal's audit entry, if any
            raise op.error
        first = self.propose(op)
        return op.reply_fn(first) if op.reply_fn is not None else op.reply

    def tick(self, now_ms: int) -> list[Operation]:
        self.now = now_ms
        ops = self.core.tick(now_ms)
        for op in ops:
            self.propose(op)
        return ops

    def expect_error(self, request, now_ms: Optional[int] = None) -> SparkraftError:
        try:
            self.request(request, now_ms)
        except SparkraftError as e:
            return e
        raise AssertionError(f"{type(request).__name__} did not fail")
