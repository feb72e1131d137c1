"""Named failure scenarios and a seeded chaos run, each ending in ``stabilize()``.

Every scenario takes a seed and returns the cluster it ran, so a test can look
at the end state; invariants are checked after every event along the way, and
``stabilize`` checks that the survivors converge and every acknowledged write
is still committed.
"""
from __future__ import annotations

import random
from typing import Callable, Optional

from quorum.errors import Errors
from quorum.log.api import OffsetAndEpoch
from quorum.raft.limits import MAX_EPOCH
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    VoteRequest,
)
from quorum.raft.settings import RaftSettings
from quorum.sim.cluster import CLUSTER_ID, Cluster
from quorum.sim.network import NetworkFaults


def _writes(c: Cluster, bursts: int, every_ms: int = 20, size: int = 3) -> None:
    for _ in range(bursts):
        c.write(size)
        c.run_for(every_ms)


def _elect(c: Cluster, limit_ms: int = 30_000) -> int:
    assert c.run_until(lambda: c.leader() is not None and c.leader().core.high_watermark > 0, limit_ms), \
        f"seed {c.seed}: no leader after {limit_ms} ms"
    return c.leader().node_id


def initial_election(seed: int, voters: int = 3, observers: int = 0) -> Cluster:
    c = Cluster(seed, voters, observers)
    _elect(c)
    _writes(c, 20)
    c.stabilize()
    return c


def kill_leader(seed: int, voters: int = 3) -> Cluster:
    c = Cluster(seed, voters, observers=1)
    old = _elect(c)
    _writes(c, 20)
    c.crash(old)
    assert c.run_until(lambda: c.leader() is not None and c.leader().node_id != old, 30_000)
    _writes(c, 20)
    c.stabilize()
    return c


