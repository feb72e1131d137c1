"""Kafka's primitive encodings, read from bytes (:class:`Reader`) and written (:class:`Writer`):
big-endian integers, unsigned and zig-zag varints, flexible versions' compact strings, bytes and
arrays, UUIDs and tagged-field sections.

Bounds are checked as data is read: a length past the end of the buffer is a ValueError (the
record is then reported as undecodable), never an over-read or a huge allocation.
"""
from __future__ import annotations

import base64
import struct
from typing import Callable, Optional, TypeVar

T = TypeVar("T")
_I16, _I32, _I64, _U16, _F64 = (struct.Struct(f) for f in (">h", ">i", ">q", ">H", ">d"))
_INT32S = [struct.Struct(f">{n}i") for n in range(16)]  # the usual lengths of a broker id list


def uuid_text(raw: bytes) -> str:
    """Kafka's text form of a UUID: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class Reader:
    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | memoryview, pos: int = 0, end: Optional[int] = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ValueError(f"{n} bytes wanted at {self.pos}, {self.end - self.pos} left")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def _fixed(self, s: struct.Struct):
        if self.pos + s.size > self.end:
            raise ValueError(f"{s.size} bytes wanted at {self.pos}, {self.end - self.pos} left")
        (value,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return value

    def int8(self) -> int:
        b = self.take(1)[0]
        return b - 256 if b > 127 else b

    def bool(self) -> bool:
        return self.take(1)[0] != 0

    def int16(self) -> int:
        return self._fixed(_I16)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def float64(self) -> float:
        return self._fixed(_F64)

    def uvarint(self) -> int:
        pos = self.pos
        if pos < self.end:  # most are one byte: lengths, counts, tags
            b = self.buf[pos]
            if b < 0x80:
                self.pos = pos + 1
                return b
        shift = value = 0
        while True:
            if self.pos >= self.end:
                raise ValueError("a varint runs past the end")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError("a varint longer than 10 bytes")

    def varint(self) -> int:
        """A zig-zag signed varint (record fields: lengths, deltas)."""
        u = self.uvarint()
        return (u >> 1) ^ -(u & 1)

    def uuid(self) -> str:
        return uuid_text(self.take(16))

    def compact_string(self) -> Optional[str]:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode("utf-8")

    def compact_bytes(self) -> Optional[bytes]:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def compact_array(self, item: Callable[["Reader"], T]) -> Optional[list[T]]:
        n = self.uvarint()
        if n == 0:
            return None
        if n - 1 > self.end - self.pos:  # every item takes at least a byte
            raise ValueError(f"an array of {n - 1} items in {self.end - self.pos} bytes")
        return [item(self) for _ in range(n - 1)]

    def int32_array(self) -> Optional[list[int]]:
        """A compact array of int32 (broker ids: replicas, ISR), in one unpack."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        size = 4 * n
        if self.pos + size > self.end:
            raise ValueError(f"an array of {n} int32 in {self.end - self.pos} bytes")
        s = _INT32S[n] if n < len(_INT32S) else struct.Struct(f">{n}i")
        values = list(s.unpack_from(self.buf, self.pos))
        self.pos += size
        return values

    def uuid_array(self) -> Optional[list[str]]:
        """A compact array of UUIDs (a partition's log directories), as Kafka's text."""
        n = self.uvarint() - 1
        if n < 0:
            return None
        start, end = self.pos, self.pos + 16 * n
        if end > self.end:
            raise ValueError(f"an array of {n} UUIDs in {self.end - self.pos} bytes")
        buf = self.buf
        self.pos = end
        return [base64.urlsafe_b64encode(buf[p:p + 16])[:22].decode() for p in range(start, end, 16)]

    def tagged_fields(self) -> dict[int, "Reader"]:
        """A tagged-field section: tag -> a Reader over that field's bytes."""
        out = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if self.pos + size > self.end:
                raise ValueError(f"tagged field {tag} of {size} bytes runs past the end")
            out[tag] = Reader(self.buf, self.pos, self.pos + size)
            self.pos += size
        return out


def uuid_bytes(text: str) -> bytes:
    """The 16 bytes of a UUID in Kafka's text form."""
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka UUID")
    return raw


class Writer:
    """Appends Kafka's encodings to ``buf``: what the generated writers of gen/records.py call."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, value: int) -> None:
        self.buf.append(value & 0xFF)

    def bool(self, value: bool) -> None:
        self.buf.append(1 if value else 0)

    def int16(self, value: int) -> None:
        self.buf += _I16.pack(value)

    def uint16(self, value: int) -> None:
        self.buf += _U16.pack(value)

    def int32(self, value: int) -> None:
        self.buf += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.buf += _I64.pack(value)

    def float64(self, value: float) -> None:
        self.buf += _F64.pack(value)

    def uvarint(self, value: int) -> None:
        buf = self.buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def varint(self, value: int) -> None:
        """A zig-zag signed varint (64-bit: record lengths and deltas)."""
        self.uvarint((value << 1) ^ (value >> 63))

    def uuid(self, text: str) -> None:
        self.buf += uuid_bytes(text)

    def compact_string(self, value: Optional[str]) -> None:
        if value is None:
            self.buf.append(0)
            return
        raw = value.encode("utf-8")
        self.uvarint(len(raw) + 1)
        self.buf += raw

    def compact_bytes(self, value: Optional[bytes]) -> None:
        if value is None:
            self.buf.append(0)
            return
        self.uvarint(len(value) + 1)
        self.buf += value

    def compact_array(self, items: Optional[list], item: Callable[["Writer", object], None]) -> None:
        if items is None:
            self.buf.append(0)
            return
        self.uvarint(len(items) + 1)
        for x in items:
            item(self, x)

    def int32_array(self, items: Optional[list[int]]) -> None:
        if items is None:
            self.buf.append(0)
            return
        n = len(items)
        self.uvarint(n + 1)
        self.buf += (_INT32S[n] if n < len(_INT32S) else struct.Struct(f">{n}i")).pack(*items)

    def uuid_array(self, items: Optional[list[str]]) -> None:
        if items is None:
            self.buf.append(0)
            return
        self.uvarint(len(items) + 1)
        for text in items:
            self.buf += uuid_bytes(text)

    def tagged_fields(self, fields: list[tuple[int, bytes]]) -> None:
        """A tagged-field section of (tag, the field's bytes), in ascending tag order."""
        self.uvarint(len(fields))
        for tag, raw in fields:
            self.uvarint(tag)
            self.uvarint(len(raw))
            self.buf += raw
