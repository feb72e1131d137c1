"""KafkaMetadataLogReader: an Apache Kafka cluster's COMMITTED metadata log, read from outside as an
observer over Kafka's own protocol, as sparkraft's records.

It is MetadataLogReader's counterpart (quorum/rpc/log_reader.py: the same methods, LogChunk and
SnapshotRequired), so the streaming source reads a Kafka quorum as it reads sparkraft's. It speaks
to the controllers' listener (``--bootstrap-controller``, KIP-919) with Kafka's requests:

- DescribeCluster (controller endpoints) learns the cluster id;
- Fetch v17 of ``__cluster_metadata`` (topic id 0...01, partition 0) with replica id -1, as an
  observer that the leader answers and never counts. A controller that does not lead answers
  NOT_LEADER_OR_FOLLOWER or an epoch error naming the current leader, and its endpoint on this
  listener (``NodeEndpoints``): the reader moves there, as Kafka's brokers do;
- FetchSnapshot v1 when the offset asked for is below the log start; the snapshot is turned into
  sparkraft's checkpoint format (its image, and the voters of its header batch).

Only committed records are returned: the leader sends uncommitted ones too, which a new leader may
still truncate, so the tail past the high watermark is dropped and fetched again later. Naming the
leader's current epoch as the last fetched epoch is valid for any offset at or below the high
watermark, so reading from any committed offset needs no history of epochs.

Records come back as sparkraft's frames (quorum/kafka_import/records.py). TLS and a SASL/SCRAM login
come from Kafka's client keys (``security.protocol`` SSL or SASL_SSL, ``ssl.truststore.location``,
``ssl.keystore.location``, ``sasl.mechanism``, ``sasl.username``, ``sasl.password``); a refused
login fails at once with Kafka's reason, it is not tried again.
"""
from __future__ import annotations

import datetime
import time
from typing import Optional

from kio.schema.describe_cluster.v2.request import DescribeClusterRequest
from kio.schema.fetch.v17.request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from kio.schema.fetch_snapshot.v1.request import FetchSnapshotRequest, PartitionSnapshot, TopicSnapshot
from kio.schema.fetch_snapshot.v1.request import SnapshotId as KioSnapshotId

from quorum.errors import Errors, SparkraftError
from quorum.kafka.client import KafkaConnection
from quorum.kafka_import.files import checkpoint_of_kafka_snapshot
from quorum.kafka_import.records import control_record, metadata_record
from quorum.kafka_log.batches import KafkaBatchError, batch_size, read_batches
from quorum.kafka_log.topic import METADATA_TOPIC, METADATA_TOPIC_ID
from quorum.log.api import OffsetAndEpoch
from quorum.metadata.records import MetadataRecord, encode_record
from quorum.rpc import nothing_listens
from quorum.rpc.log_reader import LogChunk, LogRecord, SnapshotRequired
from quorum.security.client import ClientSecurity

FETCH_MAX_BYTES = 8 << 20
CONTROLLER_ENDPOINTS = 2  # DescribeCluster's endpoint type for a controller listener (KIP-919)
_LEADER_MOVED = {Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH}
_RETRIABLE = _LEADER_MOVED | {Errors.BROKER_NOT_AVAILABLE, Errors.REQUEST_TIMED_OUT, Errors.LEADER_NOT_AVAILABLE}


# Apache Kafka 4.4's controllers answer DescribeCluster to a principal with Alter on the cluster, and
# Fetch and FetchSnapshot of the metadata log to one with ClusterAction (found against Kafka running)
ACL_NEEDED = ("the reader's principal needs Alter and ClusterAction on Kafka's cluster resource "
              "(kafka-acls --add --allow-principal User:NAME --operation Alter --operation ClusterAction --cluster)")


def _hint(error: Errors) -> str:
    """What to do about ``error`` ("" if nothing more useful than Kafka's own message)."""
    return f"Kafka's controllers refused the reader: {ACL_NEEDED}" if error is Errors.CLUSTER_AUTHORIZATION_FAILED \
        else ""


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"invalid controller address {item!r}: expected HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no controller address given")
    return out


