"""Controller requests and replies survive dataclass -> protobuf -> dataclass unchanged, and every RPC of
the service has a request and a reply in the table."""
from __future__ import annotations

import pytest

from quorum.controller import api
from quorum.metadata.audit import LogHold
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.rpc import controller_convert as cc

EP = api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092)
ACL = api.AclBinding("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW")
TP = api.TopicPartition("orders", 2)
KEY = api.ConfigResourceKey("TOPIC", "orders")

REQUESTS = [
    api.RegisterBrokerRequest(101, "c1", "inc", (EP, api.BrokerEndpoint("SSL", "::1", 9093, "SSL")), "rack-a", 1, 3),
    api.RegisterBrokerRequest(102, "c1", "inc", (EP,)),  # no rack
    api.BrokerHeartbeatRequest(101, 17, 42, want_fence=True, want_shutdown=True),
    api.UnregisterBrokerRequest(101),
    api.UnregisterControllerRequest(3),
    api.RegisterControllerRequest(1, "AAAAAAAAAAAAAAAAAAAAAQ", (EP,),
                                  (("metadata.version", 14, 29), ("kraft.version", 0, 1))),
    api.CreateTopicsRequest((api.CreatableTopic("a", 3, 2, configs=(("cleanup.policy", "compact"),)),
                             api.CreatableTopic("b", assignments=((1, 2), (2, 3)))), validate_only=True),
    api.DeleteTopicsRequest(("a", "b"), ("id1",)),
    api.CreatePartitionsRequest((api.PartitionCountUpdate("a", 5), api.PartitionCountUpdate("b", 3, ((1,),)))),
    api.ElectLeadersRequest("UNCLEAN", (TP,)),
    api.ElectLeadersRequest(),  # every partition
    api.ElectLeadersRequest("PREFERRED", ()),  # no partition at all
    api.AlterPartitionRequest(101, 17, (api.PartitionIsr("tid", 0, 3, 4, (101, 102)),
                                        api.PartitionIsr("tid", 1, 0, 0, (101,)))),
    api.AlterPartitionReassignmentsRequest((api.ReassignablePartition(TP, (1, 2, 3)),
                                            api.ReassignablePartition(api.TopicPartition("b", 1), None))),
    api.ListPartitionReassignmentsRequest(),
    api.ListPartitionReassignmentsRequest((TP,)),
    api.IncrementalAlterConfigsRequest(((KEY, (api.AlterableConfig("retention.ms", "SET", "1000"),
                                               api.AlterableConfig("cleanup.policy", "DELETE"))),
                                        (api.ConfigResourceKey("BROKER", ""), ())), validate_only=True),
    api.DescribeConfigsRequest((KEY, api.ConfigResourceKey("CLUSTER", ""))),
    api.ListTopicsRequest(),
    api.DescribeTopicsRequest(("a", "b")),
    api.DescribeTopicsRequest(("a",), first_partition=20_000, partition_limit=500),
    api.DescribeClusterRequest(),
    api.UpdateFeaturesRequest((("metadata.version", 3),), validate_only=True),
    api.UpdateFeaturesRequest((("metadata.version", 2), ("eligible.leader.replicas.version", 0)),
                              upgrade_type="UNSAFE_DOWNGRADE"),
    api.DescribeFeaturesRequest(),
    api.DescribeClientQuotasRequest((("user", "EXACT", "alice"), ("client-id", "ANY", None)), strict=True),
    api.RegisterBrokerRequest(7, "c", "inc", (), None, 1, 2, ()),
    api.AlterClientQuotasRequest((api.ClientQuotaAlteration(
        (("user", "alice"), ("client-id", None)), (("producer_byte_rate", 1024.0), ("consumer_byte_rate", None))),)),
    api.AllocateProducerIdsRequest(101, 17),
    api.AssignReplicasToDirsRequest(101, 17, (api.DirectoryAssignment("AAAAAAAAAAAAAAAAAAAAAQ", 3,
                                                                      "Uvwkq7q1T9Cb96OVaGex7A"),)),
    api.BrokerHeartbeatRequest(101, 17, 40, offline_log_dirs=("Uvwkq7q1T9Cb96OVaGex7A",)),
    api.CreateAclsRequest((ACL,)),
    api.DeleteAclsRequest((ACL,)),
    api.DescribeAclsRequest(ACL),
    api.AlterUserScramCredentialsRequest(
        (api.ScramCredentialDeletion("bob", "SCRAM-SHA-256"),),
        (api.ScramCredentialUpsertion("alice", "SCRAM-SHA-512", 8192, b"salt", b"\x01" * 64),)),
    api.DescribeUserScramCredentialsRequest(("alice", "bob")),
    api.DescribeUserScramCredentialsRequest(),
    api.DescribeMigrationRequest(),
    api.FinalizeMigrationRequest(),
    api.HoldLogRequest("materialize:/wh", 4711),
    api.HoldLogRequest("materialize:/wh", release=True),
    api.DescribeLogHoldsRequest(),
    api.DescribeAuditRequest(4711, 50),
    api.RecordRefusalRequest(2, "User:alice", "10.0.0.7", "CONTROLLER", ("apache-kafka-java", "4.4.0"), "",
                             "AlterUserScramCredentials", ("USER:bob",), ("set bob SCRAM-SHA-256 iterations=8192",),
                             42, "AlterUserScramCredentials carries secrets, taken only over TLS"),
]

