"""The controller's requests and replies, shared by the controller, its gRPC service and clients.

Frozen dataclasses, like the Raft messages: protobuf stays in the gRPC adapter. Every
reply that can fail per item carries ``error`` (a Kafka error) and ``message``; a
request that fails as a whole raises :class:`~quorum.errors.SparkraftError` (for
example NOT_CONTROLLER with the leader's id) instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

# the controller's API names these too (api.TopicPartition, ...)
from quorum.controller.partition_results import ElectLeadersResult, PartitionResults, TopicPartition  # noqa: F401
from quorum.controller.settings import BROKER_FEATURES, MV_MAX, MV_MIN
from quorum.controller.side_api import (  # noqa: F401
    AuditEntries,
    DescribeAuditRequest,
    DescribeLogHoldsRequest,
    DescribeMigrationRequest,
    FinalizeMigrationRequest,
    HoldLogRequest,
    ImportZkMetadataRequest,
    LogHolds,
    MigrationDescription,
    RecordRefusalRequest,
)
from quorum.errors import Errors


# ---------------------------------------------------------------- brokers
@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    name: str  # listener name, e.g. PLAINTEXT
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class RegisterBrokerRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: str  # a fresh Uuid per process start
    endpoints: tuple[BrokerEndpoint, ...]
    rack: Optional[str] = None
    # metadata.version levels this broker supports (inclusive): by default, what this code reads
    min_metadata_version: int = MV_MIN
    max_metadata_version: int = MV_MAX
    # the other features it supports: (name, lowest, highest level); one not named is supported at 0 only
    features: tuple[tuple[str, int, int], ...] = BROKER_FEATURES
    log_dirs: tuple[str, ...] = ()  # its log directories' ids (Kafka's brokers, KIP-858)


@dataclass(frozen=True, slots=True)
class RegisterControllerRequest:
    """A controller's registration (KIP-919): where Kafka's clients reach it, what it supports."""

    controller_id: int
    incarnation_id: str  # a fresh Uuid per process start
    endpoints: tuple[BrokerEndpoint, ...]  # its listeners that speak Kafka's protocol
    features: tuple[tuple[str, int, int], ...]  # (name, lowest, highest level), metadata.version among them


@dataclass(frozen=True, slots=True)
class UnregisterControllerRequest:
    """Remove a controller's registration (metadata.version 4.4-IV2): one taken out of the quorum."""

    controller_id: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerReply:
    broker_epoch: int  # the offset of its RegisterBrokerRecord


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int  # the last offset the broker has applied
    want_fence: bool = False
    want_shutdown: bool = False  # controlled shutdown: move my leaderships away
    offline_log_dirs: tuple[str, ...] = ()  # its log directories that failed (a Kafka broker's, KIP-858)
    # its log directories that take no new replicas (KIP-1066); None: it does not say (before 4.3-IV0)
    cordoned_log_dirs: Optional[tuple[str, ...]] = None


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool  # controlled shutdown finished: the broker may stop now


# ---------------------------------------------------------------- topics and partitions
@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1  # -1: num.partitions default (1)
    replication_factor: int = -1  # -1: default.replication.factor (1)
    # explicit assignment: partition -> replicas (then num_partitions/replication_factor are -1)
    assignments: tuple[tuple[int, ...], ...] = ()
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: Errors = Errors.NONE
    message: str = ""
    topic_id: Optional[str] = None
    num_partitions: int = -1
    replication_factor: int = -1


@dataclass(frozen=True, slots=True)
class TopicResult:
    """Per-topic outcome of delete, create-partitions and similar requests."""

    name: str
    error: Errors = Errors.NONE
    message: str = ""
    topic_id: Optional[str] = None


