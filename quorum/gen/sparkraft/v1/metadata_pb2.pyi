from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BrokerIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DirectoryIds(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class SecurityProtocol(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PLAINTEXT: _ClassVar[SecurityProtocol.Code]
        SSL: _ClassVar[SecurityProtocol.Code]
        SASL_PLAINTEXT: _ClassVar[SecurityProtocol.Code]
        SASL_SSL: _ClassVar[SecurityProtocol.Code]
    PLAINTEXT: SecurityProtocol.Code
    SSL: SecurityProtocol.Code
    SASL_PLAINTEXT: SecurityProtocol.Code
    SASL_SSL: SecurityProtocol.Code
    def __init__(self) -> None: ...

class ConfigResourceType(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[ConfigResourceType.Code]
        TOPIC: _ClassVar[ConfigResourceType.Code]
        BROKER: _ClassVar[ConfigResourceType.Code]
        BROKER_LOGGER: _ClassVar[ConfigResourceType.Code]
        CLIENT_METRICS: _ClassVar[ConfigResourceType.Code]
        GROUP: _ClassVar[ConfigResourceType.Code]
    UNKNOWN: ConfigResourceType.Code
    TOPIC: ConfigResourceType.Code
    BROKER: ConfigResourceType.Code
    BROKER_LOGGER: ConfigResourceType.Code
    CLIENT_METRICS: ConfigResourceType.Code
    GROUP: ConfigResourceType.Code
    def __init__(self) -> None: ...

class AclResourceType(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[AclResourceType.Code]
        ANY: _ClassVar[AclResourceType.Code]
        TOPIC: _ClassVar[AclResourceType.Code]
        GROUP: _ClassVar[AclResourceType.Code]
        CLUSTER: _ClassVar[AclResourceType.Code]
        TRANSACTIONAL_ID: _ClassVar[AclResourceType.Code]
        DELEGATION_TOKEN: _ClassVar[AclResourceType.Code]
        USER: _ClassVar[AclResourceType.Code]
    UNKNOWN: AclResourceType.Code
    ANY: AclResourceType.Code
    TOPIC: AclResourceType.Code
    GROUP: AclResourceType.Code
    CLUSTER: AclResourceType.Code
    TRANSACTIONAL_ID: AclResourceType.Code
    DELEGATION_TOKEN: AclResourceType.Code
    USER: AclResourceType.Code
    def __init__(self) -> None: ...

class PatternType(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[PatternType.Code]
        ANY: _ClassVar[PatternType.Code]
        MATCH: _ClassVar[PatternType.Code]
        LITERAL: _ClassVar[PatternType.Code]
        PREFIXED: _ClassVar[PatternType.Code]
    UNKNOWN: PatternType.Code
    ANY: PatternType.Code
    MATCH: PatternType.Code
    LITERAL: PatternType.Code
    PREFIXED: PatternType.Code
    def __init__(self) -> None: ...

class AclOperation(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[AclOperation.Code]
        ANY: _ClassVar[AclOperation.Code]
        ALL: _ClassVar[AclOperation.Code]
        READ: _ClassVar[AclOperation.Code]
        WRITE: _ClassVar[AclOperation.Code]
        CREATE: _ClassVar[AclOperation.Code]
        DELETE: _ClassVar[AclOperation.Code]
        ALTER: _ClassVar[AclOperation.Code]
        DESCRIBE: _ClassVar[AclOperation.Code]
        CLUSTER_ACTION: _ClassVar[AclOperation.Code]
        DESCRIBE_CONFIGS: _ClassVar[AclOperation.Code]
        ALTER_CONFIGS: _ClassVar[AclOperation.Code]
        IDEMPOTENT_WRITE: _ClassVar[AclOperation.Code]
        CREATE_TOKENS: _ClassVar[AclOperation.Code]
        DESCRIBE_TOKENS: _ClassVar[AclOperation.Code]
    UNKNOWN: AclOperation.Code
    ANY: AclOperation.Code
    ALL: AclOperation.Code
    READ: AclOperation.Code
    WRITE: AclOperation.Code
    CREATE: AclOperation.Code
    DELETE: AclOperation.Code
    ALTER: AclOperation.Code
    DESCRIBE: AclOperation.Code
    CLUSTER_ACTION: AclOperation.Code
    DESCRIBE_CONFIGS: AclOperation.Code
    ALTER_CONFIGS: AclOperation.Code
    IDEMPOTENT_WRITE: AclOperation.Code
    CREATE_TOKENS: AclOperation.Code
    DESCRIBE_TOKENS: AclOperation.Code
    def __init__(self) -> None: ...

class AclPermissionType(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[AclPermissionType.Code]
        ANY: _ClassVar[AclPermissionType.Code]
        DENY: _ClassVar[AclPermissionType.Code]
        ALLOW: _ClassVar[AclPermissionType.Code]
    UNKNOWN: AclPermissionType.Code
    ANY: AclPermissionType.Code
    DENY: AclPermissionType.Code
    ALLOW: AclPermissionType.Code
    def __init__(self) -> None: ...

class RegisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "incarnation_id", "broker_epoch", "endpoints", "features", "rack", "fenced", "in_controlled_shutdown", "log_dirs", "cordoned_log_dirs")
    class BrokerEndpoint(_message.Message):
        __slots__ = ("name", "host", "port", "security_protocol")
        NAME_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        PORT_FIELD_NUMBER: _ClassVar[int]
        SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
        name: str
        host: str
        port: int
        security_protocol: SecurityProtocol.Code
        def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., security_protocol: _Optional[_Union[SecurityProtocol.Code, str]] = ...) -> None: ...
    class BrokerFeature(_message.Message):
        __slots__ = ("name", "min_supported_version", "max_supported_version")
        NAME_FIELD_NUMBER: _ClassVar[int]
        MIN_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
        MAX_SUPPORTED_VERSION_FIELD_NUMBER: _ClassVar[int]
        name: str
        min_supported_version: int
        max_supported_version: int
        def __init__(self, name: _Optional[str] = ..., min_supported_version: _Optional[int] = ..., max_supported_version: _Optional[int] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    CORDONED_LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: _containers.RepeatedCompositeFieldContainer[RegisterBrokerRecord.BrokerEndpoint]
    features: _containers.RepeatedCompositeFieldContainer[RegisterBrokerRecord.BrokerFeature]
    rack: str
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: _containers.RepeatedScalarFieldContainer[str]
    cordoned_log_dirs: DirectoryIds
    def __init__(self, broker_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., broker_epoch: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[RegisterBrokerRecord.BrokerEndpoint, _Mapping]]] = ..., features: _Optional[_Iterable[_Union[RegisterBrokerRecord.BrokerFeature, _Mapping]]] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., log_dirs: _Optional[_Iterable[str]] = ..., cordoned_log_dirs: _Optional[_Union[DirectoryIds, _Mapping]] = ...) -> None: ...

class RegisterControllerRecord(_message.Message):
    __slots__ = ("controller_id", "incarnation_id", "zk_migration_ready", "endpoints", "features")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    ZK_MIGRATION_READY_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    incarnation_id: str
    zk_migration_ready: bool
    endpoints: _containers.RepeatedCompositeFieldContainer[RegisterBrokerRecord.BrokerEndpoint]
    features: _containers.RepeatedCompositeFieldContainer[RegisterBrokerRecord.BrokerFeature]
    def __init__(self, controller_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., zk_migration_ready: _Optional[bool] = ..., endpoints: _Optional[_Iterable[_Union[RegisterBrokerRecord.BrokerEndpoint, _Mapping]]] = ..., features: _Optional[_Iterable[_Union[RegisterBrokerRecord.BrokerFeature, _Mapping]]] = ...) -> None: ...

class UnregisterControllerRecord(_message.Message):
    __slots__ = ("controller_id",)
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    def __init__(self, controller_id: _Optional[int] = ...) -> None: ...

class UnregisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class TopicRecord(_message.Message):
    __slots__ = ("name", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ...) -> None: ...

class PartitionRecord(_message.Message):
    __slots__ = ("partition_id", "topic_id", "replicas", "isr", "removing_replicas", "adding_replicas", "leader", "leader_epoch", "partition_epoch", "eligible_leader_replicas", "last_known_elr", "directories")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    topic_id: str
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    directories: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, partition_id: _Optional[int] = ..., topic_id: _Optional[str] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ..., directories: _Optional[_Iterable[str]] = ...) -> None: ...

class ConfigRecord(_message.Message):
    __slots__ = ("resource_type", "resource_name", "name", "value")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    resource_type: ConfigResourceType.Code
    resource_name: str
    name: str
    value: str
    def __init__(self, resource_type: _Optional[_Union[ConfigResourceType.Code, str]] = ..., resource_name: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class PartitionChangeRecord(_message.Message):
    __slots__ = ("partition_id", "topic_id", "isr", "leader", "replicas", "removing_replicas", "adding_replicas", "eligible_leader_replicas", "last_known_elr", "directories")
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    DIRECTORIES_FIELD_NUMBER: _ClassVar[int]
    partition_id: int
    topic_id: str
    isr: BrokerIds
    leader: int
    replicas: BrokerIds
    removing_replicas: BrokerIds
    adding_replicas: BrokerIds
    eligible_leader_replicas: BrokerIds
    last_known_elr: BrokerIds
    directories: DirectoryIds
    def __init__(self, partition_id: _Optional[int] = ..., topic_id: _Optional[str] = ..., isr: _Optional[_Union[BrokerIds, _Mapping]] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Union[BrokerIds, _Mapping]] = ..., removing_replicas: _Optional[_Union[BrokerIds, _Mapping]] = ..., adding_replicas: _Optional[_Union[BrokerIds, _Mapping]] = ..., eligible_leader_replicas: _Optional[_Union[BrokerIds, _Mapping]] = ..., last_known_elr: _Optional[_Union[BrokerIds, _Mapping]] = ..., directories: _Optional[_Union[DirectoryIds, _Mapping]] = ...) -> None: ...

class RemoveTopicRecord(_message.Message):
    __slots__ = ("topic_id",)
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    topic_id: str
    def __init__(self, topic_id: _Optional[str] = ...) -> None: ...

class FeatureLevelRecord(_message.Message):
    __slots__ = ("name", "feature_level")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FEATURE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    feature_level: int
    def __init__(self, name: _Optional[str] = ..., feature_level: _Optional[int] = ...) -> None: ...

class ClientQuotaRecord(_message.Message):
    __slots__ = ("entity", "key", "value", "remove")
    class EntityData(_message.Message):
        __slots__ = ("entity_type", "entity_name")
        ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
        ENTITY_NAME_FIELD_NUMBER: _ClassVar[int]
        entity_type: str
        entity_name: str
        def __init__(self, entity_type: _Optional[str] = ..., entity_name: _Optional[str] = ...) -> None: ...
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    entity: _containers.RepeatedCompositeFieldContainer[ClientQuotaRecord.EntityData]
    key: str
    value: float
    remove: bool
    def __init__(self, entity: _Optional[_Iterable[_Union[ClientQuotaRecord.EntityData, _Mapping]]] = ..., key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...

class ProducerIdsRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "next_producer_id")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    next_producer_id: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., next_producer_id: _Optional[int] = ...) -> None: ...

class BrokerRegistrationChangeRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "fenced", "in_controlled_shutdown", "log_dirs", "cordoned_log_dirs")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    CORDONED_LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: DirectoryIds
    cordoned_log_dirs: DirectoryIds
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., log_dirs: _Optional[_Union[DirectoryIds, _Mapping]] = ..., cordoned_log_dirs: _Optional[_Union[DirectoryIds, _Mapping]] = ...) -> None: ...

