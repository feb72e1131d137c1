"""The controller on the simulated quorum: failover in the middle of a multi-batch operation, and a
property test of random request sequences against the metadata invariants."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quorum.controller import api
from quorum.controller.index import PartitionIndex
from quorum.controller.local import LocalController
from quorum.controller.settings import ControllerSettings
from quorum.errors import Errors
from quorum.metadata import MetadataDelta, change_block
from quorum.metadata.delta import TRANSACTION_MARKERS
from quorum.metadata.invariants import violations
from quorum.metadata.records import decode_record
from quorum.raft.settings import RaftSettings
from quorum.sim.cluster import CLUSTER_ID
from quorum.sim.controller_sim import ControllerCluster

BIG = 30_000


def _register_brokers(c: ControllerCluster, n: int = 3) -> dict[int, int]:
    epochs = {}
    for b in range(n):
        r = c.request(api.RegisterBrokerRequest(b, CLUSTER_ID, f"Inc000xxxxxxxxxxxxx{b:03d}",
                                                (api.BrokerEndpoint("PLAINTEXT", "h", 9092 + b),)))
        epochs[b] = r.broker_epoch
        hb = c.request(api.BrokerHeartbeatRequest(b, r.broker_epoch, 1 << 40))
        assert not hb.is_fenced
    return epochs


@pytest.mark.parametrize("seed, crash_after", [(1, 0), (2, 1), (3, 2), (4, 3), (5, 1)])
def test_failover_in_the_middle_of_a_multi_batch_create(seed, crash_after):
    # one batch per fetch, so followers commit the transaction's batches one at a time
    raft = RaftSettings(fetch_max_bytes=700_000, max_batch_bytes=700_000)
    c = ControllerCluster(seed, settings=raft)
    seen_sizes: set = set()

    def all_or_nothing(node_id, core):
        t = core.image.topics.topic_by_name("big")
        size = 0 if t is None else len(t.partitions)
        seen_sizes.add(size)
        assert size in (0, BIG), f"node {node_id} sees {size} partitions of 'big'"
    c.after_replay.append(all_or_nothing)

    leader = c.wait_active()
    _register_brokers(c)
    p = c.submit(api.CreateTopicsRequest((api.CreatableTopic("big", BIG, 3),)))
    assert len(p.op.batches) == 4  # Begin + Topic + 30,000 partitions + End, 10,000 per proposal

    def committed_batches() -> int:
        core = c.controllers()[leader]
        return sum(1 for b in c.nodes[leader].log.batches(p.first_offset, core.last_committed_offset + 1)
                   if b.base_offset >= p.first_offset)

    if crash_after:
        assert c.run_until(lambda: committed_batches() >= crash_after or p.done, 20_000)
        assert c.controllers()[leader].in_transaction  # the crash cuts the transaction
    c.crash(leader)
    new = c.wait_active()
    assert new != leader
    # the new leader serves at once
    (r,) = c.request(api.CreateTopicsRequest((api.CreatableTopic("small", 2, 2),)))
    assert r.error is Errors.NONE
    c.start(leader)
    target = c.leader().core.high_watermark  # past the transaction's end or its abort
    assert c.run_until(lambda: len(c.controllers()) == 3 and all(
        core.last_committed_offset >= target - 1 for core in c.controllers().values()), 30_000)
    images = {i: core.image for i, core in c.controllers().items()}
    sizes = {len(img.topics.topic_by_name("big").partitions) if img.topics.topic_by_name("big") else 0
             for img in images.values()}
    assert len(sizes) == 1 and sizes <= {0, BIG}
    for core in c.controllers().values():
        assert core.list_topics() in (["big", "small"], ["small"])
        assert violations(core.image) == []
        assert PartitionIndex.build(core.image).snapshot() == core.index.snapshot()


def test_replies_fail_with_not_controller_when_leader_dies_before_commit():
    c = ControllerCluster(11)
    leader = c.wait_active()
    _register_brokers(c)
    p = c.submit(api.CreateTopicsRequest((api.CreatableTopic("t", 3, 3),)))
    c.crash(leader)
    c.wait_active()
    c.run_until(lambda: p.done, 5000)
    assert p.done and (p.error is None or p.error.error is Errors.NOT_CONTROLLER)
    r = c.request(api.CreateTopicsRequest((api.CreatableTopic("t", 3, 3),)))
    assert r[0].error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS)


def test_brokers_without_heartbeats_get_fenced_on_the_new_controller():
    c = ControllerCluster(12, controller_settings=ControllerSettings(session_timeout_ms=3000))
    leader = c.wait_active()
    _register_brokers(c)
    c.request(api.CreateTopicsRequest((api.CreatableTopic("t", 3, 3),)))
    c.crash(leader)
    c.wait_active()
    c.run_for(5000)
    _, core = c.active()
    assert all(b.fenced for b in core.image.cluster.brokers.values())
    assert all(p.leader == -1 for p in core.image.topics.topic_by_name("t").partitions.values())


def test_a_shutdown_written_as_blocks_reaches_every_controller_alike():
    c = ControllerCluster(21)
    leader = c.wait_active()
    epochs = _register_brokers(c)
    (r,) = c.request(api.CreateTopicsRequest((api.CreatableTopic("t", 300, 3),)))
    assert r.error is Errors.NONE
    # broker 0's controlled shutdown moves its ~100 leaderships and takes it out of 300 ISRs
    c.request(api.BrokerHeartbeatRequest(0, epochs[0], 1 << 40, want_shutdown=True))
    c.crash(leader)  # ...and a standby that replayed the blocks takes over
    c.wait_active()
    c.start(leader)
    target = c.leader().core.high_watermark
    assert c.run_until(lambda: len(c.controllers()) == 3 and all(
        core.last_committed_offset >= target - 1 for core in c.controllers().values()), 30_000)
    node = c.leader()
    frames = [raw for b in node.log.batches(0, target) if not b.control for raw in b.records]
    assert sum(1 for raw in frames if raw[:2] == change_block.BLOCK_PREFIX) >= 1
    images = [core.image for core in c.controllers().values()]
    assert all(img.topics == images[0].topics for img in images)
    t = images[0].topics.topic_by_name("t")
    assert all(p.leader != 0 and 0 not in p.isr for p in t.partitions.values())
    for core in c.controllers().values():
        assert violations(core.image) == []
        assert PartitionIndex.build(core.image).snapshot() == core.index.snapshot()


# ---------------------------------------------------------------- property test
NAMES = ["a", "b", "c", "d"]
BROKERS = [0, 1, 2, 3]
DIR_A, DIR_B, DIR_C = "Uvwkq7q1T9Cb96OVaGex7A", "CkQ1SrseSvGDApIStVUtIw", "5FVl8RDQSXWM5R7iCaavmA"
LOG_DIRS = [(), (DIR_A,), (DIR_B, DIR_C)]  # a sparkraft broker's none, a Kafka broker's one, or JBOD

action = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(BROKERS), st.sampled_from([None, "r1", "r2"]),
              st.integers(0, 2), st.sampled_from(LOG_DIRS)),
    st.tuples(st.just("heartbeat"), st.sampled_from(BROKERS), st.booleans(), st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 12_000)),
    st.tuples(st.just("create"), st.sampled_from(NAMES), st.integers(-1, 5), st.integers(-1, 4)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("partitions"), st.sampled_from(NAMES), st.integers(1, 8)),
    st.tuples(st.just("alter"), st.sampled_from(NAMES), st.integers(0, 5), st.lists(st.sampled_from(BROKERS))),
    st.tuples(st.just("elect"), st.sampled_from(["PREFERRED", "UNCLEAN"])),
    st.tuples(st.just("unregister"), st.sampled_from(BROKERS)),
    st.tuples(st.just("configs"), st.sampled_from(NAMES), st.sampled_from(["SET", "DELETE", "APPEND"]),
              st.sampled_from(["retention.ms", "cleanup.policy", "bogus", "unclean.leader.election.enable",
                               "min.insync.replicas"]),
              st.sampled_from(["1", "2", "3", "compact", "-9", "true", "false"])),
    st.tuples(st.just("features"), st.sampled_from(["metadata.version", "eligible.leader.replicas.version",
                                                    "sparkraft.version"]),
              st.sampled_from([0, 1, 2, 13, 14, 17, 21, 23, 29, 30, 33, 34]),
              st.sampled_from(["UPGRADE", "SAFE_DOWNGRADE", "UNSAFE_DOWNGRADE"])),
    st.tuples(st.just("assign"), st.sampled_from(BROKERS), st.sampled_from(NAMES), st.integers(0, 5),
              st.sampled_from([DIR_A, DIR_B, DIR_C])),
    st.tuples(st.just("dir_failed"), st.sampled_from(BROKERS), st.sampled_from([DIR_A, DIR_B, DIR_C])),
    st.tuples(st.just("scram"), st.sampled_from(["alice", "bob", ""]),
              st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
              st.sampled_from([None, 4095, 4096, 8192, 16385]), st.booleans()),
    # a controller's registration (KIP-919): one of two incarnations, supporting metadata.version up to 3.8 or 4.2
    st.tuples(st.just("controller"), st.integers(1, 3), st.integers(0, 1), st.sampled_from([20, 33])),
    st.tuples(st.just("hold")),
    st.tuples(st.just("failover"), st.booleans()),
    st.tuples(st.just("reassign"), st.sampled_from(NAMES[:2]), st.integers(0, 2),
              st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("reassign"), st.sampled_from(NAMES), st.integers(0, 5),  # mostly refused
              st.lists(st.sampled_from(BROKERS + [7]), max_size=4)),
    st.tuples(st.just("cancel"), st.sampled_from(NAMES[:2]), st.integers(0, 2)),
    st.tuples(st.just("alter"), st.sampled_from(NAMES[:2]), st.integers(0, 2), st.just(BROKERS)),
)


def _leaderless_but_electable(image) -> list[str]:
    """Partitions without a leader although an ISR member's broker (or, with the ISR empty, an ELR
    member's) could lead (registered, unfenced, not shutting down): the controller elects whenever a
    broker becomes able to, so none may exist."""
    able = {b.broker_id for b in image.cluster.brokers.values() if not b.fenced and not b.in_controlled_shutdown}
    return [f"{t.name}-{pid} (ISR {p.isr}, ELR {p.elr})" for t in image.topics.by_id.values()
            for pid, p in t.partitions.items()
            if p.leader == -1 and (able.intersection(p.isr) or (not p.isr and able.intersection(p.elr)))]


class Reassignments:
    """What the reassignments asked for must do: while one is in flight, its partition's replicas
    stay within target + the replicas it started from; it ends by completing (replicas = target) or
    by a cancel (the original replicas), never otherwise, except when a failover dropped the
    uncommitted request that started it, or an unsafe downgrade of metadata.version below
    reassignments cancelled it (the original replicas again)."""

    def __init__(self) -> None:
        self.flight: dict = {}  # (topic id, partition) -> (target, allowed brokers)

    def started(self, key, before, target) -> None:
        self.flight[key] = (tuple(target), set(target) | set(before.replicas))

    def downgraded(self, before, image) -> None:
        """After an unsafe downgrade: a reassignment no longer in flight was reverted as a cancel
        reverts one (Kafka's revert: the replicas in flight less the ones being added, in order)."""
        for key in list(self.flight):
            t = image.topics.by_id.get(key[0])
            p = t.partitions.get(key[1]) if t is not None else None
            if p is not None and not (p.adding_replicas or p.removing_replicas):
                was = before.topics.by_id[key[0]].partitions[key[1]]
                assert p.replicas == tuple(b for b in was.replicas if b not in was.adding_replicas), (key, was, p)
                del self.flight[key]

    def cancelled(self, key, before, after) -> None:
        self.flight.pop(key, None)
        assert (after.adding_replicas, after.removing_replicas) == ((), ())
        assert after.replicas == tuple(b for b in before.replicas if b not in before.adding_replicas)

    def check(self, image, failover: bool) -> None:
        for key, (target, allowed) in list(self.flight.items()):
            t = image.topics.by_id.get(key[0])
            p = t.partitions.get(key[1]) if t is not None else None
            if p is None:
                del self.flight[key]
                continue
            assert set(p.replicas) <= allowed, (key, p, target)
            if not (p.adding_replicas or p.removing_replicas):
                assert p.replicas == target or failover, (key, p, target)
                del self.flight[key]


def _partition(image, name, pid):
    t = image.topics.topic_by_name(name)
    return (t.topic_id, t.partitions.get(pid)) if t is not None else (None, None)


def _epochs(image) -> dict:
    return {(tid, pid): (p.leader_epoch, p.partition_epoch)
            for tid, t in image.topics.by_id.items() for pid, p in t.partitions.items()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2), st.lists(action, max_size=40))
