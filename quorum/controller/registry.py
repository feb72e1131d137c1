"""Every controller request, one row each: the only place a request is described. A row says what
the transports call it (gRPC's method, the wire's number, Kafka's API, versions and whether a Kafka
broker may forward it), what it needs to be allowed, whether it writes, and what answers it: the
handler that turns a write into records, or the function that answers a read from the image.

Everything else is derived from the rows: the controller's dispatch (core.py), the authorizer's
rules (quorum/rpc/request_actions.py), the gRPC and wire methods and their protobuf codecs
(quorum/rpc/controller_convert.py, quorum/rpc/wire_methods.py), the Kafka listeners' tables
(quorum/kafka/apis.py, controller_apis.py: each served API is answered by the function named after
it as kio names it, in the listener's modules), the reads (``RequestRow.read``) and what a
controller node adds around the core's answer (``RequestRow.around``: quorum/node/controller_extras.py).
tests/unit/controller/test_registry.py checks that every request type has a complete row and each
reader has what the row asks of it; test_registry_only.py, that no table keyed by request type or
Kafka API key appears outside this module. Adding a request means adding a row (and its codec, its handler).

Handlers take a ControllerContext (context.py), the request and the time, and return the records
and the reply (or raise SparkraftError, which changes nothing).

``quick`` says which writes are small enough to handle on the node's event loop, where the wire
read them, when the controller's thread is idle (quorum/node/controller_node.py): a thread hand-off
each way costs a single writer about as much as the write's own work. Only writes whose work is
bounded by a few records qualify; anything that may walk many partitions (a heartbeat can start a
controlled shutdown, an election every partition) stays on the controller's thread, so the event
loop never stalls Raft behind it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from quorum.controller import (
    acls_control,
    api,
    audit,
    brokers_control,
    configs_control,
    controllers_control,
    directories,
    features_control,
    log_holds,
    migration_control,
    producer_ids_control,
    quotas_control,
    read_requests,
    reassign_control,
    scram_control,
    topics_control,
)
from quorum.controller.context import ControllerContext

Handler = Callable[[ControllerContext, Any, int], tuple[list, Any]]
Quick = Callable[[ControllerContext, Any], bool]
Read = Callable[[Any, Any, Optional[int]], Any]  # (the ControllerCore, the request, the leader's id) -> the reply
Versions = tuple[int, int]  # lowest and highest version of a Kafka API a listener implements

QUICK_RECORDS = 64  # a quick write makes at most about this many records (and touches as many partitions)


@dataclass(frozen=True, slots=True)
class Needs:
    """What a request needs to be allowed (Kafka's rules; request_actions.py carries them out):

    - ``cluster``: ``operation`` on the cluster;
    - ``broker``: CLUSTER_ACTION on the cluster, or the broker's own principal for its own id;
    - ``controller``: CLUSTER_ACTION on the cluster, or the controller's own principal for its own id;
    - ``create_topics``: CREATE on the cluster, or CREATE on each topic;
    - ``topics``: ``operation`` on each topic ``names(request)`` gives (topic ids named by
      ``ids(request)`` are looked up first);
    - ``configs``: ``operation`` on each topic resource, and on the cluster for broker or cluster
      resources, of ``resources(request)``;
    - ``nothing``: anyone (what Kafka answers every client);
    - ``listed``: anyone, and the answer lists only the topics the caller may DESCRIBE (Kafka's
      Metadata)."""

    kind: str
    operation: str = ""
    names: Optional[Callable[[Any], list[str]]] = None
    ids: Optional[Callable[[Any], list[str]]] = None
    resources: Optional[Callable[[Any], list[api.ConfigResourceKey]]] = None


NEED_KINDS = ("cluster", "broker", "controller", "create_topics", "topics", "configs", "nothing", "listed")


@dataclass(frozen=True, slots=True)
class KafkaApi:
    """The same request in Kafka's protocol: its API name and key, the versions each kind of
    sparkraft Kafka listener implements (None: that listener does not serve it), and whether a
    Kafka broker may forward it to a controller in an Envelope (KIP-590)."""

    name: str
    key: int
    broker: Optional[Versions] = None
    controller: Optional[Versions] = None
    forwarded: bool = False
    # a request small by nature: a frame of it past this is refused before any of it is decoded
    # (quorum/kafka/codec.py); None: bounded by the listener's frame size alone
    max_bytes: Optional[int] = None

    def versions(self, listener: str) -> Optional[Versions]:
        return self.broker if listener == "broker" else self.controller


@dataclass(frozen=True, slots=True)
class RequestRow:
    request: type  # the api.py dataclass
    method: Optional[str]  # gRPC's and the wire's method name; None: only the active controller's own node sends it
    # the method's number on the wire: fixed once given (clients and servers of any version agree)
    number: Optional[int]
    kafka: Optional[KafkaApi]  # the same request in Kafka's protocol, where it has one
    needs: Needs
    handler: Optional[Handler] = None  # a write's: records and reply; None for a read
    read: Optional[Read] = None  # a read's: its answer from the replayed image (read_requests.py)
    transaction: bool = False  # written as a transaction even when its records fit one batch
    # Clients send it on the wire (quorum/wire/, the log's own transport: answered from the node's
    # event loop, no thread held while it commits) where the controller has one; else over gRPC.
    # gRPC stays for SCRAM logins, requests a broker forwards for its client, and requests larger
    # than the wire takes (they get gRPC's RESOURCE_EXHAUSTED and a line saying to split them).
    wire: bool = True
    quick: Optional[Quick] = None  # True for a request small enough to handle on the event loop (above)
    # True for a request that carries secrets: refused on a listener without TLS, where they would
    # cross the network in clear
    secret: Optional[Callable[[Any], bool]] = None
    # What a controller node adds around the core's answer, by the name of its function in
    # quorum/node/controller_extras.py: state the metadata image does not hold (the Raft log's
    # kraft.version, the migration driver's progress)
    around: Optional[str] = None
    # the migration's own write: made while ZooKeeper's metadata is being imported, when every other
    # write is refused with NOT_CONTROLLER (migration_control.refusal)
    migrates: bool = False
    # what its audit entry names and says it asked to set (quorum/controller/audit.py); None: the
    # broker or controller it is about, else the cluster, and nothing set
    audit: Optional[audit.Of] = None

    @property
    def writes(self) -> bool:
        return self.handler is not None


def _register(ctx: ControllerContext, req: api.RegisterBrokerRequest, now: int):
    records, reply = brokers_control.register(ctx, req, now)
    ctx.sessions.touch(req.broker_id, now)
    return records, reply


def _unregister(ctx: ControllerContext, req: api.UnregisterBrokerRequest, now: int):
    records, reply = brokers_control.unregister(ctx, req)
    ctx.sessions.forget(req.broker_id)
    return records, reply


def _few_configs(ctx: ControllerContext, req: api.IncrementalAlterConfigsRequest) -> bool:
    return sum(len(ops) for _, ops in req.resources) <= QUICK_RECORDS


def _few_new_partitions(ctx: ControllerContext, req: api.CreateTopicsRequest) -> bool:
    """Partitions named outright (a -1 takes num.partitions, which an operator may have set high)."""
    total = 0
    for topic in req.topics:
        count = len(topic.assignments) or topic.num_partitions
        if count < 0:
            return False
        total += count
    return total <= QUICK_RECORDS


def _few_partitions_removed(ctx: ControllerContext, req: api.DeleteTopicsRequest) -> bool:
    """Removing a topic costs its partitions (the image and the partition index drop each)."""
    topics = ctx.spec.topics
    total = 0
    for topic_id in [topics.ids_by_name.get(name) for name in req.names] + list(req.topic_ids):
        topic = topics.topic(topic_id) if topic_id is not None else None
        total += len(topic.partitions) if topic is not None else 0
    return total <= QUICK_RECORDS * 16


def _few_quotas(ctx: ControllerContext, req: api.AlterClientQuotasRequest) -> bool:
    return len(req.alterations) <= QUICK_RECORDS


def _cluster(operation: str) -> Needs:
    return Needs("cluster", operation)


BROKER = Needs("broker")
NOTHING = Needs("nothing")

def _both(lo: int, hi: int) -> dict:
    """Served alike on a broker's and a controller's Kafka listeners."""
    return {"broker": (lo, hi), "controller": (lo, hi)}


ROWS: tuple[RequestRow, ...] = (
    # brokers
    RequestRow(api.RegisterBrokerRequest, "RegisterBroker", 32, KafkaApi("BrokerRegistration", 62, controller=(0, 4),
                                                                    max_bytes=256 << 10),
               BROKER, _register),
    RequestRow(api.BrokerHeartbeatRequest, "BrokerHeartbeat", 33, KafkaApi("BrokerHeartbeat", 63, controller=(0, 2),
                                                                      max_bytes=64 << 10),
               BROKER, lambda c, r, now: brokers_control.heartbeat(c, r, now)),
    RequestRow(api.UnregisterBrokerRequest, "UnregisterBroker", 34,
               KafkaApi("UnregisterBroker", 64, **_both(0, 0), forwarded=True),
               _cluster("ALTER"), _unregister),
    RequestRow(api.AlterPartitionRequest, "AlterPartition", 39, KafkaApi("AlterPartition", 56, controller=(2, 3)),
               BROKER, lambda c, r, now: topics_control.alter_partition(c, r)),
    RequestRow(api.AllocateProducerIdsRequest, "AllocateProducerIds", 51,
               KafkaApi("AllocateProducerIds", 67, controller=(0, 0)), BROKER,
               lambda c, r, now: producer_ids_control.allocate(c.spec, r)),
    RequestRow(api.AssignReplicasToDirsRequest, "AssignReplicasToDirs", 59,
               KafkaApi("AssignReplicasToDirs", 73, controller=(0, 0), max_bytes=1 << 20), BROKER,
               lambda c, r, now: directories.assign(c, r)),
    RequestRow(api.RegisterControllerRequest, "RegisterController", 60, None, Needs("controller"),
               controllers_control.register, quick=lambda c, r: True),
    RequestRow(api.UnregisterControllerRequest, "UnregisterController", 61,
               KafkaApi("UnregisterController", 94, **_both(0, 0), forwarded=True), _cluster("ALTER"),
               controllers_control.unregister, quick=lambda c, r: True),
    RequestRow(api.DescribeClusterRequest, "DescribeCluster", 46,
               KafkaApi("DescribeCluster", 60, broker=(0, 2), controller=(1, 2)),  # v0 names no endpoint type
               NOTHING, read=read_requests.describe_cluster),
    # topics and partitions
    RequestRow(api.CreateTopicsRequest, "CreateTopics", 35, KafkaApi("CreateTopics", 19, **_both(2, 7), forwarded=True),
               Needs("create_topics"), lambda c, r, now: topics_control.create_topics(c, r),
               quick=_few_new_partitions, audit=audit.Of(audit.topics_created, audit.topic_settings)),
    RequestRow(api.DeleteTopicsRequest, "DeleteTopics", 36, KafkaApi("DeleteTopics", 20, **_both(1, 6), forwarded=True),
               Needs("topics", "DELETE", names=lambda r: list(r.names), ids=lambda r: list(r.topic_ids)),
               lambda c, r, now: topics_control.delete_topics(c, r), quick=_few_partitions_removed,
               audit=audit.Of(audit.topics_deleted)),
    RequestRow(api.CreatePartitionsRequest, "CreatePartitions", 37,
               KafkaApi("CreatePartitions", 37, **_both(0, 3), forwarded=True),
               Needs("topics", "ALTER", names=lambda r: [u.name for u in r.updates]),
               lambda c, r, now: topics_control.create_partitions(c, r),
               audit=audit.Of(audit.topics_extended, audit.partition_counts)),
    RequestRow(api.ElectLeadersRequest, "ElectLeaders", 38, KafkaApi("ElectLeaders", 43, **_both(0, 2), forwarded=True),
               _cluster("ALTER"), lambda c, r, now: topics_control.elect_leaders(c, r),
               audit=audit.Of(audit.partitions)),
    RequestRow(api.AlterPartitionReassignmentsRequest, "AlterPartitionReassignments", 40,
               KafkaApi("AlterPartitionReassignments", 45, **_both(0, 0), forwarded=True), _cluster("ALTER"),
               lambda c, r, now: reassign_control.alter(c, r), audit=audit.Of(audit.partitions)),
    RequestRow(api.ListPartitionReassignmentsRequest, "ListPartitionReassignments", 41,
               KafkaApi("ListPartitionReassignments", 46, **_both(0, 0), forwarded=True), _cluster("DESCRIBE"),
               read=read_requests.list_reassignments),
    RequestRow(api.ListTopicsRequest, "ListTopics", 44, KafkaApi("Metadata", 3, broker=(0, 13)), Needs("listed"),
               read=read_requests.list_topics),
    RequestRow(api.DescribeTopicsRequest, "DescribeTopics", 45, KafkaApi("DescribeTopicPartitions", 75),
               Needs("topics", "DESCRIBE", names=lambda r: list(r.names)), read=read_requests.describe_topics),
    # configs and quotas
    RequestRow(api.IncrementalAlterConfigsRequest, "IncrementalAlterConfigs", 42,
               KafkaApi("IncrementalAlterConfigs", 44, **_both(0, 1), forwarded=True),
               Needs("configs", "ALTER_CONFIGS", resources=lambda r: [k for k, _ in r.resources]),
               lambda c, r, now: configs_control.incremental_alter(c.spec, r), quick=_few_configs,
               audit=audit.Of(audit.config_resources, audit.config_changes)),
    RequestRow(api.DescribeConfigsRequest, "DescribeConfigs", 43, KafkaApi("DescribeConfigs", 32, **_both(1, 4)),
               Needs("configs", "DESCRIBE_CONFIGS", resources=lambda r: list(r.resources)),
               read=read_requests.describe_configs),
    RequestRow(api.AlterClientQuotasRequest, "AlterClientQuotas", 49,
               KafkaApi("AlterClientQuotas", 49, **_both(0, 1), forwarded=True), _cluster("ALTER_CONFIGS"),
               lambda c, r, now: quotas_control.alter(c.spec, r), quick=_few_quotas,
               audit=audit.Of(audit.quota_entities, audit.quota_changes)),
    RequestRow(api.DescribeClientQuotasRequest, "DescribeClientQuotas", 50,
               KafkaApi("DescribeClientQuotas", 48, **_both(0, 1)), _cluster("DESCRIBE_CONFIGS"),
               read=read_requests.describe_quotas),
    # features (kraft.version is the Raft log's: the node upgrades and reports it)
    RequestRow(api.UpdateFeaturesRequest, "UpdateFeatures", 47,
               KafkaApi("UpdateFeatures", 57, **_both(0, 1), forwarded=True), _cluster("ALTER"),
               lambda c, r, now: features_control.update(c, r), around="update_features_with_kraft",
               audit=audit.Of(audit.features, audit.feature_changes)),
    RequestRow(api.DescribeFeaturesRequest, "DescribeFeatures", 48,
               KafkaApi("ApiVersions", 18, **_both(0, 4), max_bytes=64 << 10),
               NOTHING, read=read_requests.describe_features, around="with_kraft_version"),
    # security
    RequestRow(api.CreateAclsRequest, "CreateAcls", 52, KafkaApi("CreateAcls", 30, **_both(1, 3), forwarded=True),
               _cluster("ALTER"), lambda c, r, now: acls_control.create(c.spec, r, c.new_uuid),
               audit=audit.Of(audit.acl_resources(lambda r: r.bindings), audit.acls_created)),
    RequestRow(api.DeleteAclsRequest, "DeleteAcls", 53, KafkaApi("DeleteAcls", 31, **_both(1, 3), forwarded=True),
               _cluster("ALTER"), lambda c, r, now: acls_control.delete(c.spec, r),
               audit=audit.Of(audit.acl_resources(lambda r: r.filters), audit.acls_deleted)),
    RequestRow(api.DescribeAclsRequest, "DescribeAcls", 54, KafkaApi("DescribeAcls", 29, **_both(1, 3)),
               _cluster("DESCRIBE"), read=read_requests.describe_acls),
    RequestRow(api.AlterUserScramCredentialsRequest, "AlterUserScramCredentials", 55,
               KafkaApi("AlterUserScramCredentials", 51, **_both(0, 0), forwarded=True), _cluster("ALTER"),
               lambda c, r, now: scram_control.alter(c.spec, r), secret=lambda r: bool(r.upsertions),
               audit=audit.Of(audit.scram_users, audit.scram_changes)),
    RequestRow(api.DescribeUserScramCredentialsRequest, "DescribeUserScramCredentials", 56,
               KafkaApi("DescribeUserScramCredentials", 50), _cluster("DESCRIBE"), read=read_requests.describe_scram),
    # migration from ZooKeeper mode (the import is the active controller's own: MigrationDriver)
    RequestRow(api.ImportZkMetadataRequest, None, None, None, _cluster("ALTER"),
               lambda c, r, now: migration_control.import_zk(c, r), transaction=True, migrates=True),
    RequestRow(api.FinalizeMigrationRequest, "FinalizeMigration", 58, None, _cluster("ALTER"),
               lambda c, r, now: migration_control.finalize(c, r), migrates=True),
    RequestRow(api.DescribeMigrationRequest, "DescribeMigration", 57, None, _cluster("DESCRIBE"),
               read=read_requests.describe_migration, around="with_migration_status"),
    # holds readers put on the log (quorum/controller/log_holds.py): the streaming job's, renewed as it commits
    # (what reading the log needs: CLUSTER_ACTION on the cluster)
    RequestRow(api.HoldLogRequest, "HoldLog", 95, None, _cluster("CLUSTER_ACTION"), log_holds.hold,
               quick=lambda c, r: True,
               audit=audit.Of(lambda r: [f"LOG_HOLD:{r.holder}"], lambda r: ["release"] if r.release else [],
                              quiet=lambda r: not r.release)),
    RequestRow(api.DescribeLogHoldsRequest, "DescribeLogHolds", 96, None, _cluster("DESCRIBE"),
               read=log_holds.describe),
    # the audit trail in this controller's log (quorum/node/audit_reads.py: the log, not the image, holds it)
    RequestRow(api.DescribeAuditRequest, "DescribeAudit", 98, None, _cluster("DESCRIBE"),
               read=lambda core, r, leader: None, around="audit_entries"),
    # a refusal another controller answered itself, for the audit trail (its entry is the refused request's)
    RequestRow(api.RecordRefusalRequest, "RecordRefusal", 97, None, Needs("controller"),
               lambda c, r, now: (c.reported_refusal(r, now), None), quick=lambda c, r: True,
               audit=audit.Of(lambda r: list(r.resources), quiet=lambda r: True)),
)

BY_TYPE: dict[type, RequestRow] = {row.request: row for row in ROWS}
BY_METHOD: dict[str, RequestRow] = {row.method: row for row in ROWS if row.method is not None}


def row_of(request) -> RequestRow:
    """The row of a request dataclass (TypeError for anything else)."""
    try:
        return BY_TYPE[type(request)]
    except KeyError:
        raise TypeError(f"not a controller request: {type(request).__name__}") from None


def is_read(request) -> bool:
    return row_of(request).read is not None
