"""A simulated cluster of RaftCores on virtual time, with invariants checked after every event.

Each node is a core, a :class:`MemoryLog` (its disk) and the last election state it
persisted. A crash forgets unflushed batches and every message in flight to or
from the node, except what a leader sent before flushing (``crash_before_flush``
crashes it in that window); a wipe forgets everything (a replaced disk). Writes come from a
client that proposes to whoever leads and remembers what was acknowledged.

Invariants (invariants.py) are checked after every event.
"""
from __future__ import annotations

import heapq
import itertools
import random
from typing import Callable, Optional

from quorum.errors import Errors
from quorum.log.api import OffsetAndEpoch
from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.log.voter_set import Endpoint, ReplicaKey, Voter, VoterSet, raft_state_records
from quorum.raft.core import RaftCore
from quorum.raft.membership import VoterChangeError
from quorum.raft.messages import Outbound, describe_message
from quorum.raft.ready import process_readies
from quorum.raft.settings import RaftSettings
from quorum.sim.invariants import Invariants, InvariantViolation, encode_snapshot
from quorum.sim.network import Network, NetworkFaults
from quorum.sim.nodes import Proposal, SimNode
from quorum.snapshot.memory_store import MemorySnapshotStore

SNAPSHOTS_KEPT = 2  # per node; the log start is the oldest one's end
MAX_DUE_AGAIN = 1000  # rounds in a row with a deadline still due before the simulation calls it a livelock


CLUSTER_ID = "sim-cluster-0000000000"
DEFAULT_TRACE: Optional[Callable[[str], None]] = None  # ``python -m quorum.sim --trace`` sets it


class _CrashedBeforeFlush(Exception):
    """The simulated leader crashed between sending a Ready's messages and flushing its log."""


class _SimReadyIO:
    """A Ready's side effects on a simulated node: the election state and the flush are instant,
    messages go on the simulated network, and a leader may crash between its send and its flush
    (``Cluster.crash_before_flush``)."""

    def __init__(self, cluster: "Cluster", node: SimNode):
        self.c, self.n = cluster, node

    def refused(self, peer: int, what: str) -> None:
        if peer not in self.c.byzantine:
            self.c.inv.fail(f"node {self.n.node_id} saw honest node {peer} break the protocol: {what}")

    def persist(self, state: ElectionState) -> None:
        if state.voted_id is not None and (state.epoch, state.voted_id) != (self.n.persisted.epoch,
                                                                             self.n.persisted.voted_id):
            self.c.inv.check_vote(self.n, state.voted_id)
        self.n.persisted = state

    def flush(self, after_send: bool) -> None:
        if after_send and self.c.rng.random() < self.c.crash_before_flush:
            self.c.crash(self.n.node_id)  # its messages are on the wire; its unflushed records are gone
            raise _CrashedBeforeFlush
        self.n.log.flush()

    def committed(self, high_watermark: int) -> None:
        # Acknowledged here, before the Ready's sends and a leader's flush after them (a crash may
        # come between): the invariants then check that this early is safe.
        self.c._maybe_ack(self.n)

    def send(self, out: Outbound, before_flush: bool) -> None:
        self.c._send(self.n, out, outlives_sender=before_flush)

    def now_ms(self) -> int:
        return self.c.now

    def advanced(self) -> None:
        self.c._maybe_snapshot(self.n)