REPLIES = [
    ("RegisterBroker", api.RegisterBrokerReply(17)),
    ("BrokerHeartbeat", api.BrokerHeartbeatReply(True, False, True)),
    ("UnregisterBroker", None),
    ("RegisterController", None),
    ("UnregisterController", None),
    ("CreateTopics", (api.CreateTopicResult("a", topic_id="tid", num_partitions=3, replication_factor=2),
                      api.CreateTopicResult("b", Errors.TOPIC_ALREADY_EXISTS, "topic b exists"))),
    ("DeleteTopics", (api.TopicResult("a", topic_id="tid"),
                      api.TopicResult("x", Errors.UNKNOWN_TOPIC_OR_PARTITION, "no"))),
    ("CreatePartitions", (api.TopicResult("a", Errors.INVALID_PARTITIONS, "fewer"),)),
    ("ElectLeaders", (api.ElectLeadersResult(TP, Errors.ELECTION_NOT_NEEDED, "already"),)),
    ("AlterPartition", (api.AlterPartitionResult("tid", 0, Errors.NONE, "", 101, 3, 5, (101, 102)),
                        api.AlterPartitionResult("tid", 1, Errors.FENCED_LEADER_EPOCH, "stale", -1, -1, -1, ()))),
    ("AlterPartitionReassignments", (api.ElectLeadersResult(TP), api.ElectLeadersResult(
        TP, Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."))),
    ("ListPartitionReassignments", (api.OngoingReassignment(TP, (3, 4, 1, 2), (3, 4), (1, 2)),)),
    ("IncrementalAlterConfigs", (api.AlterConfigsResult(KEY),
                                 api.AlterConfigsResult(KEY, Errors.INVALID_CONFIG, "bad"))),
    ("DescribeConfigs", ((KEY, Errors.NONE, "", (api.ConfigEntry("retention.ms", "1000", "DYNAMIC_TOPIC_CONFIG"),
                                                 api.ConfigEntry("x", None, "DEFAULT_CONFIG", True))),
                         (api.ConfigResourceKey("TOPIC", "zz"), Errors.UNKNOWN_TOPIC_OR_PARTITION, "no", ()))),
    ("ListTopics", ("a", "b")),
    ("DescribeTopics", (api.TopicDescription("a", "tid", (api.PartitionDescription(0, 101, (101, 102), (101,), 2, 3),),
                                             {"retention.ms": "1000"}, partition_count=3, next_partition=1),)),
    ("DescribeCluster", api.ClusterDescription("c1", 2, 40, (
        api.BrokerDescription(101, False, True, 17, "rack-a", (EP,), "inc", 4711),
        api.BrokerDescription(102, True, False, 19, None, (), "")))),
    ("DescribeCluster", api.ClusterDescription("c1", None, -1, ())),
    ("UpdateFeatures", (api.ItemResult(), api.ItemResult(Errors.INVALID_UPDATE_VERSION, "no"))),
    ("DescribeClientQuotas", (api.ClientQuotaEntry((("client-id", None), ("user", "alice")),
                                                   (("producer_byte_rate", 1024.0),)),)),
    ("DescribeFeatures", api.FeaturesDescription((("metadata.version", 3), ("eligible.leader.replicas.version", 1)),
                                                 (("metadata.version", 1, 3), ("group.version", 0, 0)), 42)),
    ("AlterClientQuotas", (api.ItemResult(),)),
    ("AllocateProducerIds", api.ProducerIdsBlock(2000, 1000)),
    ("AssignReplicasToDirs", (api.AssignmentResult("AAAAAAAAAAAAAAAAAAAAAQ", 3),
                              api.AssignmentResult("AAAAAAAAAAAAAAAAAAAAAQ", 4, Errors.NOT_LEADER_OR_FOLLOWER))),
    ("CreateAcls", (api.ItemResult(),)),
    ("DeleteAcls", ((api.ItemResult(), (ACL,)), (api.ItemResult(Errors.INVALID_REQUEST, "bad filter"), ()))),
    ("DescribeAcls", (ACL,)),
    ("AlterUserScramCredentials", (api.UserResult("alice"),
                                   api.UserResult("bob", Errors.RESOURCE_NOT_FOUND, "no such credential"))),
    ("DescribeUserScramCredentials", (api.UserScramCredentials("alice", credentials=(("SCRAM-SHA-256", 8192),
                                                                                     ("SCRAM-SHA-512", 4096))),
                                      api.UserScramCredentials("bob", Errors.RESOURCE_NOT_FOUND, "none"))),
    ("DescribeMigration", api.MigrationDescription("MIGRATION", 8, 12, 4711, "")),
    ("DescribeMigration", api.MigrationDescription("PRE_MIGRATION", error="ZooKeeper at h:2181 is not answering")),
    ("HoldLog", LogHold("materialize:/wh", 4711, 1_700_000_000_000)),
    ("DescribeLogHolds", api.LogHolds((LogHold("a", 1, 2), LogHold("b", 3, 4)), -1)),
    ("RecordRefusal", None),
    ("DescribeAudit", api.AuditEntries(((12, b"\x08\x01"), (15, b"")), 16, 3)),
    ("FinalizeMigration", None),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
def test_requests_round_trip(request_):
    m = cc.request_to_proto(request_)
    assert type(m).__name__ == f"{cc.method_of(request_)}Request"
    again = cc.request_from_proto(type(m).FromString(m.SerializeToString()))
    assert again == request_


@pytest.mark.parametrize("method,reply", REPLIES, ids=[m for m, _ in REPLIES])
def test_replies_round_trip(method, reply):
    m = cc.reply_to_proto(method, reply)
    assert cc.response_error(m) is None
    again = cc.reply_from_proto(method, type(m).FromString(m.SerializeToString()))
    assert again == reply


def test_describe_topics_carries_a_per_topic_error():
    m = cc.reply_to_proto("DescribeTopics", (SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "no such topic",
                                                            name="zz"),))
    (err,) = cc.reply_from_proto("DescribeTopics", m)
    assert isinstance(err, SparkraftError)
    assert (err.error, err.message, err.details["name"]) == (Errors.UNKNOWN_TOPIC_OR_PARTITION, "no such topic", "zz")


def test_whole_request_errors_name_the_active_controller():
    for method in cc.METHODS:
        m = cc.error_response(method, Errors.NOT_CONTROLLER, "not me", 2, "127.0.0.1:9094")
        e = cc.response_error(m)
        assert (e.error, e.message) == (Errors.NOT_CONTROLLER, "not me")
        assert e.details == {"leader_id": 2, "leader_endpoint": "127.0.0.1:9094"}
    e = cc.response_error(cc.error_response("CreateTopics", Errors.NOT_CONTROLLER, "nobody"))
    assert e.details["leader_id"] is None and e.details["leader_endpoint"] == ""


def test_every_rpc_of_the_service_is_covered():
    service = pb.DESCRIPTOR.services_by_name["Controller"]
    assert sorted(m.name for m in service.methods) == sorted(cc.METHODS)
    for method in service.methods:
        for field in ("error", "error_message", "leader_id", "leader_endpoint"):
            assert field in method.output_type.fields_by_name, f"{method.name} response lacks {field}"
    covered = {cc.method_of(r) for r in REQUESTS}
    assert covered == set(cc.METHODS)
    assert {m for m, _ in REPLIES} == set(cc.METHODS)


def test_unknown_error_codes_become_unknown_server_error():
    m = pb.CreateTopicsResponse(error=12345, error_message="?")
    assert cc.response_error(m).error is Errors.UNKNOWN_SERVER_ERROR


def test_a_registration_past_the_bounds_is_refused_as_it_arrives_over_grpc():
    """The gRPC service's conversion refuses a registration of too many listeners on the message's
    count alone (before 100,000 endpoint objects exist), and one whose host or rack a terminal or
    a browser would render, as INVALID_REQUEST (begin_call's ValueError); a real one converts."""
    def message(endpoints, rack=None):
        m = pb.RegisterBrokerRequest(broker_id=7, cluster_id="c", incarnation_id="inc", endpoints=endpoints)
        if rack is not None:
            m.rack = rack
        return m

    many = [pb.BrokerEndpoint(name=f"L{i}", host="h", port=1) for i in range(100_000)]
    with pytest.raises(ValueError, match="at most 64 listeners, not 100000"):
        cc.request_from_proto(message(many))
    with pytest.raises(ValueError, match="Invalid host"):
        cc.request_from_proto(message([pb.BrokerEndpoint(name="PLAINTEXT", host="<script>", port=1)]))
    with pytest.raises(ValueError, match="Invalid listener name 'PLAIN\\\\nTEXT'"):
        cc.request_from_proto(message([pb.BrokerEndpoint(name="PLAIN\nTEXT", host="h", port=1)]))
    with pytest.raises(ValueError, match="Invalid rack"):
        cc.request_from_proto(message([pb.BrokerEndpoint(name="PLAINTEXT", host="h", port=1)], rack="<img>"))
    ok = cc.request_from_proto(message([pb.BrokerEndpoint(name="PLAINTEXT", host="broker-1.example", port=9092)],
                                       rack="us-east-1a"))
    assert ok.endpoints[0].host == "broker-1.example" and ok.rack == "us-east-1a"
