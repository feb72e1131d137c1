"""Real Kafka clients against real processes: 3 ``sparkraft controller start`` and 2 ``sparkraft
broker start`` on 127.0.0.1, the clients pointed at the brokers' PLAINTEXT listeners.

librdkafka (confluent-kafka's AdminClient and Debian's kcat), kafka-python's KafkaAdminClient and
aiokafka's admin client each list, create, describe, alter and delete; their answers are compared
with ``sparkraft topics describe --json``, which asks the controllers over gRPC. Then what no client
would send: bad frames, unknown APIs, garbage; the broker closes that connection and goes on serving.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import socket
import struct
import subprocess
import time

import pytest
from conftest import BrokerProcesses, ControllerProcesses, sparkraft_cmd, wait_for

from quorum.kafka.client import KafkaConnection, encode_request

pytestmark = pytest.mark.slow

confluent_admin = pytest.importorskip("confluent_kafka.admin")
kafka_admin = pytest.importorskip("kafka.admin")
aiokafka_admin = pytest.importorskip("aiokafka.admin")

from kio.schema.api_versions.v3.request import ApiVersionsRequest  # noqa: E402
from kio.schema.create_topics.v7 import request as create_v7  # noqa: E402
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic  # noqa: E402

from quorum.errors import Errors  # noqa: E402
from quorum.kafka.apis import SUPPORTED  # noqa: E402
from quorum.rpc.controller_client import ControllerClient  # noqa: E402

SETTINGS = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}
BROKERS = (101, 102)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("kafka-clients")
    (root / "q").mkdir()
    cp = ControllerProcesses(root / "q", **SETTINGS)
    brokers = None
    try:
        cp.format()
        cp.start()
        brokers = BrokerProcesses(root, cp, {b: None for b in BROKERS}, SETTINGS)
        for b in BROKERS:
            brokers.start(b)
        for b in BROKERS:
            wait_for(lambda b=b: _answers(brokers.ports[b]), 60, f"broker {b}'s Kafka listener")
        yield cp, brokers
    except BaseException:
        print(cp.dump_outputs(), brokers.dump() if brokers else "")
        raise
    finally:
        if brokers is not None:
            brokers.close()
        cp.close()


def _answers(port: int) -> bool:
    try:
        with KafkaConnection("127.0.0.1", port, timeout=2) as c:
            return c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1")).error_code == 0
    except OSError:
        return False


def controller(cp) -> ControllerClient:
    return ControllerClient(cp.bootstrap(), timeout=30)


def bootstrap(brokers) -> str:
    return ",".join(f"127.0.0.1:{brokers.ports[b]}" for b in BROKERS)


def describe_json(cp, topic: str) -> dict:
    """``sparkraft topics describe --json``: what the controllers say (any of them may answer, so
    one restarted a moment ago may not have replayed the topic yet: asked again for a while)."""
    deadline = time.monotonic() + 30
    while True:
        out = subprocess.run(sparkraft_cmd("topics", "describe", "--topic", topic, "--json", "--bootstrap-controller",
                                           cp.bootstrap()), capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        if out.returncode == 0 or "UNKNOWN_TOPIC_OR_PARTITION" not in out.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def metadata_of(port: int, *topics: str):
    with KafkaConnection("127.0.0.1", port) as c:
        return c.request(MetadataRequest(topics=tuple(MetadataRequestTopic(topic_id=None, name=t) for t in topics),
                                         allow_auto_topic_creation=False, include_topic_authorized_operations=False))


def test_confluent_admin_client_creates_describes_alters_and_deletes(cluster):
    cp, brokers = cluster
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    for f in admin.create_topics([NewTopic("ck-orders", 6, 2), NewTopic("ck-dry", 3, 1)], validate_only=False,
                                 operation_timeout=30).values():
        f.result(60)
    # validate_only creates nothing
    for f in admin.create_topics([NewTopic("ck-validate", 3, 1)], validate_only=True).values():
        f.result(60)
    listed = admin.list_topics(timeout=30)
    assert {"ck-orders", "ck-dry"} <= set(listed.topics) and "ck-validate" not in listed.topics
    assert set(listed.brokers) == set(BROKERS)
    assert listed.cluster_id == controller(cp).describe_cluster().cluster_id

    # the broker's answer is the controller's: leaders, replicas and ISR per partition
    expected = describe_json(cp, "ck-orders")
    got = listed.topics["ck-orders"].partitions
    assert len(got) == 6
    for p in expected["partitions"]:
        mine = got[p["partition"]]
        assert (mine.leader, list(mine.replicas), list(mine.isrs)) == (p["leader"], p["replicas"], p["isr"])

    # an existing topic: TOPIC_ALREADY_EXISTS, nothing changed
    with pytest.raises(Exception) as failed:
        admin.create_topics([NewTopic("ck-orders", 1, 1)])["ck-orders"].result(60)
    assert failed.value.args[0].code() == Errors.TOPIC_ALREADY_EXISTS
    assert len(describe_json(cp, "ck-orders")["partitions"]) == 6

    admin.create_partitions([NewPartitions("ck-orders", 8)])["ck-orders"].result(60)
    assert len(describe_json(cp, "ck-orders")["partitions"]) == 8

    resource = ConfigResource(ResourceType.TOPIC, "ck-orders", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(60)
    assert describe_json(cp, "ck-orders")["configs"]["retention.ms"] == "3600000"
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "ck-orders")])
    (entries,) = [f.result(60) for f in configs.values()]
    assert entries["retention.ms"].value == "3600000" and not entries["retention.ms"].is_default
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].is_default

    cluster_description = admin.describe_cluster().result(60)
    assert {n.id for n in cluster_description.nodes} == set(BROKERS)

    binding = AclBinding(ResourceType.TOPIC, "ck-orders", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(60)
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "ck-orders", ResourcePatternType.ANY, None,
                                                 None, AclOperation.ANY, AclPermissionType.ANY)).result(60)
    assert [(b.principal, b.operation) for b in found] == [("User:alice", AclOperation.READ)]

    admin.delete_topics(["ck-orders", "ck-dry"])["ck-orders"].result(60)
    wait_for(lambda: "ck-orders" not in admin.list_topics(timeout=30).topics, 30, "ck-orders gone from Metadata")


def test_read_your_writes_through_the_same_broker(cluster):
    """A create answered by broker 102 is in broker 102's very next Metadata answer."""
    cp, brokers = cluster
    port = brokers.ports[102]
    with KafkaConnection("127.0.0.1", port) as c:
        for i in range(5):
            name = f"ryw-{i}"
            created = c.request(create_v7.CreateTopicsRequest(topics=(create_v7.CreatableTopic(
                name=name, num_partitions=2, replication_factor=2, assignments=(), configs=()),),
                timeout=datetime.timedelta(seconds=30), validate_only=False))
            assert created.topics[0].error_code == 0, created
            (topic,) = metadata_of(port, name).topics
            assert topic.error_code == 0 and len(topic.partitions) == 2
    assert describe_json(cp, "ryw-4")["name"] == "ryw-4"