# found by the search: an unsafe downgrade of metadata.version cancels a reassignment in flight
@example(populated=1, actions=[("reassign", "a", 0, [0]), ("features", "metadata.version", 1, "UNSAFE_DOWNGRADE")])
# every broker says where its replicas of topic a are, then one of broker 2's directories fails
@example(populated=1, actions=[*(("assign", b, "a", p, DIR_C) for b in BROKERS for p in range(3)),
                               ("dir_failed", 2, DIR_C)])
@example(populated=1, actions=[("reassign", "a", 1, [0, 1]), ("features", "metadata.version", 1, "UNSAFE_DOWNGRADE")])
# a controller that registered support up to 3.8 (20) holds metadata.version below 4.0 (23)
@example(populated=0, actions=[("features", "metadata.version", 17, "UNSAFE_DOWNGRADE"), ("controller", 2, 0, 20),
                               ("features", "metadata.version", 23, "UPGRADE"), ("controller", 2, 1, 29),
                               ("features", "metadata.version", 23, "UPGRADE")])
def test_random_requests_keep_the_image_sound(populated, actions):
    # blocks from two partition changes on: every election, fencing and shutdown writes them
    c = LocalController(ControllerSettings(seed=3, max_records_per_batch=4, leader_imbalance_check_interval_ms=3000,
                                           change_block_min_rows=2))
    epochs: dict[int, int] = {}
    if populated:  # brokers and topics to reassign, elect and fence from the first action on; ELR on at 2
        for b in BROKERS:
            epochs[b] = c.request(api.RegisterBrokerRequest(b, c.cluster_id, f"Inc000xxxxxxxxxxxxx{b:03d}", (),
                                                            log_dirs=LOG_DIRS[b % len(LOG_DIRS)])).broker_epoch
            c.request(api.BrokerHeartbeatRequest(b, epochs[b], c.core.last_committed_offset))
        if populated == 2:
            c.request(api.UpdateFeaturesRequest((("eligible.leader.replicas.version", 1),)))
        c.request(api.CreateTopicsRequest((api.CreatableTopic("a", 3, 2),
                                           api.CreatableTopic("b", 2, 3, configs=(("min.insync.replicas", "2"),)))))
    last_epochs: dict = {}
    deleted: set = set()
    reassignments = Reassignments()
    epoch = 1
    for a in actions:
        kind = a[0]
        req = None
        if kind == "register":
            req = api.RegisterBrokerRequest(a[1], c.cluster_id, f"Inc{a[3]:03d}xxxxxxxxxxxxx{a[1]:03d}", (), a[2],
                                            log_dirs=a[4])
        elif kind == "heartbeat" and a[1] in epochs:
            req = api.BrokerHeartbeatRequest(a[1], epochs[a[1]], c.core.last_committed_offset,
                                             want_fence=a[2] and a[3], want_shutdown=a[2] and not a[3])
        elif kind == "tick":
            c.tick(c.now + a[1])
        elif kind == "create":
            req = api.CreateTopicsRequest((api.CreatableTopic(a[1], a[2], a[3]),))
        elif kind == "delete":
            req = api.DeleteTopicsRequest((a[1],))
        elif kind == "partitions":
            req = api.CreatePartitionsRequest((api.PartitionCountUpdate(a[1], a[2]),))
        elif kind == "alter":
            t = c.core.spec.topics.topic_by_name(a[1])
            p = t.partition(a[2]) if t is not None else None
            if p is not None and p.leader in epochs:
                isr = tuple(dict.fromkeys([p.leader] + [b for b in a[3] if b in p.replicas]))
                req = api.AlterPartitionRequest(p.leader, epochs[p.leader], (api.PartitionIsr(
                    t.topic_id, a[2], p.leader_epoch, p.partition_epoch, isr),))
        elif kind == "assign" and a[1] in epochs:  # a broker says which directory a replica is in
            t = c.core.spec.topics.topic_by_name(a[2])
            req = api.AssignReplicasToDirsRequest(a[1], epochs[a[1]], (api.DirectoryAssignment(
                t.topic_id if t is not None else "AAAAAAAAAAAAAAAAAAAAAQ", a[3], a[4]),))
        elif kind == "dir_failed" and a[1] in epochs:  # a heartbeat naming a failed log directory
            req = api.BrokerHeartbeatRequest(a[1], epochs[a[1]], c.core.last_committed_offset, offline_log_dirs=(a[2],))
        elif kind == "elect":
            req = api.ElectLeadersRequest(a[1], None)
        elif kind == "unregister":
            req = api.UnregisterBrokerRequest(a[1])
        elif kind == "features":
            req = api.UpdateFeaturesRequest(((a[1], a[2]),), upgrade_type=a[3])
        elif kind in ("reassign", "cancel"):
            replicas = tuple(a[3]) if kind == "reassign" else None
            req = api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(
                api.TopicPartition(a[1], a[2]), replicas),))
        elif kind == "configs":
            key = api.ConfigResourceKey("TOPIC", a[1])
            req = api.IncrementalAlterConfigsRequest(((key, (api.AlterableConfig(a[3], a[2], a[4]),)),))
        elif kind == "scram":  # a deletion (None), or an upsertion with these iterations
            if a[3] is None:
                req = api.AlterUserScramCredentialsRequest(deletions=(api.ScramCredentialDeletion(a[1], a[2]),))
            else:
                size = 64 if a[2].endswith("512") else 32
                salted = bytes(size if a[4] else size - 1)  # a salted password of the wrong size is refused
                req = api.AlterUserScramCredentialsRequest(
                    upsertions=(api.ScramCredentialUpsertion(a[1], a[2], a[3], b"salt", salted),))
        elif kind == "controller":
            req = api.RegisterControllerRequest(a[1], f"Ctl{a[2]:03d}xxxxxxxxxxxxx{a[1]:03d}", (
                api.BrokerEndpoint("CONTROLLER", "h", 9093 + a[1]),), (("metadata.version", 14, a[3]),))
        elif kind == "hold":
            c.hold = True
        elif kind == "failover":
            if a[1]:
                c.commit()  # the next leader may have all of it ...
            else:
                c.uncommitted = [b for b in c.uncommitted if b.control]  # ... or none of it
            c.hold = False
            epoch += 1
            c.elect(epoch)
            epochs = {b: r.broker_epoch for b, r in c.core.image.cluster.brokers.items()}
        if req is not None:
            before = c.core.spec
            op = c.core.handle(req, c.now)
            if op.error is not None:
                assert c.core.spec.same_metadata(before)
                c.propose(op)  # its audit entry, if it has one
            else:
                _blocks_apply_as_their_rows(before, op)
                c.propose(op)
                if kind in ("reassign", "cancel") and op.reply[0].error is Errors.NONE:
                    tid, p = _partition(before, a[1], a[2])
                    if kind == "reassign":
                        reassignments.started((tid, a[2]), p, a[3])
                    else:
                        reassignments.cancelled((tid, a[2]), p, _partition(c.core.spec, a[1], a[2])[1])
                if kind == "features" and a[3] == "UNSAFE_DOWNGRADE" and op.reply[0].error is Errors.NONE:
                    reassignments.downgraded(before, c.core.spec)
                if kind == "register":
                    epochs[a[1]] = op.reply.broker_epoch
                if kind == "dir_failed" and op.batches:  # no replica of it is left in an ISR in that directory
                    for t in c.core.spec.topics.by_id.values():
                        for q in t.partitions.values():
                            assert not (a[1] in q.isr and q.directories and q.directory_of(a[1]) == a[2]), (a, q)
                if kind == "assign" and op.batches:
                    DIRECTORIES_MOVED[0] += 1
                    tid, p = _partition(c.core.spec, a[2], a[3])
                    assert p.directory_of(a[1]) == a[4], (a, p)
                if kind == "unregister":
                    epochs.pop(a[1], None)
                if kind == "controller":  # registered as asked, and only where metadata.version has them
                    registered = c.core.spec.cluster.controllers[a[1]]
                    assert before.features.metadata_version >= 15, a
                    assert (registered.incarnation_id, registered.feature("metadata.version").max_version) == \
                        (req.incarnation_id, a[3]), (a, registered)
                was = before.features.metadata_version if a[1] == "metadata.version" else before.features.level(a[1])
                if kind == "features" and op.reply[0].error is Errors.NONE and a[2] != was:
                    # a level every other registered controller supports (KIP-919's check)
                    for other in before.cluster.controllers.values():
                        f = other.feature(a[1])  # one not named: level 0 only, as Kafka reads it
                        lo, hi = (f.min_version, f.max_version) if f is not None else (0, 0)
                        assert other.controller_id == c.core.node_id or lo <= a[2] <= hi, (a, other)
        for image in (c.core.image, c.core.spec):
            assert violations(image) == [], (a, violations(image))
        assert _leaderless_but_electable(c.core.spec) == [], a
        reassignments.check(c.core.spec, kind == "failover")
        image = c.core.image
        now_epochs = _epochs(image)
        for key, (le, pe) in now_epochs.items():
            old = last_epochs.get(key)
            assert old is None or (le >= old[0] and pe >= old[1]), (key, old, le, pe)
            assert key[0] not in deleted
        for tid in set(k[0] for k in last_epochs) - set(k[0] for k in now_epochs):
            deleted.add(tid)
        last_epochs = now_epochs
        assert PartitionIndex.build(c.core.spec).snapshot() == c.core.index.snapshot(), a
    c.commit()
    assert violations(c.core.image) == []
    _settle(c, epochs, reassignments)


