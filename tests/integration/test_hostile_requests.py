"""Hostile and malformed requests to real controller processes: each gets a clear error and changes
nothing, and afterwards every controller is alive, the leader and epoch are the same, and no
controller has grown past its memory bound.

Requests go through the same ControllerClient the CLI uses and, for fields the client would never
send, through the generated gRPC stubs directly.
"""
from __future__ import annotations

import math

import grpc
import pytest
from conftest import LiveBrokers

from quorum.controller import api
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2, controller_pb2_grpc, raft_pb2, raft_pb2_grpc

pytestmark = pytest.mark.slow

MEMORY_BOUND_MB = 600  # a controller process with a few topics stays far below this


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


@pytest.fixture
def quorum(controller_processes):
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    client = ControllerClient(cp.bootstrap(), timeout=20)
    brokers = LiveBrokers(client, cp.cluster_id)
    try:
        brokers.wait_unfenced()
        client.create_topic("coll.x", 3, 3)
        yield cp, client
    finally:
        brokers.close()
        client.close()


def error_of(call) -> SparkraftError:
    with pytest.raises(SparkraftError) as e:
        call()
    return e.value


def test_hostile_requests_get_clear_errors_and_change_nothing(quorum):
    cp, c = quorum
    before = cp.wait_leader()
    topics_before = c.list_topics()
    huge = 2 ** 31 - 1

    cases = [
        (lambda: c.create_topic("huge", huge, 3), Errors.INVALID_PARTITIONS, "max.partitions.per.request"),
        (lambda: c.create_topic("huge", -5, 3), Errors.INVALID_PARTITIONS, "non-positive"),
        (lambda: c.create_topic("huge", 1, huge), Errors.INVALID_REPLICATION_FACTOR, "registered"),
        (lambda: c.create_partitions("coll.x", huge), Errors.INVALID_PARTITIONS, "max.partitions.per.request"),
        (lambda: c.create_topic("coll_x", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "collides with existing topic"),
        (lambda: c.create_topic("x" * 100_000, 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "can't be longer than 249"),
        (lambda: c.create_topic("ünïcödé", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "illegal"),
        (lambda: c.create_topic("", 1, 1), Errors.INVALID_TOPIC_EXCEPTION, "empty"),
        (lambda: c.create_topic("cfg", 1, 1, [("retention.ms", "1_000")]), Errors.INVALID_CONFIG, "LONG"),
        (lambda: c.create_topic("cfg", 1, 1, [("segment.bytes", "1_073_741_824")]), Errors.INVALID_CONFIG, "INT"),
        (lambda: c.create_topic("cfg", 1, 1, [("min.cleanable.dirty.ratio", "nan")]), Errors.INVALID_CONFIG,
         "DOUBLE"),
        (lambda: c.alter_configs(api.ConfigResourceKey("TOPIC", "coll.x"),
                                 [api.AlterableConfig("retention.ms", "SET", "9" * 100)]),
         Errors.INVALID_CONFIG, "LONG"),
        (lambda: c.register_broker(api.RegisterBrokerRequest(
            77, cp.cluster_id, "Inc000xxxxxxxxxxxxx077", (api.BrokerEndpoint("PLAINTEXT", "h", -1),))),
         Errors.INVALID_REQUEST, "port in 0..65535"),
        (lambda: c.register_broker(api.RegisterBrokerRequest(
            78, "Some0ther0Cluster0Idxx", "Inc000xxxxxxxxxxxxx078", ())),
         Errors.INCONSISTENT_CLUSTER_ID, "Some0ther0Cluster0Idxx"),
        # several topics of 2 MiB configs: a request larger than any controller takes
        (lambda: c.create_topics([api.CreatableTopic(f"big{i}", 1, 1, configs=(("cleanup.policy", "x" * (2 << 20)),))
                                  for i in range(5)]), Errors.INVALID_REQUEST, "larger than a controller accepts"),
    ]
    for call, error, words in cases:
        try:
            result = call()
        except SparkraftError as e:
            assert e.error is error and words in e.message, (error, words, e)
            continue
        # create_topics answers per topic
        assert all(r.error is error for r in result) and words in result[0].message, result
    results = c.alter_client_quotas([api.ClientQuotaAlteration((("user", "u"),), (("request_percentage", math.inf),))])
    assert results[0].error is Errors.INVALID_REQUEST

    assert c.list_topics() == topics_before
    assert {b.broker_id for b in c.describe_cluster().brokers} == {101, 102, 103}
    after = cp.wait_leader()
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
    for v in cp.voters:
        assert cp.alive(v), cp.dump_outputs()
        assert rss_mb(cp.procs[v].pid) < MEMORY_BOUND_MB


def test_raw_messages_with_extreme_fields_are_refused(quorum):
    cp, c = quorum
    before = cp.wait_leader()
    leader = before.leader_id
    with grpc.insecure_channel(f"127.0.0.1:{cp.ports[leader]}") as channel:
        raft = raft_pb2_grpc.RaftStub(channel)
        controller = controller_pb2_grpc.ControllerStub(channel)
        # a Vote from a stranger at the largest epoch; an observer Fetch with a negative offset
        vote = raft.Vote(raft_pb2.VoteRequest(cluster_id=cp.cluster_id, epoch=2 ** 31 - 1, candidate_id=99,
                                              last_epoch=2 ** 31 - 1, last_offset=2 ** 62), timeout=5)
        assert vote.error == Errors.INCONSISTENT_VOTER_SET and not vote.granted
        fetch = raft.Fetch(raft_pb2.FetchRequest(cluster_id=cp.cluster_id, epoch=before.leader_epoch, replica_id=-1,
                                                 fetch_offset=-7, last_fetched_epoch=0, max_wait_ms=0,
                                                 max_bytes=1024), timeout=5)
        assert fetch.error == Errors.INVALID_REQUEST
        wrong = raft.Fetch(raft_pb2.FetchRequest(cluster_id="wrong", epoch=0, replica_id=-1), timeout=5)
        assert wrong.error == Errors.INCONSISTENT_CLUSTER_ID
        # a message of more than 8 MiB is refused by gRPC before it is read into memory
        with pytest.raises(grpc.RpcError) as e:
            controller.CreateTopics(controller_pb2.CreateTopicsRequest(
                topics=[controller_pb2.CreatableTopic(name="t" * 200, num_partitions=1, replication_factor=1)
                        for _ in range(50_000)]), timeout=10)
        assert e.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    after = cp.wait_leader()
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
    assert all(cp.alive(v) for v in cp.voters)
    assert c.list_topics() == ("coll.x",)
