"""Three ControllerNodes in one process, on 127.0.0.1 ephemeral ports, driven through ControllerClient:
brokers register and are unfenced, topics and configs are created, and a failover of the active
controller keeps every committed topic and config while the new active controller serves at once."""
from __future__ import annotations

import time

import pytest
from conftest import LiveBrokers, wait_for

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.log.meta_properties import format_storage, random_cluster_id
from quorum.raft.settings import RaftSettings

pytest.importorskip("quorum.controller.core")

from quorum.node.controller_node import ControllerNode  # noqa: E402
from quorum.node.controller_process import new_controller_node  # noqa: E402
from quorum.rpc.controller_client import ControllerClient  # noqa: E402

VOTERS = (1, 2, 3)
FAST = RaftSettings(election_timeout_ms=300, fetch_timeout_ms=1000, request_timeout_ms=1000)
BROKERS = ((101, "rack-a"), (102, "rack-b"), (103, "rack-c"))


class Cluster:
    def __init__(self, root):
        self.cluster_id = random_cluster_id()
        placeholder = {i: ("127.0.0.1", 0) for i in VOTERS}
        self.nodes: dict[int, ControllerNode] = {}
        for i in VOTERS:
            format_storage(root / f"c{i}", self.cluster_id, i)
            self.nodes[i] = new_controller_node(i, placeholder, ("127.0.0.1", 0), root / f"c{i}", FAST)
        addresses = {i: ("127.0.0.1", n.port) for i, n in self.nodes.items()}
        for n in self.nodes.values():
            n.raft.set_voter_addresses(addresses)
        for n in self.nodes.values():
            n.start()
        self.client = ControllerClient(",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values()),
                                       timeout=15, rpc_timeout=2)
        self.epochs: dict[int, int] = {}
        self.brokers: LiveBrokers | None = None

    def active(self, exclude=()) -> int:
        return wait_for(lambda: next((i for i, n in self.nodes.items() if n.is_active and i not in exclude), None),
                        15, "an active controller")

    def register_brokers(self) -> None:
        """Brokers 101-103 (one per rack), heartbeating until ``close`` (a slow step must not fence them)."""
        self.brokers = LiveBrokers(self.client, self.cluster_id, BROKERS)
        self.epochs = self.brokers.wait_unfenced()

    def close(self) -> None:
        if self.brokers is not None:
            self.brokers.close()
        self.client.close()
        for n in self.nodes.values():
            n.shutdown(graceful=False)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def test_brokers_register_unfence_and_topics_and_configs_are_served(cluster):
    cluster.active()
    cluster.register_brokers()
    brokers = cluster.client.describe_cluster().brokers
    assert [(b.broker_id, b.fenced, b.rack) for b in brokers] == [(101, False, "rack-a"), (102, False, "rack-b"),
                                                                  (103, False, "rack-c")]
    assert [b.broker_epoch for b in brokers] == [cluster.epochs[b] for b in (101, 102, 103)]

    result = cluster.client.create_topic("orders", 6, 3, [("retention.ms", "1000")])
    assert result.topic_id
    d = cluster.client.describe_topic("orders")
    assert d.topic_id == result.topic_id and len(d.partitions) == 6
    for p in d.partitions:
        assert sorted(p.replicas) == [101, 102, 103] and p.leader == p.replicas[0] and sorted(p.isr) == [101, 102, 103]
    assert len({p.replicas[0] for p in d.partitions}) == 3, "leaders are striped across brokers"
    assert d.configs.get("retention.ms") == "1000"

    with pytest.raises(SparkraftError) as e:
        cluster.client.create_topic("orders", 1, 1)
    assert e.value.error is Errors.TOPIC_ALREADY_EXISTS
    with pytest.raises(SparkraftError) as e:
        cluster.client.create_topic("too-many", 1, 4)
    assert e.value.error is Errors.INVALID_REPLICATION_FACTOR

    key = api.ConfigResourceKey("TOPIC", "orders")
    cluster.client.alter_configs(key, [api.AlterableConfig("cleanup.policy", "SET", "compact"),
                                       api.AlterableConfig("retention.ms", "DELETE")])
    entries = {e.name: e for e in cluster.client.describe_configs(key)}
    assert entries["cleanup.policy"].value == "compact"
    assert entries["cleanup.policy"].source == "DYNAMIC_TOPIC_CONFIG"
    assert "retention.ms" not in entries or entries["retention.ms"].source != "DYNAMIC_TOPIC_CONFIG"
    assert cluster.client.list_topics() == ("orders",)


