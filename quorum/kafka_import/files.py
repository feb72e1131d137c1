"""Apache Kafka's own ``__cluster_metadata`` files as sparkraft's metadata image: a ``.checkpoint``
snapshot (``sparkraft shell --snapshot``), or a snapshot and the log segments after it."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator, Optional

from quorum.kafka_import.partitions import with_partition_blocks
from quorum.kafka_import.records import control_record, metadata_record
from quorum.kafka_log.batches import KafkaBatchError, read_batches
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.loader import MetadataLoader, image_from_records
from quorum.metadata.partition_block import PartitionBlock
from quorum.metadata.records import AnyRecord
from quorum.snapshot.checkpoint import checkpoint_bytes

# Kafka names a snapshot by the offset it ends before and that offset's epoch
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class KafkaFileError(ValueError):
    """The file is damaged, or not one of Kafka's metadata log files."""


def snapshot_id_of(path: Path) -> tuple[int, int]:
    """(end offset, epoch) from a Kafka snapshot's file name; (-1, -1) if it is named otherwise."""
    m = _SNAPSHOT_NAME.match(path.name)
    return (int(m.group(1)), int(m.group(2))) if m else (-1, -1)


def _values(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(offset, leader epoch, value) of each metadata record in ``data``, control records left out."""
    for batch in read_batches(data):
        if not batch.control:
            for record in batch.records:
                yield record.offset, batch.partition_leader_epoch, record.value


def _records(data: bytes, where: str) -> Iterator[tuple[int, int, AnyRecord]]:
    """(offset, leader epoch, record) of each metadata record in ``data``, control records left out."""
    try:
        for offset, epoch, value in _values(data):
            yield offset, epoch, metadata_record(value)[0]
    except (KafkaBatchError, ValueError) as e:
        raise KafkaFileError(f"{where} is damaged: {e}") from None


def _snapshot_body(data: bytes, where: str) -> Iterator[PartitionBlock | AnyRecord]:
    """What ``image_from_records`` loads from a Kafka snapshot's records: its PartitionRecords read
    straight into partitions, a topic's run at a time (quorum/kafka_import/partitions.py), the rest
    as records. Damaged bytes are a KafkaFileError here; what the image then refuses stays its own."""
    try:
        yield from with_partition_blocks((value for _, _, value in _values(data)),
                                         lambda value: metadata_record(value)[0])
    except (KafkaBatchError, ValueError) as e:
        raise KafkaFileError(f"{where} is damaged: {e}") from None


def _snapshot_image(data: bytes, where: str, provenance: Provenance) -> MetadataImage:
    return image_from_records(_snapshot_body(data, where), provenance)


def kafka_snapshot_image(path: str | Path) -> MetadataImage:
    """The image a Kafka ``.checkpoint`` snapshot holds (KafkaFileError if it is damaged)."""
    path = Path(path)
    end, epoch = snapshot_id_of(path)
    return _snapshot_image(path.read_bytes(), str(path), Provenance(end - 1, epoch))


def checkpoint_of_kafka_snapshot(data: bytes, snapshot_id, cluster_id: str) -> bytes:
    """A Kafka snapshot's bytes as sparkraft's checkpoint: the image its records hold, and the
    quorum's kraft.version and voters from its header batch, under the header a sparkraft
    snapshot of ``snapshot_id`` (offset, epoch) carries."""
    raft_records = []
    try:
        for batch in read_batches(data):
            if not batch.control:
                break
            for record in batch.records:
                frame = control_record(record.key, record.value)[0]
                if frame is not None:
                    raft_records.append(frame)
    except (KafkaBatchError, ValueError) as e:
        raise KafkaFileError(f"Kafka's snapshot {snapshot_id} is damaged: {e}") from None
    image = _snapshot_image(data, f"Kafka's snapshot {snapshot_id}",
                            Provenance(snapshot_id.offset - 1, snapshot_id.epoch))
    return checkpoint_bytes(image, {"cluster_id": cluster_id, "end_offset": snapshot_id.offset,
                                    "epoch": snapshot_id.epoch}, raft_records)


def replay_segments(paths: Iterable[str | Path], image: MetadataImage = MetadataImage.EMPTY,
                    end: Optional[int] = None) -> MetadataImage:
    """``image`` with Kafka's log segments replayed onto it in order (their transactions included),
    up to before offset ``end`` (None: all of them)."""
    loader = MetadataLoader(image)
    for path in paths:
        for offset, epoch, record in _records(Path(path).read_bytes(), str(path)):
            if end is not None and offset >= end:
                return loader.flush()
            if offset > loader.last_offset:  # a segment may begin inside what the image holds
                loader.replay(record, offset, epoch)
    return loader.flush()
