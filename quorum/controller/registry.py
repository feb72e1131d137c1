"""Every controller request, one row each: what the transports call it, what it needs to be
allowed, whether it writes, and (for a write) the handler that turns it into records.

The controller's dispatch (core.py), the authorizer's rules (quorum/rpc/request_actions.py) and
the transports' names (quorum/rpc/controller_convert.py: gRPC methods, the wire's methods,
protobuf ``<Method>Request``/``<Method>Response``) read these rows; a test checks that every
request type of api.py has a complete row and that each of those readers has what the row asks
of it. Adding a request means adding a row (and its converters); adding a transport means
reading the rows.

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
    brokers_control,
    configs_control,
    features_control,
    migration_control,
    producer_ids_control,
    quotas_control,
    reassign_control,
    scram_control,
    topics_control,
)
from quorum.controller.context import ControllerContext

Handler = Callable[[ControllerContext, Any, int], tuple[list, Any]]
Quick = Callable[[ControllerContext, Any], bool]

QUICK_RECORDS = 64  # a quick write makes at most about this many records (and touches as many partitions)


@dataclass(frozen=True, slots=True)
class Needs:
    """What a request needs to be allowed (Kafka's rules; request_actions.py carries them out):

    - ``cluster``: ``operation`` on the cluster;
    - ``broker``: CLUSTER_ACTION on the cluster, or the broker's own principal for its own id;
    - ``create_topics``: CREATE on the cluster, or CREATE on each topic;
    - ``topics``: ``operation`` on each topic ``names(request)`` gives (topic ids named by
      ``ids(request)`` are looked up first);
    - ``configs``: ``operation`` on each topic resource, and on the cluster for broker or cluster
      resources, of ``resources(request)``;
    - ``nothing``: anyone (what Kafka answers every client)."""

    kind: str
    operation: str = ""
    names: Optional[Callable[[Any], list[str]]] = None
    ids: Optional[Callable[[Any], list[str]]] = None
    resources: Optional[Callable[[Any], list[api.ConfigResourceKey]]] = None


NEED_KINDS = ("cluster", "broker", "create_topics", "topics", "configs", "nothing")


@dataclass(frozen=True, slots=True)
class RequestRow:
    request: type  # the api.py dataclass
    method: Optional[str]  # gRPC's and the wire's method name; None: only the active controller's own node sends it
    kafka: Optional[tuple[str, int]]  # Kafka's API name and key for the same request, where it has one
    needs: Needs
    handler: Optional[Handler] = None  # a write's: records and reply; None for a read (answered from the image)
    transaction: bool = False  # written as a transaction even when its records fit one batch
    # Clients send it on the wire (quorum/wire/, the log's own transport: answered from the node's
    # event loop, no thread held while it commits) where the controller has one; else over gRPC.
    # gRPC stays for SCRAM logins, requests a broker forwards for its client, and requests larger
    # than the wire takes (they get gRPC's RESOURCE_EXHAUSTED and a line saying to split them).
    wire: bool = True
    quick: Optional[Quick] = None  # True for a request small enough to handle on the event loop (above)

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

ROWS: tuple[RequestRow, ...] = (
    # brokers
    RequestRow(api.RegisterBrokerRequest, "RegisterBroker", ("BrokerRegistration", 62), BROKER, _register),
    RequestRow(api.BrokerHeartbeatRequest, "BrokerHeartbeat", ("BrokerHeartbeat", 63), BROKER,
               lambda c, r, now: brokers_control.heartbeat(c, r, now)),
    RequestRow(api.UnregisterBrokerRequest, "UnregisterBroker", ("UnregisterBroker", 64), _cluster("ALTER"),
               _unregister),
    RequestRow(api.AlterPartitionRequest, "AlterPartition", ("AlterPartition", 56), BROKER,
               lambda c, r, now: topics_control.alter_partition(c, r)),
    RequestRow(api.AllocateProducerIdsRequest, "AllocateProducerIds", ("AllocateProducerIds", 67), BROKER,
               lambda c, r, now: producer_ids_control.allocate(c.spec, r)),
    RequestRow(api.DescribeClusterRequest, "DescribeCluster", ("DescribeCluster", 60), NOTHING),
    # topics and partitions
    RequestRow(api.CreateTopicsRequest, "CreateTopics", ("CreateTopics", 19), Needs("create_topics"),
               lambda c, r, now: topics_control.create_topics(c, r), quick=_few_new_partitions),
    RequestRow(api.DeleteTopicsRequest, "DeleteTopics", ("DeleteTopics", 20),
               Needs("topics", "DELETE", names=lambda r: list(r.names), ids=lambda r: list(r.topic_ids)),
               lambda c, r, now: topics_control.delete_topics(c, r), quick=_few_partitions_removed),
    RequestRow(api.CreatePartitionsRequest, "CreatePartitions", ("CreatePartitions", 37),
               Needs("topics", "ALTER", names=lambda r: [u.name for u in r.updates]),
               lambda c, r, now: topics_control.create_partitions(c, r)),
    RequestRow(api.ElectLeadersRequest, "ElectLeaders", ("ElectLeaders", 43), _cluster("ALTER"),
               lambda c, r, now: topics_control.elect_leaders(c, r)),
    RequestRow(api.AlterPartitionReassignmentsRequest, "AlterPartitionReassignments",
               ("AlterPartitionReassignments", 45), _cluster("ALTER"), lambda c, r, now: reassign_control.alter(c, r)),
    RequestRow(api.ListPartitionReassignmentsRequest, "ListPartitionReassignments",
               ("ListPartitionReassignments", 46), _cluster("DESCRIBE")),
    RequestRow(api.ListTopicsRequest, "ListTopics", ("Metadata", 3), NOTHING),  # lists only the visible ones
    RequestRow(api.DescribeTopicsRequest, "DescribeTopics", ("DescribeTopicPartitions", 75),
               Needs("topics", "DESCRIBE", names=lambda r: list(r.names))),
    # configs and quotas
    RequestRow(api.IncrementalAlterConfigsRequest, "IncrementalAlterConfigs", ("IncrementalAlterConfigs", 44),
               Needs("configs", "ALTER_CONFIGS", resources=lambda r: [k for k, _ in r.resources]),
               lambda c, r, now: configs_control.incremental_alter(c.spec, r), quick=_few_configs),
    RequestRow(api.DescribeConfigsRequest, "DescribeConfigs", ("DescribeConfigs", 32),
               Needs("configs", "DESCRIBE_CONFIGS", resources=lambda r: list(r.resources))),
    RequestRow(api.AlterClientQuotasRequest, "AlterClientQuotas", ("AlterClientQuotas", 49),
               _cluster("ALTER_CONFIGS"), lambda c, r, now: quotas_control.alter(c.spec, r), quick=_few_quotas),
    RequestRow(api.DescribeClientQuotasRequest, "DescribeClientQuotas", ("DescribeClientQuotas", 48),
               _cluster("DESCRIBE_CONFIGS")),
    # features
    RequestRow(api.UpdateFeaturesRequest, "UpdateFeatures", ("UpdateFeatures", 57), _cluster("ALTER"),
               lambda c, r, now: features_control.update(c, r)),
    RequestRow(api.DescribeFeaturesRequest, "DescribeFeatures", ("ApiVersions", 18), NOTHING),
    # security
    RequestRow(api.CreateAclsRequest, "CreateAcls", ("CreateAcls", 30), _cluster("ALTER"),
               lambda c, r, now: acls_control.create(c.spec, r, c.new_uuid)),
    RequestRow(api.DeleteAclsRequest, "DeleteAcls", ("DeleteAcls", 31), _cluster("ALTER"),
               lambda c, r, now: acls_control.delete(c.spec, r)),
    RequestRow(api.DescribeAclsRequest, "DescribeAcls", ("DescribeAcls", 29), _cluster("DESCRIBE")),
    RequestRow(api.AlterUserScramCredentialsRequest, "AlterUserScramCredentials",
               ("AlterUserScramCredentials", 51), _cluster("ALTER"), lambda c, r, now: scram_control.alter(c.spec, r)),
    RequestRow(api.DescribeUserScramCredentialsRequest, "DescribeUserScramCredentials",
               ("DescribeUserScramCredentials", 50), _cluster("DESCRIBE")),
    # migration from ZooKeeper mode (the import is the active controller's own: MigrationDriver)
    RequestRow(api.ImportZkMetadataRequest, None, None, _cluster("ALTER"),
               lambda c, r, now: migration_control.import_zk(c, r), transaction=True),
    RequestRow(api.FinalizeMigrationRequest, "FinalizeMigration", None, _cluster("ALTER"),
               lambda c, r, now: migration_control.finalize(c, r)),
    RequestRow(api.DescribeMigrationRequest, "DescribeMigration", None, _cluster("DESCRIBE")),
)

BY_TYPE: dict[type, RequestRow] = {row.request: row for row in ROWS}
BY_METHOD: dict[str, RequestRow] = {row.method: row for row in ROWS if row.method is not None}
