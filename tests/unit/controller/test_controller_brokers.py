"""Broker lifecycle: registration, fencing, heartbeats, session expiry, controlled shutdown."""
from controller_helpers import controller, create, heartbeat, incarnation, register

from quorum.controller import api
from quorum.controller.local import LocalController
from quorum.controller.settings import ControllerSettings
from quorum.errors import Errors
from quorum.metadata.invariants import violations


def test_register_gives_the_record_offset_as_epoch_and_starts_fenced():
    c = LocalController(ControllerSettings(seed=1))
    epoch = register(c, 1, unfence=False)
    record_batch = [b for b in c.log if not b.control][-1]
    assert epoch == record_batch.base_offset
    b = c.core.image.cluster.broker(1)
    assert b.broker_epoch == epoch and b.fenced


def test_heartbeat_unfences_once_caught_up():
    c = LocalController(ControllerSettings(seed=1))
    epoch = register(c, 1, unfence=False)
    r = c.request(api.BrokerHeartbeatRequest(1, epoch, epoch - 1))
    assert (r.is_caught_up, r.is_fenced) == (False, True)
    assert c.core.image.cluster.broker(1).fenced
    r = c.request(api.BrokerHeartbeatRequest(1, epoch, epoch))
    assert (r.is_caught_up, r.is_fenced, r.should_shutdown) == (True, False, False)
    assert not c.core.image.cluster.broker(1).fenced


def test_stale_epoch_unknown_broker_and_cluster_id():
    c, epochs = controller(2)
    assert c.expect_error(api.BrokerHeartbeatRequest(0, epochs[0] - 1, 100)).error is Errors.STALE_BROKER_EPOCH
    assert c.expect_error(api.BrokerHeartbeatRequest(9, 1, 100)).error is Errors.BROKER_ID_NOT_REGISTERED
    e = c.expect_error(api.RegisterBrokerRequest(5, "Zz3dEfGhIjKlMnOpQrStUv", incarnation(5), ()))
    assert e.error is Errors.INCONSISTENT_CLUSTER_ID and "Expected cluster ID" in e.message
    assert c.expect_error(api.UnregisterBrokerRequest(9)).error is Errors.BROKER_ID_NOT_REGISTERED


def test_duplicate_registration_while_the_session_lives():
    c, epochs = controller(1)
    before = c.core.image
    e = c.expect_error(api.RegisterBrokerRequest(0, c.cluster_id, incarnation(0, gen=1), ()))
    assert e.error is Errors.DUPLICATE_BROKER_REGISTRATION
    assert c.core.image.same_metadata(before)
    # the same incarnation may re-register; after the session expired another one may too
    register(c, 0, gen=0)
    c.tick(c.now + 10_000)
    assert c.core.image.cluster.broker(0).fenced
    new_epoch = register(c, 0, gen=1)
    assert c.core.image.cluster.broker(0).incarnation_id == incarnation(0, 1)
    assert new_epoch > epochs[0]


def test_session_timeout_fences_and_moves_leaderships():
    c, epochs = controller(3)
    create(c, "t", 9, 3)
    led_by_0 = [pid for pid, p in c.core.image.topics.topic_by_name("t").partitions.items() if p.leader == 0]
    assert led_by_0
    c.now = 5000
    for b in (1, 2):
        heartbeat(c, b, epochs[b])
    assert c.tick(8000) == [] or all(op.name == "NoOp" for op in c.tick(8000))
    ops = c.tick(9100)  # broker 0's last heartbeat was at time 0
    assert [op.name for op in ops] == ["FenceBroker"]
    image = c.core.image
    assert image.cluster.broker(0).fenced
    for pid, p in image.topics.topic_by_name("t").partitions.items():
        assert p.leader in (1, 2) and 0 not in p.isr
    assert violations(image) == []
    assert not c.core.index.leads_any(0) and not c.core.index.isr_partitions(0)


