"""sparkraft's framed protocol, sans-I/O: bytes in, frames out, and frames to bytes (h11's style).

A frame is a 4-byte big-endian size (of what follows) and then:

    request:   version u8 | method u8 | correlation id u32 | timeout ms u32 | protobuf request
    response:  version u8 | status u8 | correlation id u32 | protobuf response, or UTF-8 detail

One connection carries any number of requests in flight; responses come back in any order and
are matched by correlation id. A status other than OK is the transport's own refusal (the
request was not carried out, or its outcome is unknown: see Status); a request the node handled
and refused answers OK with the refusal inside the protobuf response, as over gRPC.

Sizes are checked before anything is buffered: a frame larger than the reader's limit is a
FrameError, never an allocation.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

VERSION = 1
SIZE = struct.Struct(">I")
REQUEST_HEAD = struct.Struct(">BBII")  # version, method, correlation id, timeout ms
RESPONSE_HEAD = struct.Struct(">BBI")  # version, status, correlation id
MAX_CORRELATION_ID = 2**32 - 1


class Status(enum.IntEnum):
    """A response's transport status (gRPC's codes, where one fits)."""

    OK = 0
    UNAVAILABLE = 1  # the node is not running (starting, stopping): not carried out, retry
    UNAUTHENTICATED = 2  # the connection does not speak for the voter the request claims
    INVALID_REQUEST = 3  # unknown method, or a body that does not decode: not carried out
    DEADLINE_EXCEEDED = 4  # no answer within the request's timeout: its outcome is unknown
    RESOURCE_EXHAUSTED = 5  # larger than this side accepts
    INTERNAL = 6  # a bug on the serving side: the outcome is unknown


class FrameError(ValueError):
    """The byte stream is not this protocol (or breaks its limits): close the connection."""


@dataclass(frozen=True, slots=True)
class Request:
    method: int
    corr: int
    timeout_ms: int
    body: bytes


@dataclass(frozen=True, slots=True)
class Response:
    corr: int
    status: Status
    body: bytes


def encode_request(method: int, corr: int, timeout_ms: int, body: bytes) -> bytes:
    return SIZE.pack(REQUEST_HEAD.size + len(body)) + REQUEST_HEAD.pack(VERSION, method, corr, timeout_ms) + body


def encode_response(corr: int, status: Status, body: bytes) -> bytes:
    return SIZE.pack(RESPONSE_HEAD.size + len(body)) + RESPONSE_HEAD.pack(VERSION, int(status), corr) + body


class FrameReader:
    """Cuts a byte stream into frames. ``feed(data)`` returns the frames completed by ``data``;
    FrameError if a frame is malformed or larger than ``max_frame_bytes`` (the stream is then
    unusable). ``requests=True`` reads requests (a server), else responses (a client)."""

    def __init__(self, max_frame_bytes: int, requests: bool):
        self.max_frame_bytes = max_frame_bytes
        self._head = REQUEST_HEAD if requests else RESPONSE_HEAD
        self._requests = requests
        self._buffer = bytearray()
        self._start = 0  # where the unread part of the buffer begins

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> list:
        buffer = self._buffer
        buffer += data
        frames = []
        start, end = self._start, len(buffer)
        head = self._head
        while end - start >= SIZE.size:
            (size,) = SIZE.unpack_from(buffer, start)
            if size < head.size:
                raise FrameError(f"a frame of {size} bytes is shorter than its header ({head.size})")
            if size > self.max_frame_bytes:
                raise FrameError(f"a frame of {size:,} bytes is larger than this side accepts "
                                 f"({self.max_frame_bytes:,})")
            if end - start < SIZE.size + size:
                break
            at = start + SIZE.size
            fields = head.unpack_from(buffer, at)
            if fields[0] != VERSION:
                raise FrameError(f"frame version {fields[0]} (this side speaks {VERSION})")
            body = bytes(buffer[at + head.size:at + size])
            if self._requests:
                frames.append(Request(fields[1], fields[2], fields[3], body))
            else:
                try:
                    status = Status(fields[1])
                except ValueError:
                    raise FrameError(f"unknown response status {fields[1]}") from None
                frames.append(Response(fields[2], status, body))
            start = at + size
        if start == end:
            buffer.clear()
            start = 0
        elif start > 65536 and start * 2 > end:
            del buffer[:start]
            start = 0
        self._start = start
        return frames