def all_killed_majority_restarted(seed: int, voters: int = 3) -> Cluster:
    c = Cluster(seed, voters)
    _elect(c)
    _writes(c, 30, every_ms=5)
    for i in c.voters:
        c.crash(i)
    c.run_for(1000)
    for i in c.voters[: len(c.voters) // 2 + 1]:
        c.start(i)
    _elect(c)
    _writes(c, 10)
    c.stabilize()
    return c


def leader_partitioned(seed: int, voters: int = 3) -> Cluster:
    c = Cluster(seed, voters, observers=1)
    old = _elect(c)
    _writes(c, 10)
    c.net.isolate(old, set(c.nodes))
    _writes(c, 10)  # these go to the isolated leader and can never commit
    assert c.run_until(lambda: any(n.core.is_leader and n.node_id != old for n in c.nodes.values() if n.alive),
                       30_000)
    c.run_for(5000)  # check-quorum makes the old leader resign
    assert not c.nodes[old].core.is_leader, f"seed {seed}: isolated leader never resigned"
    _writes(c, 10)
    c.stabilize()
    return c


def split_brain_healed(seed: int) -> Cluster:
    c = Cluster(seed, voters=5, observers=2)
    _elect(c)
    _writes(c, 10)
    minority = set(c.rng.sample(c.voters, 2))
    c.net.partition(minority, set(c.nodes) - minority)
    _writes(c, 20)
    c.run_for(5000)
    leaders = [n.node_id for n in c.nodes.values() if n.alive and n.core.is_leader]
    assert all(i not in minority for i in leaders), f"seed {seed}: minority {minority} has a leader {leaders}"
    c.net.heal()
    _writes(c, 10)
    c.stabilize()
    return c


def back_to_back_failures(seed: int, voters: int = 5) -> Cluster:
    c = Cluster(seed, voters)
    for _ in range(voters // 2 + 1):
        ld = _elect(c)
        _writes(c, 5)
        c.crash(ld)
        c.run_for(50)
        c.start(ld)  # comes back at once; the next leader fails too
    c.stabilize()
    return c


def lose_whole_state(seed: int, voters: int = 3) -> Cluster:
    """A follower's disk is replaced; it rejoins without voting until it has caught up."""
    c = Cluster(seed, voters)
    ld = _elect(c)
    _writes(c, 20)
    victim = c.rng.choice([v for v in c.voters if v != ld])
    c.crash(victim)
    c.wipe(victim)
    c.start(victim)
    _writes(c, 20)
    c.stabilize()
    assert c.nodes[victim].log.end_offset == c.leader().log.end_offset
    return c


def catch_up_by_snapshot(seed: int, voters: int = 3) -> Cluster:
    """Nodes snapshot and delete their log below; a follower whose disk was replaced, and a new
    observer, can only catch up by downloading a snapshot (FetchSnapshot) and fetching after it."""
    c = Cluster(seed, voters, observers=1, snapshot_every=15, faults=NetworkFaults(drop_rate=0.02, max_delay_ms=10))
    _elect(c)
    _writes(c, 30)
    ld = c.stabilize().node_id
    victim = c.rng.choice([v for v in c.voters if v != ld])
    c.crash(victim)
    c.crash(101)
    c.wipe(victim)
    c.wipe(101)
    _writes(c, 10)
    c.start(victim)
    c.start(101)
    _writes(c, 20)
    c.stabilize()
    for i in (victim, 101):
        n = c.nodes[i]
        assert n.snapshots.installed, f"seed {seed}: node {i} caught up without a snapshot"
        assert n.log.start_offset > 0
    return c


def _forgery(rng: random.Random, c: Cluster, byzantine: int):
    """A message a misbehaving peer might send: forged sender ids, epochs no election reaches,
    offsets out of range, another cluster's id, a leader claim for the current epoch."""
    live = [n.core.epoch for n in c.nodes.values() if n.alive and n.node_id != byzantine] or [0]
    epoch = rng.choice([max(live), max(live) + 1, max(live) + rng.randint(2, 50_000), MAX_EPOCH, MAX_EPOCH + 1,
                        -1, 0])
    someone = rng.choice(c.voters + [byzantine, -1, 999])
    offset = rng.choice([0, 1, 10, 1 << 40, -5])
    cluster_id = CLUSTER_ID if rng.random() < 0.9 else "another-cluster-id-000"
    kind = rng.randrange(5)
    if kind == 0:
        return VoteRequest(cluster_id, epoch, someone, rng.choice([0, epoch, epoch + 1]), offset, rng.random() < 0.5)
    if kind == 1:
        return BeginQuorumEpochRequest(cluster_id, epoch, someone)
    if kind == 2:
        return EndQuorumEpochRequest(cluster_id, epoch, someone, tuple(rng.sample(c.voters, len(c.voters))))
    if kind == 3:
        return FetchRequest(cluster_id, epoch, someone, offset, rng.choice([0, epoch, MAX_EPOCH]), 0,
                            rng.choice([0, 1, 1 << 20]))
    return FetchSnapshotRequest(cluster_id, epoch, someone, OffsetAndEpoch(offset, epoch), offset, rng.choice([0, 1]))


def byzantine_peer(seed: int, voters: int = 3) -> Cluster:
    """A node outside the voter set (authenticated as itself, as the driver makes sure) sends
    forged and out-of-range requests to everyone while the others elect, write, lose a leader and
    elect again. Nothing it sends may move an epoch, commit or lose a record, or stop the quorum:
    the invariants hold after every event, and epochs stay where real elections take them."""
    rng = random.Random(seed ^ 0xB12)
    c = Cluster(seed, voters, observers=2)
    byzantine = max(c.nodes)
    c.byzantine.add(byzantine)
    targets = [i for i in c.nodes if i != byzantine]
    corr = 1 << 40  # the Byzantine peer's own correlation ids

    def attack(rounds: int) -> None:
        nonlocal corr
        for _ in range(rounds):
            for _ in range(rng.randint(1, 4)):
                corr += 1
                c.inject(byzantine, rng.choice(targets), corr, _forgery(rng, c, byzantine))
            c.write(rng.randint(1, 3))
            c.run_for(rng.choice([5, 20, 100]))

    attack(10)
    _elect(c)
    attack(40)
    old = _elect(c)
    c.crash(old)
    attack(40)
    c.start(old)
    attack(20)
    c.stabilize()
    top = max(n.core.epoch for n in c.nodes.values() if n.alive)
    assert top < 50, f"seed {seed}: epoch {top}: the Byzantine peer moved epochs"
    return c


SCENARIOS: dict[str, Callable[[int], Cluster]] = {
    "byzantine_peer": byzantine_peer,
    "initial_election": initial_election,
    "kill_leader": kill_leader,
    "all_killed_majority_restarted": all_killed_majority_restarted,
    "leader_partitioned": leader_partitioned,
    "split_brain_healed": split_brain_healed,
    "back_to_back_failures": back_to_back_failures,
    "lose_whole_state": lose_whole_state,
    "catch_up_by_snapshot": catch_up_by_snapshot,
}


# -- the faults the chaos runs draw from (each draws from ``rng`` in the same order every time) ---------
PAUSES_MS = [5, 20, 100, 400, 1500]  # how long the cluster runs between two random steps


def _crash_one(c: Cluster, rng: random.Random) -> None:
    victim = rng.choice(list(c.nodes))
    if c.nodes[victim].alive:
        c.crash(victim)


def _restart_one(c: Cluster, rng: random.Random, wipe: Callable[[int], bool] = lambda i: False) -> bool:
    """Start a dead node (wiping its disk first if ``wipe(node)``); whether it was wiped."""
    dead = [i for i in c.nodes if not c.nodes[i].alive]
    if not dead:
        return False
    i = rng.choice(dead)
    wiped = wipe(i)
    if wiped:
        c.wipe(i)
    c.start(i)
    return wiped


def _partition(c: Cluster, rng: random.Random) -> None:
    ids = list(c.nodes)
    group = set(rng.sample(ids, rng.randint(1, max(1, len(ids) // 2))))
    c.net.partition(group, set(ids) - group)


def chaos(seed: int, duration_ms: int = 20_000, voters: Optional[int] = None,
          observers: Optional[int] = None, crash_before_flush: Optional[float] = None) -> Cluster:
    """Random faults for ``duration_ms``: crashes (some between a leader's send and its flush),
    restarts, partitions, one wipe, lossy links."""
    rng = random.Random(seed ^ 0x5EED)
    voters = voters or rng.choice([1, 3, 3, 5])
    observers = rng.randint(0, 3) if observers is None else observers
    faults = NetworkFaults(drop_rate=rng.choice([0.0, 0.01, 0.05, 0.2]),
                           duplicate_rate=rng.choice([0.0, 0.01, 0.05]),
                           max_delay_ms=rng.choice([2, 10, 50, 200]))
    settings = RaftSettings(append_linger_ms=rng.choice([0, 5, 25]))
    snapshot_every = rng.choice([None, 10, 40])
    drawn = rng.choice([0.0, 0.002, 0.02])
    crash_before_flush = drawn if crash_before_flush is None else crash_before_flush
    c = Cluster(seed, voters, observers, faults=faults, settings=settings, snapshot_every=snapshot_every,
                crash_before_flush=crash_before_flush)
    wiped = False
    end = c.now + duration_ms
    while c.now < end:
        roll = rng.random()
        if roll < 0.55:
            c.write(rng.randint(1, 5))
        elif roll < 0.65:
            _crash_one(c, rng)
        elif roll < 0.77:
            if _restart_one(c, rng, lambda i: not wiped and voters >= 3 and i in c.voters and rng.random() < 0.2):
                wiped = True
        elif roll < 0.84:
            _partition(c, rng)
        elif roll < 0.90:
            c.net.heal()
        c.run_for(rng.choice(PAUSES_MS))
    c.stabilize(limit_ms=120_000)
    return c


def membership_chaos(seed: int, duration_ms: int = 20_000) -> Cluster:
    """A dynamic quorum (KIP-853) whose voter set changes under random faults: spares added, voters
    removed (the leader too), disks replaced (wipe a voter, it comes back as a new replica, the old
    one is removed and the new one added), mixed with writes, crashes that lose unflushed writes,
    partitions and lossy links. The operator's one rule is kept: a voter whose disk is lost is
    removed before any other voter is (otherwise the quorum could be left without a majority)."""
    rng = random.Random(seed ^ 0xD1A1)
    voters = rng.choice([1, 3, 3, 5])
    faults = NetworkFaults(drop_rate=rng.choice([0.0, 0.01, 0.05]), duplicate_rate=rng.choice([0.0, 0.01]),
                           max_delay_ms=rng.choice([2, 10, 50]))
    c = Cluster(seed, voters, observers=rng.randint(0, 1), faults=faults, dynamic=True, spares=2,
                settings=RaftSettings(append_linger_ms=rng.choice([0, 5, 25])),
                snapshot_every=rng.choice([None, 10, 40]), crash_before_flush=rng.choice([0.0, 0.002, 0.02]))
    end = c.now + duration_ms
    while c.now < end:
        roll = rng.random()
        ids = list(c.nodes)
        ld = c.leader()
        voter_set = ld.core.voter_history.latest if ld is not None else None
        lost = [] if voter_set is None else [voter_set[v].key for v in voter_set
                                             if voter_set[v].key.directory_id != c.nodes[v].directory_id]
        if roll < 0.40:
            c.write(rng.randint(1, 5))
        elif roll < 0.50 and voter_set is not None:
            if lost:
                c.change_voters(remove=lost[0])
            elif len(voter_set) > 1:
                c.change_voters(remove=voter_set[rng.choice(sorted(voter_set))].key)
        elif roll < 0.62 and voter_set is not None:
            candidates = [i for i in ids if i < 100 and c.nodes[i].alive and i not in voter_set]
            if candidates and len(voter_set) < 5:
                c.change_voters(add=rng.choice(candidates))
        elif roll < 0.70:
            _crash_one(c, rng)
        elif roll < 0.80:  # a wipe is a replaced disk: a new replica under the same node id
            _restart_one(c, rng, lambda i: voter_set is not None and not lost and len(voter_set) >= 3
                         and i in voter_set and rng.random() < 0.3)
        elif roll < 0.86:
            _partition(c, rng)
        elif roll < 0.92:
            c.net.heal()
        c.run_for(rng.choice(PAUSES_MS))
    c.stabilize(limit_ms=120_000)
    return c


def upgrade_chaos(seed: int, duration_ms: int = 20_000) -> Cluster:
    """A static quorum upgraded to kraft.version 1 (UpdateFeatures) under random faults: writes,
    crashes that lose unflushed writes, partitions, lossy links; once upgraded, voters announce new
    endpoints (UpdateRaftVoter). Afterwards every node holds the static voters, each with the
    directory id of its disk, in its log."""
    rng = random.Random(seed ^ 0x0B6A)
    voters = rng.choice([1, 3, 3, 5])
    faults = NetworkFaults(drop_rate=rng.choice([0.0, 0.01, 0.05]), duplicate_rate=rng.choice([0.0, 0.01]),
                           max_delay_ms=rng.choice([2, 10, 50]))
    c = Cluster(seed, voters, observers=rng.randint(0, 1), faults=faults, directory_ids=True,
                settings=RaftSettings(append_linger_ms=rng.choice([0, 5, 25])),
                snapshot_every=rng.choice([None, 10, 40]), crash_before_flush=rng.choice([0.0, 0.002, 0.02]))
    end = c.now + duration_ms
    while c.now < end:
        roll = rng.random()
        ld = c.leader()
        if roll < 0.45:
            c.write(rng.randint(1, 5))
        elif roll < 0.55 and ld is not None:
            if ld.core.voter_history.kraft_version < 1:
                c.upgrade_kraft_version()
            else:
                c.update_voter(rng.choice(c.voters), rng.randint(9000, 9009))
        elif roll < 0.65:
            _crash_one(c, rng)
        elif roll < 0.77:
            _restart_one(c, rng)
        elif roll < 0.84:
            _partition(c, rng)
        elif roll < 0.90:
            c.net.heal()
        c.run_for(rng.choice(PAUSES_MS))
    c.stabilize(limit_ms=120_000)
    def upgraded() -> bool:
        ld = c.leader()
        return ld is not None and ld.core.voter_history.kraft_version == 1 and not ld.core.voter_change_pending

    give_up = c.now + 60_000
    while not upgraded() and c.now < give_up:  # asked again, as an operator would, until it is done
        c.upgrade_kraft_version()
        c.run_for(100)
    assert upgraded(), f"seed {seed}: the upgrade never committed"
    c.stabilize(limit_ms=120_000)
    for n in c.nodes.values():
        latest = n.core.voter_history.latest
        assert n.core.voter_history.kraft_version == 1 and latest.ids == set(c.voters), (n.node_id, latest)
        assert all(latest[v].key.directory_id == c.nodes[v].directory_id for v in c.voters), (n.node_id, latest)
    return c


# -- dynamic quorum (KIP-853): each ends in stabilize() like the scenarios above ---------------------
def _change(c: Cluster, add: Optional[int] = None, remove=None, limit_ms: int = 30_000) -> None:
    """Make one voter change and wait until it is committed, writing meanwhile; retried while the
    leader answers REQUEST_TIMED_OUT (the node is not caught up yet, or no leader)."""
    end = c.now + limit_ms
    while c.now < end:
        if c.change_voters(add=add, remove=remove) is Errors.NONE:
            break
        _writes(c, 5)
    else:
        raise AssertionError(f"seed {c.seed}: the change (add {add}, remove {remove}) was never accepted")
    want_in = add
    assert c.run_until(lambda: c.leader() is not None and not c.leader().core.voter_change_pending
                       and (want_in is None or want_in in c.leader().core.voters), limit_ms), \
        f"seed {c.seed}: the change (add {add}, remove {remove}) never committed"


def grow_and_shrink(seed: int) -> Cluster:
    """1 -> 3 -> 5 -> 3 voters under a write load."""
    c = Cluster(seed, voters=1, dynamic=True, spares=4)
    _elect(c)
    for node in (2, 3, 4, 5):
        _writes(c, 5)
        _change(c, add=node)
    assert c.leader().core.voters == {1, 2, 3, 4, 5}
    for node in (2, 4):
        _change(c, remove=c.leader().core.voter_history.latest[node].key)
        _writes(c, 5)
    c.stabilize()
    assert c.leader().core.voters == {1, 3, 5}
    return c


def remove_the_leader(seed: int) -> Cluster:
    """The active controller removes itself: it leads until that commits, then the rest elect."""
    c = Cluster(seed, voters=3, dynamic=True)
    old = _elect(c)
    _writes(c, 10)
    _change(c, remove=c.leader().core.key)
    assert c.run_until(lambda: c.leader() is not None and c.leader().node_id != old, 30_000)
    _writes(c, 10)
    c.stabilize()
    assert old not in c.leader().core.voters and not c.nodes[old].core._campaigns
    return c


def replace_a_disk(seed: int) -> Cluster:
    """A voter's disk dies: formatted again it is a new replica (an observer under the same node id);
    the operator removes the old replica and adds the new one."""
    c = Cluster(seed, voters=3, dynamic=True)
    _elect(c)
    _writes(c, 10)
    victim = next(v for v in c.voters if v != c.leader().node_id)
    old_key = c.leader().core.voter_history.latest[victim].key
    c.crash(victim)
    c.wipe(victim)
    c.start(victim)
    assert not c.nodes[victim].core.is_voter
    _writes(c, 10)
    _change(c, remove=old_key)
    _change(c, add=victim)
    _writes(c, 10)
    c.stabilize()
    new_key = c.leader().core.voter_history.latest[victim].key
    assert new_key.directory_id == c.nodes[victim].directory_id != old_key.directory_id
    return c


MEMBERSHIP_SCENARIOS: dict[str, Callable[[int], Cluster]] = {
    "grow_and_shrink": grow_and_shrink,
    "remove_the_leader": remove_the_leader,
    "replace_a_disk": replace_a_disk,
}
