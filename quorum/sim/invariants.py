"""What must stay true of a simulated cluster, checked after every event (Cluster.step).

- at most one leader per epoch, ever;
- a node's epoch never goes down (across restarts: it is persisted) and its
  high watermark never goes down while it runs;
- when a leader's high watermark reaches ``h``, a majority of voters hold offset
  ``h - 1`` durably; every node's records below its high watermark are identical
  to what every other node committed;
- committed records never change or vanish: every new leader holds all of them;
- every acknowledged write is committed at the offset it was acknowledged at;
- with snapshots (``snapshot_every``): a node's log starts at 0 or at one of its snapshots' end
  offsets; every snapshot holds exactly the committed records below its end; a leader never
  installs a snapshot. Records below a node's log start are read from its snapshots.
"""
from __future__ import annotations

import json
from typing import Optional, Protocol, Sequence

from quorum.log import control_records
from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import HEADER, encode_batch
from quorum.log.voter_set import ReplicaKey
from quorum.raft.roles import Leader
from quorum.sim.nodes import Proposal, SimNode
from quorum.snapshot.memory_store import seal, unseal

# A KRAFT_VERSION control record's first bytes (its type, then its JSON); the simulation's own
# records are short ASCII strings and never start so.
_KRAFT_VERSION_PREFIX = control_records.encode_control(control_records.KRAFT_VERSION, {})[:3]

class ClusterView(Protocol):
    """What the invariants read of the cluster that holds them (cluster.py's Cluster)."""

    seed: int
    now: int
    dynamic: bool
    nodes: dict[int, SimNode]

    voters: list[int]  # the initial voters


def encode_snapshot(records: list[tuple[int, bytes]], raft_records: Sequence[bytes] = ()) -> bytes:
    """The simulated state machine's snapshot: every committed (epoch, record) below its end, after
    the control batch of the quorum's own state if it has one (RaftCore.snapshot_raft_records)."""
    prefix = encode_batch(0, 0, 0, raft_records, control=True) if raft_records else b""
    return seal(prefix + json.dumps([[e, r.hex()] for e, r in records]).encode())


def decode_snapshot(data: bytes) -> list[tuple[int, bytes]]:
    content = unseal(data)
    if content[:1] == b"[":  # JSON text; or a control batch whose CRC happens to start with "["
        try:
            return [(e, bytes.fromhex(r)) for e, r in json.loads(content)]
        except ValueError:
            pass
    content = content[8 + HEADER.unpack_from(content)[1]:]  # after the control batch
    return [(e, bytes.fromhex(r)) for e, r in json.loads(content)]


class InvariantViolation(AssertionError):
    pass


