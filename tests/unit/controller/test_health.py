"""The controller's metrics view of the cluster (quorum/controller/health.py) against the image."""
from controller_helpers import controller, create, heartbeat

from quorum.controller import api
from quorum.controller.health import cluster_health


def test_counts_follow_a_fenced_broker_and_each_topics_min_isr():
    c, epochs = controller(3)
    assert cluster_health(c.core, c.now)["under_min_isr"] == 0  # no topic, no topic config
    create(c, "strict", 4, 3, configs=(("min.insync.replicas", "3"),))
    create(c, "loose", 4, 3)
    health = cluster_health(c.core, c.now)
    assert (health["active"], health["fenced"], health["topics"], health["partitions"]) == (3, 0, 2, 8)
    assert (health["offline"], health["under_replicated"], health["under_min_isr"]) == (0, 0, 0)
    assert health["registration"] == {0: "active", 1: "active", 2: "active"}
    assert set(health["heartbeat_age"]) == {0, 1, 2}

    heartbeat(c, 0, epochs[0], want_fence=True)  # broker 0 leaves every ISR
    health = cluster_health(c.core, c.now)
    assert (health["active"], health["fenced"]) == (2, 1)
    assert health["registration"][0] == "fenced"
    assert health["under_replicated"] == 8
    assert health["under_min_isr"] == 4  # the strict topic's: an ISR of 2 under 3; the loose one's 2 >= 1
    assert health["offline"] == 0

    c.request(api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("TOPIC", "loose"),
                                                   (api.AlterableConfig("min.insync.replicas", "SET", "3"),)),)))
    assert cluster_health(c.core, c.now)["under_min_isr"] == 8
