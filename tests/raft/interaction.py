"""A driver for Raft scenarios written as text (etcd's ``testdata/*.txt`` and ``interaction_test.go``).

Each node is a real :class:`RaftCore` over a :class:`MemoryLog` (its disk: ``crash`` loses what was
not flushed) and a :class:`MemorySnapshotStore`, with a clock of its own: time moves only when a
command moves it, so every output is exact. Nothing is delivered until a command says so. The
Readies are carried out by the same ``process_readies`` as the real node and the simulation.

Commands (one per block; the output is compared with the block's expected text):

    add-nodes N                     voters 1..N, all Unattached in epoch 0 at time 0
    add-nodes N dynamic             the same as a dynamic quorum (kraft.version 1, KIP-853): each node
                                    has a directory id and a bootstrap snapshot holding the voter set
    add-spare ID                    a controller formatted --no-initial-controllers and started: it
                                    knows no voters and asks the others (bootstrap servers) for the leader
    add-voter ID / remove-voter ID  the leader appends the voter set with / without ID's replica
    voters ID                       the latest voter set in ID's log, and whether it is committed
    campaign ID                     move ID's clock to its election timer and tick it
    tick ID MS                      move ID's clock MS forward and tick it
    advance MS                      move every running node's clock MS forward and tick them
    process-ready [ID...]           carry out each node's Readies (all nodes if none named)
    crash-before-flush ID           process ID's Ready up to its sends, then crash before the flush
    deliver-msgs [ID...] [drop]     deliver (or drop) the messages on the wire to these nodes
    stabilize                       process-ready and deliver-msgs until nothing moves
    propose ID TEXT                 propose one record on ID
    snapshot ID                     ID snapshots its committed records and lets its log go below
    crash ID / restart ID           kill (losing unflushed records) / start again from its disk
    resign ID                       ID, a leader, gives up its epoch (graceful shutdown)
    isolate ID / heal               cut ID off (its messages and those to it are dropped) / undo
    status                          every node's role, epoch, leader, vote, offsets
    raft-log ID                     ID's batches
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Callable, Optional

from quorum.log.api import OffsetAndEpoch
from quorum.log.election_state import ElectionState
from quorum.log.memory_log import MemoryLog
from quorum.log.voter_set import ReplicaKey, Voter, VoterSet, raft_state_records
from quorum.raft.core import RaftCore
from quorum.raft.messages import Outbound, describe_message
from quorum.raft.ready import describe_ready, process_readies
from quorum.raft.settings import RaftSettings
from quorum.sim.invariants import encode_snapshot
from quorum.snapshot.memory_store import MemorySnapshotStore, seal

CLUSTER_ID = "scenario-cluster-000000"
# The scenarios tell KRaft's own exchanges, in which a leader answers parked fetches as soon as the
# high watermark moves; the default linger that lets the next records carry it instead
# (replication.py) is covered by test_raft_core.py and by the simulation, which runs with it.
SETTINGS = RaftSettings(high_watermark_linger_ms=0)


@dataclass
class _Node:
    node_id: int
    directory_id: Optional[str] = None  # dynamic quorums: the replica's disk
    log: MemoryLog = field(default_factory=MemoryLog)
    snapshots: MemorySnapshotStore = field(default_factory=MemorySnapshotStore)
    persisted: ElectionState = field(default_factory=ElectionState.empty)
    core: Optional[RaftCore] = None
    now: int = 0


@dataclass(frozen=True)
class _OnWire:
    src: int
    out: Outbound


class _CrashNow(Exception):
    pass


class _RecordingCore:
    """The core as process_readies sees it, keeping every Ready it hands out (for the output)."""

    def __init__(self, core: RaftCore):
        self.core = core
        self.readies: list = []

    def has_ready(self) -> bool:
        return self.core.has_ready()

    def ready(self):
        self.readies.append(self.core.ready())
        return self.readies[-1]

    def advance(self, ready, now_ms: int) -> None:
        self.core.advance(ready, now_ms)


class _ScenarioIO:
    """process_readies' side effects on a scenario node (what they were is in describe_ready's text)."""

    def __init__(self, cluster: "Scenario", node: _Node, crash_before_flush: bool = False):
        self.c, self.n, self.crash_before_flush = cluster, node, crash_before_flush

    def refused(self, peer: int, what: str) -> None:
        pass  # in describe_ready

    def persist(self, state: ElectionState) -> None:
        self.n.persisted = state

    def flush(self, after_send: bool) -> None:
        if self.crash_before_flush:
            raise _CrashNow
        self.n.log.flush()

    def committed(self, high_watermark: int) -> None:
        pass  # in describe_ready

    def send(self, out: Outbound, before_flush: bool) -> None:
        self.c.wire.append(_OnWire(self.n.node_id, out))

    def now_ms(self) -> int:
        return self.n.now

    def advanced(self) -> None:
        pass


class Scenario:
    def __init__(self) -> None:
        self.nodes: dict[int, _Node] = {}
        self.voters: list[int] = []
        self.wire: list[_OnWire] = []
        self.isolated: set[int] = set()
        self.dynamic = False

    # -- commands ---------------------------------------------------------------------------
    def run(self, command: str) -> str:
        name, *args = command.split()
        handler = COMMANDS.get(name)
        if handler is None:
            raise ValueError(f"unknown command {name!r} (known: {', '.join(sorted(COMMANDS))})")
        out: list[str] = []
        try:
            handler(self, args, out)
        except Exception as e:  # part of the scenario's output, as etcd's driver prints them
            out.append(f"error: {type(e).__name__}: {e}")
        return "\n".join(out) if out else "ok"

    def _start(self, node: _Node) -> None:
        latest = node.snapshots.latest()
        if latest is not None and latest.offset > node.log.end_offset:
            node.log.reset_to(latest)
        voters = VoterSet() if self.dynamic else self.voters  # a dynamic node reads its set from its disk
        node.core = RaftCore(node.node_id, voters, CLUSTER_ID, node.log, node.persisted, node.now, SETTINGS,
                             random.Random(node.node_id), snapshots=node.snapshots, directory_id=node.directory_id,
                             bootstrap=sorted(self.nodes) if self.dynamic else ())

    def add_nodes(self, args: list[str], out: list[str]) -> None:
        count = int(args[0])
        self.dynamic = "dynamic" in args[1:]
        self.voters = list(range(1, count + 1))
        for i in self.voters:
            self.nodes[i] = _Node(i, f"dir{i}" if self.dynamic else None)
        if self.dynamic:  # what `storage format --initial-controllers` writes on each
            initial = VoterSet(Voter(ReplicaKey(i, self.nodes[i].directory_id)) for i in self.voters)
            for i in self.voters:
                self.nodes[i].snapshots.add(OffsetAndEpoch(0, 0),
                                            encode_snapshot([], raft_state_records(initial, kraft_version=1)))
        for i in self.voters:
            self._start(self.nodes[i])

    def add_spare(self, args: list[str], out: list[str]) -> None:
        if not self.dynamic:
            raise ValueError("add-spare needs a dynamic quorum (add-nodes N dynamic)")
        node_id = int(args[0])
        self.nodes[node_id] = node = _Node(node_id, f"dir{node_id}")
        self._start(node)
        out.append(f"{node_id} starts {node.core.state_name}, a voter: {node.core.is_voter}")

    def add_voter(self, args: list[str], out: list[str]) -> None:
        node_id = int(args[0])
        leader = self._leader()
        offset = leader.core.add_voter(Voter(ReplicaKey(node_id, self.nodes[node_id].directory_id)), leader.now)
        out.append(f"{leader.node_id} appends the voter set with {node_id} at offset {offset}")

    def remove_voter(self, args: list[str], out: list[str]) -> None:
        node_id = int(args[0])
        leader = self._leader()
        offset = leader.core.remove_voter(ReplicaKey(node_id, self.nodes[node_id].directory_id), leader.now)
        out.append(f"{leader.node_id} appends the voter set without {node_id} at offset {offset}")

    def voters(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        history = node.core.voter_history
        at = history.latest_offset
        committed = at is None or at < node.core.high_watermark
        out.append(f"{node.node_id}: voters {sorted(history.latest.ids)}"
                   f"{'' if at is None else f' from offset {at}'}, {'committed' if committed else 'not committed'}")

    def campaign(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        node.now = max(node.now, node.core.role.timer)
        node.core.tick(node.now)
        out.append(f"{node.node_id} at t={node.now}: {node.core.state_name} in epoch {node.core.epoch}")

    def tick(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        node.now += int(args[1])
        node.core.tick(node.now)
        out.append(f"{node.node_id} at t={node.now}: {node.core.state_name} in epoch {node.core.epoch}")

    def advance(self, args: list[str], out: list[str]) -> None:
        for node in self._nodes([]):
            if node.core is not None:
                self.tick([str(node.node_id), args[0]], out)

    def process_ready(self, args: list[str], out: list[str], crash_before_flush: bool = False) -> bool:
        moved = False
        for node in self._nodes(args):
            if node.core is None or not node.core.has_ready():
                continue
            moved = True
            out.append(f"> {node.node_id} handles its Readies")
            core = _RecordingCore(node.core)
            try:
                process_readies(core, _ScenarioIO(self, node, crash_before_flush))
            except _CrashNow:
                out += [f"  {line}" for rd in core.readies for line in describe_ready(rd)]
                out.append(f"  crash before the flush (log end {node.log.end_offset}, flushed "
                           f"{node.log.flushed_offset})")
                self._crash(node)
                return True
            out += [f"  {line}" for rd in core.readies for line in describe_ready(rd)]
        return moved

    def crash_before_flush(self, args: list[str], out: list[str]) -> None:
        self.process_ready(args, out, crash_before_flush=True)

    def deliver_msgs(self, args: list[str], out: list[str]) -> bool:
        drop = "drop" in args
        targets = {int(a) for a in args if a != "drop"} or set(self.nodes)
        now_on_wire, self.wire = self.wire, []
        moved = False
        for m in now_on_wire:
            if m.out.dest not in targets:
                self.wire.append(m)
                continue
            moved = True
            dst = self.nodes[m.out.dest]
            text = f"{m.src}->{m.out.dest} corr={m.out.corr} {describe_message(m.out.message)}"
            if drop or dst.core is None or {m.src, m.out.dest} & self.isolated:
                out.append(f"{text} (dropped)")
                continue
            out.append(text)
            dst.core.receive(m.src, m.out.corr, m.out.message, dst.now)
        return moved

    def stabilize(self, args: list[str], out: list[str]) -> None:
        for _ in range(100):
            moved = self.process_ready([], out)
            moved = self.deliver_msgs([], out) or moved
            if not moved:
                return
        raise AssertionError("stabilize: still moving after 100 rounds")

    def propose(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        last = node.core.propose([" ".join(args[1:]).encode()], node.now)
        out.append(f"{node.node_id} will append it at offset {last}")

    def snapshot(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        hw = node.core.high_watermark
        records = [[b.epoch, r.hex()] for b in node.log.batches(node.log.start_offset, hw) for r in b.records]
        epoch = next(b.epoch for b in node.log.batches(hw - 1, hw))
        sid = OffsetAndEpoch(hw, epoch)
        node.snapshots.add(sid, seal(json.dumps(records).encode()))
        node.core.advance_log_start(sid, node.now)
        out.append(f"{node.node_id} snapshot {sid.offset}-{sid.epoch}; log starts at {node.log.start_offset}")

    def resign(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        node.core.resign(node.now)
        out.append(f"{node.node_id} is {node.core.state_name} in epoch {node.core.epoch}")

    def crash(self, args: list[str], out: list[str]) -> None:
        self._crash(self._node(args[0]))

    def _crash(self, node: _Node) -> None:
        node.core = None
        node.log.crash()
        node.snapshots.crash()
        self.wire = [m for m in self.wire if m.out.dest != node.node_id]

    def restart(self, args: list[str], out: list[str]) -> None:
        node = self.nodes[int(args[0])]
        self._start(node)
        out.append(f"{node.node_id} restarts {node.core.state_name} in epoch {node.core.epoch}, log "
                   f"[{node.log.start_offset}, {node.log.end_offset})")

    def isolate(self, args: list[str], out: list[str]) -> None:
        self.isolated.add(int(args[0]))

    def heal(self, args: list[str], out: list[str]) -> None:
        self.isolated.clear()

    def status(self, args: list[str], out: list[str]) -> None:
        for node in self._nodes([]):
            core = node.core
            if core is None:
                out.append(f"{node.node_id}: down (log [{node.log.start_offset}, {node.log.end_offset}))")
                continue
            out.append(f"{node.node_id}: {core.state_name} epoch={core.epoch} leader={_dash(core.leader_id)} "
                       f"voted={_dash(node.persisted.voted_id)} hw={core.high_watermark} log=[{node.log.start_offset}, "
                       f"{node.log.end_offset}) flushed={node.log.flushed_offset}")

    def raft_log(self, args: list[str], out: list[str]) -> None:
        node = self._node(args[0])
        for b in node.log.batches(node.log.start_offset, node.log.end_offset):
            body = "control" if b.control else ", ".join(r.decode(errors="replace") for r in b.records)
            out.append(f"{b.base_offset}..{b.last_offset} epoch {b.epoch}: {body}")
        if not out:
            out.append(f"empty from {node.log.start_offset}")

    # -- helpers ----------------------------------------------------------------------------
    def _node(self, arg: str) -> _Node:
        node = self.nodes[int(arg)]
        if node.core is None:
            raise ValueError(f"node {arg} is down")
        return node

    def _leader(self) -> _Node:
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if len(leaders) != 1:
            raise ValueError(f"{len(leaders)} leaders")
        return leaders[0]

    def _nodes(self, args: list[str]) -> list[_Node]:
        return [self.nodes[int(a)] for a in args] if args else [self.nodes[i] for i in sorted(self.nodes)]


def _dash(v: Optional[int]) -> str:
    return "-" if v is None else str(v)


COMMANDS: dict[str, Callable[[Scenario, list[str], list[str]], object]] = {
    "add-nodes": Scenario.add_nodes,
    "add-spare": Scenario.add_spare,
    "add-voter": Scenario.add_voter,
    "remove-voter": Scenario.remove_voter,
    "voters": Scenario.voters,
    "campaign": Scenario.campaign,
    "tick": Scenario.tick,
    "advance": Scenario.advance,
    "process-ready": Scenario.process_ready,
    "crash-before-flush": Scenario.crash_before_flush,
    "deliver-msgs": Scenario.deliver_msgs,
    "stabilize": Scenario.stabilize,
    "propose": Scenario.propose,
    "snapshot": Scenario.snapshot,
    "resign": Scenario.resign,
    "crash": Scenario.crash,
    "restart": Scenario.restart,
    "isolate": Scenario.isolate,
    "heal": Scenario.heal,
    "status": Scenario.status,
    "raft-log": Scenario.raft_log,
}


# -- the file format ------------------------------------------------------------------------------
def parse(text: str) -> tuple[str, list[tuple[str, str]]]:
    """(the leading comment, [(command, expected output)]). A block is a command line, ``----``,
    then the expected output up to a blank line."""
    lines = text.splitlines()
    header = []
    i = 0
    while i < len(lines) and (lines[i].startswith("#") or not lines[i].strip()):
        header.append(lines[i])
        i += 1
    blocks = []
    while i < len(lines):
        if not lines[i].strip() or lines[i].startswith("#"):
            i += 1
            continue
        command = lines[i]
        if i + 1 >= len(lines) or lines[i + 1] != "----":
            raise ValueError(f"line {i + 2}: expected ---- after the command {command!r}")
        i += 2
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        blocks.append((command, "\n".join(expected)))
    return "\n".join(header).rstrip() + "\n", blocks


def render(header: str, blocks: list[tuple[str, str]]) -> str:
    return header + "".join(f"\n{command}\n----\n{output}\n" for command, output in blocks)


def run_file(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """Run a scenario file: (its header, [(command, expected, got)])."""
    header, blocks = parse(text)
    scenario = Scenario()
    return header, [(command, expected, scenario.run(command)) for command, expected in blocks]
