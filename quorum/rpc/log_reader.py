"""MetadataLogReader: read the quorum's COMMITTED log from outside, as an observer over Fetch.

The streaming source, the metadata shell and the broker metadata client need the same thing: the
records at offsets ``[offset, high watermark)``, in order, from whichever controller leads now.
This is a Fetch client with no id (replica_id -1: the leader answers it but never counts it).

Why it only returns committed records: the leader sends a fetcher everything it has, including
records a new leader may still truncate. A reader outside the quorum cannot take records back from
its users, so it keeps the uncommitted tail to itself and re-fetches it once the high watermark
covers it. Committed records never diverge, which also makes seeking cheap: to fetch from offset N
the request names the leader's *current* epoch as the last fetched epoch (the leader's log ends in
that epoch, at or past N), which is valid for every N at or below the high watermark.

Errors: a fetch below the log start offset raises :class:`SnapshotRequired` with the snapshot to
load first (``load_snapshot`` downloads it with FetchSnapshot); a different cluster raises INCONSISTENT_CLUSTER_ID; no reachable leader before the
reader's timeout raises NETWORK_EXCEPTION or NOT_LEADER_OR_FOLLOWER (see LeaderFollowingClient).
Leader changes in between are followed silently.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.log.api import OffsetAndEpoch
from quorum.log.batch import decode, scan
from quorum.metadata import change_block
from quorum.metadata.image import MetadataImage
from quorum.metadata.loader import MetadataLoader
from quorum.rpc import convert
from quorum.rpc.leader_client import LeaderFollowingClient
from quorum.rpc.raft_client import Bootstrap, parse_bootstrap
from quorum.security.client import ClientSecurity
from quorum.snapshot.api import SnapshotError
from quorum.snapshot.checkpoint import CheckpointError, decode_checkpoint
from quorum.snapshot.files import SnapshotId, verify_checkpoint

FETCH_MAX_BYTES = 8 << 20
_EPOCH_ERRORS = {Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH}


class SnapshotRequired(SparkraftError):
    """The offset asked for is below the log start: load ``snapshot_id`` first, then read from its
    end offset."""

    def __init__(self, offset: int, snapshot_id: Optional[OffsetAndEpoch], log_start_offset: int):
        super().__init__(Errors.OFFSET_OUT_OF_RANGE,
                         f"offset {offset} is below the log start offset {log_start_offset}: "
                         f"load snapshot {snapshot_id} first")
        self.offset = offset
        self.snapshot_id = snapshot_id
        self.log_start_offset = log_start_offset


class LogRecord(NamedTuple):
    """One committed record: ``data`` is the record frame (a metadata record, or a control record
    when ``control``). A NamedTuple: a reader makes one per offset (a million in a balance at 2M),
    and a frozen dataclass cost three times as much to make."""

    offset: int
    epoch: int
    append_time_ms: int
    data: bytes
    control: bool = False
    form: Optional[dict] = None  # the record's JSON form where its frame cannot say it (a Kafka-only type)


# ``new_log_record(LogRecord, (offset, epoch, append_time_ms, data, control, form))``: a LogRecord
# without the generated __new__'s Python call (a third of making a million of them)
new_log_record = tuple.__new__


@dataclass(frozen=True, slots=True)
class LogChunk:
    """Committed records from the offset asked for; ``next_offset`` is where to read next."""

    records: list[LogRecord] = field(default_factory=list)
    high_watermark: int = 0
    next_offset: int = 0
    log_start_offset: int = 0


class MetadataLogReader(LeaderFollowingClient):
    """Not thread-safe: one reader per thread (each holds its own channels)."""

    stub_class = raft_pb2_grpc.RaftStub
    retriable = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT})
    # Fetches take the wire where the leader has one: answered from its event loop the moment the
    # high watermark moves. Over gRPC a server thread waited for that answer and passed it on, and
    # a broker learnt of a commit about 1 ms after the controller's own reply to the write.
    wire_methods = frozenset({"Fetch"})

    def __init__(self, bootstrap: Bootstrap, cluster_id: str = "", timeout: float = 15.0,
                 rpc_timeout: float = 2.0, backoff: float = 0.05, max_bytes: int = FETCH_MAX_BYTES,
                 security: Optional[ClientSecurity] = None, unblock: bool = False):
        super().__init__(parse_bootstrap(bootstrap), timeout, rpc_timeout, backoff, security)
        self.cluster_id = cluster_id  # "": learnt from the quorum (DescribeQuorum) on first use
        # records as Kafka's log would hold them: each partition change block as the
        # PartitionChangeRecords it stands for, one per offset (what a reader that shows records wants;
        # a follower that only replays them is faster with the blocks)
        self.unblock = unblock
        self.max_bytes = max_bytes
        self.bytes_fetched = 0  # record batch bytes received (what a benchmark compares)
        self._epoch = 0  # the newest leader epoch any answer named

    def response_error(self, resp) -> Optional[SparkraftError]:
        epoch = resp.leader_epoch if isinstance(resp, raft_pb2.DescribeQuorumResponse) else resp.epoch
        if epoch > self._epoch:
            self._epoch = epoch
        error = convert.error_from_code(resp.error)
        if error is Errors.NONE:
            return None
        return SparkraftError(error, getattr(resp, "error_message", "") or error.name)

    # -- fetching ------------------------------------------------------------------------------
    def _discover(self, deadline: float) -> None:
        """Learn the cluster id (Raft requests must name it) and the leader's epoch."""
        resp = self._call_leader("DescribeQuorum", raft_pb2.DescribeQuorumRequest(cluster_id=self.cluster_id),
                                 timeout=max(0.05, deadline - time.monotonic()))
        self.cluster_id = self.cluster_id or resp.cluster_id

    def _fetch(self, offset: int, wait_ms: int, deadline: float, max_bytes: Optional[int] = None,
               last_fetched_epoch: Optional[int] = None, high_watermark: Optional[int] = None
               ) -> raft_pb2.FetchResponse:
        """One Fetch answered by the leader (following it and its epoch), raw. The leader sends
        whole batches: at least one, then more up to ``max_bytes``. ``last_fetched_epoch``: the
        epoch of the batch before ``offset`` when it is known (else the current epoch, which the
        leader's log holds up to its end); ``high_watermark``: the one this reader knows."""
        if not self.cluster_id or self._epoch == 0:
            self._discover(deadline)
        while True:
            left = deadline - time.monotonic()
            epoch = self._epoch
            request = raft_pb2.FetchRequest(
                cluster_id=self.cluster_id, epoch=epoch, replica_id=-1, fetch_offset=offset,
                last_fetched_epoch=epoch if last_fetched_epoch is None else last_fetched_epoch,
                max_wait_ms=max(0, wait_ms), max_bytes=self.max_bytes if max_bytes is None else max_bytes,
                high_watermark=high_watermark)
            saved_rpc_timeout = self.rpc_timeout
            self.rpc_timeout = saved_rpc_timeout + wait_ms / 1000.0  # a long poll is not a dead server
            try:
                return self._call_leader("Fetch", request, timeout=max(0.05, left))
            except SparkraftError as e:
                if e.error in _EPOCH_ERRORS and time.monotonic() < deadline:
                    if self._epoch == epoch:  # nobody knows a newer one yet: an election is running
                        time.sleep(self.backoff)
                    continue  # response_error adopted the newer epoch; ask again with it
                raise
            finally:
                self.rpc_timeout = saved_rpc_timeout

    def read(self, offset: int, max_records: Optional[int] = None, wait_ms: int = 0,
             timeout: Optional[float] = None, max_bytes: Optional[int] = None) -> LogChunk:
        """Committed records from ``offset`` (up to ``max_records``, from at most ``max_bytes`` of
        batches but always one whole batch); waits up to ``wait_ms`` for new ones when there are
        none. An empty chunk means nothing new was committed in time."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout) + wait_ms / 1000.0
        poll_until = time.monotonic() + wait_ms / 1000.0
        # Batches past the high watermark, already fetched: the next fetch asks from their end with
        # the high watermark known, so the leader holds it until that moves (or answers at once if
        # it has moved meanwhile), and nothing is fetched twice.
        tail, tail_end, tail_epoch, known_hw = b"", offset, None, None
        while True:
            remaining_wait = int(max(0.0, poll_until - time.monotonic()) * 1000)
            resp = self._fetch(tail_end, remaining_wait, deadline, max_bytes, tail_epoch, known_hw)
            self.bytes_fetched += len(resp.records)
            if resp.HasField("snapshot_id") or offset < resp.log_start_offset:
                snap = (OffsetAndEpoch(resp.snapshot_id.offset, resp.snapshot_id.epoch)
                        if resp.HasField("snapshot_id") else None)
                raise SnapshotRequired(offset, snap, resp.log_start_offset)
            hw = resp.high_watermark
            if resp.HasField("diverging"):
                # The named epoch does not hold the fetch offset: what was fetched past the high
                # watermark was never committed (a leader change cut it), or `offset` itself is not
                # committed yet (a reader ahead). Start again from `offset`.
                tail, tail_end, tail_epoch, known_hw = b"", offset, None, None
                chunk = LogChunk([], hw, offset, resp.log_start_offset)
            else:
                data = tail + resp.records
                chunk = self._committed(data, offset, hw, max_records, resp.log_start_offset, self.unblock)
                if not chunk.records and data:
                    tail, known_hw = data, hw
                    tail_end, tail_epoch = _end_of(data)
            if chunk.records or time.monotonic() >= poll_until:
                return chunk

    @staticmethod
    def _committed(data: bytes, offset: int, hw: int, max_records: Optional[int],
                   log_start: int, unblock: bool = False) -> LogChunk:
        out: list[LogRecord] = []
        limit = hw if max_records is None else min(hw, offset + max_records)  # the first offset not returned
        for batch in decode(data):
            records = change_block.unblocked(batch.records) if unblock and not batch.control else batch.records
            base = batch.base_offset
            first, end = max(0, offset - base), min(len(records), limit - base)
            if first < end:
                epoch, append_ms, control = batch.epoch, batch.append_time_ms, batch.control
                out += [new_log_record(LogRecord, (base + i, epoch, append_ms, records[i], control, None))
                        for i in range(first, end)]
            if base + len(records) >= limit:
                break
        return LogChunk(out, hw, offset + len(out), log_start)

    def download_snapshot(self, snapshot_id: OffsetAndEpoch, timeout: Optional[float] = None,
                          progress: Optional[Callable[[int, int], None]] = None) -> bytes:
        """The whole snapshot ``snapshot_id`` from the leader with FetchSnapshot, verified (CRCs,
        header, footer, cluster, id). A leader change restarts it from byte 0 (another node's file
        of the same snapshot may differ byte for byte). SNAPSHOT_NOT_FOUND (deleted meanwhile:
        read again for the newest) and a damaged download raise SparkraftError."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if not self.cluster_id or self._epoch == 0:
            self._discover(deadline)
        parts: list[bytes] = []
        position, leader = 0, None
        while True:
            request = raft_pb2.FetchSnapshotRequest(
                cluster_id=self.cluster_id, epoch=self._epoch, replica_id=-1,
                snapshot_id=raft_pb2.OffsetAndEpoch(offset=snapshot_id.offset, epoch=snapshot_id.epoch),
                position=position, max_bytes=self.max_bytes)
            try:
                resp = self._call_leader("FetchSnapshot", request, timeout=max(0.05, deadline - time.monotonic()))
            except SparkraftError as e:
                if e.error in _EPOCH_ERRORS and time.monotonic() < deadline:
                    time.sleep(self.backoff)
                    continue
                raise
            if leader is not None and resp.leader_id != leader:
                parts, position = [], 0  # another leader's file: start over
                leader = resp.leader_id
                continue
            leader = resp.leader_id
            parts.append(resp.data)
            position += len(resp.data)
            self.bytes_fetched += len(resp.data)
            if progress is not None:
                progress(position, resp.size)
            if position >= resp.size or not resp.data:
                break
        data = b"".join(parts)
        try:
            verify_checkpoint(data, self.cluster_id, SnapshotId(snapshot_id.offset, snapshot_id.epoch))
        except SnapshotError as e:
            raise SparkraftError(Errors.CORRUPT_MESSAGE, str(e)) from None
        return data

    def load_snapshot(self, snapshot_id: OffsetAndEpoch, timeout: Optional[float] = None) -> MetadataImage:
        """The metadata image in snapshot ``snapshot_id`` (downloaded and verified); the log
        continues at ``snapshot_id.offset``."""
        return _snapshot_image(self, snapshot_id, timeout)

    def high_watermark(self, timeout: Optional[float] = None) -> int:
        """The leader's high watermark now: the first offset that is not committed."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        # Fetching at the log start asks for nothing we need; max_bytes 1 keeps the answer small.
        while True:
            resp = self._fetch(0, 0, deadline, max_bytes=1)
            if resp.high_watermark >= 0 or time.monotonic() >= deadline:
                return resp.high_watermark  # -1: a new leader has not committed in its epoch yet
            time.sleep(self.backoff)

    def follow(self, offset: int, until: Optional[int] = None, wait_ms: int = 500,
               progress: Optional[Callable[[int, int], None]] = None):
        """Yield committed records from ``offset`` forever, or until the record before ``until``."""
        while until is None or offset < until:
            chunk = self.read(offset, wait_ms=wait_ms)
            for record in chunk.records:
                if until is not None and record.offset >= until:
                    return
                yield record
            offset = chunk.next_offset
            if progress is not None:
                progress(offset, chunk.high_watermark)


def replay(loader: MetadataLoader, records) -> MetadataImage:
    """Replay committed LogRecords (control records skipped) into ``loader``; its latest image."""
    for record in records:
        if not record.control:
            loader.replay_frame(record.data, record.offset, record.epoch)
    return loader.flush()


def read_image(bootstrap: Bootstrap, timeout: float = 30.0, cluster_id: str = "",
               progress: Optional[Callable[[int, int], None]] = None,
               security: Optional[ClientSecurity] = None) -> MetadataImage:
    """The committed metadata image as of the high watermark at the time of the call.

    Replays the log from offset 0, or, once the quorum's log starts later, from the leader's
    snapshot (FetchSnapshot) and the log after it.
    """
    with MetadataLogReader(bootstrap, cluster_id=cluster_id, timeout=timeout, security=security) as reader:
        return image_through(reader, progress)


def image_through(reader, progress: Optional[Callable[[int, int], None]] = None) -> MetadataImage:
    """``read_image`` with any log reader that reads and downloads snapshots as MetadataLogReader
    does (Apache Kafka's quorum's too: quorum/kafka_import/reader.py)."""
    hw = reader.high_watermark()
    loader = MetadataLoader()
    offset = 0
    while offset < hw:
        try:
            chunk = reader.read(offset, wait_ms=0)
        except SnapshotRequired as e:
            if e.snapshot_id is None:
                raise
            loader.reset(_snapshot_image(reader, e.snapshot_id))
            offset = e.snapshot_id.offset
            continue
        if not chunk.records and chunk.next_offset <= offset:
            break
        replay(loader, (r for r in chunk.records if r.offset < hw))
        offset = chunk.next_offset
        if progress is not None:
            progress(offset, hw)
    return loader.flush()


def _snapshot_image(reader, snapshot_id: OffsetAndEpoch, timeout: Optional[float] = None) -> MetadataImage:
    """The image in snapshot ``snapshot_id``, downloaded by ``reader`` (sparkraft's or Kafka's) and
    verified."""
    data = reader.download_snapshot(snapshot_id, timeout)
    try:
        return decode_checkpoint(data, f"snapshot {snapshot_id}")[1]
    except CheckpointError as e:
        raise SparkraftError(Errors.CORRUPT_MESSAGE, str(e)) from None


def _end_of(data: bytes) -> tuple[int, int]:
    """(the offset after the last batch in ``data``, that batch's epoch): read from the headers."""
    last = None
    for header in scan(data, verify=False):
        last = header
    return last.end_offset, last.epoch