class AccessControlEntryRecord(_message.Message):
    __slots__ = ("id", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    id: str
    resource_type: AclResourceType.Code
    resource_name: str
    pattern_type: PatternType.Code
    principal: str
    host: str
    operation: AclOperation.Code
    permission_type: AclPermissionType.Code
    def __init__(self, id: _Optional[str] = ..., resource_type: _Optional[_Union[AclResourceType.Code, str]] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[_Union[PatternType.Code, str]] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[_Union[AclOperation.Code, str]] = ..., permission_type: _Optional[_Union[AclPermissionType.Code, str]] = ...) -> None: ...

class ScramMechanism(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[ScramMechanism.Code]
        SCRAM_SHA_256: _ClassVar[ScramMechanism.Code]
        SCRAM_SHA_512: _ClassVar[ScramMechanism.Code]
    UNKNOWN: ScramMechanism.Code
    SCRAM_SHA_256: ScramMechanism.Code
    SCRAM_SHA_512: ScramMechanism.Code
    def __init__(self) -> None: ...

class UserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "mechanism", "salt", "stored_key", "server_key", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: ScramMechanism.Code
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[_Union[ScramMechanism.Code, str]] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ..., iterations: _Optional[int] = ...) -> None: ...

class ZkMigrationState(_message.Message):
    __slots__ = ()
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NONE: _ClassVar[ZkMigrationState.Code]
        MIGRATION: _ClassVar[ZkMigrationState.Code]
        PRE_MIGRATION: _ClassVar[ZkMigrationState.Code]
        POST_MIGRATION: _ClassVar[ZkMigrationState.Code]
    NONE: ZkMigrationState.Code
    MIGRATION: ZkMigrationState.Code
    PRE_MIGRATION: ZkMigrationState.Code
    POST_MIGRATION: ZkMigrationState.Code
    def __init__(self) -> None: ...

class ZkMigrationStateRecord(_message.Message):
    __slots__ = ("zk_migration_state",)
    ZK_MIGRATION_STATE_FIELD_NUMBER: _ClassVar[int]
    zk_migration_state: ZkMigrationState.Code
    def __init__(self, zk_migration_state: _Optional[_Union[ZkMigrationState.Code, str]] = ...) -> None: ...

class RemoveUserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: ScramMechanism.Code
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[_Union[ScramMechanism.Code, str]] = ...) -> None: ...

