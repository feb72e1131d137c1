"""The Raft RPCs as frozen dataclasses: what the core consumes and produces.

Protobuf appears only in the gRPC adapter (``quorum/rpc``), which converts to and
from these. Field names follow Kafka's KIP-595 RPCs. ``-1`` never means "none"
here: an absent leader is ``None``.

Each request names its sender (``sender``: the core refuses a request naming someone other than
the authenticated peer) and makes its own error answer (``error_response``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from quorum.errors import Errors
from quorum.log.api import OffsetAndEpoch
from quorum.log.voter_set import Endpoint


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str
    epoch: int  # the epoch the candidate runs for (current + 1 for a pre-vote)
    candidate_id: int
    last_epoch: int  # epoch of the candidate's last batch
    last_offset: int  # candidate's log end offset
    pre_vote: bool = False
    candidate_directory_id: Optional[str] = None  # KIP-853 replica keys: who asks
    voter_directory_id: Optional[str] = None  # and which replica of the receiving node it asks

    @property
    def sender(self) -> int:
        return self.candidate_id

    def error_response(self, error: Errors, epoch: int, leader_id: Optional[int], log_start_offset: int):
        return VoteResponse(error, epoch, leader_id, False, self.pre_vote)


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: Errors
    epoch: int  # the voter's epoch
    leader_id: Optional[int]
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    epoch: int
    leader_id: int
    voter_directory_id: Optional[str] = None  # the replica of the receiving node it is meant for

    @property
    def sender(self) -> int:
        return self.leader_id

    def error_response(self, error: Errors, epoch: int, leader_id: Optional[int], log_start_offset: int):
        return BeginQuorumEpochResponse(error, epoch, leader_id)


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: Errors
    epoch: int
    leader_id: Optional[int]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str
    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...] = ()  # most caught-up first
    # Their directory ids in the same order (KIP-853; None: a static voter's), so a node that has
    # the id but another disk knows the hint is not for it; () from a peer that sends none.
    preferred_directory_ids: tuple[Optional[str], ...] = ()


    @property
    def sender(self) -> int:
        return self.leader_id

    def error_response(self, error: Errors, epoch: int, leader_id: Optional[int], log_start_offset: int):
        return EndQuorumEpochResponse(error, epoch, leader_id)


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: Errors
    epoch: int
    leader_id: Optional[int]


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str
    epoch: int  # the fetcher's epoch
    replica_id: int  # -1 for an observer without an id
    fetch_offset: int  # fetcher's log end offset (durable, for voters)
    last_fetched_epoch: int  # epoch of the fetcher's last batch
    max_wait_ms: int = 500  # long-poll: how long the leader may hold an empty answer
    max_bytes: int = 8 * 1024 * 1024
    replica_directory_id: Optional[str] = None  # a voter's fetch counts only from the voter's directory
    # the high watermark the fetcher knows (KIP-1166): a leader whose own is higher answers at once
    high_watermark: Optional[int] = None

    @property
    def sender(self) -> int:
        return self.replica_id  # -1: an anonymous observer

    def error_response(self, error: Errors, epoch: int, leader_id: Optional[int], log_start_offset: int):
        return FetchResponse(error, epoch, leader_id, log_start_offset=log_start_offset)


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: Errors
    epoch: int
    leader_id: Optional[int]
    high_watermark: Optional[int] = None
    log_start_offset: int = 0
    records: bytes = b""  # encoded batches (quorum.log.batch)
    diverging: Optional[OffsetAndEpoch] = None  # truncate to this end offset for this epoch
    snapshot_id: Optional[OffsetAndEpoch] = None  # fetch offset below log start: fetch this snapshot


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    """The next chunk of the snapshot a Fetch answer named (KIP-630), from byte ``position``."""

    cluster_id: str
    epoch: int
    replica_id: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int = 8 * 1024 * 1024
    replica_directory_id: Optional[str] = None


    @property
    def sender(self) -> int:
        return self.replica_id

    def error_response(self, error: Errors, epoch: int, leader_id: Optional[int], log_start_offset: int):
        return FetchSnapshotResponse(error, epoch, leader_id, self.snapshot_id, position=self.position)


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: Errors
    epoch: int
    leader_id: Optional[int]
    snapshot_id: Optional[OffsetAndEpoch] = None
    size: int = 0  # the whole snapshot's size in bytes
    position: int = 0  # where ``data`` starts
    data: bytes = b""


Request = Union[VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest]
Response = Union[VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                 FetchSnapshotResponse]
Message = Union[Request, Response]

REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest)
RESPONSE_TYPES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                  FetchSnapshotResponse)


@dataclass(frozen=True, slots=True)
class Outbound:
    """A message to send. ``corr`` pairs a response with the request it answers."""

    dest: int
    corr: int
    message: Message


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One replica as DescribeQuorum reports it (timestamps in ms; None = never)."""

    replica_id: int
    log_end_offset: int
    last_fetch_ms: Optional[int]
    last_caught_up_ms: Optional[int]
    directory_id: Optional[str] = None
    endpoints: tuple[Endpoint, ...] = ()  # a voter's listeners, added by the node (the core knows none)


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The leader's view of the quorum (Kafka's DescribeQuorum)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...] = field(default=())


def describe_message(msg: Message) -> str:
    """One canonical text form of a message, for logs and scenario tests."""
    name = type(msg).__name__
    parts = []
    for f in msg.__dataclass_fields__:  # type: ignore[union-attr]
        v = getattr(msg, f)
        if f == "cluster_id":
            continue
        if f in ("records", "data"):
            v = f"<{len(v)}B>" if v else ""
            if not v:
                continue
        if isinstance(v, Errors):
            if v is Errors.NONE:
                continue
            v = v.name
        if v is None or (f == "preferred_directory_ids" and not any(v)):  # static voters have none
            continue
        parts.append(f"{f}={v}")
    return f"{name}({' '.join(parts)})"
