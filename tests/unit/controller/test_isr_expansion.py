"""The partition leader's ISR expansion (quorum/broker/isr_expansion.py) against a real controller
core: a restarted broker rejoins the ISRs it left once caught up, and a reassignment's added replica
joins only once its broker reports the offset that made it a replica."""
from __future__ import annotations

import itertools

from controller_helpers import controller, create, heartbeat, register

from quorum.broker.isr_expansion import IsrExpansion
from quorum.broker.metadata_client import MetadataUpdate
from quorum.controller import api
from quorum.metadata.records import decode_record


class Controllers:
    """What IsrExpansion calls on a ControllerClient, answered by an in-process LocalController."""

    def __init__(self, c):
        self.c = c
        self.calls = 0

    def describe_cluster(self):
        return self.c.core.describe_cluster()

    def alter_partition(self, request):
        self.calls += 1
        return self.c.request(request)


class Feed:
    """Hands the controller's newly committed records to ``expansion.on_update``, as a broker's
    metadata client would."""

    def __init__(self, c, expansion):
        self.c, self.expansion, self.seen = c, expansion, len(c.log)

    def __call__(self):
        records = [(b.base_offset + i, decode_record(raw)) for b in self.c.log[self.seen:] if not b.control
                   for i, raw in enumerate(b.records)]
        self.seen = len(self.c.log)
        if records:
            self.expansion.on_update(MetadataUpdate(records[0][0], records[-1][0], tuple(records), self.c.core.image))


def _later():
    """A clock on which every reading is a minute after the last: each round is due."""
    ticks = itertools.count(0, 60)
    return lambda: float(next(ticks))


def _expansion(c, epochs, broker, clock=None):
    x = IsrExpansion(broker, Controllers(c), lambda: c.core.image, lambda b: epochs[b], clock=clock or _later())
    return x, Feed(c, x)


def _p(c, name="t", pid=0):
    return c.core.image.topics.topic_by_name(name).partitions[pid]


def _restart(c, epochs, broker, at_ms, offset=None):
    """``broker`` is fenced (missed heartbeats), then registers again and heartbeats."""
    c.now = at_ms
    for b in epochs:
        if b != broker:
            heartbeat(c, b, epochs[b])
    c.tick(at_ms + 9000)  # only its session (last heard of at 0) has run out
    epochs[broker] = register(c, broker, gen=1, unfence=False)
    reply = c.request(api.BrokerHeartbeatRequest(broker, epochs[broker],
                                                 c.core.last_committed_offset if offset is None else offset))
    return reply


def test_a_restarted_broker_rejoins_the_isrs_it_left():
    c, epochs = controller(3)
    create(c, "t", 4, 3)
    leaders = {pid: _p(c, pid=pid).leader for pid in range(4)}
    _restart(c, epochs, 2, 1000)
    left = [pid for pid in range(4) if 2 not in _p(c, pid=pid).isr]
    assert left  # it left every ISR when fenced
    expansions = {b: _expansion(c, epochs, b) for b in range(3)}
    # its first heartbeat reported an offset from before the image the leaders started from
    assert sum(x.round() for x, _ in expansions.values()) == 0
    heartbeat(c, 2, epochs[2])
    done = sum(x.round() for x, _ in expansions.values())
    assert done == len(left)
    for pid in range(4):
        p = _p(c, pid=pid)
        assert set(p.isr) == {0, 1, 2} and p.leader in (leaders[pid], 0, 1)
    assert sum(x.round() for x, _ in expansions.values()) == 0  # nothing more to do
    # back in the ISR, a preferred election gives it back the partitions it prefers
    c.request(api.ElectLeadersRequest("PREFERRED", None))
    assert all(_p(c, pid=pid).leader == _p(c, pid=pid).replicas[0] for pid in range(4))