@dataclass(frozen=True, slots=True)
class PartitionCountUpdate:
    name: str
    count: int  # the new total number of partitions
    assignments: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionIsr:
    """One partition's ISR as its leader proposes it, at the epochs the leader last saw."""

    topic_id: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionRequest:
    """A partition leader (a broker) changes the ISR of partitions it leads (Kafka batches them)."""

    broker_id: int
    broker_epoch: int
    partitions: tuple[PartitionIsr, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    """One partition's outcome, and its state after the request (or as it is, when refused)."""

    topic_id: str
    partition: int
    error: Errors = Errors.NONE
    message: str = ""
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ReassignablePartition:
    partition: TopicPartition
    replicas: Optional[tuple[int, ...]]  # the target replicas; None cancels the reassignment in flight


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequest:
    partitions: tuple[ReassignablePartition, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsRequest:
    partitions: Optional[tuple[TopicPartition, ...]] = None  # None: every reassignment in flight


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    partition: TopicPartition
    replicas: tuple[int, ...]  # the target replicas, then those being removed
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


# ---------------------------------------------------------------- configs
@dataclass(frozen=True, slots=True)
class ConfigResourceKey:
    type: str  # TOPIC, BROKER, CLUSTER or GROUP (a BROKER with an empty name is the cluster default)
    name: str


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    op: str  # SET, DELETE, APPEND, SUBTRACT
    value: Optional[str] = None


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    resource: ConfigResourceKey
    error: Errors = Errors.NONE
    message: str = ""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: Optional[str]
    source: str  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG
    sensitive: bool = False


# ---------------------------------------------------------------- reads
@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int = 0


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]  # a page of them, or all (see next_partition)
    configs: dict = field(default_factory=dict)
    partition_count: int = -1  # all of the topic's partitions (-1: as many as ``partitions``)
    next_partition: int = 0  # where the next page starts; 0: ``partitions`` ends the topic


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    broker_id: int
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int
    rack: Optional[str]
    endpoints: tuple[BrokerEndpoint, ...]
    incarnation_id: str = ""
    # the last metadata offset it reported in a heartbeat to the active controller; -1 when unknown
    # (answered by a standby, or no heartbeat since this controller became active)
    metadata_offset: int = -1


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: Optional[int]  # the active controller, if known
    metadata_offset: int  # the committed offset the answer was read at
    brokers: tuple[BrokerDescription, ...]


# ---------------------------------------------------------------- admin requests
@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class DeleteTopicsRequest:
    names: tuple[str, ...] = ()
    topic_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    updates: tuple[PartitionCountUpdate, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    election_type: str = "PREFERRED"  # PREFERRED or UNCLEAN
    partitions: Optional[tuple[TopicPartition, ...]] = None  # None: every partition


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[tuple[ConfigResourceKey, tuple[AlterableConfig, ...]], ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class DescribeConfigsRequest:
    resources: tuple[ConfigResourceKey, ...]


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRequest:
    broker_id: int


@dataclass(frozen=True, slots=True)
class UpdateFeaturesRequest:
    updates: tuple[tuple[str, int], ...]  # feature name -> max level (0 deletes)
    validate_only: bool = False
    upgrade_type: str = "UPGRADE"  # UPGRADE, SAFE_DOWNGRADE or UNSAFE_DOWNGRADE (Kafka's, for every update)


@dataclass(frozen=True, slots=True)
class DescribeFeaturesRequest:
    pass


@dataclass(frozen=True, slots=True)
class FeaturesDescription:
    finalized: tuple[tuple[str, int], ...]  # (feature, level), metadata.version among them
    supported: tuple[tuple[str, int, int], ...]  # (feature, lowest, highest) this controller implements
    epoch: int  # the metadata offset it was read at


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    entity: tuple[tuple[str, Optional[str]], ...]  # (entity type, name or None for the default)
    ops: tuple[tuple[str, Optional[float]], ...]  # (key, value or None to remove)


@dataclass(frozen=True, slots=True)
class AlterClientQuotasRequest:
    alterations: tuple[ClientQuotaAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class DescribeClientQuotasRequest:
    """Kafka's ClientQuotaFilter: per component (entity type, match type EXACT | DEFAULT | ANY, name
    for EXACT); ``strict``: only entities made of exactly these types."""

    components: tuple[tuple[str, str, Optional[str]], ...]
    strict: bool = False


@dataclass(frozen=True, slots=True)
class ClientQuotaEntry:
    entity: tuple[tuple[str, Optional[str]], ...]  # (entity type, name or None for the default), by type
    values: tuple[tuple[str, float], ...]  # (key, value), by key


@dataclass(frozen=True, slots=True)
class DirectoryAssignment:
    topic_id: str
    partition: int
    directory: str  # a log directory id of the broker's (Kafka's Uuid text)


@dataclass(frozen=True, slots=True)
class AssignReplicasToDirsRequest:
    """A broker says which of its log directories its replicas are in (KIP-858)."""

    broker_id: int
    broker_epoch: int
    assignments: tuple[DirectoryAssignment, ...]


@dataclass(frozen=True, slots=True)
class AssignmentResult:
    topic_id: str
    partition: int
    error: Errors = Errors.NONE


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    first_producer_id: int
    size: int = 1000


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER
    resource_name: str
    pattern_type: str  # LITERAL or PREFIXED
    principal: str  # User:alice
    host: str  # * for any
    operation: str  # READ, WRITE, ALL, ...
    permission_type: str  # ALLOW or DENY


@dataclass(frozen=True, slots=True)
class CreateAclsRequest:
    bindings: tuple[AclBinding, ...]


@dataclass(frozen=True, slots=True)
class DeleteAclsRequest:
    filters: tuple[AclBinding, ...]  # fields may be "ANY" / "*" as in Kafka's AclBindingFilter


@dataclass(frozen=True, slots=True)
class ScramCredentialUpsertion:
    """A user's SCRAM credential to set: salted and iterated by the client, so the password itself
    never reaches the controller (Kafka's AlterUserScramCredentials)."""

    name: str
    mechanism: str  # SCRAM-SHA-256 | SCRAM-SHA-512
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class ScramCredentialDeletion:
    name: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...] = ()
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()


@dataclass(frozen=True, slots=True)
class UserResult:
    """The outcome for one user of an AlterUserScramCredentials (all of its changes, or none)."""

    user: str
    error: Errors = Errors.NONE
    message: str = ""


@dataclass(frozen=True, slots=True)
class UserScramCredentials:
    """A user's credentials as DescribeUserScramCredentials shows them: mechanism and iterations."""

    user: str
    error: Errors = Errors.NONE
    message: str = ""
    credentials: tuple[tuple[str, int], ...] = ()  # (mechanism, iterations)


@dataclass(frozen=True, slots=True)
class ItemResult:
    """Per-item outcome of requests that return nothing else (alter quotas, create ACLs...)."""

    error: Errors = Errors.NONE
    message: str = ""


# -- read requests (no records, answered by any controller) ------------------------------------
@dataclass(frozen=True, slots=True)
class ListTopicsRequest:
    pass


@dataclass(frozen=True, slots=True)
class DescribeTopicsRequest:
    names: tuple[str, ...]
    first_partition: int = 0
    partition_limit: int = 0  # 0: the controller's page size


@dataclass(frozen=True, slots=True)
class DescribeClusterRequest:
    pass


@dataclass(frozen=True, slots=True)
class DescribeAclsRequest:
    filter: AclBinding


@dataclass(frozen=True, slots=True)
class DescribeUserScramCredentialsRequest:
    users: tuple[str, ...] = ()  # none: every user with a credential
