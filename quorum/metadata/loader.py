"""MetadataLoader: committed records in, published images out, transactions honoured.

Why transactions live here and not in MetadataDelta: a delta already is "changes that are not
visible yet", so a transaction is just a delta that is applied at EndTransaction and dropped at
AbortTransaction. What the loader adds is the choice of *when* to apply. This is Kafka's
MetadataBatchLoader design:

- records outside a transaction are published by ``flush()`` (once per batch, say);
- BeginTransaction first publishes what came before it, so the transaction's delta holds only its
  own records; until End or Abort, ``flush()`` publishes nothing and ``image`` stays at the offset
  before the transaction, so a snapshot (taken of ``image``) never cuts a transaction in half;
- EndTransaction makes the transaction's records publishable; AbortTransaction drops them (the
  image then only moves its provenance past the aborted records).

A Begin inside a transaction, or an End/Abort outside one, is a broken log: ReplayError.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from google.protobuf.message import Message

from quorum.metadata import change_block
from quorum.metadata.delta import TRANSACTION_MARKERS, MetadataDelta
from quorum.metadata.errors import ReplayError
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.partition_block import PartitionBlock
from quorum.metadata.records import AnyRecord, MetadataRecord, RecordType, as_record, decode_record
from quorum.metadata.topics import PartitionRegistration


class MetadataLoader:
    def __init__(self, image: MetadataImage = MetadataImage.EMPTY) -> None:
        self.reset(image)

    def reset(self, image: MetadataImage) -> None:
        """Start over from ``image`` (e.g. one loaded from a snapshot), dropping anything pending."""
        self.image = image  # the latest published image: never inside a transaction
        self._delta = MetadataDelta(image)
        # the last record replayed (kept as two ints: a Provenance per record is measurable)
        self._last_offset, self._last_epoch = image.provenance.offset, image.provenance.epoch
        self._transaction_start: Optional[int] = None  # offset of the open BeginTransactionRecord
        self._moves: Optional[change_block.Moves] = None  # see collect_moves
        self._revisited: Optional[set] = None

    def collect_moves(self, moves: Optional[change_block.Moves], revisited: Optional[set]) -> None:
        """From now on (None: no longer), say what each partition change block did to the partitions
        the published image holds, as ``change_block.replay`` does: for an index that follows the
        published images (a standby controller's) without looking each partition up again. When
        the delta they are relative to goes (a transaction begins or is aborted), what ``moves``
        holds goes to ``revisited`` as (topic id, partition id): look those up."""
        self._moves, self._revisited = moves, revisited

    def _demote_moves(self) -> None:
        if self._moves:
            self._revisited.update(change_block.moved_keys(self._moves))
            self._moves.clear()

    @property
    def in_transaction(self) -> bool:
        return self._transaction_start is not None

    @property
    def last_offset(self) -> int:
        """The offset of the last record replayed (published or not)."""
        return self._last_offset

    def replay(self, record: Message | AnyRecord, offset: int, epoch: int) -> None:
        """Replay one committed record written in leader epoch ``epoch`` at ``offset``."""
        if offset <= self._last_offset:
            raise ReplayError(f"offset {offset} is not after the last replayed offset "
                              f"{self._last_offset}")
        record = as_record(record)
        kind = record.type if type(record) is MetadataRecord else None
        if kind not in TRANSACTION_MARKERS:
            if kind is RecordType.PARTITION_CHANGE_BLOCK_RECORD and self._moves is not None:
                self._delta.replay_block(record.message, offset, self._moves, self._revisited)
            else:
                self._delta.replay(record, offset)
        elif kind is RecordType.BEGIN_TRANSACTION_RECORD:
            if self.in_transaction:
                raise ReplayError(f"BeginTransactionRecord at {offset} inside the transaction "
                                  f"begun at {self._transaction_start}")
            self._publish()
            self._demote_moves()  # (relative to the image before the one just published)
            self._transaction_start = offset
        else:  # End or Abort
            if not self.in_transaction:
                raise ReplayError(f"{record.type_name} at {offset} outside a transaction")
            if kind is RecordType.ABORT_TRANSACTION_RECORD:
                self._delta = MetadataDelta(self.image)
                self._demote_moves()  # (their new registrations went with the delta)
            self._transaction_start = None
        self._last_offset, self._last_epoch = offset, epoch

    def replay_frame(self, frame: bytes, offset: int, epoch: int) -> Optional[AnyRecord]:
        """Replay one committed record frame; the decoded record, or None for a partition change
        block's continuation, which changes nothing (its block, before it in the batch, applied
        every row) and is not decoded: a million of them follow a balance at 2M."""
        if frame == change_block.CONTINUATION_BYTES:
            if offset <= self._last_offset:
                raise ReplayError(f"offset {offset} is not after the last replayed offset {self._last_offset}")
            self._last_offset, self._last_epoch = offset, epoch
            return None
        record = decode_record(frame)
        self.replay(record, offset, epoch)
        return record

    def flush(self) -> MetadataImage:
        """Publish every record replayed so far unless a transaction is open; the latest image."""
        if not self.in_transaction:
            self._publish()
        return self.image

    def load_batch(self, records: Iterable[Message | AnyRecord], base_offset: int,
                   epoch: int) -> MetadataImage:
        """Replay a batch (record i at ``base_offset + i``) and flush."""
        for i, record in enumerate(records):
            self.replay(record, base_offset + i, epoch)
        return self.flush()

    def _publish(self) -> None:
        provenance = self.image.provenance
        if self._last_offset != provenance.offset or self._last_epoch != provenance.epoch:
            self.image = self._delta.apply(Provenance(self._last_offset, self._last_epoch))
            self._delta = MetadataDelta(self.image)


def image_from_records(records: Iterable[Message | AnyRecord], provenance: Provenance) -> MetadataImage:
    """The image a snapshot body (``MetadataImage.records()`` of some image: no offsets, no
    transactions) rebuilds, ending at ``provenance``.

    The same as replaying the records onto an empty image through a MetadataDelta, but partition
    records, nearly all of a large image, go straight into their topic's delta: loading a
    2,000,000-partition snapshot or cache spends its time decoding, not dispatching. A
    :class:`PartitionBlock` (a checkpoint's partitions of one topic) goes in whole.
    """
    delta = MetadataDelta(MetadataImage.EMPTY)
    topics = delta.sub("topics")
    topic_id, partitions = None, None  # the topic the last partition record went to
    for record in records:
        if isinstance(record, PartitionBlock):  # a checkpoint's columnar partitions of one topic
            topics.topic_delta(record.topic_id).partitions.update(record.partitions)
            topic_id = None
            continue
        record = as_record(record)
        if isinstance(record, MetadataRecord) and record.type is RecordType.PARTITION_RECORD:
            message = record.message
            if message.topic_id != topic_id:
                topic_id = message.topic_id
                partitions = topics.topic_delta(topic_id).partitions
            partitions[message.partition_id] = PartitionRegistration.from_record(message)
        else:
            if isinstance(record, MetadataRecord) and record.type in TRANSACTION_MARKERS:
                raise ReplayError(f"{record.type_name} in a snapshot body")
            delta.replay(record)
            topic_id = None  # a record between partitions may have removed or replaced the topic
    return delta.apply(provenance)