def test_failover_keeps_every_committed_topic_and_config_and_the_new_controller_serves_at_once(cluster):
    first = cluster.active()
    cluster.register_brokers()
    for k in range(5):
        cluster.client.create_topic(f"t{k}", 2, 2)
    cluster.client.alter_configs(api.ConfigResourceKey("TOPIC", "t0"),
                                 [api.AlterableConfig("retention.ms", "SET", "5000")])
    before = {name: cluster.client.describe_topic(name) for name in cluster.client.list_topics()}

    cluster.nodes[first].shutdown(graceful=False)  # the active controller is gone, no resignation
    t0 = time.monotonic()
    second = cluster.active(exclude=(first,))
    # the new active controller takes writes at once, from the same client (it follows the redirect)
    cluster.client.create_topic("after-failover", 1, 2)
    took = time.monotonic() - t0
    assert took < 10, f"failover took {took:.1f}s"

    assert second != first
    names = cluster.client.list_topics()
    assert set(names) == set(before) | {"after-failover"}
    for name, d in before.items():
        assert cluster.client.describe_topic(name).topic_id == d.topic_id
    entries = {e.name: e.value for e in cluster.client.describe_configs(api.ConfigResourceKey("TOPIC", "t0"))}
    assert entries["retention.ms"] == "5000"
    # the brokers' registrations survived too
    assert {b.broker_id for b in cluster.client.describe_cluster().brokers} == {101, 102, 103}


def test_a_standby_refuses_writes_with_not_controller_naming_the_active_one(cluster):
    active = cluster.active()
    cluster.register_brokers()
    standby = next(i for i in VOTERS if i != active)
    node = cluster.nodes[standby]
    wait_for(lambda: node.leader_id() == active, 5, "the standby to know the leader")
    with pytest.raises(SparkraftError) as e:
        node.submit(api.CreateTopicsRequest((api.CreatableTopic("x", 1, 1),))).result(5)
    assert e.value.error is Errors.NOT_CONTROLLER
    assert e.value.details["leader_id"] == active
    # but it answers reads from what it replayed
    cluster.client.create_topic("seen-everywhere", 1, 1)
    from quorum.controller.api import ListTopicsRequest
    wait_for(lambda: "seen-everywhere" in node.read(ListTopicsRequest()), 5, "the standby to replay the topic")


def test_broker_registrations_and_heartbeats_take_the_wire(cluster):
    """A broker's RegisterBroker and BrokerHeartbeat go to the active controller's wire listener
    (quorum/wire/) with the same answers as over gRPC."""
    from quorum.gen.sparkraft.v1 import controller_pb2
    from quorum.rpc.wire_methods import BY_NAME
    from quorum.wire.client import BlockingWireChannel

    cluster.register_brokers()
    active = cluster.nodes[cluster.active()]
    target = cluster.client.leader_endpoint
    assert target.endswith(f":{active.port}")
    wire, _ = cluster.client._wires[target]
    assert wire is not None and wire.port == active.raft.wire_port, "heartbeats did not take the wire"
    # The same refusal as over gRPC, for a broker the controller does not know.
    channel = BlockingWireChannel("127.0.0.1", active.raft.wire_port)
    try:
        resp = channel.call(BY_NAME["BrokerHeartbeat"], controller_pb2.BrokerHeartbeatRequest(
            broker_id=999, broker_epoch=1, current_metadata_offset=0), timeout=5)
        assert Errors(resp.error) is Errors.BROKER_ID_NOT_REGISTERED
        # A standby answers NOT_CONTROLLER naming the active controller, as over gRPC.
        standby = next(n for n in cluster.nodes.values() if n is not active)
        other = BlockingWireChannel("127.0.0.1", standby.raft.wire_port)
        resp = other.call(BY_NAME["BrokerHeartbeat"], controller_pb2.BrokerHeartbeatRequest(
            broker_id=101, broker_epoch=cluster.epochs[101], current_metadata_offset=0), timeout=5)
        other.close()
        assert Errors(resp.error) is Errors.NOT_CONTROLLER and resp.leader_id == active.node_id
    finally:
        channel.close()
    # The brokers stay unfenced on wire heartbeats.
    time.sleep(1.5)
    described = {b.broker_id: b for b in cluster.client.describe_cluster().brokers}
    assert all(not described[b].fenced for b, _ in BROKERS)


