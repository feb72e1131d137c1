"""Partition reassignment at the controller: start, completion through the leader's AlterPartition,
cancellation, and Kafka's errors for bad targets (each changing nothing)."""
from __future__ import annotations

from controller_helpers import controller, create, heartbeat

from quorum.controller import api
from quorum.errors import Errors
from quorum.metadata.invariants import violations

TP = api.TopicPartition("t", 0)


def _p(c, pid=0):
    t = c.core.image.topics.topic_by_name("t")
    return t.topic_id, t.partitions[pid]


def _reassign(c, replicas, tp=TP):
    (r,) = c.request(api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(tp, replicas),)))
    return r


def _expand(c, epochs, pid=0):
    """The leader's broker puts every replica in the ISR (they caught up)."""
    tid, p = _p(c, pid)
    (r,) = c.request(api.AlterPartitionRequest(p.leader, epochs[p.leader], (
        api.PartitionIsr(tid, pid, p.leader_epoch, p.partition_epoch, p.replicas),)))
    return r


def test_move_a_partition_to_other_brokers_through_the_isr():
    c, epochs = controller(5)
    create(c, "t", -1, -1, assignments=((0, 1, 2),))
    _, before = _p(c)
    assert _reassign(c, (3, 4, 0)).error is Errors.NONE
    _, p = _p(c)
    # the target first, then what is being removed; the added brokers are not in the ISR yet
    assert p.replicas == (3, 4, 0, 1, 2) and p.adding_replicas == (3, 4) and p.removing_replicas == (1, 2)
    assert p.isr == before.isr and p.leader == before.leader
    (ongoing,) = c.core.list_reassignments(api.ListPartitionReassignmentsRequest())
    assert ongoing == api.OngoingReassignment(TP, (3, 4, 0, 1, 2), (3, 4), (1, 2))
    assert _expand(c, epochs).error is Errors.NONE
    _, q = _p(c)
    assert (q.replicas, q.adding_replicas, q.removing_replicas) == ((3, 4, 0), (), ())
    assert set(q.isr) == {3, 4, 0} and q.leader in q.isr and q.leader_epoch > p.leader_epoch
    assert c.core.list_reassignments(api.ListPartitionReassignmentsRequest()) == ()
    assert violations(c.core.image) == []


def test_leader_moves_off_a_removed_replica_at_completion():
    c, epochs = controller(4)
    create(c, "t", -1, -1, assignments=((0, 1),))
    assert _p(c)[1].leader == 0
    _reassign(c, (2, 3))
    assert _p(c)[1].leader == 0  # leads until the new replicas are in sync
    _expand(c, epochs)
    _, q = _p(c)
    assert q.replicas == (2, 3) and q.leader == 2 and set(q.isr) == {2, 3}


def test_reorder_or_shrink_completes_at_once():
    c, _ = controller(3)
    create(c, "t", -1, -1, assignments=((0, 1, 2),))
    assert _reassign(c, (2, 1, 0)).error is Errors.NONE
    _, p = _p(c)
    assert p.replicas == (2, 1, 0) and not p.adding_replicas and not p.removing_replicas
    assert _reassign(c, (1,)).error is Errors.NONE
    _, q = _p(c)
    assert q.replicas == (1,) and q.isr == (1,) and q.leader == 1


def test_fencing_a_removed_replica_does_not_complete_it_without_the_target_in_sync():
    c, epochs = controller(3)
    create(c, "t", -1, -1, assignments=((0, 1),))
    _reassign(c, (0, 2))
    c.now = 9000
    for b in (0, 2):
        heartbeat(c, b, epochs[b])
    c.tick(9500)  # broker 1 (being removed) is fenced and leaves the ISR
    _, p = _p(c)
    assert p.isr == (0,) and p.adding_replicas == (2,) and p.removing_replicas == (1,)
    tid, p = _p(c)
    (r,) = c.request(api.AlterPartitionRequest(0, epochs[0], (
        api.PartitionIsr(tid, 0, p.leader_epoch, p.partition_epoch, (0, 2)),)))
    assert r.error is Errors.NONE and r.isr == (0, 2)
    _, q = _p(c)
    assert (q.replicas, q.isr, q.adding_replicas, q.removing_replicas) == ((0, 2), (0, 2), (), ())


def test_cancel_reverts_to_the_original_replicas():
    c, epochs = controller(5)
    create(c, "t", -1, -1, assignments=((0, 1, 2),))
    _, original = _p(c)
    _reassign(c, (3, 4, 0))
    assert _reassign(c, None).error is Errors.NONE
    _, p = _p(c)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((0, 1, 2), (), ())
    assert set(p.isr) == set(original.isr)
    r = _reassign(c, None)
    assert r.error is Errors.NO_REASSIGNMENT_IN_PROGRESS and r.message == "No partition reassignment is in progress."
    assert violations(c.core.image) == []


def test_a_new_target_replaces_the_one_in_flight():
    c, epochs = controller(6)
    create(c, "t", -1, -1, assignments=((0, 1),))
    _reassign(c, (2, 3))
    _reassign(c, (4, 5))
    _, p = _p(c)
    assert p.replicas[:2] == (4, 5) and set(p.removing_replicas) == {0, 1, 2, 3} and p.adding_replicas == (4, 5)
    _expand(c, epochs)
    assert _p(c)[1].replicas == (4, 5)


