"""The event-loop half of RaftNode (raft_node.py): what runs on the node's one loop thread.

A round drains the inbound items (inbox.py) through ``_HANDLERS``, a table checked complete against
the inbox's item types, feeds the core, carries out its Readies (quorum/raft/ready.py), settles
proposals, feeds the commit listeners and publishes the node's status; a timer wakes the next
round at the core's next deadline. RaftNode builds the state these methods use (its ``__init__``)
and offers the thread-safe API that puts items in the inbox.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Optional

from quorum.errors import Errors, NodeNotRunningError, SparkraftError
from quorum.node.cluster_probe import foreign_cluster_error, majority_elsewhere
from quorum.node.inbox import (
    AWAITED,
    Call,
    Delivered,
    Listen,
    PeerRequest,
    Propose,
    Resign,
    SnapshotWritten,
    Stop,
)
from quorum.node.listeners import CommitListener
from quorum.node.proposals import fail, resolve
from quorum.node.ready_io import NodeReadyIO
from quorum.node.retention import apply_retention
from quorum.node.status import NodeStatus
from quorum.raft.ready import process_readies
from quorum.rpc.peer_client import PeerAnswer, PeerNoAnswer

log = logging.getLogger("quorum.node.raft_node")  # one logger for the node, whichever half logs

MAX_ITEMS_PER_ROUND = 512  # inbound items handled before the core's outputs are carried out
MAX_IDLE_WAIT_MS = 1000


class RaftRounds:
    """RaftNode's loop-thread methods (a base class of RaftNode, which holds their state)."""

    # ------------------------------------------------------------------ the event loop
    def _put(self, item) -> None:
        """Hand ``item`` to the event loop (any thread). A round already scheduled will see it, so
        only the first item after a round began schedules another (one wake-up, not one per item)."""
        self._inbox.append(item)
        self._schedule_round()

    def _round(self) -> None:
        """One round: the items that arrived, then the core's outputs until it has none, then the
        timer for its next deadline."""
        self._round_pending = False
        if not self._started:
            return  # what arrived before start waits for the first round (start() schedules it)
        if self._loop_ended.is_set():
            self._fail_everything(NodeNotRunningError(f"node {self.node_id} is not running"))
            return
        try:
            if self._handle_items():
                return
            core = self.core
            self._process_ready()
            wait_ms = core.tick(self.now_ms())
            while core.has_ready():
                self._process_ready()
                wait_ms = core.tick(self.now_ms())
        except BaseException as e:
            self._end(e)
            return
        if self._inbox:
            self._schedule_round()
            return
        if any(lst.next_offset < core.high_watermark and lst.wants_more for lst in self._listeners):
            wait_ms = 0
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.loop.call_later(min(max(wait_ms, 1), MAX_IDLE_WAIT_MS) / 1000,
                                                 self._schedule_round)

    def _schedule_round(self) -> None:
        """A round on the loop soon, unless one is scheduled already (any thread)."""
        if self._round_pending:
            return
        self._round_pending = True
        try:
            self._loop.call_soon(self._round)
        except RuntimeError:  # the loop is closed: the node has shut down
            self._fail_everything(NodeNotRunningError(f"node {self.node_id} is not running"))

    def _handle_items(self) -> bool:
        """Handle up to MAX_ITEMS_PER_ROUND inbound items; True if one was Stop (the loop ended)."""
        inbox = self._inbox
        for _ in range(MAX_ITEMS_PER_ROUND):
            if not inbox:
                break
            item = inbox.popleft()
            if isinstance(item, Stop):
                self._process_ready()
                self._end(None)
                return True
            _HANDLERS[type(item)](self, item, self.now_ms())
        return False

    def _end(self, error: Optional[BaseException]) -> None:
        """No more rounds: after Stop (``error`` None) or a fatal error."""
        if error is not None:
            self.fatal_error = error
            if isinstance(error, SparkraftError):
                log.error("Node %d stops: %s", self.node_id, error)
            else:
                log.error("Node %d stops on an unexpected error", self.node_id,
                          exc_info=(type(error), error, error.__traceback__))
        if self._timer is not None:
            self._timer.cancel()
        self._running = False
        self._loop_ended.set()
        self._fail_everything(NodeNotRunningError(f"node {self.node_id} stopped"))
        self._stopped.set()
        self._status.wake()

    def _on_peer_answer(self, item: PeerAnswer, now: int) -> None:
        if item.msg.error is Errors.INCONSISTENT_CLUSTER_ID:
            # Do not let a node of another cluster move our epoch: treat it as no answer.
            self._note_cluster_rejection(item.src)
            self.core.request_failed(item.src, item.corr, now)
        else:
            self._cluster_rejections.pop(item.src, None)
            leader = getattr(item.msg, "leader_id", None)
            if item.leader_endpoint is not None and leader is not None and leader != self.node_id \
                    and self.peers.address_of(leader) is None:
                self.peers.set_addresses({leader: item.leader_endpoint})  # an observer learns where to fetch
            self.core.receive(item.src, item.corr, item.msg, now)

    def _on_peer_no_answer(self, item: PeerNoAnswer, now: int) -> None:
        self.core.request_failed(item.dest, item.corr, now)

    def _on_peer_request(self, item: PeerRequest, now: int) -> None:
        if item.future.set_running_or_notify_cancel():
            self._waiting[item.corr] = item.future
            self.core.receive(item.src, item.corr, item.msg, now)

    def _on_propose(self, item: Propose, now: int) -> None:
        if not item.future.set_running_or_notify_cancel():
            return
        try:
            last = self.core.propose(item.records, now)
        except Exception as e:
            item.future.set_exception(e)
            return
        self._proposals.accepted(self.core.epoch, last, item.future)

    def _on_call(self, item: Call, now: int) -> None:
        if item.future.set_running_or_notify_cancel():
            try:
                item.future.set_result(item.fn(self.core, now))
            except Exception as e:
                item.future.set_exception(e)

    def _on_delivered(self, item: Delivered, now: int) -> None:
        item.listener.pending -= 1

    def _on_listen(self, item: Listen, now: int) -> None:
        lst = CommitListener(self.node_id, item.fn, len(self._listeners), self.log.start_offset, item.on_snapshot,
                             delivered=self._listener_done, hand_off=item.hand_off)
        self._listeners.append(lst)
        if lst.thread is not None:
            lst.thread.start()
        item.done.set()

    def _listener_done(self, listener: CommitListener) -> None:
        """A listener is through with a delivery (any thread). On the event loop itself (a delivery
        handled where it was handed off: the controller's quick replays) the count drops at once,
        with a round only if more is committed than was handed over; from another thread, through
        the inbox. (A round for each quick commit cost every node a round of its loop a write.)"""
        if self._loop.in_loop():
            listener.pending -= 1
            if listener.next_offset < self.core.high_watermark:
                self._schedule_round()
        else:
            self._put(Delivered(listener))

    def _on_snapshot_written(self, item: SnapshotWritten, now: int) -> None:
        apply_retention(self.node_id, self.core, self.log, self.snapshot_store, self.retention, now,
                        self.log_hold())

    def _on_resign(self, item: Resign, now: int) -> None:
        core = self.core
        if core.is_leader:
            log.info("Node %d resigns as leader of epoch %d", self.node_id, core.epoch)
            core.resign(now)
            self._resign_outcome = item.outcome
        else:
            resolve(item.outcome, "not leader")

    # ------------------------------------------------------------------ after each round
    def _process_ready(self) -> None:
        process_readies(self.core, NodeReadyIO(self))
        self._after_ready()

    def _follow_voter_set(self) -> None:
        """A dynamic quorum's peers are the voters of the core's latest voter set (VoterAddresses)."""
        addresses = self.addresses.follow(self.core.voter_history)
        if addresses is None:
            return
        self.peers.set_addresses({i: a for i, a in addresses.items() if i != self.node_id})
        log.info("Node %d: the voters are now %s", self.node_id, self.addresses.describe_set())

    def _after_ready(self) -> None:
        core = self.core
        self._follow_voter_set()
        if self.self_membership is not None:
            leader = core.leader_id
            self.self_membership.poll(core, None if leader is None else self.peers.address_of(leader),
                                      self.cluster_id)
        if self._proposals:
            self._proposals.settle(core, self.node_id, self._epoch_at)
        hw = core.high_watermark
        for lst in self._listeners:
            lst.feed(self.log, self.snapshot_store, hw)
        if self._resign_outcome is not None:
            if core.resignation_acknowledged:
                resolve(self._resign_outcome, "acknowledged by every voter")
            elif core.state_name != "Resigned":
                resolve(self._resign_outcome, f"over: now {core.state_name} in epoch {core.epoch}")
            if self._resign_outcome.done():
                self._resign_outcome = None
        self._publish_status()
        if self._waiting and time.monotonic() - self._last_sweep > 5:
            self._last_sweep = time.monotonic()
            for corr in [c for c, f in self._waiting.items() if f.done()]:
                del self._waiting[corr]

    def _epoch_at(self, offset: int) -> Optional[int]:
        for b in self.log.batches(offset, offset + 1):
            return b.epoch
        return None

    def _publish_status(self) -> None:
        core = self.core
        self._status.publish(NodeStatus(self.node_id, core.state_name, core.epoch, core.leader_id,
                                        core.high_watermark, self.log.end_offset, self.log.start_offset,
                                        core.snapshots_installed, core.first_leader_high_watermark))

    def _note_cluster_rejection(self, src: int) -> None:
        if src not in self.voters or src in self._cluster_rejections:
            return
        self._cluster_rejections[src] = None
        log.warning("Node %d: node %d rejects our cluster id %s", self.node_id, src, self.cluster_id)
        if majority_elsewhere(self.voters, self._cluster_rejections):
            raise foreign_cluster_error(self.cluster_id, {v: "" for v in self._cluster_rejections}, self.log_dir)

    def _fail_everything(self, error: Exception) -> None:
        """The loop is gone: fail whatever still waits on it."""
        while True:
            try:
                item = self._inbox.popleft()
            except IndexError:
                break
            if isinstance(item, AWAITED):
                fail(item.outcome if isinstance(item, Resign) else item.future, error)
            elif isinstance(item, Listen):
                item.done.set()
        for future in self._waiting.values():
            fail(future, error)
        self._waiting.clear()
        self._proposals.fail_all(self._status.current.epoch)
        if self._resign_outcome is not None:
            fail(self._resign_outcome, error)


_HANDLERS: dict[type, Callable[[RaftRounds, object, int], None]] = {
    PeerAnswer: RaftRounds._on_peer_answer,
    PeerNoAnswer: RaftRounds._on_peer_no_answer,
    PeerRequest: RaftRounds._on_peer_request,
    Propose: RaftRounds._on_propose,
    Call: RaftRounds._on_call,
    Delivered: RaftRounds._on_delivered,
    Listen: RaftRounds._on_listen,
    SnapshotWritten: RaftRounds._on_snapshot_written,
    Resign: RaftRounds._on_resign,
}