def test_admin_requests_take_the_wire_and_a_write_is_visible_to_the_next_read_anywhere(cluster):
    """Admin writes and reads go on the wire (the registry's rows say so) with gRPC's answers: a
    config set and acknowledged there is what the next read says, asked of the active controller
    and of a client that knows only a standby (its answer names the active controller, which the
    client asks too). A request larger than the wire takes goes over gRPC and is refused with the
    line saying to split it, as before."""
    cluster.register_brokers()
    active = cluster.nodes[cluster.active()]
    standby = next(n for n in cluster.nodes.values() if n is not active)
    cluster.client.create_topic("wired", 1, 1)
    wire, _ = cluster.client._wires[cluster.client.leader_endpoint]
    assert wire is not None and wire.port == active.raft.wire_port
    key = api.ConfigResourceKey("TOPIC", "wired")
    with ControllerClient(f"127.0.0.1:{standby.port}", timeout=10) as by_standby:
        for n in range(20):
            cluster.client.alter_configs(key, [api.AlterableConfig("retention.ms", "SET", str(1000 + n))])
            for client in (cluster.client, by_standby):
                entries = client.describe_configs(key)
                assert {e.name: e.value for e in entries}["retention.ms"] == str(1000 + n)
        assert by_standby._wires, "the standby's client did not take the wire"
    with pytest.raises(SparkraftError) as e:
        cluster.client.create_topics([api.CreatableTopic("t" * 200 + str(i), 1, 1) for i in range(50_000)])
    assert e.value.error is Errors.INVALID_REQUEST and "split it into smaller ones" in e.value.message
    assert "wired" in cluster.client.list_topics() and len(cluster.client.list_topics()) == 1


def test_a_wire_without_a_method_is_an_older_server_and_the_client_takes_grpc_for_it(cluster):
    """A controller of an older version serves fewer methods on its wire: the client takes gRPC
    for a method the wire refuses as not served, and keeps doing so for that server."""
    from quorum.rpc.wire_methods import BY_NAME

    cluster.register_brokers()
    active = cluster.nodes[cluster.active()]
    number = BY_NAME["CreateTopics"].number
    handler = active.raft.wire.handlers.pop(number)
    try:
        cluster.client.create_topic("by-grpc", 1, 1)
        cluster.client.create_topic("by-grpc-again", 1, 1)
        assert (cluster.client.leader_endpoint, "CreateTopics") in cluster.client._not_on_wire
    finally:
        active.raft.wire.handlers[number] = handler
    assert {"by-grpc", "by-grpc-again"} <= set(cluster.client.list_topics())


def test_a_forwarded_request_takes_the_wire_in_its_envelope(cluster):
    """A request a broker forwards for its client (``on_behalf_of``) goes in the wire's Forward
    envelope, naming that client, and is answered as the method's own response."""
    from quorum.rpc.wire_methods import BY_NAME

    cluster.register_brokers()
    active = cluster.nodes[cluster.active()]
    number = BY_NAME["Forward"].number
    handler, seen = active.raft.wire.handlers[number], []
    active.raft.wire.handlers[number] = lambda conn, envelope: (seen.append(envelope.principal), handler(conn, envelope))[1]
    try:
        reply, offset = cluster.client.call_committed(
            api.CreateTopicsRequest((api.CreatableTopic("forwarded", 2, 1),)), on_behalf_of=("User:alice", "10.0.0.1"))
    finally:
        active.raft.wire.handlers[number] = handler
    assert seen == ["User:alice"]
    assert reply[0].error is Errors.NONE and offset >= 0
    assert len(cluster.client.describe_topic("forwarded").partitions) == 2


