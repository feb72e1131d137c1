"""The checkpoint format: a metadata image as one file, for controller snapshots (``.checkpoint``
files, quorum/snapshot/files.py), a broker's metadata cache (quorum/broker/cache.py) and snapshots
sent over FetchSnapshot.

The file is batches of quorum/log/batch.py with a CRC each: a SNAPSHOT_HEADER control record
first, a SNAPSHOT_FOOTER (the record count) last, the image's records in between, each topic's
partitions as one PARTITION_BLOCK. ``sparkraft dump-log`` reads it as it reads a log segment. The
header carries the format version, the image's provenance (offset, epoch) and what the writer adds
(cluster id, next offset, snapshot id). A file that fails a CRC, misses its footer or does not
rebuild an image raises CheckpointError: it is never half-loaded.
"""
from __future__ import annotations

import os
from itertools import chain
from pathlib import Path
from typing import Sequence

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.log import control_records
from quorum.log.batch import CorruptBatchError, decode, decode_one, encode_batch, scan
from quorum.log.durable import write_atomically
from quorum.metadata.errors import ReplayError
from quorum.metadata.image import MetadataImage, Provenance
from quorum.metadata.loader import image_from_records
from quorum.metadata.partition_block import decode_block, encode_block, is_block
from quorum.metadata.records import HEADER, SENSITIVE_FIELDS, decode_record, encode_record, redacted

RECORDS_PER_BATCH = 2000
FORMAT_VERSION = 1  # 1: partitions as one PARTITION_BLOCK per topic (0: one PartitionRecord each)
READABLE_VERSIONS = (0, 1)


class CheckpointError(ValueError):
    """The file cannot be used: damaged, incomplete, of an unknown format version (or, for a
    broker's cache, of another cluster)."""


def write_checkpoint(path: str | os.PathLike, image: MetadataImage, header: dict,
                     raft_records: Sequence[bytes] = (), failpoint: str = "") -> int:
    """Write ``image`` to ``path`` in the checkpoint format, atomically; the file's size.

    ``header`` goes into the SnapshotHeader record beside the format version and the image's
    provenance; ``raft_records`` (the quorum's KRAFT_VERSION and KRAFT_VOTERS at the snapshot's end,
    quorum/raft/voter_history.py) follow it in the same first batch, where the Raft core reads them."""
    data = checkpoint_bytes(image, header, raft_records)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data, failpoint)
    return len(data)


def checkpoint_bytes(image: MetadataImage, header: dict, raft_records: Sequence[bytes] = ()) -> bytes:
    """``image`` in the checkpoint format (see ``write_checkpoint``)."""
    head = control_records.encode_control(control_records.SNAPSHOT_HEADER, {
        "version": FORMAT_VERSION, "image_offset": image.provenance.offset,
        "image_epoch": image.provenance.epoch, **header})
    parts = [encode_batch(0, 0, 0, [head, *raft_records], control=True)]
    records = checkpoint_body(image)
    for i in range(0, len(records), RECORDS_PER_BATCH):
        parts.append(encode_batch(1 + i, 0, 0, records[i:i + RECORDS_PER_BATCH]))
    footer = control_records.encode_control(control_records.SNAPSHOT_FOOTER, {"records": len(records)})
    parts.append(encode_batch(1 + len(records), 0, 0, [footer], control=True))
    return b"".join(parts)


def read_checkpoint(path: str | os.PathLike) -> tuple[dict, MetadataImage]:
    """(header data, image) of a checkpoint-format file; CheckpointError if it is not one or is damaged,
    FileNotFoundError if it does not exist."""
    path = Path(path)
    return decode_checkpoint(path.read_bytes(), str(path))