class KafkaMetadataLogReader:
    """Not thread-safe: one reader per thread."""

    def __init__(self, bootstrap: str, cluster_id: str = "", timeout: float = 15.0, rpc_timeout: float = 5.0,
                 backoff: float = 0.1, max_bytes: int = FETCH_MAX_BYTES, security: Optional[ClientSecurity] = None):
        self.bootstrap = parse_bootstrap(bootstrap)
        self.cluster_id = cluster_id  # "": learnt with DescribeCluster on first use
        self.timeout, self.rpc_timeout, self.backoff, self.max_bytes = timeout, rpc_timeout, backoff, max_bytes
        self.security = security or ClientSecurity()
        self.bytes_fetched = 0
        self._epoch = 0  # the newest leader epoch an answer named
        # offset -> the epoch of the record before it, where that is known not to be the current epoch:
        # a snapshot's end. Kafka answers a Fetch at its log start offset with "load the snapshot"
        # unless the last fetched epoch is the snapshot's own (KafkaMetadataLog.validateOffsetAndEpoch).
        self._epoch_before: dict[int, int] = {}
        self._leader: Optional[tuple[str, int]] = None  # the leader's address on this listener, once known
        self._next = 0  # the bootstrap address to try next while the leader is unknown
        self._connection: Optional[KafkaConnection] = None
        self._address: Optional[tuple[str, int]] = None

    # -- connections ------------------------------------------------------------------------------
    def __enter__(self) -> "KafkaMetadataLogReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _call(self, body, deadline: float):
        """``body`` sent to the leader (or, while it is unknown, a bootstrap controller); its answer.
        A lost connection is tried again elsewhere until ``deadline`` (or, in a client command, until
        quorum/rpc/nothing_listens.py's rule says nothing listens at any address)."""
        refusals = nothing_listens.RefusalClock(_text(self.bootstrap).split(","))
        while True:
            address = self._leader or self.bootstrap[self._next % len(self.bootstrap)]
            try:
                if self._connection is None or self._address != address:
                    self.close()
                    self._connection = KafkaConnection(*address, timeout=self.rpc_timeout, security=self.security)
                    self._address = address
                wait = getattr(body, "max_wait", datetime.timedelta(0)).total_seconds()
                return self._connection.request(body, self.rpc_timeout + wait)
            except (OSError, ConnectionError, ValueError) as e:
                if isinstance(e, ConnectionRefusedError):
                    refusals.note_refused(f"{address[0]}:{address[1]}")
                else:
                    refusals.note_answered()  # something is there (a handshake, a bad frame...)
                self.close()
                self._leader = None
                self._next += 1
                if time.monotonic() >= deadline:
                    raise SparkraftError(Errors.NETWORK_EXCEPTION,
                                         f"no Kafka controller reachable at {_text(self.bootstrap)}: {e}") from None
                refusals.check()
                time.sleep(self.backoff)

    def discover(self, deadline: float) -> None:
        """The cluster id, from DescribeCluster on the controllers' listener."""
        while True:
            resp = self._call(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                     endpoint_type=CONTROLLER_ENDPOINTS,
                                                     include_fenced_brokers=False), deadline)
            error = _error(int(resp.error_code))
            if error is Errors.NONE:
                if self.cluster_id and resp.cluster_id != self.cluster_id:
                    raise SparkraftError(Errors.INCONSISTENT_CLUSTER_ID,
                                         f"the Kafka cluster at {_text(self.bootstrap)} is {resp.cluster_id}, "
                                         f"not {self.cluster_id}")
                self.cluster_id = resp.cluster_id
                return
            if error not in _RETRIABLE or time.monotonic() >= deadline:
                reason = _hint(error) or f"DescribeCluster: {resp.error_message or error.name}"
                raise SparkraftError(error, reason)
            time.sleep(self.backoff)

    def _follow(self, error: Errors, leader_id: int, epoch: int, endpoints) -> None:
        """An answer named another leader (or none): go where it says, or around the bootstrap."""
        if epoch > self._epoch:
            self._epoch = epoch
        where = {e.node_id: (e.host, int(e.port)) for e in endpoints or ()}
        self._leader = where.get(leader_id) if leader_id >= 0 else None
        if self._leader is None:
            self._next += 1

    # -- Fetch --------------------------------------------------------------------------------------
    def _fetch(self, offset: int, wait_ms: int, deadline: float, max_bytes: Optional[int]):
        """One successful Fetch answer's partition for ``offset`` (leader moves followed)."""
        if not self.cluster_id:
            self.discover(deadline)
        limit = self.max_bytes if max_bytes is None else max_bytes
        while True:
            request = FetchRequest(
                cluster_id=self.cluster_id, replica_state=ReplicaState(replica_id=-1, replica_epoch=-1),
                max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1 if wait_ms else 0, max_bytes=limit,
                isolation_level=0, session_id=0, session_epoch=-1, topics=(FetchTopic(
                    topic_id=METADATA_TOPIC_ID, partitions=(FetchPartition(
                        partition=0, current_leader_epoch=self._epoch, fetch_offset=offset,
                        last_fetched_epoch=self._epoch_before.get(offset, self._epoch), log_start_offset=-1,
                        partition_max_bytes=limit,
                        replica_directory_id=None),)),),
                forgotten_topics_data=(), rack_id="")
            resp = self._call(request, deadline)
            error = _error(int(resp.error_code))
            if error is Errors.NONE and resp.responses and resp.responses[0].partitions:
                part = resp.responses[0].partitions[0]
                error = _error(int(part.error_code))
                if part.current_leader.leader_epoch > self._epoch:
                    self._epoch = int(part.current_leader.leader_epoch)
                if error is Errors.NONE:
                    return part
                if error in _LEADER_MOVED:
                    known = (self._epoch, self._leader)
                    self._follow(error, int(part.current_leader.leader_id), int(part.current_leader.leader_epoch),
                                 resp.node_endpoints)
                    if (self._epoch, self._leader) != known and self._leader is not None:
                        continue  # the answer named the leader (or a newer epoch): ask there at once
            if error is Errors.INCONSISTENT_CLUSTER_ID:
                raise SparkraftError(error, f"the Kafka controllers at {_text(self.bootstrap)} are not of cluster "
                                            f"{self.cluster_id}")
            if error not in _RETRIABLE and error is not Errors.NONE:
                raise SparkraftError(error, _hint(error) or f"Fetch of {METADATA_TOPIC} at offset {offset}: {error.name}")
            if time.monotonic() >= deadline:
                raise SparkraftError(Errors.NOT_LEADER_OR_FOLLOWER,
                                     f"no leader of the Kafka quorum at {_text(self.bootstrap)} answered in time")
            time.sleep(self.backoff)

    def read(self, offset: int, max_records: Optional[int] = None, wait_ms: int = 0,
             timeout: Optional[float] = None, max_bytes: Optional[int] = None) -> LogChunk:
        """Committed records from ``offset`` (up to ``max_records``); waits up to ``wait_ms`` for new
        ones when there are none. An empty chunk means nothing new was committed in time."""
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout) + wait_ms / 1000.0
        poll_until = time.monotonic() + wait_ms / 1000.0
        while True:
            remaining = int(max(0.0, poll_until - time.monotonic()) * 1000)
            part = self._fetch(offset, remaining, deadline, max_bytes)
            snapshot = part.snapshot_id
            if snapshot.end_offset == offset and snapshot.epoch >= 0 and self._epoch_before.get(offset) != snapshot.epoch:
                # asked at the snapshot's end naming another epoch (the leader's has moved on since the
                # snapshot): the records from there are valid, ask again naming the snapshot's epoch
                self._epoch_before[offset] = int(snapshot.epoch)
                continue
            if snapshot.end_offset >= 0 and snapshot.epoch >= 0:
                raise SnapshotRequired(offset, OffsetAndEpoch(int(snapshot.end_offset), int(snapshot.epoch)),
                                       int(part.log_start_offset))
            if offset < part.log_start_offset:
                raise SnapshotRequired(offset, None, int(part.log_start_offset))
            data = bytes(part.records or b"")
            self.bytes_fetched += len(data)
            hw = int(part.high_watermark)
            chunk = _committed(data, offset, hw, max_records, int(part.log_start_offset))
            if chunk.records or time.monotonic() >= poll_until or part.diverging_epoch.epoch >= 0:
                return chunk

    def high_watermark(self, timeout: Optional[float] = None) -> int:
        """The leader's high watermark now: the first offset that is not committed."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            part = self._fetch(0, 0, deadline, max_bytes=1)
            if part.high_watermark >= 0 or time.monotonic() >= deadline:
                return int(part.high_watermark)
            time.sleep(self.backoff)

    # -- FetchSnapshot ------------------------------------------------------------------------------
    def download_snapshot(self, snapshot_id: OffsetAndEpoch, timeout: Optional[float] = None) -> bytes:
        """Kafka's snapshot ``snapshot_id`` from the leader (FetchSnapshot), as sparkraft's
        checkpoint bytes (its image, and the quorum's voters and kraft.version it carries)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        if not self.cluster_id:
            self.discover(deadline)
        self._epoch_before[snapshot_id.offset] = snapshot_id.epoch  # where the next Fetch starts
        parts: list[bytes] = []
        position = 0
        while True:
            request = FetchSnapshotRequest(cluster_id=self.cluster_id, replica_id=-1, max_bytes=self.max_bytes,
                                           topics=(TopicSnapshot(name=METADATA_TOPIC, partitions=(PartitionSnapshot(
                                               partition=0, current_leader_epoch=self._epoch,
                                               snapshot_id=KioSnapshotId(end_offset=snapshot_id.offset,
                                                                         epoch=snapshot_id.epoch),
                                               position=position, replica_directory_id=None),)),))
            resp = self._call(request, deadline)
            error = _error(int(resp.error_code))
            part = resp.topics[0].partitions[0] if error is Errors.NONE and resp.topics else None
            if part is not None:
                error = _error(int(part.error_code))
            if error is Errors.NONE:
                data = bytes(part.unaligned_records or b"")
                parts.append(data)
                position += len(data)
                self.bytes_fetched += len(data)
                if position >= part.size or not data:
                    break
                continue
            if error in _LEADER_MOVED and part is not None:
                parts, position = [], 0  # another leader's file of this snapshot: from byte 0
                self._follow(error, int(part.current_leader.leader_id), int(part.current_leader.leader_epoch),
                             resp.node_endpoints)
            elif error not in _RETRIABLE:
                raise SparkraftError(error, f"FetchSnapshot {snapshot_id}: {error.name}")
            if time.monotonic() >= deadline:
                raise SparkraftError(error, f"FetchSnapshot {snapshot_id}: no answer in time")
            time.sleep(self.backoff)
        return checkpoint_of_kafka_snapshot(b"".join(parts), snapshot_id, self.cluster_id)


def _committed(data: bytes, offset: int, hw: int, max_records: Optional[int], log_start: int) -> LogChunk:
    """The records of ``data`` (Kafka's record batches; a partial last batch is left) from
    ``offset`` and below the high watermark, as sparkraft's frames."""
    out: list[LogRecord] = []
    position, next_offset = 0, offset
    while position < len(data):
        size = batch_size(data, position)
        if size is None or position + size > len(data):
            break
        try:
            batch = next(read_batches(data[position:position + size]))
        except (KafkaBatchError, StopIteration) as e:
            raise SparkraftError(Errors.CORRUPT_MESSAGE, f"a record batch of {METADATA_TOPIC} is damaged: {e}") from None
        position += size
        for record in batch.records:
            if record.offset < offset:
                continue
            if record.offset >= hw or (max_records is not None and len(out) >= max_records):
                return LogChunk(out, hw, next_offset, log_start)
            next_offset = record.offset + 1
            if batch.control:
                frame = control_record(record.key, record.value)[0]
                if frame is None:
                    continue  # a snapshot's header or footer: never in a log, and no offset of its own
                form = None
            else:
                converted, kafkas = metadata_record(record.value)
                frame = encode_record(converted)
                # a type sparkraft does not model keeps Kafka's name and reading in the records table
                form = None if isinstance(converted, MetadataRecord) else {
                    "type": kafkas.type, "version": kafkas.version, "data": kafkas.data}
            out.append(LogRecord(record.offset, batch.partition_leader_epoch, record.timestamp, frame, batch.control,
                                 form))
    return LogChunk(out, hw, next_offset, log_start)


def _error(code: int) -> Errors:
    try:
        return Errors(code)
    except ValueError:
        return Errors.UNKNOWN_SERVER_ERROR


def _text(addresses: list[tuple[str, int]]) -> str:
    return ",".join(f"{h}:{p}" for h, p in addresses)
