from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ItemResult(_message.Message):
    __slots__ = ("error", "error_message")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class ReplicaList(_message.Message):
    __slots__ = ("replicas",)
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class ConfigPair(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class BrokerEndpoint(_message.Message):
    __slots__ = ("name", "host", "port", "security_protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    security_protocol: str
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., security_protocol: _Optional[str] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "cluster_id", "incarnation_id", "endpoints", "rack", "min_metadata_version", "max_metadata_version", "features")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    MIN_METADATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_METADATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    cluster_id: str
    incarnation_id: str
    endpoints: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    rack: str
    min_metadata_version: int
    max_metadata_version: int
    features: _containers.RepeatedCompositeFieldContainer[SupportedFeature]
    def __init__(self, broker_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., incarnation_id: _Optional[str] = ..., endpoints: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., rack: _Optional[str] = ..., min_metadata_version: _Optional[int] = ..., max_metadata_version: _Optional[int] = ..., features: _Optional[_Iterable[_Union[SupportedFeature, _Mapping]]] = ...) -> None: ...

class SupportedFeature(_message.Message):
    __slots__ = ("name", "min_version", "max_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    min_version: int
    max_version: int
    def __init__(self, name: _Optional[str] = ..., min_version: _Optional[int] = ..., max_version: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "broker_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    broker_epoch: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shutdown", "offline_log_dirs", "says_cordoned", "cordoned_log_dirs")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    SAYS_CORDONED_FIELD_NUMBER: _ClassVar[int]
    CORDONED_LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shutdown: bool
    offline_log_dirs: _containers.RepeatedScalarFieldContainer[str]
    says_cordoned: bool
    cordoned_log_dirs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shutdown: _Optional[bool] = ..., offline_log_dirs: _Optional[_Iterable[str]] = ..., says_cordoned: _Optional[bool] = ..., cordoned_log_dirs: _Optional[_Iterable[str]] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "is_caught_up", "is_fenced", "should_shutdown")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., is_caught_up: _Optional[bool] = ..., is_fenced: _Optional[bool] = ..., should_shutdown: _Optional[bool] = ...) -> None: ...

class RegisterControllerRequest(_message.Message):
    __slots__ = ("controller_id", "incarnation_id", "endpoints", "features")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    incarnation_id: str
    endpoints: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    features: _containers.RepeatedCompositeFieldContainer[SupportedFeature]
    def __init__(self, controller_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., endpoints: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., features: _Optional[_Iterable[_Union[SupportedFeature, _Mapping]]] = ...) -> None: ...

class RegisterControllerResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class UnregisterControllerRequest(_message.Message):
    __slots__ = ("controller_id",)
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    def __init__(self, controller_id: _Optional[int] = ...) -> None: ...

class UnregisterControllerResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id",)
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    def __init__(self, broker_id: _Optional[int] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "assignments", "configs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    assignments: _containers.RepeatedCompositeFieldContainer[ReplicaList]
    configs: _containers.RepeatedCompositeFieldContainer[ConfigPair]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaList, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[ConfigPair, _Mapping]]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicResult(_message.Message):
    __slots__ = ("name", "error", "error_message", "topic_id", "num_partitions", "replication_factor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: int
    error_message: str
    topic_id: str
    num_partitions: int
    replication_factor: int
    def __init__(self, name: _Optional[str] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[CreateTopicResult, _Mapping]]] = ...) -> None: ...

class TopicResult(_message.Message):
    __slots__ = ("name", "error", "error_message", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: int
    error_message: str
    topic_id: str
    def __init__(self, name: _Optional[str] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[str] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names", "topic_ids")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_IDS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    topic_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ..., topic_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class PartitionCountUpdate(_message.Message):
    __slots__ = ("name", "count", "assignments")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    assignments: _containers.RepeatedCompositeFieldContainer[ReplicaList]
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaList, _Mapping]]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("updates", "validate_only")
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[PartitionCountUpdate]
    validate_only: bool
    def __init__(self, updates: _Optional[_Iterable[_Union[PartitionCountUpdate, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class TopicPartition(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "all_partitions", "partitions", "results_by_topic")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    ALL_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_BY_TOPIC_FIELD_NUMBER: _ClassVar[int]
    election_type: str
    all_partitions: bool
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    results_by_topic: bool
    def __init__(self, election_type: _Optional[str] = ..., all_partitions: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ..., results_by_topic: _Optional[bool] = ...) -> None: ...

class ElectLeadersResult(_message.Message):
    __slots__ = ("partition", "error", "error_message", "more_partitions")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MORE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partition: TopicPartition
    error: int
    error_message: str
    more_partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[_Union[TopicPartition, _Mapping]] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., more_partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[ElectLeadersResult, _Mapping]]] = ...) -> None: ...

class PartitionIsr(_message.Message):
    __slots__ = ("topic_id", "partition", "leader_epoch", "partition_epoch", "new_isr")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "partitions")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionIsr]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionIsr, _Mapping]]] = ...) -> None: ...

