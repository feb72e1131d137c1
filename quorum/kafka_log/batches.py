"""Apache Kafka's record batch, magic v2: what its log segments and ``.checkpoint`` snapshots are made
of, and what its Fetch and FetchSnapshot answers carry.

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32 | records

The CRC is CRC-32C over everything from the attributes on. Attributes: bits 0-2 the compression
codec of the records section (none, gzip, snappy, lz4, zstd), bit 4 transactional, bit 5 control.
Each record: varint length, int8 attributes, varlong timestamp delta, varint offset delta, varint
key length and key, varint value length and value (-1: null), varint header count and headers.
"""
from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from typing import Iterator, Optional

import crc32c

from quorum.kafka_log.wire import Reader

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
CRC_FROM = 21  # the CRC covers the batch from its attributes on
MAGIC_V2 = 2
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
MAX_BATCH_BYTES = 256 << 20  # a length field past this is damage, not a batch to buffer


class KafkaBatchError(ValueError):
    """Bytes that are not (or no longer) a valid record batch v2."""


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    offset: int
    timestamp: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: tuple[tuple[str, Optional[bytes]], ...]


@dataclass(frozen=True, slots=True)
class KafkaBatch:
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    crc: int
    compression: str
    transactional: bool
    control: bool
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    position: int  # where the batch starts in its file or buffer
    size: int
    records: tuple[KafkaRecord, ...]


def looks_like_kafka(data: bytes) -> bool:
    """Whether ``data`` starts with a whole record batch v2 whose CRC-32C holds."""
    if len(data) < HEADER_SIZE or data[16] != MAGIC_V2:
        return False
    size = struct.unpack_from(">i", data, 8)[0] + 12
    return HEADER_SIZE <= size <= len(data) and crc32c.crc32c(data[CRC_FROM:size]) == struct.unpack_from(">I", data, 17)[0]


def batch_size(data: bytes | memoryview, position: int = 0) -> Optional[int]:
    """The size of the batch at ``position``, or None if its header is not all there."""
    if len(data) - position < 12:
        return None
    size = struct.unpack_from(">i", data, position + 8)[0] + 12
    if size < HEADER_SIZE or size > MAX_BATCH_BYTES:
        raise KafkaBatchError(f"a batch length of {size - 12} bytes at byte {position}")
    return size


def decode_batch(data: bytes | memoryview, position: int = 0) -> KafkaBatch:
    """The whole batch at ``position`` (KafkaBatchError if it is torn, damaged or not magic v2)."""
    size = batch_size(data, position)
    if size is None or position + size > len(data):
        raise KafkaBatchError(f"a torn batch at byte {position}")
    (base_offset, _length, leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts, producer_id,
     producer_epoch, base_sequence, count) = HEADER.unpack_from(data, position)
    if magic != MAGIC_V2:
        raise KafkaBatchError(f"magic {magic} at byte {position}: only record batch v2 is read")
    body = bytes(data[position + CRC_FROM:position + size])
    if crc32c.crc32c(body) != crc:
        raise KafkaBatchError(f"the batch at byte {position} (offset {base_offset}) fails its CRC-32C")
    codec = CODECS.get(attributes & 0x07)
    if codec is None:
        raise KafkaBatchError(f"unknown compression codec {attributes & 0x07} at offset {base_offset}")
    records_bytes = _decompress(codec, body[HEADER_SIZE - CRC_FROM:])
    r = Reader(records_bytes)
    records = []
    for _ in range(count):
        length = r.varint()
        end = r.pos + length
        if length < 0 or end > r.end:
            raise KafkaBatchError(f"a record of {length} bytes runs past its batch at offset {base_offset}")
        rec = Reader(records_bytes, r.pos, end)
        rec.int8()  # attributes: unused
        ts_delta = rec.varint()
        offset_delta = rec.varint()
        key = _nullable(rec)
        value = _nullable(rec)
        headers = tuple((_nullable(rec).decode(), _nullable(rec)) for _ in range(rec.varint()))
        records.append(KafkaRecord(base_offset + offset_delta, base_ts + ts_delta, key, value, headers))
        r.pos = end
    return KafkaBatch(base_offset, base_offset + last_delta, leader_epoch, crc, codec, bool(attributes & 0x10),
                      bool(attributes & 0x20), base_ts, max_ts, producer_id, producer_epoch, base_sequence, position,
                      size, tuple(records))


def read_batches(data: bytes | memoryview, position: int = 0) -> Iterator[KafkaBatch]:
    """Every whole batch from ``position`` on; KafkaBatchError at the first that is not."""
    while position < len(data):
        batch = decode_batch(data, position)
        yield batch
        position += batch.size


def _nullable(r: Reader) -> Optional[bytes]:
    n = r.varint()
    return None if n < 0 else r.take(n)


def _decompress(codec: str, data: bytes) -> bytes:
    if codec == "none":
        return data
    try:
        if codec == "gzip":
            return gzip.decompress(data)
        import cramjam  # snappy, lz4 and zstd, as Kafka's producers write them

        if codec == "snappy":
            return _xerial_snappy(data, cramjam)
        if codec == "lz4":
            return bytes(cramjam.lz4.decompress(data))
        return bytes(cramjam.zstd.decompress(data))
    except KafkaBatchError:
        raise
    except Exception as e:
        raise KafkaBatchError(f"records that do not decompress as {codec}: {e}") from None


_XERIAL = b"\x82SNAPPY\x00"


def _xerial_snappy(data: bytes, cramjam) -> bytes:
    """Kafka's snappy is snappy-java's framing (a header, then length-prefixed raw blocks) or raw."""
    if not data.startswith(_XERIAL):
        return bytes(cramjam.snappy.decompress_raw(data))
    out, pos = bytearray(), 16
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        out += cramjam.snappy.decompress_raw(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    return bytes(out)
