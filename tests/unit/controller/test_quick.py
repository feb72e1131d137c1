"""What the node may handle on its event loop (registry ``quick``, ControllerCore.handles_quickly
and replays_quickly): small writes and replays of a few records that each change one thing; never a
request or a replay whose work grows with the cluster (quorum/node/controller_node.py)."""
from __future__ import annotations

from controller_helpers import controller, create

from quorum.controller import api, registry
from quorum.controller.core import ControllerCore
from quorum.controller.settings import ControllerSettings


def _alter(*names: str, configs: int = 1) -> api.IncrementalAlterConfigsRequest:
    return api.IncrementalAlterConfigsRequest(tuple(
        (api.ConfigResourceKey("TOPIC", name), tuple(api.AlterableConfig(f"k{i}", "SET", "1") for i in range(configs)))
        for name in names))


def test_only_writes_the_wire_carries_are_quick():
    for row in registry.ROWS:
        if row.quick is not None:
            assert row.writes and row.wire and row.method is not None, row


def test_small_writes_are_quick_and_writes_that_grow_with_the_cluster_are_not():
    c, epochs = controller(brokers=3)
    create(c, "small", partitions=3, rf=3)
    create(c, "wide", partitions=2_000, rf=1)
    core = c.core
    quick = core.handles_quickly
    assert quick(_alter("small"))
    assert not quick(_alter(*[f"t{i}" for i in range(registry.QUICK_RECORDS + 1)]))
    assert quick(api.CreateTopicsRequest((api.CreatableTopic("new", 1, 3),)))
    assert quick(api.CreateTopicsRequest((api.CreatableTopic("new", assignments=((0, 1), (1, 2))),)))
    # -1 takes num.partitions, which an operator may have set to thousands
    assert not quick(api.CreateTopicsRequest((api.CreatableTopic("new"),)))
    assert not quick(api.CreateTopicsRequest((api.CreatableTopic("new", registry.QUICK_RECORDS + 1, 1),)))
    assert quick(api.DeleteTopicsRequest(("small",)))
    assert quick(api.DeleteTopicsRequest(("no-such-topic",)))
    assert not quick(api.DeleteTopicsRequest(("wide",)))
    assert not quick(api.DeleteTopicsRequest(topic_ids=(core.image.topics.ids_by_name["wide"],)))
    # a heartbeat may start a controlled shutdown; an election may walk every partition
    assert not quick(api.BrokerHeartbeatRequest(0, epochs[0], core.last_committed_offset))
    assert not quick(api.ElectLeadersRequest())
    assert not quick(api.DescribeClusterRequest())  # reads are answered on the controller thread
    core.deactivate()
    assert not quick(_alter("small"))  # only the active controller handles writes


def test_a_standby_replays_quickly_only_a_few_records_that_each_change_one_thing():
    c, _ = controller(brokers=3)
    first = len(c.log)
    create(c, "small", partitions=2, rf=3)
    c.request(_alter("small"))
    created = c.log[first:]
    create(c, "wide", partitions=registry.QUICK_RECORDS + 1, rf=1)
    wide = c.log[len(created) + first:]
    c.request(api.DeleteTopicsRequest(("small",)))
    removal = c.log[-1:]

    standby = ControllerCore(2, c.cluster_id, ControllerSettings(seed=7))
    assert standby.replays_quickly(created)  # a topic, its partitions, a config
    assert not standby.replays_quickly(wide)  # more records than a quick replay holds
    assert not standby.replays_quickly(removal)  # drops every partition of the topic
    assert not standby.replays_quickly(c.log[:1 + first])  # registrations and features
    # the active controller's own batches are published from its speculative image: any type
    assert c.core.replays_quickly(removal)