class Invariants:
    def __init__(self, cluster: ClusterView):
        self.c = cluster
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.committed: dict[int, tuple[int, bytes]] = {}  # offset -> (epoch, record)
        self.committed_end = 0  # one past the highest offset any node committed
        self.kraft_versions: dict[int, int] = {}  # offset of a committed KRAFT_VERSION record -> level
        self.acked: list[Proposal] = []
        self._decoded: dict[int, tuple[bytes, list]] = {}  # id(snapshot bytes) -> (bytes, records)
        self._checked_snapshots: set[tuple[int, OffsetAndEpoch]] = set()

    def fail(self, why: str) -> None:
        raise InvariantViolation(f"seed {self.c.seed} t={self.c.now}ms: {why}")

    def check(self) -> None:
        c = self.c
        for n in c.nodes.values():
            if not n.alive:
                continue
            core = n.core
            if core.epoch < n.last_epoch_seen:
                self.fail(f"node {n.node_id} epoch went back {n.last_epoch_seen} -> {core.epoch}")
            n.last_epoch_seen = core.epoch
            if isinstance(core.role, Leader):
                prev = self.leaders.setdefault(core.epoch, n.node_id)
                if prev != n.node_id:
                    self.fail(f"two leaders in epoch {core.epoch}: {prev} and {n.node_id}")
                if prev == n.node_id and core.epoch not in c.checked_leader_epochs:
                    c.checked_leader_epochs.add(core.epoch)
                    self._check_leader_completeness(n)
                    self._check_election(n)
                # (against the cluster's commit point: a new leader learns it only as it commits)
                pending = [o for o in core.voter_history.offsets if o >= self.committed_end]
                if len(pending) > 1:
                    self.fail(f"leader {n.node_id} has {len(pending)} uncommitted voter changes at {pending}")
            if core.snapshots_installed != n.installs_seen:
                if core.is_leader:
                    self.fail(f"leader {n.node_id} installed a snapshot")
                n.installs_seen = core.snapshots_installed
            self._check_snapshots(n)
            hw = core.high_watermark
            if hw < n.last_hw_seen:
                self.fail(f"node {n.node_id} high watermark went back {n.last_hw_seen} -> {hw}")
            if hw > n.last_hw_seen:
                self._check_new_commits(n, n.last_hw_seen, hw)
                n.last_hw_seen = hw
            expected = self._committed_kraft_version(hw - 1)
            if expected is not None and core.voter_history.kraft_version_at(hw - 1) != expected:
                self.fail(f"node {n.node_id} says kraft.version {core.voter_history.kraft_version_at(hw - 1)} "
                          f"at its high watermark {hw}, the committed records say {expected}")
        for n in c.nodes.values():  # after every node's commits are noted: a leader's may be new this step
            told = n.core.first_leader_high_watermark if n.alive else None
            if told is not None and told > self.committed_end:
                self.fail(f"node {n.node_id} was told high watermark {told} by a leader, beyond what any node "
                          f"committed ({self.committed_end}): it would call itself loaded on records not committed")

    def _snapshot_records(self, data: bytes) -> list:
        hit = self._decoded.get(id(data))
        if hit is None or hit[0] is not data:
            hit = self._decoded[id(data)] = (data, decode_snapshot(data))
        return hit[1]

    def _check_snapshots(self, n: SimNode) -> None:
        start = n.log.start_offset
        ids = n.snapshots.ids()
        if start > 0 and OffsetAndEpoch(start, n.log.start_epoch) not in ids:
            self.fail(f"node {n.node_id} log starts at {start} (epoch {n.log.start_epoch}), "
                      f"which is none of its snapshots {ids}")
        for sid in ids:
            if (n.node_id, sid) in self._checked_snapshots:
                continue
            self._checked_snapshots.add((n.node_id, sid))
            records = self._snapshot_records(n.snapshots.snapshots[sid])
            if len(records) != sid.offset or (records and records[-1][0] != sid.epoch):
                self.fail(f"node {n.node_id} snapshot {sid} holds {len(records)} records")
            for off, rec in enumerate(records):
                known = self._commit(off, rec)
                if known != rec:
                    self.fail(f"node {n.node_id} snapshot {sid} has {rec} at {off}, committed was {known}")

    def _commit(self, offset: int, record: tuple[int, bytes]) -> tuple[int, bytes]:
        """Note ``record`` committed at ``offset``; what was known committed there (it, if new)."""
        self.committed_end = max(self.committed_end, offset + 1)
        known = self.committed.setdefault(offset, record)
        raw = record[1]
        if known is record and raw[:3] == _KRAFT_VERSION_PREFIX:
            self.kraft_versions[offset] = int(control_records.decode_control(raw).data["kraft_version"])
        return known

    def _committed_kraft_version(self, offset: int) -> Optional[int]:
        """kraft.version at ``offset`` by the committed KRAFT_VERSION records; None if they do not
        say (a dynamic quorum's level before the first leader copied it into the log comes from its
        bootstrap snapshot)."""
        at = [o for o in self.kraft_versions if o <= offset]
        if at:
            return self.kraft_versions[max(at)]
        return None if self.c.dynamic else 0

    def record_at(self, n: SimNode, offset: int, durable: bool) -> Optional[tuple[int, bytes]]:
        """What node ``n`` holds at ``offset``: from its log, or below the log start its snapshots."""
        log = n.log
        if offset < log.start_offset:
            for sid in reversed(n.snapshots.ids()):
                if sid.offset > offset:
                    return self._snapshot_records(n.snapshots.snapshots[sid])[offset]
            return None
        if offset >= (log.flushed_offset if durable else log.end_offset):
            return None
        for b in log.batches(offset, offset + 1):
            return b.epoch, b.records[offset - b.base_offset]
        return None

    def _check_new_commits(self, n: SimNode, lo: int, hi: int) -> None:
        for off in range(lo, hi):
            mine = self.record_at(n, off, durable=False)
            if mine is None:
                self.fail(f"node {n.node_id} high watermark {hi} but offset {off} missing from its log")
            known = self._commit(off, mine)
            if known != mine:
                self.fail(f"offset {off} committed as {known} but node {n.node_id} has {mine}")
        if not n.core.is_leader:
            return  # followers learn of commits later; a wipe since then may have removed a copy
        if any(self.c.nodes[v].persisted.rejoining for v in self.c.voters):
            # A replaced disk in a static quorum: until that voter fetches again the leader still
            # counts what it held before. A dynamic quorum tells it by its directory id.
            return
        # Durable on a majority of the leader's voters (its latest set: committed or not, it is the
        # one it counts with) at the moment the leader commits it. A node whose disk is not the
        # voter's (wiped and formatted again) holds nothing for that voter.
        # A voter whose disk was wiped since (a replica that can never vote again) may have acknowledged
        # it before it lost it: it is given the benefit of the doubt.
        voters = n.core.voter_history.latest
        lost = [v for v in voters if not voters[v].matches(ReplicaKey(v, self.c.nodes[v].directory_id))]
        holders = sum(1 for v in voters if v not in lost
                      and self.record_at(self.c.nodes[v], hi - 1, durable=True) == self.committed[hi - 1])
        if holders + len(lost) < voters.majority:
            self.fail(f"node {n.node_id} moved its high watermark to {hi} but only {holders} of voters "
                      f"{voters} hold it durably")

    def _check_leader_completeness(self, n: SimNode) -> None:
        for off, rec in self.committed.items():
            if self.record_at(n, off, durable=False) != rec:
                self.fail(f"new leader {n.node_id} (epoch {n.core.epoch}) lacks committed offset {off}")

    def _check_election(self, n: SimNode) -> None:
        """A new leader was elected by a majority of the voter set of its own log, every one a voter."""
        core = n.core
        start = core.role.epoch_start_offset
        if start < core.log.start_offset:
            return  # committed and snapshotted within the step that elected it
        (batch,) = core.log.batches(start, start + 1)
        change = control_records.decode_control(batch.records[start - batch.base_offset])
        voters = core.voter_history.at(start - 1)
        granted = set(change.data["granting_voters"])
        if not granted <= voters.ids or len(granted) < voters.majority or set(change.data["voters"]) != voters.ids:
            self.fail(f"leader {n.node_id} of epoch {core.epoch} elected by {sorted(granted)} under voters "
                      f"{sorted(change.data['voters'])}; its log's voters are {voters}")

    def check_vote(self, n: SimNode, voted_for: int) -> None:
        """A node grants a vote only to a voter of its own log's latest set (or of the one before it,
        while that change is not committed)."""
        core = n.core
        sets = core._recent_voter_sets()
        if voted_for != n.node_id and not any(voted_for in s for s in sets):
            self.fail(f"node {n.node_id} voted for {voted_for} under voters {core.voter_history.latest} "
                      f"(itself {core.key})")

    def check_acked(self) -> None:
        for p in self.acked:
            base = p.last_offset - len(p.records) + 1
            for i, r in enumerate(p.records):
                if self.committed.get(base + i) != (p.epoch, r):
                    self.fail(f"acknowledged record {r!r} at offset {base + i} is not what was committed: "
                              f"{self.committed.get(base + i)}")

    def check_converged(self) -> None:
        """After healing: every live voter's log equals the committed prefix."""
        for n in self.c.nodes.values():
            if not n.alive:
                continue
            for off in range(n.core.high_watermark):
                if self.record_at(n, off, durable=False) != self.committed.get(off):
                    self.fail(f"node {n.node_id} differs from the committed log at offset {off}")