def test_kafka_python_and_aiokafka_admin_clients(cluster):
    cp, brokers = cluster
    from kafka.admin import KafkaAdminClient, NewTopic

    k = KafkaAdminClient(bootstrap_servers=bootstrap(brokers), request_timeout_ms=30000)
    try:
        k.create_topics([NewTopic("kp-events", 4, 2)])
        assert "kp-events" in k.list_topics()
        assert {b["broker_id"] for b in k.describe_cluster()["brokers"]} == set(BROKERS)
        (described,) = k.describe_topics(["kp-events"])
        expected = describe_json(cp, "kp-events")
        assert sorted((p["partition_index"], p["leader_id"]) for p in described["partitions"]) == \
            [(p["partition"], p["leader"]) for p in expected["partitions"]]
        k.delete_topics(["kp-events"])
    finally:
        k.close()

    async def aio():
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.admin import NewTopic as AioTopic

        a = AIOKafkaAdminClient(bootstrap_servers=bootstrap(brokers), request_timeout_ms=30000)
        await a.start()
        try:
            await a.create_topics([AioTopic("aio-events", 3, 1)])
            assert "aio-events" in await a.list_topics()
            cluster_answer = await a.describe_cluster()
            assert {b["node_id"] for b in cluster_answer["brokers"]} == set(BROKERS)
        finally:
            await a.close()
    asyncio.run(aio())
    assert len(describe_json(cp, "aio-events")["partitions"]) == 3