def test_expired_brokers_are_fenced_one_per_tick_and_a_heartbeat_in_between_saves_one():
    """Fencing a big broker takes seconds; the driver handles queued heartbeats between ticks, so a
    tick fences only the broker that expired first, and one whose heartbeat arrives meanwhile
    (stamped with its arrival time) is not fenced at all."""
    c, epochs = controller(4)
    create(c, "t", 8, 3)
    for b, at in ((3, 3000), (0, 400), (1, 200), (2, 0)):  # expiry order: 2, then 1, then 0
        c.core.sessions.touch(b, at)
    ops = c.tick(9900)
    assert [op.name for op in ops] == ["FenceBroker"]
    assert [b for b in range(4) if c.core.image.cluster.broker(b).fenced] == [2]
    # broker 0's heartbeat arrived at 9,900 and is handled (with that time) before the next tick
    c.request(api.BrokerHeartbeatRequest(0, epochs[0], c.core.last_committed_offset), now_ms=9900)
    ops = c.tick(9950)
    assert [op.name for op in ops] == ["FenceBroker"]
    assert [b for b in range(4) if c.core.image.cluster.broker(b).fenced] == [1, 2]
    assert [op.name for op in c.tick(9960)] in ([], ["NoOp"])
    assert violations(c.core.image) == []


def test_last_isr_member_is_kept_and_partition_goes_leaderless_then_comes_back():
    c, epochs = controller(2)
    create(c, "solo", 1, 1, )
    p = c.core.image.topics.topic_by_name("solo").partitions[0]
    leader = p.leader
    c.now = 0
    other = 1 - leader
    c.now = 9000
    heartbeat(c, other, epochs[other])
    c.tick(9500)
    p = c.core.image.topics.topic_by_name("solo").partitions[0]
    assert p.leader == -1 and p.isr == (leader,)
    # it comes back (heartbeat, caught up): unfenced and leader again
    r = heartbeat(c, leader, epochs[leader])
    assert not r.is_fenced
    p = c.core.image.topics.topic_by_name("solo").partitions[0]
    assert p.leader == leader and p.leader_epoch == 2


def test_controlled_shutdown_moves_leaderships_then_says_shutdown():
    c, epochs = controller(3)
    create(c, "t", 6, 3)
    r = heartbeat(c, 0, epochs[0], want_shutdown=True)
    assert r.should_shutdown and r.is_fenced
    image = c.core.image
    b = image.cluster.broker(0)
    assert b.in_controlled_shutdown and b.fenced
    for p in image.topics.topic_by_name("t").partitions.values():
        assert p.leader != 0 and 0 not in p.isr
    # a broker in controlled shutdown is not given new replicas
    res = create(c, "u", 4, 2)
    assert all(0 not in p.replicas for p in c.core.image.topics.topic_by_name("u").partitions.values())
    assert res.error is Errors.NONE


def test_unregister_removes_broker_and_its_isr_entries():
    c, epochs = controller(3)
    create(c, "t", 3, 3)
    assert c.request(api.UnregisterBrokerRequest(2)) is None
    image = c.core.image
    assert image.cluster.broker(2) is None
    assert all(2 not in p.isr for p in image.topics.topic_by_name("t").partitions.values())


def test_fenced_broker_still_gets_follower_replicas():
    c, epochs = controller(3)
    c.now = 9000
    heartbeat(c, 0, epochs[0])
    heartbeat(c, 1, epochs[1])
    c.tick(9500)
    assert c.core.image.cluster.broker(2).fenced
    create(c, "t", 6, 3)
    for p in c.core.image.topics.topic_by_name("t").partitions.values():
        assert set(p.replicas) == {0, 1, 2} and p.leader != 2 and 2 not in p.isr


def test_noop_after_idle_interval():
    c, _ = controller(1)
    ops = c.tick(c.now + 10_000)
    assert [op.name for op in ops] == ["FenceBroker"]
    ops = c.tick(c.now + 600)
    assert [op.name for op in ops] == ["NoOp"]
    assert c.core.next_deadline_ms() == c.now + 500