class AlterPartitionResult(_message.Message):
    __slots__ = ("topic_id", "partition", "error", "error_message", "leader", "leader_epoch", "partition_epoch", "isr")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    error: int
    error_message: str
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[AlterPartitionResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[AlterPartitionResult, _Mapping]]] = ...) -> None: ...

class ReassignablePartition(_message.Message):
    __slots__ = ("partition", "cancel", "replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: TopicPartition
    cancel: bool
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[_Union[TopicPartition, _Mapping]] = ..., cancel: _Optional[bool] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[ReassignablePartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[ReassignablePartition, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[ElectLeadersResult, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("all_partitions", "partitions")
    ALL_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    all_partitions: bool
    partitions: _containers.RepeatedCompositeFieldContainer[TopicPartition]
    def __init__(self, all_partitions: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[TopicPartition, _Mapping]]] = ...) -> None: ...

class OngoingReassignment(_message.Message):
    __slots__ = ("partition", "replicas", "adding_replicas", "removing_replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: TopicPartition
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[_Union[TopicPartition, _Mapping]] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "reassignments")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    reassignments: _containers.RepeatedCompositeFieldContainer[OngoingReassignment]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., reassignments: _Optional[_Iterable[_Union[OngoingReassignment, _Mapping]]] = ...) -> None: ...

class ConfigResource(_message.Message):
    __slots__ = ("type", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: str
    name: str
    def __init__(self, type: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class AlterableConfig(_message.Message):
    __slots__ = ("name", "op", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: str
    value: str
    def __init__(self, name: _Optional[str] = ..., op: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class AlterConfigsResource(_message.Message):
    __slots__ = ("resource", "configs")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    resource: ConfigResource
    configs: _containers.RepeatedCompositeFieldContainer[AlterableConfig]
    def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., configs: _Optional[_Iterable[_Union[AlterableConfig, _Mapping]]] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResult(_message.Message):
    __slots__ = ("resource", "error", "error_message")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    resource: ConfigResource
    error: int
    error_message: str
    def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[AlterConfigsResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[AlterConfigsResult, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ConfigResource]
    def __init__(self, resources: _Optional[_Iterable[_Union[ConfigResource, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "source", "sensitive")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SENSITIVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    source: str
    sensitive: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[str] = ..., sensitive: _Optional[bool] = ...) -> None: ...

class DescribeConfigsResult(_message.Message):
    __slots__ = ("resource", "error", "error_message", "entries")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    resource: ConfigResource
    error: int
    error_message: str
    entries: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DescribeConfigsResult, _Mapping]]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "names", "metadata_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    names: _containers.RepeatedScalarFieldContainer[str]
    metadata_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., names: _Optional[_Iterable[str]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "first_partition", "partition_limit")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    FIRST_PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_LIMIT_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    first_partition: int
    partition_limit: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., first_partition: _Optional[int] = ..., partition_limit: _Optional[int] = ...) -> None: ...

class PartitionDescription(_message.Message):
    __slots__ = ("partition", "leader", "replicas", "isr", "leader_epoch", "partition_epoch")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader_epoch: int
    partition_epoch: int
    def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "error", "error_message", "topic_id", "partitions", "configs", "partition_count", "next_partition")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    NEXT_PARTITION_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: int
    error_message: str
    topic_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDescription]
    configs: _containers.RepeatedCompositeFieldContainer[ConfigPair]
    partition_count: int
    next_partition: int
    def __init__(self, name: _Optional[str] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionDescription, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[ConfigPair, _Mapping]]] = ..., partition_count: _Optional[int] = ..., next_partition: _Optional[int] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "topics", "metadata_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    metadata_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerDescription(_message.Message):
    __slots__ = ("broker_id", "fenced", "in_controlled_shutdown", "broker_epoch", "rack", "endpoints", "incarnation_id", "metadata_offset")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int
    rack: str
    endpoints: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    incarnation_id: str
    metadata_offset: int
    def __init__(self, broker_id: _Optional[int] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., broker_epoch: _Optional[int] = ..., rack: _Optional[str] = ..., endpoints: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., incarnation_id: _Optional[str] = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "cluster_id", "controller_id", "metadata_offset", "brokers")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    cluster_id: str
    controller_id: int
    metadata_offset: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerDescription]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., metadata_offset: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerDescription, _Mapping]]] = ...) -> None: ...

