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
# A batch's records, decompressed, are at most this many bytes: eight times the largest batch
# Kafka's controllers write (8 MiB). A 1 MB gzip of 1 GiB of zeros, or a 525 KB zstd that claims
# 4 GiB, is refused as it decompresses, before it is all in memory (it used to take the process).
MAX_RECORDS_BYTES = 64 << 20
MAX_RECORDS_PER_BATCH = 200_000  # a record takes at least 7 bytes; a batch of more is not read
MIN_RECORD_BYTES = 7  # length, attributes, timestamp and offset deltas, key, value, header count


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
    if not 0 <= count <= MAX_RECORDS_PER_BATCH:
        raise KafkaBatchError(f"a batch claiming {count} records at byte {position} (offset {base_offset}): "
                              f"at most {MAX_RECORDS_PER_BATCH} are read")
    records_bytes = _decompress(codec, body[HEADER_SIZE - CRC_FROM:], position)
    if count * MIN_RECORD_BYTES > len(records_bytes):
        raise KafkaBatchError(f"a batch claiming {count} records in {len(records_bytes)} bytes at byte {position} "
                              f"(offset {base_offset}): a record takes at least {MIN_RECORD_BYTES}")
    buf, pos, records = records_bytes, 0, []
    for _ in range(count):  # a snapshot's millions of records: one-byte varints read inline
        length, pos = _zigzag(buf, pos, len(buf))
        end = pos + length
        if length < 0 or end > len(buf):
            raise KafkaBatchError(f"a record of {length} bytes runs past its batch at offset {base_offset}")
        if pos >= end:
            raise ValueError("a record without its attributes")
        ts_delta, p = _zigzag(buf, pos + 1, end)  # after the attributes (unused)
        offset_delta, p = _zigzag(buf, p, end)
        key, p = _nullable_at(buf, p, end)
        value, p = _nullable_at(buf, p, end)
        count_headers, p = _zigzag(buf, p, end)
        headers = []
        for _ in range(count_headers):
            name, p = _nullable_at(buf, p, end)
            header, p = _nullable_at(buf, p, end)
            if name is None:
                raise ValueError("a record header without a name")
            headers.append((name.decode(), header))
        records.append(KafkaRecord(base_offset + offset_delta, base_ts + ts_delta, key, value, tuple(headers)))
        pos = end
    return KafkaBatch(base_offset, base_offset + last_delta, leader_epoch, crc, codec, bool(attributes & 0x10),
                      bool(attributes & 0x20), base_ts, max_ts, producer_id, producer_epoch, base_sequence, position,
                      size, tuple(records))


def read_batches(data: bytes | memoryview, position: int = 0) -> Iterator[KafkaBatch]:
    """Every whole batch from ``position`` on; KafkaBatchError at the first that is not."""
    while position < len(data):
        batch = decode_batch(data, position)
        yield batch
        position += batch.size


def _zigzag(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` (read no further than ``end``) and the position after it."""
    if pos < end:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    r = Reader(buf, pos, end)
    return r.varint(), r.pos


def _nullable_at(buf: bytes, pos: int, end: int) -> tuple[Optional[bytes], int]:
    """A record's length-prefixed key, value or header part (None: length -1) and the position after it."""
    n, pos = _zigzag(buf, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise ValueError(f"{n} bytes wanted at {pos}, {end - pos} left")
    return buf[pos:pos + n], pos + n


def _decompress(codec: str, data: bytes, position: int, limit: int = MAX_RECORDS_BYTES) -> bytes:
    """The records section of the batch at byte ``position``, decompressed to at most ``limit``
    bytes (KafkaBatchError past it, or for bytes that do not decompress)."""
    if codec == "none":
        return data
    try:
        if codec == "gzip":
            return _gunzip(data, limit, position)
        import cramjam  # snappy, lz4 and zstd, as Kafka's producers write them

        if codec == "snappy" and data.startswith(_XERIAL):
            return _xerial_snappy(data, cramjam, limit, position)
        into = {"snappy": cramjam.snappy.decompress_raw_into, "lz4": cramjam.lz4.decompress_into,
                "zstd": cramjam.zstd.decompress_into}[codec]
        return _bounded(lambda buffer: into(data, buffer), len(data), limit, codec, position)
    except KafkaBatchError:
        raise
    except Exception as e:
        raise KafkaBatchError(f"records that do not decompress as {codec} at byte {position}: {e}") from None


def _too_big(codec: str, limit: int, position: int) -> KafkaBatchError:
    return KafkaBatchError(f"records that decompress ({codec}) to more than {limit} bytes at byte {position}: "
                           f"refused (a batch's records are at most {limit} bytes)")


def _bounded(decompress_into, compressed: int, limit: int, codec: str, position: int) -> bytes:
    """``decompress_into(buffer)`` into a buffer that grows (x8) until the output fits, never past
    ``limit`` + 1 bytes: cramjam stops at the buffer's end instead of allocating what the data says."""
    size = min(limit + 1, max(64 << 10, 8 * compressed))
    while True:
        buffer = bytearray(size)
        try:
            n = decompress_into(buffer)
        except Exception as e:
            if "buffer" not in str(e):  # damage, not a full buffer
                raise
            if size > limit:
                raise _too_big(codec, limit, position) from None
            size = min(limit + 1, size * 8)
            continue
        if n > limit:
            raise _too_big(codec, limit, position)
        return bytes(memoryview(buffer)[:n])


def _gunzip(data: bytes, limit: int, position: int) -> bytes:
    """gzip (one member or several), decompressed a bounded piece at a time."""
    import zlib

    out, rest = bytearray(), data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = rest
        while chunk:
            out += d.decompress(chunk, limit + 1 - len(out))
            if len(out) > limit:
                raise _too_big("gzip", limit, position)
            chunk = d.unconsumed_tail
        if not d.eof:
            raise KafkaBatchError(f"records that do not decompress as gzip at byte {position}: a truncated stream")
        rest = d.unused_data
    return bytes(out)


_XERIAL = b"\x82SNAPPY\x00"


def _xerial_snappy(data: bytes, cramjam, limit: int, position: int) -> bytes:
    """Kafka's snappy is snappy-java's framing (a header, then length-prefixed raw blocks) or raw."""
    out, pos = bytearray(), 16
    while pos < len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        block = data[pos + 4:pos + 4 + n]
        out += _bounded(lambda buffer: cramjam.snappy.decompress_raw_into(block, buffer), len(block),
                        limit - len(out), "snappy", position)
        pos += 4 + n
    return bytes(out)
