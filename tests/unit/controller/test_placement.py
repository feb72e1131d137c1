"""Striped, rack-aware replica placement (Kafka's StripedReplicaPlacer semantics)."""
import random
from collections import Counter

import pytest

from quorum.controller.placement import UsableBroker, place
from quorum.errors import Errors, SparkraftError


def brokers(n, racks=None, fenced=()):
    return [UsableBroker(i, racks[i % len(racks)] if racks else None, i in fenced) for i in range(n)]


def test_replicas_are_distinct_and_leaders_striped():
    out = place(brokers(6), 60, 3, random.Random(1))
    assert all(len(set(r)) == 3 for r in out)
    leaders = Counter(r[0] for r in out)
    assert set(leaders) == set(range(6)) and max(leaders.values()) - min(leaders.values()) <= 2
    replicas = Counter(b for r in out for b in r)
    assert max(replicas.values()) - min(replicas.values()) <= 3


def test_each_replica_on_another_rack_when_racks_suffice():
    racks = ["a", "b", "c"]
    rack_of = {b.broker_id: b.rack for b in brokers(9, racks)}
    for r in place(brokers(9, racks), 50, 3, random.Random(2)):
        assert len({rack_of[b] for b in r}) == 3


def test_more_replicas_than_racks_spreads_over_all_racks():
    racks = ["a", "b"]
    rack_of = {b.broker_id: b.rack for b in brokers(6, racks)}
    for r in place(brokers(6, racks), 30, 3, random.Random(3)):
        assert {rack_of[b] for b in r} == {"a", "b"}


def test_leader_is_never_fenced_followers_may_be():
    bs = brokers(3, fenced={1, 2})
    out = place(bs, 10, 3, random.Random(4))
    assert all(r[0] == 0 for r in out)
    assert all(set(r) == {0, 1, 2} for r in out)


def test_errors_have_kafka_messages():
    with pytest.raises(SparkraftError) as e:
        place(brokers(2), 1, 3, random.Random(0))
    assert e.value.error is Errors.INVALID_REPLICATION_FACTOR
    assert e.value.message == ("The target replication factor of 3 cannot be reached because only 2 "
                               "broker(s) are registered.")
    with pytest.raises(SparkraftError, match=r"All brokers are currently fenced \(0, 1\)\. A broker is fenced until"):
        place(brokers(2, fenced={0, 1}), 1, 1, random.Random(0))
    with pytest.raises(SparkraftError, match="No brokers are registered: start a broker"):
        place([], 1, 1, random.Random(0))
    with pytest.raises(SparkraftError, match="must be positive"):
        place(brokers(2), 1, 0, random.Random(0))


def test_deterministic_for_a_seed():
    assert place(brokers(5, ["x", "y"]), 20, 2, random.Random(9)) == place(brokers(5, ["x", "y"]), 20, 2,
                                                                              random.Random(9))


def test_adding_partitions_continues_the_stripe():
    first = place(brokers(4), 4, 1, random.Random(5))
    more = place(brokers(4), 4, 1, random.Random(6), existing=first)
    assert sorted(r[0] for r in more) == [0, 1, 2, 3]
