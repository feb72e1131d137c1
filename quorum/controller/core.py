"""ControllerCore: the active controller's logic as a sans-I/O state machine.

Inputs: ``replay_committed(batch)`` (every committed batch, in offset order), ``activate`` /
``deactivate`` (leadership), ``handle(request, now)`` and ``tick(now)``. Outputs: ``Operation``s,
whose batches the driver proposes to the quorum in the order they were returned, and whose reply
it gives once the last batch is committed. No threads, sockets, clocks or files.

Two images:

- the **committed image** (``image``), built by a MetadataLoader from committed batches; reads
  (``describe_*``, ``list_topics``) answer from it, on standbys too;
- the **speculative image** (``spec``), on the active controller only: the committed image plus
  every operation handled but not committed yet. Requests are validated against it, so two
  requests in flight cannot both create topic ``t``. Each operation's records are applied to it
  with a MetadataDelta as they are generated; ``deactivate()`` drops it.

Offsets. The active controller is the only writer of its epoch, so it knows the offset each record
will get (Kafka's ``nextWriteOffset``): a broker's epoch is the offset of its RegisterBrokerRecord,
written into the record itself. When its own batches come back committed, the core does not decode
and replay them again: it publishes the speculative image it kept for that point (cost O(1), not
O(records)). Anything else is decoded and replayed.

Large operations (more than ``max_records_per_batch`` records) are wrapped in Begin/End
transaction markers and split into several proposals; the loader makes them visible all at once.
A new active controller that finds the log inside a transaction (its predecessor died midway)
first appends an AbortTransactionRecord, and an empty log gets its metadata.version first.

Indexes (``index.PartitionIndex``) follow the speculative image on the active controller and the
committed image elsewhere, so fencing a broker walks its own partitions, not the cluster's.
"""
from __future__ import annotations

import base64
import logging
import random
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import replace
from typing import Any, Optional

from google.protobuf.message import Message

from quorum.controller import (
    batching,
    features_control,
    levels,
    migration_control,
    registry,
)
from quorum.controller.audit import AuditContext, Audits
from quorum.controller.committed_reads import CommittedReads
from quorum.controller.index import PartitionIndex, note_touched
from quorum.controller.operation import Inflight, Operation
from quorum.controller.sessions import Sessions
from quorum.controller.settings import ControllerSettings
from quorum.controller.timers import NO_DEADLINE, Timers
from quorum.controller.version_history import VersionHistory
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.log.batch import Batch
from quorum.metadata import change_block
from quorum.metadata.delta import MetadataDelta
from quorum.metadata.errors import ReplayError
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.loader import MetadataLoader
from quorum.metadata.records import MetadataRecord, RecordType, encode_record

log = logging.getLogger(__name__)

# Record types whose replay changes one entry of the image (see ControllerCore.replays_quickly).
_QUICK_TO_REPLAY = frozenset(int(t) for t in (
    RecordType.CONFIG_RECORD, RecordType.TOPIC_RECORD, RecordType.PARTITION_RECORD,
    RecordType.PARTITION_CHANGE_RECORD, RecordType.NO_OP_RECORD, RecordType.CLIENT_QUOTA_RECORD,
    RecordType.PRODUCER_IDS_RECORD, RecordType.AUDIT_RECORD, RecordType.LOG_HOLD_RECORD))

_RESERVED_UUIDS = {"AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"}  # Kafka's ZERO and ONE
_MARKERS = (pb.BeginTransactionRecord, pb.EndTransactionRecord, pb.AbortTransactionRecord)


