"""Every API the broker advertises, in every version it advertises: a request as a client encodes
it (kio), decoded by the listener's codec, answered by the handler from an image (and forwarded to
an in-memory controller), encoded, and read back by kio as a client reads it.

The handlers are written once for all versions (dicts materialized into each version's type), so
this is what shows that a field a version lacks or adds cannot break its answer."""
from __future__ import annotations

import socket
import time
import uuid

import pytest
from conftest import wait_for
from kafka_helpers import broker_with_orders

from quorum.connection_limits import ConnectionLimits
from quorum.controller import api
from quorum.controller.settings import MV_MAX
from quorum.errors import Errors
from quorum.kafka import apis, schemas
from quorum.kafka.apis import SUPPORTED
from quorum.kafka.client import KafkaConnection, decode_response, encode_request
from quorum.kafka.codec import Encoded, decode_request, encode_entity, encode_response, materialize
from quorum.kafka.server import KafkaListener


def sample(key: int, version: int) -> dict:
    """A request of API ``key`` as every version can carry it (materialize drops what one lacks)."""
    return {
        18: {"client_software_name": "tests", "client_software_version": "1"},
        17: {"mechanism": "SCRAM-SHA-256"},  # on this PLAINTEXT listener: ILLEGAL_SASL_STATE (test_sasl.py logs in)
        36: {"auth_bytes": b"n,,n=alice,r=abc"},
        3: {"topics": [{"name": "orders", "topic_id": None}], "allow_auto_topic_creation": False},
        60: {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": True},
        32: {"resources": [{"resource_type": 2, "resource_name": "orders", "configuration_keys": None}]},
        29: {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1},
        46: {"topics": None, "timeout": 1000},
        48: {"components": [], "strict": False},
        19: {"topics": [{"name": f"new-{version}", "num_partitions": 2, "replication_factor": 2, "assignments": [],
                         "configs": [{"name": "retention.ms", "value": "1000"}]}], "timeout": 1000},
        20: {"topic_names": [f"gone-{version}"], "topics": [{"name": f"gone-{version}", "topic_id": None}],
             "timeout": 1000},
        37: {"topics": [{"name": "orders", "count": 5 + version, "assignments": None}], "timeout": 1000},
        44: {"resources": [{"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": str(1000 + version)}]}]},
        33: {"resources": [{"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "retention.ms", "value": str(2000 + version)}]}]},
        30: {"creations": [{"resource_type": 2, "resource_name": f"orders-{version}", "resource_pattern_type": 3,
                            "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}]},
        31: {"filters": [{"resource_type_filter": 2, "resource_name_filter": "nothing-here", "pattern_type_filter": 3,
                          "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]},
        45: {"topics": [{"name": "orders", "partitions": [{"partition_index": 0, "replicas": [2, 1]}]}],
             "timeout": 1000},
        43: {"election_type": 0, "topic_partitions": [{"topic": "orders", "partitions": [1]}], "timeout": 1000},
        49: {"entries": [{"entity": [{"entity_type": "user", "entity_name": "alice"}],
                          "ops": [{"key": "producer_byte_rate", "value": 1024.0 + version, "remove": False}]}]},
        51: {"deletions": [], "upsertions": []},
        35: {"topics": None},
        55: {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]},
        57: {"feature_updates": [{"feature": "metadata.version", "max_version_level": MV_MAX, "upgrade_type": 1,
                                  "allow_downgrade": False}], "validate_only": True, "timeout": 1000},
        # the data plane: refused (data_plane.py)
        0: {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
            {"name": "orders", "topic_id": ORDERS_ID, "partition_data": [{"index": 0, "records": None}]}]},
        1: {"replica_id": -1, "max_wait": 100, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [
                {"topic": "orders", "topic_id": ORDERS_ID, "partitions": [
                    {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""},
        2: {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "orders", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
        64: {"broker_id": 2},
        94: {"controller_id": 3},
        10: {"key": "group-1", "key_type": 0, "coordinator_keys": ["group-1"]},
        22: {"transactional_id": None, "transaction_timeout_ms": 1000, "producer_id": -1, "producer_epoch": -1},
    }[key]


ORDERS_ID = uuid.UUID(int=0)  # Fetch v13+ and Produce v13 name topics by id; refused all the same


def errors_in(value) -> list[int]:
    """Every error_code in a response, nested ones included."""
    found = []
    if hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            v = getattr(value, name)
            if name == "error_code":
                found.append(int(v))
            else:
                found += errors_in(v)
    elif isinstance(value, tuple):
        for v in value:
            found += errors_in(v)
    return found


CASES = [(key, v) for key, (lo, hi) in sorted(SUPPORTED.items()) for v in range(lo, hi + 1)]


@pytest.fixture(scope="module")
def leader_of_a_quorum(tmp_path_factory):
    """DescribeQuorum's way to a leader, as a broker's: a RaftClient to three in-process RaftNodes."""
    from inprocess_quorum import Quorum

    from quorum.kafka.quorum_answers import RemoteQuorum
    from quorum.rpc.raft_client import RaftClient

    q = Quorum(tmp_path_factory.mktemp("quorum"))
    q.leader()
    client = RaftClient(q.bootstrap(), timeout=10)
    try:
        yield RemoteQuorum(client, 1)
    finally:
        client.close()
        q.close()


@pytest.mark.parametrize("key,version", CASES, ids=[f"key{k}-v{v}" for k, v in CASES])
def test_each_version_is_answered_and_reads_back(key, version, request):
    c, ctx = broker_with_orders()
    if key == 55:
        ctx.quorum = request.getfixturevalue("leader_of_a_quorum")
    if key == 20:
        c.request(api.CreateTopicsRequest((api.CreatableTopic(f"gone-{version}", 1, 1),)))
    if key == 94:
        c.request(api.RegisterControllerRequest(3, "Ctl000xxxxxxxxxxxxx003", (), ()))
    body = materialize(schemas.request_type(key, version), sample(key, version))
    request = decode_request(encode_request(body, 11)[4:], SUPPORTED)
    response = apis.BROKER.handle(ctx, request)
    correlation_id, read_back = decode_response(body, encode_response(key, 11, response)[4:])
    if isinstance(response, Encoded):  # Metadata, joined from kept topics: the bytes kio writes for it all
        assert response.body == encode_entity(read_back)
        assert ctx.metadata_answers.encoded_topics == 1
        apis.BROKER.handle(ctx, request)  # asked again: nothing encoded again
        assert ctx.metadata_answers.encoded_topics == 1
    else:
        assert read_back == response
    assert correlation_id == 11
    # PREFERRED of a preferred leader: ELECTION_NOT_NEEDED; a SASL request on a PLAINTEXT listener: ILLEGAL_SASL_STATE
    refused = {int(Errors.INVALID_REQUEST)}
    expected_errors = {45: {0}, 43: {0, 84}, 17: {34}, 36: {34}, 0: refused, 1: refused, 2: refused, 10: refused,
                       22: refused}.get(key, {0})
    assert set(errors_in(read_back)) <= expected_errors, read_back
    image = c.core.image
    if key == 3:
        (topic,) = read_back.topics
        assert topic.name == "orders" and len(topic.partitions) == 4
        assert {p.leader_id for p in topic.partitions} <= {1, 2}
        assert {b.node_id for b in read_back.brokers} == {1, 2}
    elif key == 19:
        assert image.topics.topic_by_name(f"new-{version}") is not None
    elif key == 20:
        assert image.topics.topic_by_name(f"gone-{version}") is None
    elif key == 37:
        assert len(image.topics.topic_by_name("orders").partitions) == 5 + version
    elif key == 32:
        names = {e.name for e in read_back.results[0].configs}
        assert {"cleanup.policy", "retention.ms"} <= names
    elif key == 18:
        assert {(k.api_key, k.min_version, k.max_version) for k in read_back.api_keys} == \
            {(k, lo, hi) for k, (lo, hi) in SUPPORTED.items()}


def test_the_data_plane_is_advertised_and_refused_with_a_reason():
    """Produce, Fetch, ListOffsets, FindCoordinator and InitProducerId are advertised (a client
    that finds them missing retries until its own timeout) and refused with an error every client
    treats as final."""
    assert {0, 1, 2, 10, 22} <= set(SUPPORTED)
    c, ctx = broker_with_orders()
    for key in (0, 1, 2, 10, 22):
        version = SUPPORTED[key][1]
        body = materialize(schemas.request_type(key, version), sample(key, version))
        response = apis.BROKER.handle(ctx, decode_request(encode_request(body, 3)[4:], SUPPORTED))
        assert set(errors_in(response)) == {int(Errors.INVALID_REQUEST)}
    assert c.core.image.topics.topic_by_name("orders") is not None


def test_a_slow_client_is_cut_off_and_the_listener_serves_others():
    """A slowloris client (a frame trickling in) is closed once the frame is late; a client that
    sends nothing is closed once idle; both while another client is answered."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    c, ctx = broker_with_orders(port)
    listener = KafkaListener(ctx, "127.0.0.1", port,
                             limits=ConnectionLimits(request_arrival_s=0.5, idle_timeout_s=1.5)).start()
    try:
        from kio.schema.api_versions.v3.request import ApiVersionsRequest
        slow = KafkaConnection("127.0.0.1", port, timeout=20)
        idle = KafkaConnection("127.0.0.1", port, timeout=20)
        frame = encode_request(ApiVersionsRequest(client_software_name="s", client_software_version="1"), 1)
        closed_slow = False
        for byte in frame:
            try:
                slow.send_raw(bytes([byte]))
            except OSError:
                closed_slow = True
                break
            time.sleep(0.2)
        assert closed_slow or slow.closed_by_peer()
        with KafkaConnection("127.0.0.1", port) as other:
            assert other.request(ApiVersionsRequest(client_software_name="o", client_software_version="1")).error_code == 0
        assert idle.closed_by_peer()
        assert listener.closed_for_cause >= 2
    finally:
        listener.stop()


def test_frames_still_arriving_are_bounded_over_all_connections():
    """Clients that each send most of a large frame and stop cannot make the broker hold much more
    than ``queued.max.request.bytes``: past it, the connections holding part of a frame are not
    read (Kafka mutes them), others are served, and the late frames' connections are closed at
    ``socket.request.arrival.timeout.ms``, which gives the bytes back."""
    import struct

    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from quorum.kafka.server import READ_CHUNK

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    c, ctx = broker_with_orders(port)
    limits = ConnectionLimits(max_buffered_bytes=1 << 20, request_arrival_s=3.0)
    listener = KafkaListener(ctx, "127.0.0.1", port, max_frame_bytes=8 << 20, limits=limits).start()
    hogs = []
    try:
        for i in range(4):
            hog = KafkaConnection("127.0.0.1", port, timeout=20)
            try:
                hog.sock.settimeout(1.0)
                hog.send_raw(struct.pack(">i", 4 << 20) + b"\0" * (600 << 10))  # 600 KiB of a 4 MiB frame
            except OSError:  # not read: the kernel's buffers are full
                pass
            hogs.append(hog)
            if i == 0:  # held whole before the next one starts
                wait_for(lambda: listener.budget.held == 600 << 10, 20, "the first 600 KiB held")
        wait_for(lambda: listener.budget.exhausted, 20, "the budget spent")
        time.sleep(0.3)
        assert listener.budget.held <= (1 << 20) + 4 * READ_CHUNK  # at most a read past it per connection
        with KafkaConnection("127.0.0.1", port) as other:  # holds no partial frame: read and answered
            assert other.request(ApiVersionsRequest(client_software_name="o", client_software_version="1")).error_code == 0
        for hog in hogs:
            hog.sock.settimeout(20)
            assert hog.closed_by_peer()  # late: closed at the arrival timeout, paused or not
        wait_for(lambda: listener.budget.held == 0, 20, "every byte given back")
    finally:
        for h in hogs:
            h.close()
        listener.stop()