class RemoveAccessControlEntryRecord(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class NoOpRecord(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BeginTransactionRecord(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class EndTransactionRecord(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortTransactionRecord(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class PartitionChangeBlockRecord(_message.Message):
    __slots__ = ("topic_ids", "topic_rows", "partition_ids", "leaders", "isr", "replicas", "removing_replicas", "adding_replicas", "eligible_leader_replicas", "last_known_elr", "list_lengths", "list_ids")
    TOPIC_IDS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ROWS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_IDS_FIELD_NUMBER: _ClassVar[int]
    LEADERS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    LIST_LENGTHS_FIELD_NUMBER: _ClassVar[int]
    LIST_IDS_FIELD_NUMBER: _ClassVar[int]
    topic_ids: _containers.RepeatedScalarFieldContainer[str]
    topic_rows: _containers.RepeatedScalarFieldContainer[int]
    partition_ids: _containers.RepeatedScalarFieldContainer[int]
    leaders: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    list_lengths: _containers.RepeatedScalarFieldContainer[int]
    list_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_ids: _Optional[_Iterable[str]] = ..., topic_rows: _Optional[_Iterable[int]] = ..., partition_ids: _Optional[_Iterable[int]] = ..., leaders: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ..., list_lengths: _Optional[_Iterable[int]] = ..., list_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionChangeBlockContinuationRecord(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("time_ms", "principal", "client_host", "client_software_name", "client_software_version", "listener", "request", "resources", "changes", "error_code", "error_message", "record_count", "forwarded_by", "occurrences", "hash")
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SOFTWARE_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SOFTWARE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LISTENER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    FORWARDED_BY_FIELD_NUMBER: _ClassVar[int]
    OCCURRENCES_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    time_ms: int
    principal: str
    client_host: str
    client_software_name: str
    client_software_version: str
    listener: str
    request: str
    resources: _containers.RepeatedScalarFieldContainer[str]
    changes: _containers.RepeatedScalarFieldContainer[str]
    error_code: int
    error_message: str
    record_count: int
    forwarded_by: str
    occurrences: int
    hash: bytes
    def __init__(self, time_ms: _Optional[int] = ..., principal: _Optional[str] = ..., client_host: _Optional[str] = ..., client_software_name: _Optional[str] = ..., client_software_version: _Optional[str] = ..., listener: _Optional[str] = ..., request: _Optional[str] = ..., resources: _Optional[_Iterable[str]] = ..., changes: _Optional[_Iterable[str]] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., record_count: _Optional[int] = ..., forwarded_by: _Optional[str] = ..., occurrences: _Optional[int] = ..., hash: _Optional[bytes] = ...) -> None: ...

class LogHoldRecord(_message.Message):
    __slots__ = ("holder", "offset", "time_ms")
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    holder: str
    offset: int
    time_ms: int
    def __init__(self, holder: _Optional[str] = ..., offset: _Optional[int] = ..., time_ms: _Optional[int] = ...) -> None: ...