class ControllerCore(CommittedReads, Audits, Timers):
    def __init__(self, node_id: int, cluster_id: str, settings: ControllerSettings = ControllerSettings()):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.settings = settings
        self.rng = random.Random(settings.seed if settings.seed is not None else f"{cluster_id}/{node_id}")
        self.loader = MetadataLoader()
        self.last_committed_offset = -1
        self.last_committed_append_ms: Optional[int] = None  # the last replayed batch's append time (metrics)
        self.timed_out_heartbeats = 0  # brokers fenced for a session that expired (metrics)
        self.index = PartitionIndex()
        self._indexed: MetadataImage = self.loader.image  # the image the index reflects (standby)
        self._acc_parts: set = set()  # partitions replayed since the index last followed the loader
        self._acc_topics: set = set()
        self._acc_moves: change_block.Moves = {}  # what blocks replayed since then did (standby)
        self.sessions = Sessions(settings.session_timeout_ms)
        self._epoch: Optional[int] = None  # the epoch we are active in
        self._spec: Optional[MetadataImage] = None
        self._inflight: deque[Inflight] = deque()
        # Committed records of our own unfinished multi-batch operation, not replayed (see
        # _replay_own): (batch, index of its first such record).
        self._skipped: list[tuple[Batch, int]] = []
        self._next_write_offset = 0
        self._pending_batches: list[list[bytes]] = []  # activation records not yet handed out
        self._last_write_ms = 0
        self._next_balance_ms = NO_DEADLINE  # the next leader balance check (active controller only)
        self._diverged = False
        self._issued: set[str] = set()
        self._refusals: dict = {}  # refusals being summarised (Audits)
        self._acceptable_of: Any = None
        self._acceptable_set: frozenset = frozenset()
        self.fast_replays = 0  # batches published from the speculative image (for tests/metrics)
        self.versions = VersionHistory()  # metadata.version by offset (the log Kafka's brokers fetch)
        self.voters_of: Callable[[], Optional[Collection[int]]] = lambda: None  # the node sets the quorum's

    # ------------------------------------------------------------------ state
    @property
    def is_active(self) -> bool:
        return self._epoch is not None

    @property
    def epoch(self) -> Optional[int]:
        return self._epoch

    @property
    def image(self) -> MetadataImage:
        """The committed image (never inside a transaction)."""
        return self.loader.image

    @property
    def spec(self) -> MetadataImage:
        """The speculative image on the active controller; the committed one elsewhere."""
        return self._spec if self._spec is not None else self.loader.image

    @property
    def next_write_offset(self) -> int:
        return self._next_write_offset

    def first_record_offset(self, record_count: int) -> int:
        """The offset the first record of an operation of ``record_count`` records will get."""
        wrapped = record_count > self.settings.max_records_per_batch
        return self._next_write_offset + (1 if wrapped else 0)

    def acceptable(self, broker: int) -> bool:
        """Registered, unfenced and not shutting down (in the speculative image): may lead."""
        cluster = self.spec.cluster
        if self._acceptable_of is not cluster:
            self._acceptable_of = cluster
            self._acceptable_set = frozenset(b.broker_id for b in cluster.brokers.values()
                                             if not b.fenced and not b.in_controlled_shutdown)
        return broker in self._acceptable_set

    def voters(self) -> Optional[Collection[int]]:
        return self.voters_of()

    def new_uuid(self) -> str:
        spec = self.spec
        while True:
            s = base64.urlsafe_b64encode(self.rng.getrandbits(128).to_bytes(16, "big")).decode()[:22]
            if (s[0] != "-" and s not in _RESERVED_UUIDS and s not in self._issued
                    and s not in spec.topics.by_id and s not in spec.acls.acls):
                self._issued.add(s)
                return s

    # ------------------------------------------------------------------ committed log
    def replay_committed(self, batch: Batch) -> None:
        """Replay a committed batch (every one, in offset order; control batches are skipped)."""
        if batch.last_offset <= self.last_committed_offset:
            return  # seen already
        if batch.base_offset != self.last_committed_offset + 1 and self.last_committed_offset >= 0:
            log.warning("controller %d: committed batch at %d after offset %d", self.node_id,
                        batch.base_offset, self.last_committed_offset)
        if not batch.control:
            if not (self.is_active and batch.epoch == self._epoch and self._replay_own(batch)):
                self._replay_decoded(batch)
        elif self.is_active and batch.epoch == self._epoch:
            self._make_room_for(batch)
        self.last_committed_offset = batch.last_offset
        self.last_committed_append_ms = batch.append_time_ms
        self.versions.note(batch.end_offset, self.loader.image.features.metadata_version)

    def _make_room_for(self, control: Batch) -> None:
        """The Raft leader appended a control batch of its own in our epoch (a voter change, the
        kraft.version upgrade). Our batches proposed after it, and the next write, sit that many
        offsets later than we reckoned: those before it were in the log already (the leader appends
        what was proposed first), and nothing after it has committed yet (commits come in order)."""
        size = control.end_offset - control.base_offset
        for e in self._inflight:
            if e.base >= control.base_offset:
                e.base += size
                e.end += size
        if self._next_write_offset >= control.base_offset:
            self._next_write_offset += size

    def _replay_own(self, batch: Batch) -> bool:
        """Publish our own batch from the speculative images kept for it; False if it is not
        exactly the next of our in-flight batches (then it is decoded instead)."""
        inflight = self._inflight
        n, off = 0, batch.base_offset
        while off < batch.end_offset:
            if n >= len(inflight) or inflight[n].base != off:
                break
            off = inflight[n].end
            n += 1
        if off != batch.end_offset or n == 0:
            self._replay_skipped()
            if inflight:
                log.error("controller %d: committed batch %d..%d is not what it proposed (next in flight "
                          "%d); stops taking requests", self.node_id, batch.base_offset, batch.last_offset,
                          inflight[0].base)
                self._diverged = True
            return False
        entries = [inflight.popleft() for _ in range(n)]
        start = batch.base_offset
        for e in reversed(entries):
            if e.snapshot is not None:
                self.loader.reset(replace(e.snapshot, provenance=Provenance(e.end - 1, batch.epoch)))
                self._skipped.clear()  # the snapshot holds them
                start = e.end
                break
        if start < batch.end_offset:
            # The first batches of an operation whose last batch is still in flight: that one
            # brings the image after the whole operation, so decoding these now is wasted work
            # (a 2M-partition fencing is ~20 such batches). Kept aside in case we lose leadership.
            self._skipped.append((batch, start - batch.base_offset))
        self.loader.flush()
        self.fast_replays += 1
        return True

    def load_snapshot(self, image: MetadataImage, end_offset: int) -> None:
        """Start from a snapshot's image: at start, or when this standby fell behind the leader's log
        start and Raft installed the leader's snapshot. The log's batches below ``end_offset`` are
        then skipped as seen."""
        if self.is_active:
            raise RuntimeError("the active controller never loads a snapshot")
        self._skipped.clear()
        self.loader.reset(image)
        self.index = PartitionIndex.build(image)
        self._indexed = image
        self._acc_parts, self._acc_topics, self._acc_moves = set(), set(), {}
        self.last_committed_offset = end_offset - 1
        self.versions.note(end_offset, image.features.metadata_version)

    @property
    def in_transaction(self) -> bool:
        """Is a committed transaction open (its records committed, its end not yet)?"""
        return self.loader.in_transaction or bool(self._skipped)

    def _replay_skipped(self) -> None:
        """Decode the records _replay_own kept aside (before anything else is replayed)."""
        for batch, first in self._skipped:
            for i in range(first, len(batch.records)):
                self.loader.replay_frame(batch.records[i], batch.base_offset + i, batch.epoch)
        self._skipped.clear()
        self.loader.flush()

    def _replay_decoded(self, batch: Batch) -> None:
        if self._skipped:
            self._replay_skipped()
        follow = not self.is_active  # the index follows the committed image only on a standby
        parts, topics = self._acc_parts, self._acc_topics
        if follow:  # blocks say what they did (no partition looked up again), the rest is noted
            self.loader.collect_moves(self._acc_moves, parts)
        block = RecordType.PARTITION_CHANGE_BLOCK_RECORD
        try:
            for i, raw in enumerate(batch.records):
                record = self.loader.replay_frame(raw, batch.base_offset + i, batch.epoch)
                if follow and isinstance(record, MetadataRecord) and record.type is not block:
                    note_touched(record.message, parts, topics)
            self.loader.flush()
        finally:
            self.loader.collect_moves(None, None)
        if follow:
            self._sync_index()

    def _sync_index(self) -> None:
        image = self.loader.image
        if image is self._indexed:
            return
        if self.loader.in_transaction:  # what the open transaction did is not in ``image`` yet
            self.index.update(self._indexed, image, self._acc_parts, self._acc_topics)
            self._indexed = image
            return
        self.index.update(self._indexed, image, self._acc_parts, self._acc_topics, self._acc_moves)
        self._indexed = image
        self._acc_parts, self._acc_topics, self._acc_moves = set(), set(), {}

    # ------------------------------------------------------------------ leadership
    def activate(self, epoch: int, now_ms: int, next_write_offset: Optional[int] = None) -> None:
        """This node is the active controller of ``epoch``; it has replayed everything committed
        before (its own LeaderChange included), so its next record lands right after that."""
        if self.is_active:
            self.deactivate()
        self._epoch = epoch
        self._spec = self.loader.image
        # what a standby's open transaction did is not in the index (it follows published images),
        # and that transaction ends aborted or from our own image: look those partitions up instead
        self._acc_parts.update(change_block.moved_keys(self._acc_moves))
        self._acc_moves = {}
        self._next_write_offset = (self.last_committed_offset + 1 if next_write_offset is None
                                   else next_write_offset)
        self._diverged = False
        self._inflight.clear()
        self.sessions = Sessions(self.settings.session_timeout_ms)
        for b in self._spec.cluster.brokers:
            self.sessions.touch(b, now_ms)
        self._last_write_ms = now_ms
        self._next_balance_ms = (now_ms + self.settings.leader_imbalance_check_interval_ms
                                 if self.settings.auto_leader_rebalance else NO_DEADLINE)
        records: list[Message] = []
        if self.loader.in_transaction:
            records.append(pb.AbortTransactionRecord(reason="the active controller changed during the "
                                                            "transaction"))
        if self._spec.features.metadata_version is None:  # an empty log: write the bootstrap metadata
            formatted = self.settings.bootstrap_records  # storage format's, metadata.version first if it set one
            if not any(isinstance(r, pb.FeatureLevelRecord) and r.name == METADATA_VERSION for r in formatted):
                records += features_control.bootstrap_records(self._spec, self.settings.bootstrap_metadata_version)
            records += formatted
            if self.settings.zk_migration:
                records += migration_control.bootstrap_records()
        if records:
            self._pending_batches = self._emit(records, now_ms).batches

    def deactivate(self) -> None:
        """Leadership is lost: forget everything not committed."""
        if not self.is_active:
            return
        self._replay_skipped()
        parts, topics = set(), set()
        for e in self._inflight:
            if e.touched is not None:
                parts |= e.touched[0]
                topics |= e.touched[1]
                for block in e.touched[2]:  # (worked out only now: _apply gave the index their moves)
                    parts.update(change_block.touched(block))
        committed = self.loader.image
        if self._diverged:
            self.index = PartitionIndex.build(committed)
        else:
            self.index.update(self._spec, committed, parts, topics)
        self._indexed = committed
        # our own open transaction may still be completed by the next leader: remember its keys
        self._acc_parts |= parts
        self._acc_topics |= topics
        self._epoch = None
        self._spec = None
        self._inflight.clear()
        self._pending_batches = []
        self._next_balance_ms = NO_DEADLINE
        self._diverged = False
        self.sessions = Sessions(self.settings.session_timeout_ms)

    # ------------------------------------------------------------------ what is quick
    def handles_quickly(self, request: object) -> bool:
        """A write whose handling is bounded by a few records (the registry's ``quick``)."""
        row = registry.BY_TYPE.get(type(request))
        return row is not None and row.quick is not None and self.is_active and row.quick(self, request)

    def replays_quickly(self, batches: list[Batch]) -> bool:
        """Committed batches this core replays in about the time of a few records: at most
        QUICK_RECORDS records, each either its own (published from the speculative image kept for
        it) or of a type whose replay touches one thing (not a topic's removal, say, which drops
        every partition of the topic)."""
        count = 0
        for batch in batches:
            count += len(batch.records)
            if count > registry.QUICK_RECORDS:
                return False
            if batch.control or self.is_active and batch.epoch == self._epoch:
                continue
            for record in batch.records:
                if (record[0] << 8 | record[1]) not in _QUICK_TO_REPLAY:
                    return False
        return True

    # ------------------------------------------------------------------ requests and timers
    def handle(self, request: object, now_ms: int, context: Optional[AuditContext] = None) -> Operation:
        """Validate a write request against the speculative image and turn it into records (with
        its audit entry, quorum/controller/audit.py; a refusal's entry alone, its error kept)."""
        name = type(request).__name__
        if not self.is_active or self._diverged:
            return Operation(error=SparkraftError(Errors.NOT_CONTROLLER, f"node {self.node_id} is not the "
                                                  f"active controller"), name=name)
        row = registry.BY_TYPE.get(type(request))
        if row is None or row.handler is None:
            return Operation(error=SparkraftError(Errors.INVALID_REQUEST, f"not a controller write "
                                                  f"request: {name}"), name=name)
        refused = migration_control.refusal(self, row.migrates)
        if refused is not None:
            return Operation(error=refused, name=name)
        self._issued = set()
        try:
            records, reply = row.handler(self, request, now_ms)
            return self._emit(self.with_audit(row, request, records, reply, now_ms, context), now_ms, reply, name,
                              transaction=row.transaction)
        except SparkraftError as e:
            return self.refused(row, request, e, now_ms, context)
        except ReplayError as e:  # records that do not apply to the image: nothing was changed
            return Operation(error=SparkraftError(Errors.INVALID_RECORD, f"{name} does not apply: {e}"), name=name)

    # ------------------------------------------------------------------ records out
    def _emit(self, records: list[Message], now_ms: int, reply: object = None, name: str = "",
              transaction: bool = False) -> Operation:
        """The Operation proposing ``records`` (after any activation records still to go out);
        ``transaction``: wrapped in Begin/End even if they fit one batch. ReplayError (before
        anything changed) if they do not apply to the speculative image."""
        min_rows = self.settings.change_block_min_rows
        rows = change_block.rows(records)  # (a handler's ChangeColumns stands for many)
        if rows >= min_rows and levels.change_blocks_enabled(self._spec):
            # a block shares a batch with its continuations (and perhaps a transaction's markers)
            max_rows = min(change_block.MAX_ROWS, self.settings.max_records_per_batch - 2)
            records = change_block.pack(records, min_rows, max_rows)
        else:
            records = change_block.expanded(records)
        if records:
            snapshot, touched = self._apply(records)
        batches, self._pending_batches = self._pending_batches, []
        if records:
            continuation = change_block.CONTINUATION
            encoded = [change_block.CONTINUATION_BYTES if r is continuation else encode_record(r) for r in records]
            chunks = batching.batches(encoded, name or "operation",
                                      self.settings.max_records_per_batch, self.settings.max_batch_bytes,
                                      transaction)
            for i, chunk in enumerate(chunks):
                base = self._next_write_offset
                self._next_write_offset += len(chunk)
                last = i == len(chunks) - 1
                self._inflight.append(Inflight(base, self._next_write_offset,
                                                snapshot if last else None, touched if last else None))
            batches.extend(chunks)
            self._last_write_ms = now_ms
        return Operation(batches, reply, None, None, name)

    def _apply(self, records: list[Message]) -> tuple[MetadataImage, tuple[set, set, list]]:
        """Apply records to the speculative image (and the index); the image after them."""
        delta = MetadataDelta(self._spec)
        parts: set = set()
        topics: set = set()
        moves: change_block.Moves = {}  # what the blocks did, for the index (no lookups again)
        blocks = []
        continuation, block_type = change_block.CONTINUATION, pb.PartitionChangeBlockRecord
        for r in records:
            if r is continuation or isinstance(r, _MARKERS):  # a block's row, applied with the block
                continue
            if type(r) is block_type:
                delta.replay_block(r, None, moves, parts)
                blocks.append(r)
                continue
            delta.replay(r)
            note_touched(r, parts, topics)
        new = delta.apply(Provenance(self._next_write_offset, self._epoch))
        self.index.update(self._spec, new, parts, topics, moves)
        self._spec = new
        return new, (parts, topics, blocks)

    @property
    def read_offset(self) -> int:
        """The offset reads answer as of: inside a transaction the committed image stops at its
        start; outside, at the last committed record."""
        return self.image.offset if self.in_transaction else self.last_committed_offset