def test_a_broker_not_caught_up_does_not_join():
    c, epochs = controller(4)
    create(c, "t", -1, -1, assignments=((0, 1),))
    x, feed = _expansion(c, epochs, 0)
    x.round()  # the image as it started: nothing to expand
    feed()
    heartbeat(c, 2, epochs[2])  # broker 2 reports an offset before the reassignment
    (r,) = c.request(api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(
        api.TopicPartition("t", 0), (0, 2)),)))
    feed()
    assert _p(c).adding_replicas == (2,)
    calls = x.client.calls
    assert x.round() == 0 and x.client.calls == calls  # 2 has not applied the reassignment yet
    heartbeat(c, 2, epochs[2])  # now it has
    assert x.round() == 1
    feed()
    p = _p(c)
    assert p.replicas == (0, 2) and set(p.isr) == {0, 2} and not p.adding_replicas


def test_a_fenced_replica_does_not_join_and_a_refused_proposal_waits_for_retry():
    now = [0.0]
    c, epochs = controller(3)
    create(c, "t", 1, 3)
    leader = _p(c).leader
    other = [b for b in (0, 1, 2) if b != leader][0]
    _restart(c, epochs, other, 1000, offset=-1)  # registered but not caught up: still fenced
    assert c.core.image.cluster.brokers[other].fenced
    image = [c.core.image]
    x = IsrExpansion(leader, Controllers(c), lambda: image[0], lambda b: epochs[b], clock=lambda: now[0])
    feed = Feed(c, x)
    assert x.round() == 0 and x.client.calls == 0
    heartbeat(c, other, epochs[other])
    heartbeat(c, other, epochs[other])  # caught up, and reported so
    image[0] = c.core.image  # the leader's image knows it is unfenced...
    feed()
    tid = c.core.image.topics.topic_by_name("t").topic_id
    p = _p(c)
    (r,) = c.request(api.AlterPartitionRequest(leader, epochs[leader], (
        api.PartitionIsr(tid, 0, p.leader_epoch, p.partition_epoch, (leader,)),)))
    assert r.isr == (leader,)  # ...but not that the ISR has changed since: its proposal is stale
    assert x.round() == 0 and x.client.calls == 1
    assert x.round() == 0 and x.client.calls == 1  # not again at the same partition epoch...
    now[0] += x.retry_s
    assert x.round() == 0 and x.client.calls == 2  # ...until retry_s has passed
    third = ({0, 1, 2} - {leader, other}).pop()
    heartbeat(c, third, epochs[third])  # its last report predates the leader's image: report again
    image[0] = c.core.image
    feed()
    assert x.round() == 1
    assert set(_p(c).isr) == {0, 1, 2}


def test_a_change_inside_a_transaction_is_looked_at_once_the_image_publishes_it():
    """Inside a multi-batch transaction the broker's image stays at the transaction's start while
    its records arrive: a partition noted then must still be expanded once the image shows it (at
    200,000 partitions this left 630 reassignments in flight for good)."""
    c, epochs = controller(4, max_records_per_batch=2)
    create(c, "t", -1, -1, assignments=((0, 1), (0, 1), (0, 1)))
    image = [c.core.image]
    x = IsrExpansion(0, Controllers(c), lambda: image[0], lambda b: epochs[b], clock=_later())
    x.round()
    seen = len(c.log)
    moves = tuple(api.ReassignablePartition(api.TopicPartition("t", pid), (0, 2)) for pid in range(3))
    c.request(api.AlterPartitionReassignmentsRequest(moves))  # 3 records + markers: a transaction
    heartbeat(c, 2, epochs[2])
    batches = [b for b in c.log[seen:] if not b.control]
    records = [(b.base_offset + i, decode_record(raw)) for b in batches for i, raw in enumerate(b.records)]
    assert len(batches) > 1  # several batches: the image is published only at the end
    x.on_update(MetadataUpdate(records[0][0], records[-2][0], tuple(records[:-1]), image[0]))
    assert x.round() == 0  # its image does not show the reassignments yet
    image[0] = c.core.image
    x.on_update(MetadataUpdate(records[-1][0], records[-1][0], tuple(records[-1:]), image[0]))
    assert x.round() == 3
    assert all(c.core.image.topics.topic_by_name("t").partitions[pid].replicas == (0, 2) for pid in range(3))