@pytest.mark.skipif(shutil.which("kcat") is None, reason="Debian's kcat is not installed (.ci/run installs it)")
def test_kcat_lists_the_cluster(cluster):
    cp, brokers = cluster
    controller(cp).create_topic("kcat-topic", 3, 2)
    port = brokers.ports[101]
    wait_for(lambda: metadata_of(port, "kcat-topic").topics[0].error_code == 0, 30, "kcat-topic on broker 101")
    out = subprocess.run(["kcat", "-b", f"127.0.0.1:{port}", "-L", "-J"], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    listing = json.loads(out.stdout)
    assert {b["id"] for b in listing["brokers"]} == set(BROKERS)
    (topic,) = [t for t in listing["topics"] if t["topic"] == "kcat-topic"]
    expected = describe_json(cp, "kcat-topic")
    assert sorted((p["partition"], p["leader"], p["replicas"] and sorted(r["id"] for r in p["replicas"]))
                  for p in topic["partitions"]) == \
        [(p["partition"], p["leader"], sorted(p["replicas"])) for p in expected["partitions"]]


def test_a_broker_describes_its_own_configuration_file_as_kafka_does(cluster):
    """DescribeConfigs of a broker, asked of that broker: the keys of its configuration file are
    STATIC_BROKER_CONFIG, as Apache Kafka reports server.properties. kafka-python's default filter
    ('modified') leaves out static and default values, as it does against Apache Kafka: a broker
    without a dynamic config describes as {} there, and shows one once it has one."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
    from kafka.admin import ConfigResource as KpResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    from quorum.controller import api

    cp, brokers = cluster
    k = KafkaAdminClient(bootstrap_servers=bootstrap(brokers), request_timeout_ms=30000)
    try:
        every = k.describe_configs([KpResource(ConfigResourceType.BROKER, "101")], config_filter="all")
        mine = every["broker"]["101"]
        assert mine["node.id"]["value"] == "101" and mine["node.id"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert mine["process.roles"]["value"] == "broker"
        assert mine["log.retention.ms"]["config_source"] == "DEFAULT_CONFIG"
        controller(cp).alter_configs(api.ConfigResourceKey("BROKER", "101"),
                                     [api.AlterableConfig("log.retention.ms", "SET", "7200000")])
        wait_for(lambda: k.describe_configs([KpResource(ConfigResourceType.BROKER, "101")])["broker"]["101"],
                 30, "broker 101's dynamic config in its image")
        modified = k.describe_configs([KpResource(ConfigResourceType.BROKER, "101")])["broker"]["101"]
        assert set(modified) == {"log.retention.ms"}
        assert modified["log.retention.ms"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    finally:
        k.close()
    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    (future,) = admin.describe_configs([ConfigResource("BROKER", "102")]).values()
    entries = future.result(60)
    assert entries["node.id"].value == "102"
    assert entries["node.id"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert entries["log.retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


# --- the data plane: refused at once -----------------------------------------------------------
# Each client is given a minute or more of its own timeouts: what is asserted is the error it ends
# with, INVALID_REQUEST (the broker's refusal), not the timeout it ended with before (librdkafka's
# producer retried for five minutes, then "Local: Message timed out").

def _ready_topic(cp, brokers, name: str) -> int:
    controller(cp).create_topic(name, 2, 2)
    port = brokers.ports[101]
    wait_for(lambda: metadata_of(port, name).topics[0].error_code == 0, 30, f"{name} on broker 101")
    return port


@pytest.mark.skipif(shutil.which("kcat") is None, reason="Debian's kcat is not installed (.ci/run installs it)")
def test_kcat_producing_or_consuming_is_refused_at_once(cluster):
    cp, brokers = cluster
    port = _ready_topic(cp, brokers, "kcat-data")
    produced = subprocess.run(["kcat", "-b", f"127.0.0.1:{port}", "-P", "-t", "kcat-data", "-X",
                               "message.timeout.ms=120000"], input="hello\n", capture_output=True, text=True,
                              timeout=110, stdin=None)
    assert "Delivery failed" in produced.stderr and "Invalid request" in produced.stderr, produced.stderr
    consumed = subprocess.run(["kcat", "-b", f"127.0.0.1:{port}", "-C", "-t", "kcat-data", "-c", "1", "-e"],
                              capture_output=True, text=True, timeout=110, stdin=subprocess.DEVNULL)
    assert consumed.returncode != 0 and "Invalid request" in consumed.stderr, consumed.stderr


def test_confluent_kafka_producer_and_consumer_are_refused_with_the_reason(cluster):
    from confluent_kafka import Consumer, KafkaError, Producer

    cp, brokers = cluster
    port = _ready_topic(cp, brokers, "ck-data")
    outcomes = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "message.timeout.ms": 120000})
    producer.produce("ck-data", b"x", on_delivery=lambda err, msg: outcomes.append(err))
    assert producer.flush(110) == 0
    assert [e.code() for e in outcomes] == [KafkaError.INVALID_REQUEST]
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g", "session.timeout.ms": 60000})
    try:
        consumer.subscribe(["ck-data"])
        deadline = time.monotonic() + 100
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1)
        assert message is not None and message.error().code() == KafkaError.INVALID_REQUEST
        assert "sparkraft broker: it serves cluster metadata" in message.error().str()
    finally:
        consumer.close()


def test_kafka_python_and_aiokafka_producers_and_consumers_are_refused(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import InvalidRequestError, KafkaError

    cp, brokers = cluster
    port = _ready_topic(cp, brokers, "kp-data")
    bs = f"127.0.0.1:{port}"
    producer = KafkaProducer(bootstrap_servers=bs, max_block_ms=100_000, request_timeout_ms=100_000)
    try:
        with pytest.raises(KafkaError) as refused:  # idempotent by default: InitProducerId is refused first
            producer.send("kp-data", b"x").get(timeout=110)
        assert "InvalidRequestError" in str(refused.value)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer("kp-data", bootstrap_servers=bs, group_id="g", consumer_timeout_ms=100_000,
                             request_timeout_ms=100_000 + 5000, session_timeout_ms=60_000)
    try:
        with pytest.raises(InvalidRequestError):
            list(consumer)
    finally:
        consumer.close()

    async def aio():
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.errors import InvalidRequestError as AioInvalid

        p = AIOKafkaProducer(bootstrap_servers=bs, request_timeout_ms=100_000)
        await p.start()
        try:
            with pytest.raises(AioInvalid):
                await asyncio.wait_for(p.send_and_wait("kp-data", b"x"), 110)
        finally:
            await p.stop()
        cn = AIOKafkaConsumer("kp-data", bootstrap_servers=bs, group_id="g", request_timeout_ms=100_000)
        try:
            with pytest.raises(AioInvalid):  # its group's coordinator is looked up as it starts
                await asyncio.wait_for(cn.start(), 110)
                await asyncio.wait_for(cn.getone(), 110)
        finally:
            await cn.stop()
    asyncio.run(aio())


def test_a_brokers_kafka_port_given_as_a_controller_is_named_at_once(cluster):
    """--bootstrap-controller pointed at a broker's Kafka listener: the command says the port speaks
    Kafka's protocol (it waited 15 s and said UNAVAILABLE)."""
    cp, brokers = cluster
    port = brokers.ports[101]
    out = subprocess.run(sparkraft_cmd("topics", "list", "--bootstrap-controller", f"127.0.0.1:{port}",
                                       "--timeout", "60"), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [
        f"INVALID_REQUEST: 127.0.0.1:{port} speaks Kafka's protocol: it is a broker's Kafka listener, not a "
        f"controller's listener (give --bootstrap-controller a controller's address, as in controller.quorum.voters)"]


# --- hostile input ----------------------------------------------------------------------------

def _raw(port: int, data: bytes, read: bool = False):
    with KafkaConnection("127.0.0.1", port, timeout=5) as c:
        c.send_raw(data)
        if read:
            return c.read_frame()
        return c.closed_by_peer()


def test_hostile_frames_close_their_connection_and_nothing_else(cluster):
    cp, brokers = cluster
    port = brokers.ports[101]
    header = struct.pack(">hhih", 3, 12, 7, 5) + b"tests"
    # a frame claiming 2 GiB, a negative one: closed before anything is buffered
    assert _raw(port, struct.pack(">i", 2**31 - 1) + b"x" * 100)
    assert _raw(port, struct.pack(">i", -5))
    # an unknown API key, an unsupported version of a known one (Produce v0: older than any served)
    assert _raw(port, struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1))
    assert _raw(port, struct.pack(">i", 10) + struct.pack(">hhih", 0, 0, 1, -1))
    assert _raw(port, struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1))
    # a Metadata header whose body is garbage, and bytes that are no frame at all
    body = b"\xff" * 40
    assert _raw(port, struct.pack(">i", len(header) + len(body)) + header + body)
    assert _raw(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    # a truncated frame: the connection waits for the rest; the client giving up costs nothing
    with KafkaConnection("127.0.0.1", port, timeout=1) as c:
        c.send_raw(struct.pack(">i", 100) + header)
        assert not c.closed_by_peer()
    # ApiVersions in a version this broker does not know: answered with the versions it does (v0)
    payload = _raw(port, struct.pack(">i", 10) + struct.pack(">hhih", 18, 99, 4, -1), read=True)
    correlation, error, count = struct.unpack_from(">ihi", payload)
    assert (correlation, error, count) == (4, Errors.UNSUPPORTED_VERSION, len(SUPPORTED))
    # a request before ApiVersions is answered as any other (ApiVersions is optional in Kafka)
    assert metadata_of(port).brokers
    # and the broker serves everyone else all along
    assert _answers(port) and _answers(brokers.ports[102])


def test_many_connections_and_a_flood_of_small_requests_leave_the_broker_serving(cluster):
    cp, brokers = cluster
    port = brokers.ports[102]
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(200)]
    try:
        with KafkaConnection("127.0.0.1", port) as c:
            request = encode_request(ApiVersionsRequest(client_software_name="f", client_software_version="1"), 1)
            c.send_raw(request * 2000)  # pipelined: answered one by one, in order
            for _ in range(2000):
                c.read_frame()
        assert _answers(port)
    finally:
        for s in sockets:
            s.close()