def test_bad_targets_are_kafkas_errors_and_change_nothing():
    c, _ = controller(3)
    create(c, "t", -1, -1, assignments=((0, 1),))
    before = c.core.image.topics
    cases = [
        ((0, 9), Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        ((1, 1), Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 1 more than once."),
        ((), Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
    ]
    for replicas, error, message in cases:
        r = _reassign(c, replicas)
        assert (r.error, r.message) == (error, message)
    r = _reassign(c, (0, 1), api.TopicPartition("nope", 0))
    assert r.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    r = _reassign(c, (0, 1), api.TopicPartition("t", 7))
    assert r.error is Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert c.core.image.topics is before
    twice = api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(TP, (0, 2)),) * 2)
    assert c.expect_error(twice).error is Errors.INVALID_REQUEST
    assert c.core.image.topics is before


def _only_added_replicas_in_sync(c, epochs):
    """t-0 moving from (0,) to (1, 2): 1 joins the ISR, then 0 is fenced, so 1 leads and the ISR
    holds only a replica being added."""
    _reassign(c, (1, 2))
    tid, p = _p(c)
    (r,) = c.request(api.AlterPartitionRequest(0, epochs[0], (
        api.PartitionIsr(tid, 0, p.leader_epoch, p.partition_epoch, (0, 1)),)))
    assert r.error is Errors.NONE
    c.now = 9000
    for b in (1, 2, 3):
        heartbeat(c, b, epochs[b])
    c.tick(9500)
    _, q = _p(c)
    assert q.isr == (1,) and q.leader == 1 and q.adding_replicas == (1, 2)


def test_cancel_that_would_need_an_unclean_election_is_refused_unless_the_topic_allows_it():
    c, epochs = controller(4)
    create(c, "t", -1, -1, assignments=((0,),))
    _only_added_replicas_in_sync(c, epochs)
    before = c.core.image.topics
    r = _reassign(c, None)
    assert r.error is Errors.INVALID_REPLICA_ASSIGNMENT
    assert r.message == "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    assert c.core.image.topics is before
    key = api.ConfigResourceKey("TOPIC", "t")
    c.request(api.IncrementalAlterConfigsRequest(((key, (api.AlterableConfig(
        "unclean.leader.election.enable", "SET", "true"),)),)))
    assert _reassign(c, None).error is Errors.NONE
    _, q = _p(c)
    assert (q.replicas, q.isr, q.adding_replicas, q.removing_replicas) == ((0,), (0,), (), ())
    assert q.leader == -1  # broker 0 is fenced: leaderless until it returns
    assert violations(c.core.image) == []


# ---------------------------------------------------------------- the leader balance
def _roll(c, epochs, broker, at_ms):
    """``broker`` misses its heartbeats (fenced), then returns and its partitions' leaders put it
    back in their ISRs."""
    c.now = at_ms
    for b in epochs:
        if b != broker:
            heartbeat(c, b, epochs[b])
    c.tick(at_ms + 9000)
    heartbeat(c, broker, epochs[broker])  # unfenced again
    for b in epochs:
        heartbeat(c, b, epochs[b])
    image = c.core.image
    for t in image.topics.by_id.values():
        for pid, p in t.partitions.items():
            if broker not in p.isr and p.leader != -1:
                c.request(api.AlterPartitionRequest(p.leader, epochs[p.leader], (
                    api.PartitionIsr(t.topic_id, pid, p.leader_epoch, p.partition_epoch, p.isr + (broker,)),)))


def _led(c):
    led: dict = {}
    for t in c.core.image.topics.by_id.values():
        for p in t.partitions.values():
            led[p.leader] = led.get(p.leader, 0) + 1
    return led


def test_leaders_return_to_the_preferred_replicas_after_a_roll():
    c, epochs = controller(3, leader_imbalance_check_interval_ms=60_000, max_records_per_batch=2)
    create(c, "t", 12, 3)
    assert _led(c) == {0: 4, 1: 4, 2: 4}
    _roll(c, epochs, 0, 1000)
    assert 0 not in _led(c)  # back in every ISR, but leading nothing
    _check_balance(c, epochs, 59_000)
    assert 0 not in _led(c)  # not before the check interval
    _check_balance(c, epochs, 60_000)
    assert _led(c)[0] == 2  # one batch of two elections...
    assert c.core.next_deadline_ms() == 60_000  # ...and the next round at once
    c.tick(60_000)
    assert _led(c) == {0: 4, 1: 4, 2: 4}
    assert c.core.next_deadline_ms() <= 60_500  # the idle NoOp; the next check after the interval
    assert violations(c.core.image) == []


def _preferred_elsewhere(c):
    """Reorder one partition led by broker 0 so that another broker is its preferred replica:
    that broker now leads 4 of the 5 partitions it prefers (20 % imbalance)."""
    t = c.core.image.topics.topic_by_name("t")
    pid, p = next((pid, p) for pid, p in sorted(t.partitions.items()) if p.leader == 0)
    other = p.replicas[1]
    reordered = (other,) + tuple(b for b in p.replicas if b != other)
    c.request(api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(api.TopicPartition("t", pid),
                                                                                reordered),)))
    q = c.core.image.topics.topic_by_name("t").partitions[pid]
    assert q.replicas == reordered and q.leader == 0
    return pid, other


def _check_balance(c, epochs, at):
    for b in epochs:
        c.request(api.BrokerHeartbeatRequest(b, epochs[b], c.core.last_committed_offset), at)
    c.tick(at)


def test_rebalance_only_past_the_imbalance_percentage_and_when_enabled():
    cases = [({}, True), ({"leader_imbalance_percentage": 20}, False), ({"auto_leader_rebalance": False}, False)]
    for settings, moves in cases:
        c, epochs = controller(3, leader_imbalance_check_interval_ms=5000, **settings)
        create(c, "t", 12, 3)
        pid, other = _preferred_elsewhere(c)
        _check_balance(c, epochs, 6000)
        leader = c.core.image.topics.topic_by_name("t").partitions[pid].leader
        assert leader == (other if moves else 0), settings