class Cluster:
    def __init__(self, seed: int, voters: int = 3, observers: int = 0,
                 faults: Optional[NetworkFaults] = None, settings: RaftSettings = RaftSettings(),
                 trace: Optional[Callable[[str], None]] = None, snapshot_every: Optional[int] = None,
                 crash_before_flush: float = 0.0, dynamic: bool = False, spares: int = 0,
                 directory_ids: bool = False):
        self.seed = seed
        self.snapshot_every = snapshot_every  # committed records between a node's snapshots
        # Chance that a leader crashes after sending a Ready's messages and before flushing its log
        # (``Ready.flush_after_send``): what it sent is delivered, what it had not flushed is lost.
        self.crash_before_flush = crash_before_flush
        self.rng = random.Random(seed)
        self.now = 0
        self.settings = settings
        self.voters = list(range(1, voters + 1))  # the initial voters
        # A dynamic quorum (kraft.version 1, KIP-853): every node has a directory id; the initial
        # voters are formatted with them as --initial-controllers (a bootstrap snapshot holding the
        # voter set), spares and observers with --no-initial-controllers (they know no voters and
        # ask the controllers, controller.quorum.bootstrap.servers, for the leader). Spares are
        # controllers a scenario may add as voters.
        self.dynamic = dynamic
        self.spares = list(range(voters + 1, voters + 1 + spares))
        observer_ids = list(range(101, 101 + observers))
        self.nodes = {i: SimNode(i) for i in self.voters + self.spares + observer_ids}
        if dynamic or directory_ids:  # a static quorum with directory ids can be upgraded to kraft.version 1
            for n in self.nodes.values():
                n.directory_id = f"dir{n.node_id}.0"
        if dynamic:
            initial = VoterSet(Voter(ReplicaKey(i, self.nodes[i].directory_id)) for i in self.voters)
            for i in self.voters:
                self.nodes[i].snapshots.add(OffsetAndEpoch(0, 0), encode_snapshot(
                    [], raft_state_records(initial, kraft_version=1)))
        self.membership_results: dict[str, int] = {}  # "add NONE", "remove REQUEST_TIMED_OUT", ...
        self.net = Network(random.Random(self.rng.random()), faults or NetworkFaults())
        self.queue: list = []
        self._seq = itertools.count()
        self.inv = Invariants(self)
        # Nodes allowed to break the protocol (a Byzantine-ish peer's scenario); any other node
        # whose message a core refuses as a protocol violation is a bug the simulation reports.
        self.byzantine: set[int] = set()
        self.checked_leader_epochs: set[int] = set()
        self.pending: list[Proposal] = []
        self.trace = trace or DEFAULT_TRACE
        self._write_seq = itertools.count()
        self.events = 0
        for i in self.nodes:
            self.start(i)

    # -- node lifecycle ------------------------------------------------------------------
    def start(self, node_id: int) -> None:
        n = self.nodes[node_id]
        n.incarnation += 1
        latest = n.snapshots.latest()
        if latest is not None and latest.offset > n.log.end_offset:
            n.log.reset_to(latest)  # what a node does at open: the log restarts at its newest snapshot
        n.core = RaftCore(node_id, VoterSet() if self.dynamic else self.voters, CLUSTER_ID, n.log, n.persisted,
                          self.now, self.settings, random.Random(self.rng.random()), snapshots=n.snapshots,
                          directory_id=n.directory_id, bootstrap=self.voters + self.spares if self.dynamic else ())
        n.last_hw_seen = n.core.high_watermark
        n.installs_seen = 0
        n.next_tick = None
        self._process(n)
        self.inv.check()

    def crash(self, node_id: int) -> None:
        """Kill the process and lose whatever was not flushed."""
        n = self.nodes[node_id]
        n.core = None
        n.log.crash()
        n.snapshots.crash()
        self._log(f"crash {node_id}")

    def wipe(self, node_id: int) -> None:
        """Lose the whole disk (the node must be down); it comes back blank."""
        n = self.nodes[node_id]
        assert not n.alive
        n.log = MemoryLog()
        n.snapshots = MemorySnapshotStore()
        n.last_epoch_seen = 0
        if self.dynamic:  # formatted again with --no-initial-controllers: a new replica, an observer
            disk = int(n.directory_id.rsplit(".", 1)[1]) + 1
            n.directory_id = f"dir{node_id}.{disk}"
            n.persisted = ElectionState.empty()
        else:
            n.persisted = ElectionState(0, rejoining=True)  # what `storage format --rejoin` writes
        self._log(f"wipe {node_id}")

    # -- the event loop ------------------------------------------------------------------
    def _push(self, at: int, event: tuple) -> None:
        heapq.heappush(self.queue, (at, next(self._seq), event))

    def _process(self, n: SimNode) -> None:
        """Fire the node's due timers, carry out its Readies (quorum/raft/ready.py), schedule its next tick."""
        core = n.core
        core.tick(self.now)  # fire due timers first: they may append or send
        try:
            process_readies(core, _SimReadyIO(self, n))
        except _CrashedBeforeFlush:
            return
        at = self.now + core.tick(self.now)
        # Liveness: after its timers fired, a core's next deadline lies ahead. One that stays due
        # would spin a real node's loop without end (a deadline computed from state that never moves).
        n.due_again = n.due_again + 1 if at <= self.now else 0
        if n.due_again > MAX_DUE_AGAIN:
            raise InvariantViolation(f"seed {self.seed}: node {n.node_id} ({core.state_name}, epoch {core.epoch}) "
                                     f"has a deadline due at {self.now} ms after {MAX_DUE_AGAIN} rounds: a livelock")
        if n.next_tick is None or at < n.next_tick or n.next_tick <= self.now:
            n.next_tick = at
            self._push(at, ("tick", n.node_id, n.incarnation))

    def _maybe_snapshot(self, n: SimNode) -> None:
        """Every ``snapshot_every`` committed records a node snapshots its committed state, keeps the
        newest SNAPSHOTS_KEPT and moves its log start to the oldest one kept (deleting below it)."""
        if self.snapshot_every is None:
            return
        hw = n.core.high_watermark
        latest = n.snapshots.latest()
        base = latest.offset if latest is not None else 0
        if hw - base < self.snapshot_every:
            return
        records = self._snapshot_records_of(n, latest) + [self.inv.record_at(n, off, durable=False)
                                                          for off in range(base, hw)]
        sid = OffsetAndEpoch(hw, records[-1][0])
        n.snapshots.add(sid, encode_snapshot(records, n.core.snapshot_raft_records(hw)))
        ids = n.snapshots.ids()
        for old in ids[:-SNAPSHOTS_KEPT]:
            n.snapshots.delete(old)
        n.core.advance_log_start(n.snapshots.ids()[0], self.now)
        self._log(f"node {n.node_id} snapshot {sid}; log starts at {n.log.start_offset}")

    def _snapshot_records_of(self, n: SimNode, sid: Optional[OffsetAndEpoch]) -> list:
        return [] if sid is None else list(self.inv._snapshot_records(n.snapshots.snapshots[sid]))

    def _send(self, n: SimNode, out: Outbound, outlives_sender: bool = False) -> None:
        dst = self.nodes[out.dest]
        src_incarnation = None if outlives_sender else n.incarnation  # None: delivered even if it crashes
        for delay in self.net.deliveries():
            self._push(self.now + delay, ("deliver", n.node_id, src_incarnation, out.dest, dst.incarnation,
                                          out.corr, out.message))

    def step(self) -> bool:
        if not self.queue:
            return False
        at, _, ev = heapq.heappop(self.queue)
        self.now = max(self.now, at)
        self.events += 1
        if ev[0] == "tick":
            _, node_id, inc = ev
            n = self.nodes[node_id]
            if n.alive and n.incarnation == inc and n.next_tick == at:
                n.next_tick = None
                self._process(n)
        elif ev[0] == "deliver":
            _, src, src_inc, dst, dst_inc, corr, msg = ev
            n, s = self.nodes[dst], self.nodes[src]
            # A message dies with either end's process (as a TCP connection would).
            if n.alive and n.incarnation == dst_inc and src_inc in (None, s.incarnation) \
                    and self.net.connected(src, dst):
                self._log(f"{src}->{dst} {describe_message(msg)}")
                n.core.receive(src, corr, msg, self.now)
                self._process(n)
        elif ev[0] == "call":
            ev[1]()
        self.inv.check()
        return True

    def run_for(self, ms: int) -> None:
        end = self.now + ms
        while self.queue and self.queue[0][0] <= end:
            self.step()
        self.now = max(self.now, end)

    def at(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self._push(self.now + delay_ms, ("call", fn))

    def inject(self, src: int, dst: int, corr: int, msg) -> None:
        """Deliver ``msg`` to ``dst`` as if ``src`` had sent it (a Byzantine peer's forgery)."""
        for delay in self.net.deliveries():
            self._push(self.now + delay, ("deliver", src, None, dst, self.nodes[dst].incarnation, corr, msg))

    # -- clients -------------------------------------------------------------------------
    def leader(self) -> Optional[SimNode]:
        leaders = [n for n in self.nodes.values() if n.alive and n.core.is_leader]
        return max(leaders, key=lambda n: n.core.epoch) if leaders else None

    def write(self, count: int = 1) -> Optional[Proposal]:
        """Propose ``count`` records to the current leader, if there is one."""
        n = self.leader()
        if n is None:
            return None
        records = tuple(f"w{next(self._write_seq)}".encode() for _ in range(count))
        last = n.core.propose(list(records), self.now)
        p = Proposal(n.core.epoch, last, records)
        self.pending.append(p)
        self._process(n)
        self.inv.check()
        return p

    def change_voters(self, add: Optional[int] = None, remove: Optional[ReplicaKey] = None) -> Errors:
        """Ask the leader to add node ``add`` (its current disk) or remove ``remove``; the error it
        answers at once (NONE: the change is appended; it is done when committed)."""
        if add is not None:
            voter = Voter(ReplicaKey(add, self.nodes[add].directory_id))
            return self._ask_leader("add", lambda core: core.add_voter(voter, self.now), add)
        return self._ask_leader("remove", lambda core: core.remove_voter(remove, self.now), remove)

    def upgrade_kraft_version(self) -> Errors:
        """UpdateFeatures kraft.version=1 at the leader; the error it answers at once (NONE: the
        voter set is appended, or was already there)."""
        return self._ask_leader("upgrade", lambda core: core.upgrade_kraft_version(1, self.now))

    def update_voter(self, node_id: int, port: int) -> Errors:
        """UpdateRaftVoter from ``node_id`` (its current disk), announcing a listener on ``port``."""
        voter = Voter(ReplicaKey(node_id, self.nodes[node_id].directory_id),
                      (Endpoint("CONTROLLER", f"node{node_id}", port),))
        return self._ask_leader("update", lambda core: core.update_voter(voter, self.now))

    def _ask_leader(self, what: str, call: Callable[[RaftCore], int], detail: object = None) -> Errors:
        """``call`` the leader's core (a voter change); its refusal's error, NONE if accepted."""
        n = self.leader()
        if n is None:
            return Errors.NOT_LEADER_OR_FOLLOWER
        try:
            call(n.core)
            error = Errors.NONE
        except VoterChangeError as e:
            error = e.error
        key = f"{what} {error.name}"
        self.membership_results[key] = self.membership_results.get(key, 0) + 1
        self._log(key if detail is None else f"{key}: {detail}")
        self._process(n)
        self.inv.check()
        return error

    def _maybe_ack(self, n: SimNode) -> None:
        """A proposal is acknowledged once committed in the epoch that proposed it."""
        hw = n.core.high_watermark
        still = []
        for p in self.pending:
            if p.last_offset < hw and n.node_id == self._leader_of(p.epoch):
                rec = self.inv.record_at(n, p.last_offset, durable=False)
                if rec is not None and rec[0] == p.epoch:
                    self.inv.acked.append(p)
                    continue
            still.append(p)
        self.pending = still

    def _leader_of(self, epoch: int) -> Optional[int]:
        return self.inv.leaders.get(epoch)

    def _log(self, line: str) -> None:
        if self.trace:
            self.trace(f"{self.now:>7} {line}")

    # -- helpers for scenarios ----------------------------------------------------------------
    def run_until(self, cond: Callable[[], bool], limit_ms: int = 60_000) -> bool:
        end = self.now + limit_ms
        while self.now < end:
            if cond():
                return True
            if not self.step():
                self.now = end
                break
        return cond()

    def stabilize(self, limit_ms: int = 60_000) -> SimNode:
        """Heal everything, restart the dead, and wait for a leader that every live voter follows."""
        self.net.heal()
        self.net.faults = NetworkFaults()
        self.crash_before_flush = 0.0
        for i, n in self.nodes.items():
            if not n.alive:
                self.start(i)

        def settled() -> bool:
            ld = self.leader()
            if ld is None or ld.core.high_watermark < ld.log.end_offset:
                return False
            return all(n.core.epoch == ld.core.epoch and n.core.high_watermark == ld.core.high_watermark
                       for n in self.nodes.values() if n.alive)

        if not self.run_until(settled, limit_ms):
            states = {i: (n.core.state_name, n.core.epoch, n.core.high_watermark, n.log.end_offset)
                      for i, n in self.nodes.items() if n.alive}
            raise InvariantViolation(f"seed {self.seed}: no stable leader after {limit_ms} ms: {states}")
        self.inv.check_converged()
        self.inv.check_acked()
        return self.leader()
