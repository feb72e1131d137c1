from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Listener(_message.Message):
    __slots__ = ("name", "host", "port")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class AddRaftVoterRequest(_message.Message):
    __slots__ = ("cluster_id", "voter_id", "voter_directory_id", "listeners")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    voter_id: int
    voter_directory_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    def __init__(self, cluster_id: _Optional[str] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ...) -> None: ...

class RemoveRaftVoterRequest(_message.Message):
    __slots__ = ("cluster_id", "voter_id", "voter_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    voter_id: int
    voter_directory_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class UpdateRaftVoterRequest(_message.Message):
    __slots__ = ("cluster_id", "voter_id", "voter_directory_id", "listeners")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    voter_id: int
    voter_directory_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    def __init__(self, cluster_id: _Optional[str] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ...) -> None: ...

class VoterChangeResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_endpoint")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_endpoint: str
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class VerifyPeerRequest(_message.Message):
    __slots__ = ("cluster_id", "node_id", "nonce")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NONCE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    node_id: int
    nonce: bytes
    def __init__(self, cluster_id: _Optional[str] = ..., node_id: _Optional[int] = ..., nonce: _Optional[bytes] = ...) -> None: ...

class VerifyPeerResponse(_message.Message):
    __slots__ = ("error", "proof")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    error: int
    proof: bytes
    def __init__(self, error: _Optional[int] = ..., proof: _Optional[bytes] = ...) -> None: ...

class WireEndpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WireEndpointResponse(_message.Message):
    __slots__ = ("port",)
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: int
    def __init__(self, port: _Optional[int] = ...) -> None: ...

class WireHello(_message.Message):
    __slots__ = ("peer",)
    PEER_FIELD_NUMBER: _ClassVar[int]
    peer: str
    def __init__(self, peer: _Optional[str] = ...) -> None: ...

class OffsetAndEpoch(_message.Message):
    __slots__ = ("offset", "epoch")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    offset: int
    epoch: int
    def __init__(self, offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class VoteRequest(_message.Message):
    __slots__ = ("cluster_id", "epoch", "candidate_id", "last_epoch", "last_offset", "pre_vote", "voter_id", "candidate_directory_id", "voter_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    epoch: int
    candidate_id: int
    last_epoch: int
    last_offset: int
    pre_vote: bool
    voter_id: int
    candidate_directory_id: str
    voter_directory_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., epoch: _Optional[int] = ..., candidate_id: _Optional[int] = ..., last_epoch: _Optional[int] = ..., last_offset: _Optional[int] = ..., pre_vote: _Optional[bool] = ..., voter_id: _Optional[int] = ..., candidate_directory_id: _Optional[str] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("error", "epoch", "leader_id", "granted", "pre_vote")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    error: int
    epoch: int
    leader_id: int
    granted: bool
    pre_vote: bool
    def __init__(self, error: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., granted: _Optional[bool] = ..., pre_vote: _Optional[bool] = ...) -> None: ...

class BeginQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "epoch", "leader_id", "voter_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    epoch: int
    leader_id: int
    voter_directory_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class BeginQuorumEpochResponse(_message.Message):
    __slots__ = ("error", "epoch", "leader_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    error: int
    epoch: int
    leader_id: int
    def __init__(self, error: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class EndQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "epoch", "leader_id", "preferred_successors", "preferred_successor_directory_ids")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSOR_DIRECTORY_IDS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    epoch: int
    leader_id: int
    preferred_successors: _containers.RepeatedScalarFieldContainer[int]
    preferred_successor_directory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, cluster_id: _Optional[str] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., preferred_successors: _Optional[_Iterable[int]] = ..., preferred_successor_directory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class EndQuorumEpochResponse(_message.Message):
    __slots__ = ("error", "epoch", "leader_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    error: int
    epoch: int
    leader_id: int
    def __init__(self, error: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("cluster_id", "epoch", "replica_id", "fetch_offset", "last_fetched_epoch", "max_wait_ms", "max_bytes", "replica_directory_id", "high_watermark")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPLICA_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    max_bytes: int
    replica_directory_id: str
    high_watermark: int
    def __init__(self, cluster_id: _Optional[str] = ..., epoch: _Optional[int] = ..., replica_id: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ..., replica_directory_id: _Optional[str] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error", "epoch", "leader_id", "high_watermark", "log_start_offset", "records", "diverging", "snapshot_id", "leader_endpoint")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error: int
    epoch: int
    leader_id: int
    high_watermark: int
    log_start_offset: int
    records: bytes
    diverging: OffsetAndEpoch
    snapshot_id: OffsetAndEpoch
    leader_endpoint: str
    def __init__(self, error: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., diverging: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., snapshot_id: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("cluster_id", "epoch", "replica_id", "snapshot_id", "position", "max_bytes", "replica_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPLICA_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    epoch: int
    replica_id: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int
    replica_directory_id: str
    def __init__(self, cluster_id: _Optional[str] = ..., epoch: _Optional[int] = ..., replica_id: _Optional[int] = ..., snapshot_id: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ..., replica_directory_id: _Optional[str] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("error", "epoch", "leader_id", "snapshot_id", "size", "position", "data")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    error: int
    epoch: int
    leader_id: int
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    data: bytes
    def __init__(self, error: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., snapshot_id: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., size: _Optional[int] = ..., position: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ("cluster_id",)
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    def __init__(self, cluster_id: _Optional[str] = ...) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("replica_id", "log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp", "directory_id", "listeners")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCH_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LAST_CAUGHT_UP_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    def __init__(self, replica_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_timestamp: _Optional[int] = ..., last_caught_up_timestamp: _Optional[int] = ..., directory_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "leader_epoch", "high_watermark", "current_voters", "observers", "cluster_id", "leader_endpoint")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    observers: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    cluster_id: str
    leader_endpoint: str
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., current_voters: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("cluster_id", "records")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    records: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, cluster_id: _Optional[str] = ..., records: _Optional[_Iterable[bytes]] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("error", "error_message", "leader_id", "epoch", "base_offset", "last_offset", "leader_endpoint")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error: int
    error_message: str
    leader_id: int
    epoch: int
    base_offset: int
    last_offset: int
    leader_endpoint: str
    def __init__(self, error: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., epoch: _Optional[int] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...