BLOCKS_SEEN = [0]  # blocks the property test saw (its last test checks there were some)
DIRECTORIES_MOVED = [0]  # AssignReplicasToDirs that changed a partition's directories (checked likewise)


def _blocks_apply_as_their_rows(before, op) -> None:
    """The invariant of partition change blocks: the image after an operation's records as written
    (blocks and continuations) equals the image after the same changes one by one, and each block
    shares its batch with its continuations."""
    frames = [raw for batch in op.batches for raw in batch]
    for batch in op.batches:
        assert batch[0] != change_block.CONTINUATION_BYTES  # a continuation never starts a batch
    BLOCKS_SEEN[0] += sum(1 for raw in frames if raw[:2] == change_block.BLOCK_PREFIX)
    images = []
    for form in (frames, [raw for batch in op.batches for raw in change_block.unblocked(batch)]):
        delta = MetadataDelta(before)
        for raw in form:
            record = decode_record(raw)
            if record.type not in TRANSACTION_MARKERS:
                delta.replay(record)
        images.append(delta.apply())
    assert images[0].topics == images[1].topics
    assert images[0].topics.partition_total == images[1].topics.partition_total


def test_the_random_requests_wrote_partition_change_blocks_and_moved_directories():
    """(after the property test, in file order) the invariants above were exercised."""
    if BLOCKS_SEEN[0] == 0 or DIRECTORIES_MOVED[0] == 0:
        test_random_requests_keep_the_image_sound()
    assert BLOCKS_SEEN[0] > 0 and DIRECTORIES_MOVED[0] > 0


def _settle(c: LocalController, epochs: dict, reassignments: Reassignments) -> None:
    """Every broker back, every leader puts its live replicas in the ISR: each reassignment whose
    target brokers are all registered completes."""
    c.hold = False
    c.commit()
    for _ in range(2):
        for b in sorted(epochs):
            op = c.core.handle(api.BrokerHeartbeatRequest(b, epochs[b], c.core.last_committed_offset), c.now)
            if op.error is None:
                c.propose(op)
    registered = set(c.core.image.cluster.brokers)
    for (tid, pid), (target, _) in list(reassignments.flight.items()):
        p = c.core.image.topics.by_id[tid].partitions[pid]
        if p.leader == -1 or not set(target) <= registered:
            continue
        live = tuple(b for b in p.replicas if b == p.leader or c.core.acceptable(b))
        (r,) = c.request(api.AlterPartitionRequest(p.leader, epochs[p.leader], (
            api.PartitionIsr(tid, pid, p.leader_epoch, p.partition_epoch, live),)))
        assert r.error is Errors.NONE, r
        reassignments.check(c.core.image, False)
        assert (tid, pid) not in reassignments.flight, (p, target)
    assert violations(c.core.image) == []