def decode_checkpoint(data: bytes, path: str = "the checkpoint") -> tuple[dict, MetadataImage]:
    """``read_checkpoint`` over bytes already in memory (a snapshot downloaded with FetchSnapshot)."""
    try:
        batches = decode(data)
    except CorruptBatchError as e:
        raise CheckpointError(f"{path} is damaged or not a checkpoint: {e}") from None
    if len(batches) < 2 or not batches[0].control or not batches[-1].control:
        raise CheckpointError(f"{path} is incomplete or not a checkpoint (no header or footer)")
    header = control_records.decode_control(batches[0].records[0])
    footer = control_records.decode_control(batches[-1].records[0])
    if header.type != control_records.SNAPSHOT_HEADER or footer.type != control_records.SNAPSHOT_FOOTER:
        raise CheckpointError(f"{path} is not a checkpoint (its first and last records are not a snapshot "
                         f"header and footer)")
    if header.data.get("version") not in READABLE_VERSIONS:
        raise CheckpointError(f"{path} has format version {header.data.get('version')}, this reader reads "
                         f"{FORMAT_VERSION}")
    count = sum(len(b.records) for b in batches[1:-1])
    if count != footer.data.get("records"):
        raise CheckpointError(f"{path} holds {count} records, its footer says {footer.data.get('records')}")
    try:
        image = image_from_records(((decode_block(raw) if is_block(raw) else decode_record(raw))
                                    for b in batches[1:-1] for raw in b.records),
                                   Provenance(header.data.get("image_offset", -1), header.data.get("image_epoch", -1)))
    except (ValueError, ReplayError) as e:
        raise CheckpointError(f"{path} holds records that do not rebuild an image: {e}") from None
    return header.data, image


def checkpoint_body(image: MetadataImage) -> list[bytes]:
    """The records of a checkpoint body: ``image.records()`` in the same order, but each topic's
    partitions as one PARTITION_BLOCK (quorum/metadata/partition_block.py), which loads ~4x faster;
    a topic whose partitions have log directories (Kafka's brokers', KIP-858) as PartitionRecords."""
    out = [encode_record(r) for r in chain(image.features.records(), image.cluster.records())]
    for name in image.topics.topic_names():
        topic = image.topics.topic_by_name(name)
        out.append(encode_record(pb.TopicRecord(name=topic.name, topic_id=topic.topic_id)))
        if not len(topic.partitions):
            continue
        partitions = dict(topic.partitions.items())
        if any(p.directories for p in partitions.values()):  # a block has no directories: records do
            out.extend(encode_record(p.to_record(topic.topic_id, pid)) for pid, p in sorted(partitions.items()))
        else:
            out.append(encode_block(topic.topic_id, partitions))
    out.extend(encode_record(r) for r in chain(image.configs.records(), image.client_quotas.records(),
                                               image.producer_ids.records(), image.acls.records(),
                                               image.scram.records(), image.audit.records()))
    return out


_SENSITIVE_TYPE_IDS = {int(t) for t in SENSITIVE_FIELDS}


def _sensitive(raw: bytes) -> bool:
    return len(raw) >= HEADER.size and HEADER.unpack_from(raw)[0] in _SENSITIVE_TYPE_IDS and not is_block(raw)


def _redacted_frame(raw: bytes) -> bytes:
    """``raw`` with its credentials cleared; ``raw`` itself when it holds none (most config records)."""
    if not _sensitive(raw):
        return raw
    record = decode_record(raw)
    safe = redacted(record)
    return raw if safe is record else encode_record(safe)


def redact_checkpoint(data: bytes) -> bytes:
    """The checkpoint with credentials cleared (``records.redacted``) for places that must not hold
    them; the very same bytes when it has none. Only batches holding such records are rewritten."""
    parts, changed, last = [], False, 0
    for h in scan(data):
        if h.control:
            continue
        batch = decode_one(data, h)
        records = [_redacted_frame(raw) for raw in batch.records]
        if all(new is old for new, old in zip(records, batch.records)):
            continue
        parts += [data[last:h.position], encode_batch(h.base_offset, h.epoch, h.append_time_ms, records)]
        last, changed = h.position + h.size, True
    return b"".join(parts) + data[last:] if changed else data
