"""Kafka's framing, sans I/O: a 4-byte big-endian size, then that many bytes.

:class:`FrameReader` is fed whatever the socket gave and hands back whole frames. It never holds
more than one frame's bytes: a size above ``max_frame_bytes`` (Kafka's
``socket.request.max.bytes``, 100 MiB by default) or below the smallest request is refused with
:class:`FrameError` before any of the frame is buffered, so a client claiming 2 GiB costs nothing.
"""
from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
# api key (2) + api version (2) + correlation id (4) + client id length (2): the smallest header
MIN_REQUEST_BYTES = 10
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024


class FrameError(Exception):
    """The peer broke the framing: the connection cannot go on."""


class FrameReader:
    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._need = -1  # the size of the frame being read, -1 while reading its size

    @property
    def buffered(self) -> int:
        """Bytes held for the frame being read."""
        return len(self._buffer)

    @property
    def partial(self) -> bool:
        """Some of a frame has arrived, not all of it (a slow client's clock runs)."""
        return bool(self._buffer) or self._need >= 0

    def feed(self, data: bytes) -> list[bytes]:
        """The frames ``data`` completes, in order; FrameError on a size out of bounds."""
        self._buffer += data
        frames = []
        while True:
            if self._need < 0:
                if len(self._buffer) < SIZE.size:
                    return frames
                (size,) = SIZE.unpack_from(self._buffer)
                if size < MIN_REQUEST_BYTES or size > self.max_frame_bytes:
                    raise FrameError(f"a frame of {size} bytes (allowed {MIN_REQUEST_BYTES}.."
                                     f"{self.max_frame_bytes})")
                del self._buffer[:SIZE.size]
                self._need = size
            if len(self._buffer) < self._need:
                return frames
            frames.append(bytes(self._buffer[:self._need]))
            del self._buffer[:self._need]
            self._need = -1


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