def test_creates_through_brokers_survive_a_controller_sigkill(cluster):
    """Every create a client saw succeed exists afterwards; retried ones are not doubled."""
    cp, brokers = cluster
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap(brokers)})
    acknowledged, killed = [], None
    deadline = time.monotonic() + 120
    i = 0
    while i < 30 and time.monotonic() < deadline:
        name = f"kill-{i}"
        if i == 10:
            killed = cp.wait_leader().leader_id
            cp.kill(killed)
        try:
            admin.create_topics([NewTopic(name, 2, 2)], operation_timeout=30)[name].result(60)
            acknowledged.append(name)
            i += 1
        except Exception as e:  # NOT_CONTROLLER / timed out while the quorum elects: the client retries
            if e.args and hasattr(e.args[0], "code") and e.args[0].code() == Errors.TOPIC_ALREADY_EXISTS:
                acknowledged.append(name)  # an earlier attempt was committed: not created twice
                i += 1
            else:
                time.sleep(0.2)
    assert killed is not None and len(acknowledged) == 30
    listed = set(controller(cp).list_topics())
    assert set(acknowledged) <= listed
    for name in acknowledged:
        assert len(describe_json(cp, name)["partitions"]) == 2
    cp.start([killed])  # the module's other tests share the quorum: back to three, caught up

    def caught_up():
        try:
            info = cp.client().describe_quorum()
        except Exception:
            return False
        return len(info.voters) == 3 and all(v.log_end_offset >= info.high_watermark for v in info.voters)
    wait_for(caught_up, 60, f"controller {killed} back and caught up")