class FeatureUpdate(_message.Message):
    __slots__ = ("feature", "max_level")
    FEATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_LEVEL_FIELD_NUMBER: _ClassVar[int]
    feature: str
    max_level: int
    def __init__(self, feature: _Optional[str] = ..., max_level: _Optional[int] = ...) -> None: ...

class UpdateFeaturesRequest(_message.Message):
    __slots__ = ("updates", "validate_only", "upgrade_type")
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    UPGRADE_TYPE_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.RepeatedCompositeFieldContainer[FeatureUpdate]
    validate_only: bool
    upgrade_type: str
    def __init__(self, updates: _Optional[_Iterable[_Union[FeatureUpdate, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., upgrade_type: _Optional[str] = ...) -> None: ...

class DescribeFeaturesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FinalizedFeature(_message.Message):
    __slots__ = ("name", "level")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    level: int
    def __init__(self, name: _Optional[str] = ..., level: _Optional[int] = ...) -> None: ...

class DescribeFeaturesResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "finalized", "supported", "epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FINALIZED_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    finalized: _containers.RepeatedCompositeFieldContainer[FinalizedFeature]
    supported: _containers.RepeatedCompositeFieldContainer[SupportedFeature]
    epoch: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., finalized: _Optional[_Iterable[_Union[FinalizedFeature, _Mapping]]] = ..., supported: _Optional[_Iterable[_Union[SupportedFeature, _Mapping]]] = ..., epoch: _Optional[int] = ...) -> None: ...

class UpdateFeaturesResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class QuotaEntity(_message.Message):
    __slots__ = ("entity_type", "name")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    name: str
    def __init__(self, entity_type: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class QuotaOp(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: float
    def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class ClientQuotaAlteration(_message.Message):
    __slots__ = ("entity", "ops")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    entity: _containers.RepeatedCompositeFieldContainer[QuotaEntity]
    ops: _containers.RepeatedCompositeFieldContainer[QuotaOp]
    def __init__(self, entity: _Optional[_Iterable[_Union[QuotaEntity, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[QuotaOp, _Mapping]]] = ...) -> None: ...

class QuotaFilterComponent(_message.Message):
    __slots__ = ("entity_type", "match_type", "match")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    MATCH_TYPE_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    match_type: str
    match: str
    def __init__(self, entity_type: _Optional[str] = ..., match_type: _Optional[str] = ..., match: _Optional[str] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("components", "strict")
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[QuotaFilterComponent]
    strict: bool
    def __init__(self, components: _Optional[_Iterable[_Union[QuotaFilterComponent, _Mapping]]] = ..., strict: _Optional[bool] = ...) -> None: ...

class ClientQuotaEntry(_message.Message):
    __slots__ = ("entity", "values")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    entity: _containers.RepeatedCompositeFieldContainer[QuotaEntity]
    values: _containers.RepeatedCompositeFieldContainer[QuotaOp]
    def __init__(self, entity: _Optional[_Iterable[_Union[QuotaEntity, _Mapping]]] = ..., values: _Optional[_Iterable[_Union[QuotaOp, _Mapping]]] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "entries")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    entries: _containers.RepeatedCompositeFieldContainer[ClientQuotaEntry]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[ClientQuotaEntry, _Mapping]]] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("alterations", "validate_only")
    ALTERATIONS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    alterations: _containers.RepeatedCompositeFieldContainer[ClientQuotaAlteration]
    validate_only: bool
    def __init__(self, alterations: _Optional[_Iterable[_Union[ClientQuotaAlteration, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class DirectoryAssignment(_message.Message):
    __slots__ = ("topic_id", "partition", "directory")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    directory: str
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., directory: _Optional[str] = ...) -> None: ...

class AssignReplicasToDirsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "assignments")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    assignments: _containers.RepeatedCompositeFieldContainer[DirectoryAssignment]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[DirectoryAssignment, _Mapping]]] = ...) -> None: ...

class AssignmentResult(_message.Message):
    __slots__ = ("topic_id", "partition", "error")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    partition: int
    error: int
    def __init__(self, topic_id: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[int] = ...) -> None: ...

class AssignReplicasToDirsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[AssignmentResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[AssignmentResult, _Mapping]]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "first_producer_id", "size")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    FIRST_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    first_producer_id: int
    size: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., first_producer_id: _Optional[int] = ..., size: _Optional[int] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission_type: str
    def __init__(self, resource_type: _Optional[str] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[str] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[str] = ..., permission_type: _Optional[str] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("bindings",)
    BINDINGS_FIELD_NUMBER: _ClassVar[int]
    bindings: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, bindings: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsFilterResult(_message.Message):
    __slots__ = ("error", "error_message", "matching")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MATCHING_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    matching: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., matching: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsFilterResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DeleteAclsFilterResult, _Mapping]]] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: AclBinding
    def __init__(self, filter: _Optional[_Union[AclBinding, _Mapping]] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "bindings")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BINDINGS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    bindings: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., bindings: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class ScramCredentialUpsertion(_message.Message):
    __slots__ = ("name", "mechanism", "iterations", "salt", "salted_password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    iterations: int
    salt: bytes
    salted_password: bytes
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...

class ScramCredentialDeletion(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: str
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[str] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("deletions", "upsertions")
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[ScramCredentialDeletion]
    upsertions: _containers.RepeatedCompositeFieldContainer[ScramCredentialUpsertion]
    def __init__(self, deletions: _Optional[_Iterable[_Union[ScramCredentialDeletion, _Mapping]]] = ..., upsertions: _Optional[_Iterable[_Union[ScramCredentialUpsertion, _Mapping]]] = ...) -> None: ...

class AlterUserScramCredentialsResult(_message.Message):
    __slots__ = ("user", "error", "error_message")
    USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    user: str
    error: int
    error_message: str
    def __init__(self, user: _Optional[str] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[AlterUserScramCredentialsResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[AlterUserScramCredentialsResult, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, users: _Optional[_Iterable[str]] = ...) -> None: ...

class ScramCredentialInfo(_message.Message):
    __slots__ = ("mechanism", "iterations")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    iterations: int
    def __init__(self, mechanism: _Optional[str] = ..., iterations: _Optional[int] = ...) -> None: ...

class DescribeUserScramCredentialsResult(_message.Message):
    __slots__ = ("user", "error", "error_message", "credential_infos")
    USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_INFOS_FIELD_NUMBER: _ClassVar[int]
    user: str
    error: int
    error_message: str
    credential_infos: _containers.RepeatedCompositeFieldContainer[ScramCredentialInfo]
    def __init__(self, user: _Optional[str] = ..., error: _Optional[int] = ..., error_message: _Optional[str] = ..., credential_infos: _Optional[_Iterable[_Union[ScramCredentialInfo, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    results: _containers.RepeatedCompositeFieldContainer[DescribeUserScramCredentialsResult]
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DescribeUserScramCredentialsResult, _Mapping]]] = ...) -> None: ...

class SaslAuthenticateRequest(_message.Message):
    __slots__ = ("mechanism", "auth_bytes")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    mechanism: str
    auth_bytes: bytes
    def __init__(self, mechanism: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ...) -> None: ...

class SaslAuthenticateResponse(_message.Message):
    __slots__ = ("error", "error_message", "auth_bytes", "token", "session_lifetime_ms")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AUTH_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_LIFETIME_MS_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    auth_bytes: bytes
    token: str
    session_lifetime_ms: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., auth_bytes: _Optional[bytes] = ..., token: _Optional[str] = ..., session_lifetime_ms: _Optional[int] = ...) -> None: ...

class DescribeMigrationRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeMigrationResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset", "state", "zk_controller_epoch", "dual_write_lag_records", "mirrored_offset", "migration_error")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ZK_CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DUAL_WRITE_LAG_RECORDS_FIELD_NUMBER: _ClassVar[int]
    MIRRORED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIGRATION_ERROR_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    state: str
    zk_controller_epoch: int
    dual_write_lag_records: int
    mirrored_offset: int
    migration_error: str
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ..., state: _Optional[str] = ..., zk_controller_epoch: _Optional[int] = ..., dual_write_lag_records: _Optional[int] = ..., mirrored_offset: _Optional[int] = ..., migration_error: _Optional[str] = ...) -> None: ...

class FinalizeMigrationRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FinalizeMigrationResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class HoldLogRequest(_message.Message):
    __slots__ = ("holder", "offset", "release")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    holder: str
    offset: int
    release: bool
    def __init__(self, holder: _Optional[str] = ..., offset: _Optional[int] = ..., release: _Optional[bool] = ...) -> None: ...

class LogHold(_message.Message):
    __slots__ = ("holder", "offset", "time_ms")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    holder: str
    offset: int
    time_ms: int
    def __init__(self, holder: _Optional[str] = ..., offset: _Optional[int] = ..., time_ms: _Optional[int] = ...) -> None: ...

class HoldLogResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "hold", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    hold: LogHold
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., hold: _Optional[_Union[LogHold, _Mapping]] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class DescribeLogHoldsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeLogHoldsResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "holds", "max_age_ms", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    holds: _containers.RepeatedCompositeFieldContainer[LogHold]
    max_age_ms: int
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., holds: _Optional[_Iterable[_Union[LogHold, _Mapping]]] = ..., max_age_ms: _Optional[int] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class RecordRefusalRequest(_message.Message):
    __slots__ = ("controller_id", "principal", "host", "listener", "software_name", "software_version", "forwarded_by", "request", "resources", "changes", "error_code", "error_message")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    LISTENER_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_NAME_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_BY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    principal: str
    host: str
    listener: str
    software_name: str
    software_version: str
    forwarded_by: str
    request: str
    resources: _containers.RepeatedScalarFieldContainer[str]
    changes: _containers.RepeatedScalarFieldContainer[str]
    error_code: int
    error_message: str
    def __init__(self, controller_id: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., listener: _Optional[str] = ..., software_name: _Optional[str] = ..., software_version: _Optional[str] = ..., forwarded_by: _Optional[str] = ..., request: _Optional[str] = ..., resources: _Optional[_Iterable[str]] = ..., changes: _Optional[_Iterable[str]] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class RecordRefusalResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class DescribeAuditRequest(_message.Message):
    __slots__ = ("from_offset", "max_entries")
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    from_offset: int
    max_entries: int
    def __init__(self, from_offset: _Optional[int] = ..., max_entries: _Optional[int] = ...) -> None: ...

class AuditEntry(_message.Message):
    __slots__ = ("offset", "record")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    offset: int
    record: bytes
    def __init__(self, offset: _Optional[int] = ..., record: _Optional[bytes] = ...) -> None: ...

class DescribeAuditResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint", "entries", "next_offset", "log_start", "committed_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    entries: _containers.RepeatedCompositeFieldContainer[AuditEntry]
    next_offset: int
    log_start: int
    committed_offset: int
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AuditEntry, _Mapping]]] = ..., next_offset: _Optional[int] = ..., log_start: _Optional[int] = ..., committed_offset: _Optional[int] = ...) -> None: ...

class ForwardedRequest(_message.Message):
    __slots__ = ("principal", "host", "method", "request", "software", "listener")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    LISTENER_FIELD_NUMBER: _ClassVar[int]
    principal: str
    host: str
    method: str
    request: bytes
    software: str
    listener: str
    def __init__(self, principal: _Optional[str] = ..., host: _Optional[str] = ..., method: _Optional[str] = ..., request: _Optional[bytes] = ..., software: _Optional[str] = ..., listener: _Optional[str] = ...) -> None: ...

class ForwardedResponse(_message.Message):
    __slots__ = ("response",)
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    response: bytes
    def __init__(self, response: _Optional[bytes] = ...) -> None: ...
