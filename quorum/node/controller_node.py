"""ControllerNode: the driver that runs a sans-I/O ControllerCore on top of a RaftNode.

One node of the controller quorum = a :class:`~quorum.node.RaftNode` (the metadata log) plus a
:class:`~quorum.controller.core.ControllerCore` (requests -> records, committed records -> image),
wired by ONE controller event thread. It takes, from one inbound queue:

- committed batches, handed off by the RaftNode's event loop (``add_commit_hand_off``) ->
  ``core.replay_committed(batch)``, every batch in log order (control batches included);
- requests (from the wire, the gRPC service or in-process callers) -> ``core.handle(request, now)``; the
  Operation's batches are proposed in order, one ``RaftNode.propose`` per inner list;
- proposal outcomes (``propose`` futures' done-callbacks post them back to the queue);
- read calls, run against the core's replayed state on this thread;

and between items it watches leadership and runs ``core.tick(now)`` when its deadline has come.

Quick items on the event loop. The core is touched only by whoever holds ``_turn``: the controller
thread, or the RaftNode's event-loop thread for an item that is quick and arrives there while the
controller thread is idle and its queue is empty (so items are still handled in the order they
came). Quick: a write the registry calls quick (a config, a topic of a few partitions: its work is
bounded by a few records), committed batches the core replays quickly (its own, or a few records
of types that change one entry), and a proposal's outcome. A single write then crosses no thread
at all: the loop reads it, the core turns it into records, Raft appends and commits them, the core
replays them and the loop answers, where the controller thread cost four hand-offs (about as much
as the write's own work). Anything that may walk many partitions stays on the controller thread,
so Raft's loop never stalls behind it; when the controller thread is busy (a fencing at 2M), quick
items queue behind its work as before.

Leadership (controller_leadership.py). The core is activated for epoch E only once this node leads
E *and* it has replayed a committed batch written in E, and deactivated as soon as that stops being
true; never re-activated in an epoch it was deactivated in.

Replies (pending_replies.py). A request's reply is given once its LAST batch is committed *and*
replayed here (a read here right after a write sees it), in the order requests were handled, so an
Operation without records ("topic already exists") never talks about uncommitted state.
``Operation.reply_fn`` builds the reply from the committed offset of the first record (a broker's
epoch is its registration's offset). ``Operation.error`` is answered at once (its audit entry, if
any, proposed without waiting). When leadership is lost every pending request fails (its records
may still be committed by the new leader: clients retry, as with Kafka).
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from typing import Any, Callable, Optional

from quorum.controller import registry
from quorum.controller.core import ControllerCore
from quorum.controller.health import cluster_health
from quorum.controller.operation import Operation
from quorum.errors import ControllerNotRunningError, Errors, NotLeaderError, SparkraftError
from quorum.log.batch import Batch
from quorum.migration.driver import MigrationDriver
from quorum.node import controller_extras, controller_reads
from quorum.node.controller_events import Call, Check, Committed, Proposed, Request, SnapshotInstalled, Stop
from quorum.node.controller_leadership import Leadership
from quorum.node.listeners import SnapshotLoad
from quorum.node.pending_replies import Pending, PendingReplies, not_controller
from quorum.node.raft_node import RaftNode
from quorum.node.snapshot_policy import SnapshotPolicy

log = logging.getLogger(__name__)

LEADERSHIP_POLL_S = 0.05  # how often the loop looks at the RaftNode's status when nothing arrives
DEFAULT_TIMEOUT_S = 30.0


class ControllerNode:
    def __init__(self, raft: RaftNode, core: ControllerCore):
        self.raft = raft
        self.core = core
        core.voters_of = lambda: raft.voters.keys()  # whose registrations a feature upgrade checks
        self.node_id = raft.node_id
        # Appended by any thread; taken only by the holder of ``_turn`` (the order of handling).
        self._inbox: collections.deque = collections.deque()
        self._work = threading.Event()  # set when something was appended: wakes the controller thread
        self._turn = threading.Lock()  # held by whichever thread touches the core
        self._wake_at_ms = 0  # when the controller thread wakes next on its own (its next timer)
        self._pending = PendingReplies(self.node_id)
        self._thread: Optional[threading.Thread] = None
        self._running = False
        self._stopped = threading.Event()
        self.fatal_error: Optional[BaseException] = None
        self.replay_errors = 0  # committed batches the core could not replay (logged)
        self.busy_s = 0.0  # seconds either thread spent handling the core's items (metrics: its idle ratio)
        self._started_at: Optional[float] = None
        self.loaded = False  # replayed what the log held at start (see _follow_security)
        self._replay_to_load = 0
        self.leadership = Leadership(self.node_id, raft, core, self._pending)  # when this core is active
        self.snapshots = SnapshotPolicy(raft, core)
        self.security = raft.security
        self.migration: Optional[MigrationDriver] = None  # set by from_config on a migrating quorum
        self.refusal_reports = None  # set by controller_node(): refusals answered here, for the audit trail

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        return self.raft.port

    def start(self, check_cluster_id: bool = True) -> "ControllerNode":
        """Load the newest snapshot, start the controller loop, then Raft (the commit listener sees
        the log from its start; batches the snapshot holds are skipped)."""
        if self._thread is not None:
            raise RuntimeError("a ControllerNode starts once")
        self.snapshots.load()
        self._replay_to_load = self.raft.status().log_end_offset
        self._follow_security()
        self._running = True
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"controller-{self.node_id}-loop", daemon=True)
        self._thread.start()
        self.raft.add_commit_hand_off(self._hand_off)
        self.raft.start(check_cluster_id)
        if self.migration is not None:
            self.migration.start()
        return self

    def shutdown(self, graceful: bool = True) -> None:
        """Stop the controller loop (pending requests fail with NOT_CONTROLLER), then the RaftNode."""
        if self.migration is not None:
            self.migration.stop()
        if self._thread is not None and self._running:
            self._post(Stop())
            self._thread.join(10)
        self._running = False
        self.raft.shutdown(graceful=graceful)
        self.snapshots.close()
        self._stopped.set()

    def wait_stopped(self, timeout: Optional[float] = None) -> bool:
        """True once the node stopped: shut down, or its Raft or controller loop died (``fatal_error``)."""
        if self.raft.wait_stopped(timeout):
            self.fatal_error = self.fatal_error or self.raft.fatal_error
            return True
        return self._stopped.is_set()

    @property
    def idle_s(self) -> float:
        """Seconds since start that no thread spent on the core's items (metrics: the idle ratio)."""
        if self._started_at is None:
            return 0.0
        return max(0.0, time.monotonic() - self._started_at - self.busy_s)

    @property
    def running(self) -> bool:
        """The controller loop accepts work (started and not stopped)."""
        return self._running

    @property
    def is_active(self) -> bool:
        """This node is the active controller (as of the controller loop's last round)."""
        return self.leadership.active_epoch is not None

    @property
    def active_epoch(self) -> Optional[int]:
        """The epoch this node is the active controller of, or None."""
        return self.leadership.active_epoch

    @property
    def activations(self) -> int:
        """Times this node became the active controller (metrics)."""
        return self.leadership.activations

    def wait_active(self, timeout: float) -> bool:  # False on timeout
        return self.leadership.wait_active(timeout)

    def leader_id(self) -> Optional[int]:
        return self.raft.status().leader_id

    # -- the rest of what the transports use (quorum/rpc/ports.py, ControllerPort)
    def hold_client_slot(self, wire: bool) -> Callable[[], None]:
        """A slot for a write waiting for its commit (the wire's own pool, or gRPC's); SparkraftError
        REQUEST_TIMED_OUT when none is free."""
        return (self.raft.wire_slots if wire else self.raft.client_slots).hold()

    def last_committed_offset(self) -> int:
        return self.core.last_committed_offset

    def endpoint_of(self, node_id: int) -> str:
        return self.raft.endpoint_of(node_id)

    def topic_name(self, topic_id: str) -> Optional[str]:
        """A live topic's name by id, or None; on the controller thread (an authorization check)."""
        topic = self.core.image.topics.topic(topic_id)
        return topic.name if topic is not None else None

    # ------------------------------------------------------------------ the API (any thread)
    def submit(self, request, check: Optional[Check] = None, context=None) -> concurrent.futures.Future:
        """Hand a write request to the core; the future resolves with its reply once committed, or
        fails with SparkraftError (NOT_CONTROLLER with ``details['leader_id']``, or the core's error).
        ``check`` (authorization) runs on the controller thread once this node is known to be the
        active controller, against the ACLs of everything it has replayed; its error refuses the request.
        ``context``: who sent it, for the audit trail (an AuditContext; None: this controller's own)."""
        around = registry.row_of(request).around
        if around is not None:
            answered = getattr(controller_extras, around)(self, request, check)
            if answered is not None:
                return answered
        future: concurrent.futures.Future = concurrent.futures.Future()
        if not self._running:
            future.set_exception(not_controller(self.node_id, self.leader_id()))
        else:
            # Stamped on arrival: a heartbeat that waits behind a long operation still counts from
            # when the broker sent it, so the wait cannot expire its session.
            self._quickly_or_post(Request(request, future, self.raft.now_ms(), check, context),
                                  lambda: self.core.handles_quickly(request))
        return future

    def call(self, fn: Callable[[Any], Any]) -> concurrent.futures.Future:
        """Run ``fn(core)`` on the controller thread (for reads of the replayed state)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if not self._running:
            future.set_exception(ControllerNotRunningError(f"controller {self.node_id} is not running"))
        else:
            self._post(Call(fn, future))
        return future

    def health(self) -> concurrent.futures.Future:
        """The cluster's counts and brokers' states for the metrics (quorum/controller/health.py)."""
        return self.call(lambda core: cluster_health(core, self.raft.now_ms()))

    def read_async(self, request) -> concurrent.futures.Future:
        """Answer a read request from this node's replayed metadata (controller_reads.py): any
        controller answers reads, from what it has committed and replayed."""
        return controller_reads.answer(self, request)

    def read(self, request, timeout: Optional[float] = DEFAULT_TIMEOUT_S):
        return self.read_async(request).result(timeout)

    def request(self, request, timeout: Optional[float] = DEFAULT_TIMEOUT_S):
        """Blocking ``submit`` (or ``read`` for a read request)."""
        if registry.is_read(request):
            return self.read(request, timeout)
        return self.submit(request).result(timeout)

    # ------------------------------------------------------------------ commits (from Raft's event loop)
    def _hand_off(self, delivery, done: Callable[[], None]) -> None:
        """Committed batches (or the snapshot that replaced them), straight from Raft's event loop:
        replayed there if quick, else into this loop's queue (the reply to a write waits on this,
        so no thread sits between)."""
        if isinstance(delivery, SnapshotLoad):
            self._post(SnapshotInstalled(delivery, done))
            return
        self._quickly_or_post(Committed(delivery, done), lambda: self.core.replays_quickly(delivery))

    # ------------------------------------------------------------------ who handles an item
    def _post(self, item) -> None:
        """Queue ``item`` for the controller thread (any thread)."""
        self._inbox.append(item)
        self._work.set()

    def _quickly_or_post(self, item, quick: Callable[[], bool]) -> None:
        """Handle ``item`` here and now if this is the event loop's thread, the controller thread
        is idle with nothing queued and not due for its own round (its timers and leadership
        checks: a stream of quick writes must not keep taking the turn from it), and ``quick()``
        (asked under the turn) says it is small; else queue it for the controller thread. Never
        waits for the turn: the event loop must not block."""
        if not self._handled_quickly(item, quick):
            self._post(item)

    def _handled_quickly(self, item, quick: Callable[[], bool]) -> bool:
        if not self.raft.in_loop() or not self._turn.acquire(blocking=False):
            return False
        try:
            if not self._running or self._inbox or self.raft.now_ms() >= self._wake_at_ms or not quick():
                return False
            started = time.monotonic()
            try:
                self.leadership.check()
                _HANDLERS[type(item)](self, item)
            except BaseException as e:  # as on the controller thread: this controller stops
                self._stops_on(e)
                self._post(Stop())  # the controller thread fails what waits, and ends
                return True
            if self.core.next_deadline_ms() < self._wake_at_ms:
                self._work.set()  # a timer earlier than the controller thread's next wake-up
            self.busy_s += time.monotonic() - started
            return True
        finally:
            self._turn.release()

    # ------------------------------------------------------------------ the event loop
    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:
            self._stops_on(e)
        finally:
            with self._turn:
                self._running = False
                self._fail_everything()
            self._stopped.set()

    def _stops_on(self, error: BaseException) -> None:
        self.fatal_error = error
        log.error("Controller %d stops on an unexpected error", self.node_id, exc_info=(type(error), error,
                                                                                     error.__traceback__))

    def _loop(self) -> None:
        """Rounds of work, each under the turn, then a wait for more or for the next timer."""
        while True:
            self._work.clear()  # before the round: what is appended during it wakes the next one
            with self._turn:
                started = time.monotonic()
                wait_s = self._round()
                self.busy_s += time.monotonic() - started
            if wait_s is None:
                return
            self._work.wait(max(wait_s, 0.001))

    def _round(self) -> Optional[float]:
        """Queued items first, then timers; the seconds until the next timer (None: stopped).
        Handling everything queued before a timer fires matters at scale: fencing one broker of
        a 2M-partition cluster takes seconds, and the heartbeats queued meanwhile must reach their
        sessions before the next expiry check (the core fences at most one broker per tick for the
        same reason)."""
        inbox = self._inbox
        self.leadership.check()
        if not self.loaded:  # the leader's word may come after the last delivery it needs
            self._follow_security()
        while inbox:
            item = inbox.popleft()
            if isinstance(item, Stop):
                return None
            _HANDLERS[type(item)](self, item)
        self.leadership.check()
        wait_s = LEADERSHIP_POLL_S
        if self.leadership.active_epoch is not None:
            now = self.raft.now_ms()
            deadline = self.core.next_deadline_ms()
            if deadline is not None and deadline <= now:
                started = time.monotonic()
                for op in self.core.tick(now):
                    self._start(op, None, started, started)
                deadline = self.core.next_deadline_ms()
            if deadline is not None:
                wait_s = max(0.0, min(wait_s, (deadline - self.raft.now_ms()) / 1000))
        self._wake_at_ms = self.raft.now_ms() + int(wait_s * 1000)
        return wait_s

    def _on_committed(self, item: Committed) -> None:
        try:
            for batch in item.batches:
                self._replay(batch)
            self._follow_security()
        finally:
            item.done()
        self.leadership.check()
        self._settle()

    def _on_snapshot_installed(self, item: SnapshotInstalled) -> None:
        try:
            self.snapshots.installed(item.load)
            self._follow_security()
        finally:
            item.done()

    def _on_request(self, item: Request) -> None:
        if item.future.set_running_or_notify_cancel():
            self._handle_request(item.request, item.future, item.arrived_ms, item.check, item.context)

    def _on_proposed(self, item: Proposed) -> None:
        self._proposed(item.pending, item.index, item.proposal)

    def _on_call(self, item: Call) -> None:
        if item.future.set_running_or_notify_cancel():
            try:
                item.future.set_result(item.fn(self.core))
            except BaseException as e:
                item.future.set_exception(e)

    def _replay(self, batch: Batch) -> None:
        try:
            self.core.replay_committed(batch)
            self.snapshots.replayed(batch)
        except Exception as e:
            # Not metadata (the Raft Append RPC takes opaque records, for benchmarks and tests) or a
            # record this version cannot apply: Kafka's controller would stop here; we report it and
            # go on, so one foreign batch does not take the quorum's controllers down.
            self.replay_errors += 1
            if self.replay_errors == 1 or self.replay_errors % 1000 == 0:  # no log flood from a raw-append load
                log.error("Controller %d cannot replay the batch at offsets %d..%d (epoch %d): %s "
                          "(%d such batches so far)", self.node_id, batch.base_offset, batch.last_offset,
                          batch.epoch, e, self.replay_errors)
        self.leadership.last_replayed_epoch = batch.epoch

    def _follow_security(self) -> None:
        """The authorizer and the SCRAM logins take the committed ACLs and credentials after each
        delivery (all of it at once), so every controller decides by the committed log.

        Until the node is ``loaded`` it checks no login, and refuses no read by its ACLs, which may
        lack a grant. Loaded, as Kafka's metadata loader waits to publish: a leader has told it a
        high watermark since it started (it heard from a quorum: a node alone, or one whose log
        was empty or behind when it stopped, knows nothing of what was committed meanwhile), and it
        has replayed up to that first high watermark and up to what its own log held at start
        (less what Raft truncated since)."""
        st = self.raft.status()
        self._replay_to_load = min(self._replay_to_load, st.log_end_offset)
        told = st.first_leader_high_watermark
        self.loaded = self.loaded or (told is not None and
                                      self.core.last_committed_offset + 1 >= max(self._replay_to_load, told))
        if self.security.authorizer is not None:
            self.security.authorizer.follow(self.core.image.acls)
        if self.security.scram is not None:
            self.security.scram.follow(self.core.image.scram, loaded=self.loaded)

    def _handle_request(self, request, future: concurrent.futures.Future, arrived_ms: int,
                        check: Optional[Check] = None, context=None) -> None:
        if self.leadership.active_epoch is None:
            st = self.raft.status()
            future.set_exception(not_controller(self.node_id, st.leader_id,
                                                activating=st.state == "Leader"))
            return
        denied = check() if check is not None else None
        if denied is not None:
            self._refused(self.core.refused(registry.row_of(request), request, denied, arrived_ms, context), future)
            return
        started = time.monotonic()
        arrived = started - max(0, self.raft.now_ms() - arrived_ms) / 1000
        try:
            op = self.core.handle(request, arrived_ms, context)
        except SparkraftError as e:
            future.set_exception(e)
            return
        except Exception as e:
            log.warning("Controller %d: %s failed", self.node_id, type(request).__name__, exc_info=True)
            future.set_exception(SparkraftError(Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}"))
            return
        if op.error is not None:
            self._refused(op, future)
            return
        self._start(op, future, arrived, started)

    def _refused(self, op, future: concurrent.futures.Future) -> None:
        """Answer a refusal at once; its audit entry, if any, is proposed without waiting on it."""
        if op.batches:
            self._start(Operation(op.batches, name=op.name), None)
        future.set_exception(op.error)

    def _start(self, op, future: Optional[concurrent.futures.Future], arrived: Optional[float] = None,
               started: Optional[float] = None) -> None:
        """Propose an Operation's batches in order; its reply waits in FIFO order for their commit.
        ``arrived``, ``started``: when its request was queued and taken up (time.monotonic()), for
        the slow-operation log."""
        pending = self._pending.add(op, future, self.leadership.active_epoch, arrived, started)
        for index, records in enumerate(op.batches):
            proposal = self.raft.propose(records)
            proposal.add_done_callback(lambda f, p=pending, i=index: self._proposal_done(Proposed(p, i, f)))
        self._settle()

    def _proposal_done(self, item: Proposed) -> None:
        """A proposal's outcome (on the event loop, where Raft settles proposals): quick."""
        self._quickly_or_post(item, _always)

    def _proposed(self, pending: Pending, index: int, proposal: concurrent.futures.Future) -> None:
        if pending.failed:
            return
        error = proposal.exception()
        if error is not None:
            leader = error.leader_id if isinstance(error, NotLeaderError) else self.leader_id()
            if self.leadership.active_epoch is not None and self.leadership.active_epoch == pending.epoch:
                self.leadership.deactivate(leader)  # fails every pending request, this one included
            else:
                pending.fail(not_controller(self.node_id, leader))
            return
        pending.batch_committed(index, proposal.result())
        self._settle()

    def _settle(self) -> None:
        self._pending.settle(self.core.last_committed_offset)

    def _fail_everything(self) -> None:
        error = not_controller(self.node_id, None)
        self.leadership.stop()
        self._pending.fail_all(error)
        while self._inbox:
            item = self._inbox.popleft()
            if isinstance(item, Request) and not item.future.done():
                item.future.set_exception(error)
            elif isinstance(item, Call) and not item.future.done():
                item.future.set_exception(ControllerNotRunningError(f"controller {self.node_id} stopped"))
            elif isinstance(item, (Committed, SnapshotInstalled)):
                item.done()
        with self.leadership.changed:
            self.leadership.changed.notify_all()


def _always() -> bool:
    return True


_HANDLERS: dict[type, Callable[[ControllerNode, Any], None]] = {
    Committed: ControllerNode._on_committed,
    SnapshotInstalled: ControllerNode._on_snapshot_installed,
    Request: ControllerNode._on_request,
    Proposed: ControllerNode._on_proposed,
    Call: ControllerNode._on_call,
}
