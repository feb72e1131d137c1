"""The metadata log to Apache Kafka's brokers: Fetch of ``__cluster_metadata`` on a controller's
Kafka listener, as Kafka's controllers answer their observers (KIP-595, KIP-853).

A Kafka broker is an observer of the quorum: it fetches the log from the leader and follows it. Its
Fetch goes to this controller's Raft core as the core's own FetchRequest (the same divergence,
long-poll and snapshot rules as sparkraft's brokers get over gRPC), and the core's answer goes back
with the records in Kafka's format (quorum/kafka_log/export.py) and the leader named by id, epoch
and its address on the listener the request came in on.

Voters fetch over sparkraft's own protocol: a Fetch here that claims a voter's id is refused, so a
Kafka client cannot move the leader's view of a voter (and so the high watermark).
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import uuid
from typing import Optional

from quorum.errors import Errors, NodeNotRunningError
from quorum.kafka.apis import Pending
from quorum.kafka.codec import topic_id_text
from quorum.kafka_log.export import export_batches, export_snapshot
from quorum.kafka_log.topic import METADATA_TOPIC, METADATA_TOPIC_ID
from quorum.log.api import OffsetAndEpoch
from quorum.raft.messages import FetchRequest, FetchResponse, FetchSnapshotRequest
from quorum.raft.settings import RaftSettings
from quorum.refusal_log import RefusalLog
from quorum.security.authorizer import cluster_action

log = logging.getLogger(__name__)

# errors Kafka's Raft puts on the whole answer; the others go on the partition
TOP_LEVEL = frozenset({Errors.INCONSISTENT_CLUSTER_ID, Errors.INVALID_REQUEST, Errors.CLUSTER_AUTHORIZATION_FAILED})
NO_EPOCH = {"epoch": -1, "end_offset": -1}
MAX_FETCH_BYTES = RaftSettings().fetch_max_bytes  # the most a leader reads for one Fetch
NO_SNAPSHOT = {"end_offset": -1, "epoch": -1}
REFUSALS = RefusalLog(log)


def _note_refusal(ctx, kind: str, message: str, *args) -> None:
    """A refusal, logged at most once per client and kind every 30 s (quorum/refusal_log.py)."""
    REFUSALS.note(ctx.client_host, kind, logging.WARNING, message, *args)


def _ms(value) -> int:
    """kio gives a duration as a timedelta."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def _topic_id(t):
    return getattr(t, "topic_id", None)


def _whole(error: Errors) -> dict:
    """A Fetch answer with only a top-level error."""
    return {"throttle_time": 0, "error_code": error, "session_id": 0, "responses": [], "node_endpoints": []}


def _observer_refusal(ctx, replica_id: int, request: str) -> Optional[Errors]:
    """Why this Fetch or FetchSnapshot may not be answered, if it may not: the caller lacks
    ClusterAction (a broker's right), or it claims a voter's id (voters use sparkraft's protocol)."""
    if not ctx.may(cluster_action("CLUSTER_ACTION")):
        _note_refusal(ctx, f"authz-{request}", "Controller %d refused a metadata %s from %s: it may not "
                      "ClusterAction the cluster", ctx.broker_id, request, ctx.caller.principal if ctx.caller else "?")
        return Errors.CLUSTER_AUTHORIZATION_FAILED
    if replica_id in ctx.quorum.node.raft.voters:
        _note_refusal(ctx, f"voter-{replica_id}", "Controller %d refused a metadata %s on its Kafka listener "
                      "claiming voter %d: voters fetch over sparkraft's own protocol", ctx.broker_id, request,
                      replica_id)
        return Errors.INVALID_REQUEST
    return None


