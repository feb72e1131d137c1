"""Conversion between the core's frozen dataclasses and their protobuf form: the only place that does.

The wire uses Kafka's conventions where the dataclasses use Python's:

- an error is an ``int32`` Kafka code on the wire and an :class:`~quorum.errors.Errors` member in
  Python (a code this version does not know becomes ``UNKNOWN_SERVER_ERROR``);
- "no leader" / "unknown" is ``-1`` on the wire and ``None`` in Python (leader ids, the high
  watermark of a FetchResponse, replica timestamps);
- optional sub-messages (``diverging``, ``snapshot_id``) are proto3 ``optional`` fields and
  ``None`` when absent.

``to_proto(msg)`` and ``from_proto(pb)`` cover the five Raft RPCs in both directions;
DescribeQuorum and Append, which only tools and the servicer use, have their own helpers below.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, get_args

from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import raft_pb2 as pb
from quorum.log.api import OffsetAndEpoch
from quorum.log.voter_set import Endpoint
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    QuorumDescription,
    ReplicaDescription,
    Request,
    VoteRequest,
    VoteResponse,
)

NONE = -1  # the wire's "none" for ids, offsets and timestamps


def error_from_code(code: int) -> Errors:
    try:
        return Errors(code)
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR


def _opt_id(value: Optional[int]) -> int:
    return NONE if value is None else value


def _id_or_none(value: int) -> Optional[int]:
    return None if value < 0 else value


def _oe_to_proto(oe: OffsetAndEpoch) -> pb.OffsetAndEpoch:
    return pb.OffsetAndEpoch(offset=oe.offset, epoch=oe.epoch)


def _oe_from_proto(m, field: str) -> Optional[OffsetAndEpoch]:
    if not m.HasField(field):
        return None
    oe = getattr(m, field)
    return OffsetAndEpoch(oe.offset, oe.epoch)


# -- the Raft RPCs ------------------------------------------------------------------------------
def _vote_request_to(msg: VoteRequest, dest: Optional[int]):
    return pb.VoteRequest(cluster_id=msg.cluster_id, epoch=msg.epoch, candidate_id=msg.candidate_id,
                          last_epoch=msg.last_epoch, last_offset=msg.last_offset, pre_vote=msg.pre_vote,
                          voter_id=_opt_id(dest), candidate_directory_id=msg.candidate_directory_id or "",
                          voter_directory_id=msg.voter_directory_id or "")


def _vote_response_to(msg: VoteResponse, dest: Optional[int]):
    return pb.VoteResponse(error=int(msg.error), epoch=msg.epoch, leader_id=_opt_id(msg.leader_id),
                           granted=msg.granted, pre_vote=msg.pre_vote)


def _begin_quorum_epoch_request_to(msg: BeginQuorumEpochRequest, dest: Optional[int]):
    return pb.BeginQuorumEpochRequest(cluster_id=msg.cluster_id, epoch=msg.epoch, leader_id=msg.leader_id,
                                      voter_directory_id=msg.voter_directory_id or "")


def _begin_quorum_epoch_response_to(msg: BeginQuorumEpochResponse, dest: Optional[int]):
    return pb.BeginQuorumEpochResponse(error=int(msg.error), epoch=msg.epoch,
                                       leader_id=_opt_id(msg.leader_id))


def _end_quorum_epoch_request_to(msg: EndQuorumEpochRequest, dest: Optional[int]):
    return pb.EndQuorumEpochRequest(cluster_id=msg.cluster_id, epoch=msg.epoch, leader_id=msg.leader_id,
                                    preferred_successors=list(msg.preferred_successors),
                                    preferred_successor_directory_ids=[
                                        d or "" for d in msg.preferred_directory_ids])


def _end_quorum_epoch_response_to(msg: EndQuorumEpochResponse, dest: Optional[int]):
    return pb.EndQuorumEpochResponse(error=int(msg.error), epoch=msg.epoch, leader_id=_opt_id(msg.leader_id))


def _fetch_request_to(msg: FetchRequest, dest: Optional[int]):
    return pb.FetchRequest(cluster_id=msg.cluster_id, epoch=msg.epoch, replica_id=msg.replica_id,
                           fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch,
                           max_wait_ms=msg.max_wait_ms, max_bytes=msg.max_bytes,
                           replica_directory_id=msg.replica_directory_id or "",
                           high_watermark=msg.high_watermark)


def _fetch_response_to(msg: FetchResponse, dest: Optional[int]):
    m = pb.FetchResponse(error=int(msg.error), epoch=msg.epoch, leader_id=_opt_id(msg.leader_id),
                         high_watermark=_opt_id(msg.high_watermark), log_start_offset=msg.log_start_offset,
                         records=msg.records)
    if msg.diverging is not None:
        m.diverging.CopyFrom(_oe_to_proto(msg.diverging))
    if msg.snapshot_id is not None:
        m.snapshot_id.CopyFrom(_oe_to_proto(msg.snapshot_id))
    return m


def _fetch_snapshot_request_to(msg: FetchSnapshotRequest, dest: Optional[int]):
    return pb.FetchSnapshotRequest(cluster_id=msg.cluster_id, epoch=msg.epoch, replica_id=msg.replica_id,
                                   snapshot_id=_oe_to_proto(msg.snapshot_id), position=msg.position,
                                   max_bytes=msg.max_bytes, replica_directory_id=msg.replica_directory_id or "")


def _fetch_snapshot_response_to(msg: FetchSnapshotResponse, dest: Optional[int]):
    m = pb.FetchSnapshotResponse(error=int(msg.error), epoch=msg.epoch, leader_id=_opt_id(msg.leader_id),
                                 size=msg.size, position=msg.position, data=msg.data)
    if msg.snapshot_id is not None:
        m.snapshot_id.CopyFrom(_oe_to_proto(msg.snapshot_id))
    return m


_TO_PROTO: dict[type, Callable] = {  # every Raft message's writer
    VoteRequest: _vote_request_to,
    VoteResponse: _vote_response_to,
    BeginQuorumEpochRequest: _begin_quorum_epoch_request_to,
    BeginQuorumEpochResponse: _begin_quorum_epoch_response_to,
    EndQuorumEpochRequest: _end_quorum_epoch_request_to,
    EndQuorumEpochResponse: _end_quorum_epoch_response_to,
    FetchRequest: _fetch_request_to,
    FetchResponse: _fetch_response_to,
    FetchSnapshotRequest: _fetch_snapshot_request_to,
    FetchSnapshotResponse: _fetch_snapshot_response_to,
}


if set(_TO_PROTO) != set(get_args(Message)):
    raise AssertionError("a Raft message without a protobuf writer")


def to_proto(msg: Message, dest: Optional[int] = None):
    """The protobuf message for ``msg``; ``dest`` fills VoteRequest.voter_id (who it is meant for)."""
    try:
        write = _TO_PROTO[type(msg)]
    except KeyError:
        raise TypeError(f"not a Raft message: {type(msg).__name__}") from None
    return write(msg, dest)


def _vote_request_from(m: pb.VoteRequest) -> Message:
    return VoteRequest(m.cluster_id, m.epoch, m.candidate_id, m.last_epoch, m.last_offset, m.pre_vote,
                       m.candidate_directory_id or None, m.voter_directory_id or None)


def _vote_response_from(m: pb.VoteResponse) -> Message:
    return VoteResponse(error_from_code(m.error), m.epoch, _id_or_none(m.leader_id), m.granted, m.pre_vote)


def _begin_quorum_epoch_request_from(m: pb.BeginQuorumEpochRequest) -> Message:
    return BeginQuorumEpochRequest(m.cluster_id, m.epoch, m.leader_id, m.voter_directory_id or None)


def _begin_quorum_epoch_response_from(m: pb.BeginQuorumEpochResponse) -> Message:
    return BeginQuorumEpochResponse(error_from_code(m.error), m.epoch, _id_or_none(m.leader_id))


def _end_quorum_epoch_request_from(m: pb.EndQuorumEpochRequest) -> Message:
    return EndQuorumEpochRequest(m.cluster_id, m.epoch, m.leader_id, tuple(m.preferred_successors),
                                 tuple(d or None for d in m.preferred_successor_directory_ids))


def _end_quorum_epoch_response_from(m: pb.EndQuorumEpochResponse) -> Message:
    return EndQuorumEpochResponse(error_from_code(m.error), m.epoch, _id_or_none(m.leader_id))


def _fetch_request_from(m: pb.FetchRequest) -> Message:
    return FetchRequest(m.cluster_id, m.epoch, m.replica_id, m.fetch_offset, m.last_fetched_epoch,
                        m.max_wait_ms, m.max_bytes, m.replica_directory_id or None,
                        m.high_watermark if m.HasField("high_watermark") else None)


def _fetch_response_from(m: pb.FetchResponse) -> Message:
    return FetchResponse(error_from_code(m.error), m.epoch, _id_or_none(m.leader_id),
                         _id_or_none(m.high_watermark), m.log_start_offset, m.records,
                         _oe_from_proto(m, "diverging"), _oe_from_proto(m, "snapshot_id"))


def _fetch_snapshot_request_from(m: pb.FetchSnapshotRequest) -> Message:
    return FetchSnapshotRequest(m.cluster_id, m.epoch, m.replica_id,
                                OffsetAndEpoch(m.snapshot_id.offset, m.snapshot_id.epoch), m.position, m.max_bytes,
                                m.replica_directory_id or None)


def _fetch_snapshot_response_from(m: pb.FetchSnapshotResponse) -> Message:
    return FetchSnapshotResponse(error_from_code(m.error), m.epoch, _id_or_none(m.leader_id),
                                 _oe_from_proto(m, "snapshot_id"), m.size, m.position, m.data)


_FROM_PROTO: dict[type, Callable] = {  # every Raft message's reader
    pb.VoteRequest: _vote_request_from,
    pb.VoteResponse: _vote_response_from,
    pb.BeginQuorumEpochRequest: _begin_quorum_epoch_request_from,
    pb.BeginQuorumEpochResponse: _begin_quorum_epoch_response_from,
    pb.EndQuorumEpochRequest: _end_quorum_epoch_request_from,
    pb.EndQuorumEpochResponse: _end_quorum_epoch_response_from,
    pb.FetchRequest: _fetch_request_from,
    pb.FetchResponse: _fetch_response_from,
    pb.FetchSnapshotRequest: _fetch_snapshot_request_from,
    pb.FetchSnapshotResponse: _fetch_snapshot_response_from,
}


if {getattr(pb, t.__name__) for t in get_args(Message)} != set(_FROM_PROTO):
    raise AssertionError("a Raft message without a protobuf reader")


def from_proto(m) -> Message:
    """The dataclass for a protobuf Raft message (VoteRequest.voter_id is dropped: the core knows who it is)."""
    try:
        read = _FROM_PROTO[type(m)]
    except KeyError:
        raise TypeError(f"not a Raft protobuf message: {type(m).__name__}") from None
    return read(m)


_SOURCE_OF: dict[type, Callable[[Any], int]] = {  # the field a request names its sender in
    VoteRequest: lambda msg: msg.candidate_id,
    BeginQuorumEpochRequest: lambda msg: msg.leader_id,
    EndQuorumEpochRequest: lambda msg: msg.leader_id,
    FetchRequest: lambda msg: msg.replica_id,
    FetchSnapshotRequest: lambda msg: msg.replica_id,
}
if set(_SOURCE_OF) != set(get_args(Request)):
    raise AssertionError("a Raft request whose sender is not known")


def request_source(msg: Message) -> int:
    """The node a request comes from, as the request itself names it (-1: an anonymous observer)."""
    try:
        return _SOURCE_OF[type(msg)](msg)
    except KeyError:
        raise TypeError(f"not a Raft request: {type(msg).__name__}") from None


# -- DescribeQuorum -----------------------------------------------------------------------------
def _replica_to_proto(r: ReplicaDescription) -> pb.ReplicaState:
    return pb.ReplicaState(replica_id=r.replica_id, log_end_offset=r.log_end_offset,
                           last_fetch_timestamp=_opt_id(r.last_fetch_ms),
                           last_caught_up_timestamp=_opt_id(r.last_caught_up_ms), directory_id=r.directory_id or "",
                           listeners=[pb.Listener(name=e.name, host=e.host, port=e.port) for e in r.endpoints])


def _replica_from_proto(m: pb.ReplicaState) -> ReplicaDescription:
    return ReplicaDescription(m.replica_id, m.log_end_offset, _id_or_none(m.last_fetch_timestamp),
                              _id_or_none(m.last_caught_up_timestamp), m.directory_id or None,
                              tuple(Endpoint(lst.name, lst.host, lst.port) for lst in m.listeners))


def describe_response(desc: QuorumDescription, cluster_id: str) -> pb.DescribeQuorumResponse:
    """A successful DescribeQuorum answer (timestamps must already be wall-clock ms)."""
    return pb.DescribeQuorumResponse(
        error=int(Errors.NONE), leader_id=desc.leader_id, leader_epoch=desc.leader_epoch,
        high_watermark=desc.high_watermark, cluster_id=cluster_id,
        current_voters=[_replica_to_proto(r) for r in desc.voters],
        observers=[_replica_to_proto(r) for r in desc.observers])


def describe_error(error: Errors, message: str, cluster_id: str, leader_id: Optional[int] = None,
                   epoch: int = NONE, leader_endpoint: str = "") -> pb.DescribeQuorumResponse:
    return pb.DescribeQuorumResponse(error=int(error), error_message=message, cluster_id=cluster_id,
                                     leader_id=_opt_id(leader_id), leader_epoch=epoch,
                                     leader_endpoint=leader_endpoint)


def description_from_proto(m: pb.DescribeQuorumResponse) -> QuorumDescription:
    """The QuorumDescription in a successful DescribeQuorum answer."""
    return QuorumDescription(m.leader_id, m.leader_epoch, m.high_watermark,
                             tuple(_replica_from_proto(r) for r in m.current_voters),
                             tuple(_replica_from_proto(r) for r in m.observers))


# -- Append -------------------------------------------------------------------------------------
def append_response(base_offset: int, last_offset: int, epoch: int, leader_id: int) -> pb.AppendResponse:
    return pb.AppendResponse(error=int(Errors.NONE), leader_id=leader_id, epoch=epoch,
                             base_offset=base_offset, last_offset=last_offset)


def append_error(error: Errors, message: str, leader_id: Optional[int] = None, epoch: int = NONE,
                 leader_endpoint: str = "") -> pb.AppendResponse:
    return pb.AppendResponse(error=int(error), error_message=message, leader_id=_opt_id(leader_id),
                             epoch=epoch, base_offset=NONE, last_offset=NONE, leader_endpoint=leader_endpoint)


def format_listener(e: Endpoint) -> str:
    """``NAME://HOST:PORT``, as Kafka prints a listener."""
    return f"{e.name}://{format_endpoint(e.host, e.port)}"


def format_endpoint(host: str, port: int) -> str:
    """``host:port``, with brackets around an IPv6 host (what gRPC targets and the CLI take)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