def test_callers_sharing_a_client_do_not_wait_for_each_others_wire_calls(cluster):
    """Threads sharing one ControllerClient (a broker forwarding for many Kafka clients) each take a
    wire channel of their own: their calls overlap instead of taking turns on one connection."""
    import threading

    cluster.register_brokers()
    client = cluster.client
    client.describe_cluster()
    pool, _ = client._wires[client.leader_endpoint]

    def calls() -> None:
        for _ in range(30):
            client.describe_cluster()
            client.list_topics()

    threads = [threading.Thread(target=calls) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(pool._idle) > 1, "the calls took turns on one wire channel"


def _handled_on(node: ControllerNode, method: str) -> list[tuple[str, str]]:
    """(what, thread name) for each call of the core's ``method`` from now on (the core's own code runs)."""
    import threading

    seen: list[tuple[str, str]] = []
    real = getattr(node.core, method)

    def spy(arg, *rest):
        what = type(arg).__name__ if method == "handle" else f"{arg.base_offset}..{arg.last_offset}"
        seen.append((what, threading.current_thread().name))
        return real(arg, *rest)

    setattr(node.core, method, spy)
    return seen


def test_a_quick_write_crosses_no_thread_and_a_big_one_takes_the_controller_thread(cluster):
    """A config set over the wire is handled, committed, replayed and answered on the active
    controller's event loop (no thread hand-off), and replayed on the standbys' event loops (unless
    it arrives in the moment the controller thread looks at leadership); a topic
    of more partitions than a quick write makes, and a heartbeat, take the controller thread, on
    every node. Each is what the next read says, at the active controller and at a standby."""
    cluster.register_brokers()
    active = cluster.nodes[cluster.active()]
    standby = next(n for n in cluster.nodes.values() if n is not active)
    cluster.client.create_topic("quick", 1, 3)
    handled = _handled_on(active, "handle")
    replayed = _handled_on(standby, "replay_committed")
    key = api.ConfigResourceKey("TOPIC", "quick")
    for n in range(10):  # one might arrive while the controller thread looks at leadership: it waits its turn
        cluster.client.alter_configs(key, [api.AlterableConfig("retention.ms", "SET", str(1225 + n))])
    loop, thread = f"raft-{active.node_id}-loop", f"controller-{active.node_id}-loop"
    assert ("IncrementalAlterConfigsRequest", loop) in handled
    wait_for(lambda: len(replayed) >= 10, 10, "the standby's replay of the configs")
    assert f"raft-{standby.node_id}-loop" in {name for _, name in replayed}
    handled.clear()
    replayed.clear()
    cluster.client.create_topic("wide", 200, 1)
    assert ("CreateTopicsRequest", thread) in handled
    assert all(name != loop for what, name in handled if what == "CreateTopicsRequest")
    wait_for(lambda: len(standby.core.image.topics.topic(standby.core.image.topics.ids_by_name.get("wide", ""))
                         .partitions if "wide" in standby.core.image.topics.ids_by_name else ()) == 200,
             10, "the standby's replay of the wide topic")
    assert f"controller-{standby.node_id}-loop" in {name for _, name in replayed}
    wait_for(lambda: any(what == "BrokerHeartbeatRequest" for what, _ in handled), 10, "a heartbeat")
    assert {name for what, name in handled if what == "BrokerHeartbeatRequest"} == {thread}
    with ControllerClient(f"127.0.0.1:{standby.port}", timeout=10) as by_standby:
        for client in (cluster.client, by_standby):
            assert {e.name: e.value for e in client.describe_configs(key)}["retention.ms"] == "1234"
            assert len(client.describe_topic("wide").partitions) == 200


def test_quick_writes_wait_behind_the_controller_threads_work_and_keep_their_order(cluster):
    """While the controller thread works (here: a call that blocks), a quick write arriving on the
    event loop is queued behind that work, not handled around it; once the work ends, the queued
    writes are handled in the order they came and each is answered."""
    import concurrent.futures
    import threading

    cluster.register_brokers()
    active = cluster.nodes[cluster.active()]
    cluster.client.create_topic("ordered", 1, 1)
    key = api.ConfigResourceKey("TOPIC", "ordered")
    busy, release = threading.Event(), threading.Event()
    blocked = active.call(lambda core: (busy.set(), release.wait(30)))
    assert busy.wait(10)
    handled = _handled_on(active, "handle")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        writes = []
        for n in (1, 2):
            writes.append(pool.submit(cluster.client.alter_configs, key,
                                      [api.AlterableConfig("retention.ms", "SET", str(n))]))
            wait_for(lambda: len(active._inbox) >= n, 10, f"write {n} queued behind the work")
        assert not any(w.done() for w in writes) and handled == []
        release.set()
        for w in writes:
            w.result(30)
    assert blocked.result(10) == (None, True)
    thread = f"controller-{active.node_id}-loop"
    assert handled[:2] == [("IncrementalAlterConfigsRequest", thread)] * 2
    # handled in the order they came: the second one's value is the one that stays
    assert [e.value for e in cluster.client.describe_configs(key) if e.name == "retention.ms"] == ["2"]
