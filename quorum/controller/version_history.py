"""Which metadata.version was in force where in the log: Kafka writes each record at the version
its level gives it, so the log a Kafka broker fetches is exported batch by batch at the level in
force at that batch (quorum/kafka_log/export.py). Followed as the controller replays the committed
log; before the first level it knows (a log kept from before the snapshot it started from), the
level it first knew."""
from __future__ import annotations

import bisect
import threading
from typing import Optional


class VersionHistory:
    def __init__(self) -> None:
        self._offsets: list[int] = []  # where each level took effect (the offset after its record's batch)
        self._levels: list[int] = []
        self._lock = threading.Lock()  # noted on the controller's thread, read by the Kafka listeners'

    def note(self, offset: int, level: Optional[int]) -> None:
        """``level`` is in force from ``offset`` on (cheap when it has not changed)."""
        if level is None or (self._levels and self._levels[-1] == level):
            return
        with self._lock:
            if self._offsets and offset <= self._offsets[-1]:  # a snapshot loaded again: start over from it
                del self._offsets[bisect.bisect_left(self._offsets, offset):]
                del self._levels[len(self._offsets):]
            self._offsets.append(offset)
            self._levels.append(level)

    def level_at(self, offset: int) -> int:
        """The metadata.version of the records at ``offset`` (0 before any is known)."""
        with self._lock:
            if not self._levels:
                return 0
            i = bisect.bisect_right(self._offsets, offset) - 1
            return self._levels[max(i, 0)]
