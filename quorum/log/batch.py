"""Record batches: the unit the leader appends, followers copy and disks store.

A batch holds the records one leader appended together in one epoch. Its encoded
form is the same on disk and on the wire, so a follower stores what it fetched
byte for byte and the leader serves fetches straight from its segments::

    0  crc32        u32   zlib CRC-32 of every byte after this field
    4  length       u32   bytes after this field
    8  magic        u8    1
    9  attributes   u8    bit 0: control batch (LeaderChange, snapshot header/footer)
    10 base_offset  i64   offset of the first record
    18 epoch        i32   leader epoch that appended the batch
    22 append_time  i64   milliseconds since the epoch, leader's clock
    30 count        i32   number of records
    34 records      count x (u32 length, bytes)

The CRC covers the offsets, so a flipped bit anywhere is caught; a torn tail
shows up as a length running past the end of the data.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Iterator, Sequence

MAGIC = 1
HEADER = struct.Struct(">IIBBqiqi")
HEADER_SIZE = HEADER.size  # 34
_PREFIX = struct.Struct(">II")
_LEN = struct.Struct(">I")
ATTR_CONTROL = 0x01


class CorruptBatchError(ValueError):
    """Bytes that do not decode as whole, CRC-valid batches."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A decoded batch. ``records`` are opaque bytes to the quorum."""

    base_offset: int
    epoch: int
    append_time_ms: int
    records: tuple[bytes, ...]
    control: bool = False

    @property
    def end_offset(self) -> int:
        """One past the last record's offset."""
        return self.base_offset + len(self.records)

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """What a log needs to know about an encoded batch without decoding its records."""

    position: int  # byte position of the batch inside the buffer it was parsed from
    size: int  # total encoded size
    base_offset: int
    epoch: int
    append_time_ms: int
    count: int
    control: bool

    @property
    def end_offset(self) -> int:
        return self.base_offset + self.count


def encode_batch(base_offset: int, epoch: int, append_time_ms: int, records: Sequence[bytes],
                 control: bool = False) -> bytes:
    """Encode records as one batch. Records must be non-empty."""
    if not records:
        raise ValueError("a batch needs at least one record")
    parts = []
    for r in records:
        parts.append(_LEN.pack(len(r)))
        parts.append(r)
    body = b"".join(parts)
    length = HEADER_SIZE - 8 + len(body)
    head = struct.pack(">BBqiqi", MAGIC, ATTR_CONTROL if control else 0, base_offset, epoch,
                       append_time_ms, len(records))
    crc = zlib.crc32(body, zlib.crc32(_LEN.pack(length) + head))
    return _PREFIX.pack(crc, length) + head + body


def encode(batch: Batch) -> bytes:
    return encode_batch(batch.base_offset, batch.epoch, batch.append_time_ms, batch.records, batch.control)


def scan(data: bytes | memoryview, start: int = 0, verify: bool = True) -> Iterator[BatchHeader]:
    """Yield the header of each whole batch in ``data``; raise CorruptBatchError at the first bad one.

    A caller that wants to recover a torn tail catches the error and keeps what was
    yielded before it (``valid_prefix``).
    """
    view = memoryview(data)
    pos = start
    n = len(view)
    while pos < n:
        if n - pos < HEADER_SIZE:
            raise CorruptBatchError(f"truncated batch header at byte {pos}")
        crc, length, magic, attrs, base, epoch, ts, count = HEADER.unpack_from(view, pos)
        size = 8 + length
        if magic != MAGIC:
            raise CorruptBatchError(f"bad magic {magic} at byte {pos}")
        if length < HEADER_SIZE - 8 or pos + size > n:
            raise CorruptBatchError(f"batch at byte {pos} runs past the end of the data")
        if count <= 0:
            raise CorruptBatchError(f"batch at byte {pos} has {count} records")
        if verify and zlib.crc32(view[pos + 4:pos + size]) != crc:
            raise CorruptBatchError(f"CRC mismatch in batch at byte {pos} (offset {base})")
        yield BatchHeader(pos, size, base, epoch, ts, count, bool(attrs & ATTR_CONTROL))
        pos += size


def valid_prefix(data: bytes | memoryview) -> tuple[list[BatchHeader], int]:
    """The whole valid batches at the start of ``data`` and the byte length they cover."""
    headers: list[BatchHeader] = []
    try:
        for h in scan(data):
            headers.append(h)
    except CorruptBatchError:
        pass
    end = headers[-1].position + headers[-1].size if headers else 0
    return headers, end


_RUN_RECORD_MAX = 16  # a record this small may start a run of identical ones (decoded in bulk)
_RUN_CHUNK = 1024


def decode_one(data: bytes | memoryview, header: BatchHeader) -> Batch:
    """Decode the records of a batch whose header came from :func:`scan`.

    A run of identical tiny records (a partition change block's continuations: up to a thousand
    4-byte records in a row) is recognised by comparing whole stretches of bytes and decoded as
    one shared object repeated, instead of a record at a time."""
    view = memoryview(data)
    pos = header.position + HEADER_SIZE
    end = header.position + header.size
    records: list[bytes] = []
    unpack = _LEN.unpack_from
    left = header.count
    while left > 0:
        if pos + 4 > end:
            raise CorruptBatchError(f"record lengths do not add up in batch at offset {header.base_offset}")
        (ln,) = unpack(view, pos)
        record = bytes(view[pos + 4:pos + 4 + ln])
        records.append(record)
        left -= 1
        pos += 4 + ln
        if ln <= _RUN_RECORD_MAX and left and view[pos:pos + 4 + ln] == view[pos - 4 - ln:pos]:
            frame = bytes(view[pos - 4 - ln:pos])
            size = len(frame)
            while left:
                m = min(left, _RUN_CHUNK)
                while m and view[pos:pos + m * size] != frame * m:  # the run ends in there: look closer
                    m //= 2
                if not m:
                    break
                records.extend([record] * m)
                left -= m
                pos += m * size
    if pos != end:
        raise CorruptBatchError(f"record lengths do not add up in batch at offset {header.base_offset}")
    return Batch(header.base_offset, header.epoch, header.append_time_ms, tuple(records), header.control)


def decode(data: bytes | memoryview, verify: bool = True) -> list[Batch]:
    """Decode every batch in ``data``; raise CorruptBatchError if any is bad."""
    return [decode_one(data, h) for h in scan(data, verify=verify)]