def fetch(ctx, req, version: int):
    """Kafka's Fetch of ``__cluster_metadata`` partition 0 from an observer; anything else is
    refused (a controller holds no other partition)."""
    topics = list(req.topics)
    if len(topics) != 1 or len(topics[0].partitions) != 1 or topics[0].partitions[0].partition != 0 or (
            getattr(topics[0], "topic", METADATA_TOPIC) != METADATA_TOPIC
            and _topic_id(topics[0]) not in (None, METADATA_TOPIC_ID)):
        return _whole(Errors.INVALID_REQUEST)
    quorum = ctx.quorum
    if quorum is None:
        return _whole(Errors.INVALID_REQUEST)
    node = quorum.node
    raft = node.raft
    state = getattr(req, "replica_state", None)
    replica_id = state.replica_id if state is not None else getattr(req, "replica_id", -1)
    refusal = _observer_refusal(ctx, replica_id, "Fetch")
    if refusal is not None:
        return _whole(refusal)
    p = topics[0].partitions[0]
    directory = getattr(p, "replica_directory_id", None)
    hw = getattr(p, "high_watermark", None)
    # the answer's bytes come out of the listener's budget (the leader reads at most its 8 MiB
    # anyway), given back once the answer is written out
    granted = ctx.answer_budget.take(min(max(1, req.max_bytes), MAX_FETCH_BYTES))
    # an epoch of -1 (unknown) is older than any leader's: FENCED_LEADER_EPOCH with the leader, as
    # Kafka answers it, not a message that breaks the Raft protocol
    msg = FetchRequest(cluster_id=req.cluster_id or raft.cluster_id, epoch=max(0, p.current_leader_epoch),
                       replica_id=replica_id, fetch_offset=p.fetch_offset, last_fetched_epoch=p.last_fetched_epoch,
                       max_wait_ms=max(0, min(_ms(req.max_wait), 10_000)), max_bytes=granted,
                       replica_directory_id=None if directory in (None, uuid.UUID(int=0)) else topic_id_text(directory),
                       high_watermark=None if hw is None or hw < 0 else hw)
    try:
        future = raft.submit_request(msg)
    except NodeNotRunningError:
        ctx.answer_budget.give(granted)
        return _whole(Errors.UNKNOWN_SERVER_ERROR)
    wait = msg.max_wait_ms / 1000 + 5.0
    return Pending(future, wait, lambda: _answer(ctx, future, version, granted), held=granted)