def test_a_leadership_given_to_another_broker_is_not_noted_and_one_moved_away_is_dropped():
    """Every broker sees every change of a cluster-wide balance: those that hand another broker a
    partition this one neither leads nor watches cost it no entry; a watched partition whose
    leadership moves away leaves the watch (not proposed for, as it is no longer this broker's)."""
    c, epochs = controller(3)
    create(c, "t", -1, -1, assignments=((0, 1, 2), (1, 0, 2)))
    tid = c.core.image.topics.topic_by_name("t").topic_id
    _restart(c, epochs, 2, 1000, offset=-1)  # fenced: out of both ISRs, which are short of it now
    (x0, feed0), (x2, feed2) = _expansion(c, epochs, 0), _expansion(c, epochs, 2)
    x0.round(), x2.round()
    assert x0._watch == {(tid, 0)} and not x2._watch
    c.request(api.BrokerHeartbeatRequest(0, epochs[0], c.core.last_committed_offset, want_shutdown=True))
    assert _p(c, pid=0).leader == 1  # broker 0's leadership went to broker 1
    feed0(), feed2()
    assert (tid, 0) not in x2._changed  # not broker 2's, before or after
    assert (tid, 0) in x0._changed  # broker 0 watched it
    calls = x0.client.calls
    assert x0.round() == 0 and not x0._watch and x0.client.calls == calls


def test_one_expansion_for_several_brokers_proposes_each_partition_from_its_leader():
    """``bench day2`` runs the leader side of its simulated brokers as one IsrExpansion: each
    partition is proposed in an AlterPartition of the broker that leads it, at that broker's epoch."""
    c, epochs = controller(3)
    create(c, "t", 6, 3)
    _restart(c, epochs, 2, 1000)
    left = [pid for pid in range(6) if 2 not in _p(c, pid=pid).isr]
    leaders = {_p(c, pid=pid).leader for pid in left}
    assert leaders == {0, 1}  # the restarted broker led none of what it left
    x, _ = _expansion(c, epochs, (0, 1))
    sent = []
    x.client.alter_partition = lambda request: sent.append(request) or c.request(request)
    heartbeat(c, 2, epochs[2])
    assert x.round() == len(left)
    assert sorted(r.broker_id for r in sent) == [0, 1]
    for r in sent:
        assert r.broker_epoch == epochs[r.broker_id]
        assert all(_p(c, pid=i.partition).leader == r.broker_id for i in r.partitions)
    assert all(set(_p(c, pid=pid).isr) == {0, 1, 2} for pid in range(6))


def test_a_block_is_noted_as_its_rows_one_by_one():
    """A partition change block (a balance or a shutdown at scale) notes exactly what its rows as
    PartitionChangeRecords at the same offsets note: moved replicas, leaders this broker gains or
    loses, and leaders moving between other brokers only where watched or noted already."""
    import random

    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.metadata import change_block
    from quorum.metadata.records import encode_record

    for seed in range(30):
        rng = random.Random(seed)
        changes = []
        for _ in range(rng.randint(1, 60)):
            change = pb.PartitionChangeRecord(topic_id=rng.choice(["A" * 22, "B" * 22]), partition_id=rng.randint(0, 9))
            if rng.random() < 0.8:
                change.leader = rng.randint(-1, 4)
            if rng.random() < 0.2:
                change.replicas.ids.extend(rng.sample(range(5), 3))
            if rng.random() < 0.3 or not change.HasField("leader"):
                change.isr.ids.extend(rng.sample(range(5), 2))
            changes.append(change)
        changes.sort(key=lambda c: c.topic_id)  # a block holds a topic's rows in a row
        watched = {(rng.choice(["A" * 22, "B" * 22]), rng.randint(0, 9)) for _ in range(4)}
        noted = {(rng.choice(["A" * 22, "B" * 22]), rng.randint(0, 9)): 3 for _ in range(3)}
        seen = []
        for records in ([change_block.block_of(changes)], changes):
            x = IsrExpansion(1, None, lambda: None, lambda b: 0)
            x._watch, x._changed = set(watched), dict(noted)
            decoded = tuple((100 + i, decode_record(encode_record(r))) for i, r in enumerate(records))
            x.on_update(MetadataUpdate(100, 100 + len(changes) - 1, decoded, None))
            seen.append((x._changed, x._since))
        assert seen[0] == seen[1], seed
