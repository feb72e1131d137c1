"""ControllerCores on the simulated quorum: the controller's failover behaviour, deterministically.

Each voter of a :class:`~quorum.sim.cluster.Cluster` gets a ControllerCore, wired as the real
driver (quorum/node/controller_node.py) wires it:

- commit listener: after every event, each live node's batches below its high watermark are fed,
  in order, to ``replay_committed`` (a restarted node gets a fresh core and replays from 0);
- activation: a node that leads epoch E is activated once it has replayed a committed batch of E
  (its LeaderChange: everything before is replayed); deactivated when it stops leading E, and
  never re-activated in an epoch it was deactivated in;
- requests: ``submit`` hands a request to the active controller; each of its Operation's batches
  is proposed through ``RaftCore.propose``; the reply resolves once the last batch is committed and
  replayed *and* the batch at that offset carries the proposing epoch, else NOT_CONTROLLER;
- timers: ``tick`` runs at ``next_deadline_ms`` (fencing, NoOps, activation records).

``after_replay`` hooks see every node's committed image after each batch it replays (the
failover test checks there that a transaction is never half visible).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from quorum.controller.core import NO_DEADLINE, ControllerCore, Operation
from quorum.controller.settings import ControllerSettings
from quorum.errors import Errors, SparkraftError
from quorum.raft.settings import RaftSettings
from quorum.sim.cluster import CLUSTER_ID, Cluster
from quorum.sim.network import NetworkFaults


@dataclass
class Pending:
    """A submitted request: ``done`` once answered with ``reply`` or ``error``."""

    request: object
    op: Optional[Operation] = None
    node_id: Optional[int] = None
    epoch: int = -1
    last_offset: int = -1  # offset of the last record of the last batch
    first_offset: int = -1
    done: bool = False
    reply: object = None
    error: Optional[SparkraftError] = None

    def result(self):
        if not self.done:
            raise AssertionError(f"{type(self.request).__name__} is not answered yet")
        if self.error is not None:
            raise self.error
        return self.reply


@dataclass
class _Ctl:
    core: ControllerCore
    incarnation: int
    next_offset: int = 0  # next committed offset to replay
    last_replayed_epoch: int = -1
    active_epoch: Optional[int] = None
    last_deactivated_epoch: int = -1
    tick_at: Optional[int] = None
    pending: list = field(default_factory=list)


class ControllerCluster(Cluster):
    def __init__(self, seed: int, voters: int = 3, faults: Optional[NetworkFaults] = None,
                 settings: RaftSettings = RaftSettings(),
                 controller_settings: ControllerSettings = ControllerSettings(),
                 trace: Optional[Callable[[str], None]] = None):
        self.controller_settings = controller_settings
        self.ctl: dict[int, _Ctl] = {}
        self.after_replay: list[Callable[[int, ControllerCore], None]] = []
        super().__init__(seed, voters, 0, faults, settings, trace)

    # -- wiring -----------------------------------------------------------------------------
    def _controller(self, node_id: int) -> Optional[_Ctl]:
        n = self.nodes[node_id]
        if not n.alive:
            old = self.ctl.pop(node_id, None)
            if old is not None:
                self._fail_all(old, None)
            return None
        c = self.ctl.get(node_id)
        if c is None or c.incarnation != n.incarnation:
            if c is not None:
                self._fail_all(c, None)
            c = self.ctl[node_id] = _Ctl(ControllerCore(node_id, CLUSTER_ID, self.controller_settings),
                                         n.incarnation)
        return c

    def step(self) -> bool:
        progressed = super().step()
        self.sync()
        return progressed

    def sync(self) -> None:
        """Feed committed batches, settle leadership, resolve replies, run due timers."""
        for node_id in self.voters:
            c = self._controller(node_id)
            if c is None:
                continue
            n = self.nodes[node_id]
            hw = n.core.high_watermark
            if c.next_offset < hw:
                for b in list(n.log.batches(c.next_offset, hw)):
                    if b.end_offset > hw:
                        break
                    c.core.replay_committed(b)
                    c.next_offset = b.end_offset
                    c.last_replayed_epoch = b.epoch
                    for hook in self.after_replay:
                        hook(node_id, c.core)
            self._check_leadership(node_id, c)
            self._resolve(node_id, c)
            if c.active_epoch is not None:
                deadline = c.core.next_deadline_ms()
                if deadline <= self.now:
                    for op in c.core.tick(self.now):
                        self._start(node_id, c, Pending(None), op)
                    deadline = c.core.next_deadline_ms()
                if deadline < NO_DEADLINE and (c.tick_at is None or c.tick_at <= self.now or deadline < c.tick_at):
                    c.tick_at = max(deadline, self.now + 1)
                    self.at(c.tick_at - self.now, lambda: None)  # wakes sync() at the deadline

    def _check_leadership(self, node_id: int, c: _Ctl) -> None:
        raft = self.nodes[node_id].core
        leading = raft.is_leader
        if c.active_epoch is not None and (not leading or raft.epoch != c.active_epoch):
            c.last_deactivated_epoch = c.active_epoch
            c.active_epoch = None
            c.core.deactivate()
            self._fail_all(c, raft.leader_id)
            self._log(f"controller {node_id} deactivated")
        if (c.active_epoch is None and leading and raft.epoch > c.last_deactivated_epoch
                and c.last_replayed_epoch == raft.epoch):
            c.core.activate(raft.epoch, self.now)
            c.active_epoch = raft.epoch
            self._log(f"controller {node_id} active in epoch {raft.epoch} at offset "
                      f"{c.core.last_committed_offset}")

    def _fail_all(self, c: _Ctl, leader_id: Optional[int]) -> None:
        for p in c.pending:
            if not p.done:
                p.done, p.error = True, SparkraftError(Errors.NOT_CONTROLLER, "leadership changed",
                                                       leader_id=leader_id)
        c.pending.clear()

    def _start(self, node_id: int, c: _Ctl, p: Pending, op: Operation) -> Pending:
        p.op, p.node_id, p.epoch = op, node_id, c.active_epoch
        raft = self.nodes[node_id].core
        if op.error is not None:  # answered at once; its audit entry, if any, proposed all the same
            for records in op.batches:
                raft.propose(records, self.now)
            p.done, p.error = True, op.error
            return p
        for i, records in enumerate(op.batches):
            last = raft.propose(records, self.now)
            if i == 0:
                p.first_offset = last - len(records) + 1
            p.last_offset = last
        c.pending.append(p)
        self._process(self.nodes[node_id])
        return p

    def _resolve(self, node_id: int, c: _Ctl) -> None:
        log = self.nodes[node_id].log
        while c.pending:
            p = c.pending[0]
            if p.last_offset >= c.next_offset:
                return  # FIFO: later ones wait too
            c.pending.pop(0)
            if p.op.batches:
                batch = next(iter(log.batches(p.last_offset, p.last_offset + 1)), None)
                if batch is None or batch.epoch != p.epoch:
                    p.done, p.error = True, SparkraftError(Errors.NOT_CONTROLLER, "not committed in "
                                                                                  "the proposing epoch")
                    continue
            p.done = True
            p.reply = p.op.reply_fn(p.first_offset) if p.op.reply_fn is not None else p.op.reply

    # -- clients ----------------------------------------------------------------------------
    def active(self) -> Optional[tuple[int, ControllerCore]]:
        for node_id, c in self.ctl.items():
            if c.active_epoch is not None and self.nodes[node_id].alive:
                return node_id, c.core
        return None

    def submit(self, request) -> Pending:
        """Hand a request to the active controller (NOT_CONTROLLER at once if there is none)."""
        self.sync()
        for node_id, c in self.ctl.items():
            if c.active_epoch is not None and self.nodes[node_id].alive:
                op = c.core.handle(request, self.now)
                return self._start(node_id, c, Pending(request), op)
        return Pending(request, done=True, error=SparkraftError(Errors.NOT_CONTROLLER, "no active controller"))

    def request(self, request, limit_ms: int = 10_000):
        """Submit and run until answered; the reply (or raise its error)."""
        p = self.submit(request)
        self.run_until(lambda: p.done, limit_ms)
        return p.result()

    def wait_active(self, limit_ms: int = 30_000) -> int:
        assert self.run_until(lambda: self.active() is not None, limit_ms), f"seed {self.seed}: no active controller"
        return self.active()[0]

    def controllers(self) -> dict[int, ControllerCore]:
        return {i: c.core for i, c in self.ctl.items() if self.nodes[i].alive}