def _answer(ctx, future: concurrent.futures.Future, version: int, max_bytes: int) -> dict:
    if not future.done():
        future.cancel()
        return _whole(Errors.REQUEST_TIMED_OUT)
    try:
        r: FetchResponse = future.result(timeout=0)
    except (NodeNotRunningError, concurrent.futures.CancelledError):
        return _whole(Errors.UNKNOWN_SERVER_ERROR)
    if r.error in TOP_LEVEL:
        return _whole(r.error)
    leader = -1 if r.leader_id is None else r.leader_id
    partition = {
        "partition_index": 0, "error_code": r.error,
        "high_watermark": -1 if r.high_watermark is None else r.high_watermark, "last_stable_offset": -1,
        "log_start_offset": r.log_start_offset,
        "diverging_epoch": NO_EPOCH if r.diverging is None else {"epoch": r.diverging.epoch,
                                                                  "end_offset": r.diverging.offset},
        "current_leader": {"leader_id": leader, "leader_epoch": r.epoch},
        "snapshot_id": NO_SNAPSHOT if r.snapshot_id is None else {"end_offset": r.snapshot_id.offset,
                                                                   "epoch": r.snapshot_id.epoch},
        "aborted_transactions": None, "preferred_read_replica": -1,
        "records": export_batches(r.records, ctx.quorum.level_at, ctx.quorum.exported, max_bytes)
        if r.records else None,
    }
    return {"throttle_time": 0, "error_code": Errors.NONE, "session_id": 0,
            "responses": [{"topic": METADATA_TOPIC, "topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
            "node_endpoints": leader_endpoints(ctx, leader)}


def leader_endpoints(ctx, leader: int) -> list[dict]:
    """The leader's address on this listener (Kafka's NodeEndpoints), where it is known here."""
    if leader < 0:
        return []
    return [{"node_id": i, "host": host, "port": port, "rack": None}
            for i, host, port in ctx.quorum.controllers(ctx.listener) if i == leader]


# --- FetchSnapshot --------------------------------------------------------------------------------

class SnapshotCache:
    """The latest snapshot a Kafka broker asked for, in Kafka's format: exported once (it may be
    hundreds of MB at millions of partitions), then served in the slices each FetchSnapshot asks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key = None
        self._data = b""

    def get(self, key, make) -> bytes:
        with self._lock:
            if self._key != key:
                self._data, self._key = b"", None
                started = time.monotonic()
                self._data = make()
                self._key = key
                log.info("Exported the snapshot ending at offset %d (epoch %d) for Kafka's brokers: %d bytes in "
                         "%.2fs", key[0], key[1], len(self._data), time.monotonic() - started)
            return self._data


def _snapshot_answer(ctx, error: Errors, leader: int = -1, epoch: int = -1, snapshot=None, size: int = 0,
                     position: int = 0, data: bytes = b"") -> dict:
    partition = {"index": 0, "error_code": error,
                 "snapshot_id": {"end_offset": -1, "epoch": -1} if snapshot is None else
                 {"end_offset": snapshot.offset, "epoch": snapshot.epoch},
                 "current_leader": {"leader_id": leader, "leader_epoch": epoch},
                 "size": size, "position": position, "unaligned_records": data}
    return {"throttle_time": 0, "error_code": Errors.NONE,
            "topics": [{"name": METADATA_TOPIC, "partitions": [partition]}],
            "node_endpoints": leader_endpoints(ctx, leader)}


def _snapshot_refusal(error: Errors) -> dict:
    """A FetchSnapshot answer with only a top-level error."""
    return {"throttle_time": 0, "error_code": error, "topics": [], "node_endpoints": []}


def fetch_snapshot(ctx, req, version: int) -> dict:
    """Kafka's FetchSnapshot (KIP-630) of the snapshot a Fetch answer named: sparkraft's snapshot,
    exported to Kafka's ``.checkpoint`` format once (SnapshotCache) and served from byte
    ``position`` of that. Every request asks the Raft core first (one byte), so a snapshot that is
    gone or a leader that moved is answered as the core says; only a snapshot not cached yet is
    read from it whole."""
    topics = list(req.topics)
    if len(topics) != 1 or topics[0].name != METADATA_TOPIC or len(topics[0].partitions) != 1 \
            or topics[0].partitions[0].partition != 0 or ctx.quorum is None:
        return _snapshot_refusal(Errors.INVALID_REQUEST)
    refusal = _observer_refusal(ctx, req.replica_id, "FetchSnapshot")
    if refusal is not None:
        return _snapshot_refusal(refusal)
    p = topics[0].partitions[0]
    wanted = OffsetAndEpoch(p.snapshot_id.end_offset, p.snapshot_id.epoch)
    read = _core_snapshot_reader(ctx, req, p.current_leader_epoch, wanted)
    try:
        first = read(0, 1)
        leader, epoch = _leader_of(first), first.epoch

        def whole() -> bytes:
            chunks, position, size = [], 0, None
            while size is None or position < size:
                r = read(position, 64 << 20)
                if not r.data and position < r.size:
                    raise _SnapshotLost(_snapshot_answer(ctx, Errors.UNKNOWN_SERVER_ERROR, leader, epoch))
                chunks.append(r.data)
                size, position = r.size, position + len(r.data)
            return export_snapshot(b"".join(chunks), wanted.epoch)

        data = ctx.quorum.snapshots.get((wanted.offset, wanted.epoch), whole)
    except _SnapshotLost as e:
        return e.answer
    if p.position < 0 or p.position > len(data):
        return _snapshot_answer(ctx, Errors.POSITION_OUT_OF_RANGE, leader, epoch, wanted, len(data), p.position)
    end = p.position + max(1, min(req.max_bytes, 8 << 20))
    return _snapshot_answer(ctx, Errors.NONE, leader, epoch, wanted, len(data), p.position, data[p.position:end])


class _SnapshotLost(Exception):
    """The core would not serve (a slice of) the snapshot: ``answer`` is the FetchSnapshot answer
    saying why."""

    def __init__(self, answer: dict):
        super().__init__("snapshot lost")
        self.answer = answer


def _leader_of(r) -> int:
    return -1 if r.leader_id is None else r.leader_id


def _core_snapshot_reader(ctx, req, leader_epoch: int, wanted):
    """``read(position, max_bytes)``: the Raft core's FetchSnapshotResponse for a slice of
    sparkraft's snapshot ``wanted`` (as the core's own FetchSnapshot from this observer); where the
    core refuses, _SnapshotLost with the answer saying why."""
    raft = ctx.quorum.node.raft

    def read(position: int, max_bytes: int):
        msg = FetchSnapshotRequest(cluster_id=req.cluster_id or raft.cluster_id, epoch=max(0, leader_epoch),
                                   replica_id=req.replica_id, snapshot_id=wanted, position=position,
                                   max_bytes=max_bytes)
        try:
            r = raft.submit_request(msg).result(timeout=30)
        except (NodeNotRunningError, concurrent.futures.CancelledError, concurrent.futures.TimeoutError):
            raise _SnapshotLost(_snapshot_answer(ctx, Errors.UNKNOWN_SERVER_ERROR)) from None
        if r.error is not Errors.NONE:
            raise _SnapshotLost(_snapshot_answer(ctx, r.error, _leader_of(r), r.epoch))
        return r
    return read
