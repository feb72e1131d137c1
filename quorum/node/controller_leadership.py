"""When a ControllerNode's core is the active controller (controller_node.py's docstring,
Leadership): activated for epoch E only once this node leads E *and* has replayed a committed batch
written in E (its LeaderChange record: by then everything earlier leaders committed is replayed,
as Kafka's QuorumController waits for its own epoch start); deactivated as soon as Raft's status
shows another epoch or role, or a proposal fails with NotLeaderError; never re-activated in an
epoch it left. Deactivation fails every reply still pending with NOT_CONTROLLER. Touched only by
the holder of the node's turn; ``changed`` (a Condition) wakes whoever waits for a change."""
from __future__ import annotations

import logging
import threading
from typing import Optional

from quorum.controller.core import ControllerCore
from quorum.node.pending_replies import PendingReplies, not_controller

log = logging.getLogger("quorum.node.controller_node")


class Leadership:
    def __init__(self, node_id: int, raft, core: ControllerCore, pending: PendingReplies):
        self.node_id = node_id
        self.raft = raft  # the RaftNode: its status says who leads which epoch
        self.core = core
        self.pending = pending
        self.active_epoch: Optional[int] = None
        self.last_deactivated_epoch = -1
        self.last_replayed_epoch = -1  # the epoch of the newest committed batch replayed
        self.activations = 0  # times this node became the active controller (metrics)
        self.changed = threading.Condition()

    def check(self) -> None:
        """Activate or deactivate by Raft's status now."""
        st = self.raft.status()
        leading = st.state == "Leader"
        if self.active_epoch is not None and (not leading or st.epoch != self.active_epoch):
            self.deactivate(st.leader_id)
        if (self.active_epoch is None and leading and st.epoch > self.last_deactivated_epoch
                and self.last_replayed_epoch == st.epoch):
            self.core.activate(st.epoch, self.raft.now_ms())
            self.active_epoch = st.epoch
            self.activations += 1
            log.info("Controller %d is the active controller in epoch %d (metadata offset %d)", self.node_id,
                     st.epoch, self.core.last_committed_offset)
            with self.changed:
                self.changed.notify_all()

    def deactivate(self, leader_id: Optional[int]) -> None:
        epoch, self.active_epoch = self.active_epoch, None
        self.last_deactivated_epoch = max(self.last_deactivated_epoch, epoch)
        self.core.deactivate()
        log.info("Controller %d is no longer the active controller (epoch %d; leader now %s)", self.node_id,
                 epoch, "unknown" if leader_id is None else leader_id)
        self.pending.fail_all(not_controller(self.node_id, leader_id))
        with self.changed:
            self.changed.notify_all()

    def stop(self) -> None:
        """The node stops: no longer active (the core deactivated, as far as it still can be)."""
        if self.active_epoch is not None:
            self.active_epoch = None
            try:
                self.core.deactivate()
            except Exception:
                log.debug("deactivate failed during shutdown", exc_info=True)

    def wait_active(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.active_epoch is not None, timeout)
