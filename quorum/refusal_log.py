"""Refusals a client or a peer causes, logged at most once per client and kind every EVERY_S seconds.

A misconfigured broker retries every few milliseconds and a hostile client can send thousands of
bad requests a second; a log line each (a traceback, once) let 1,000 requests write 840 KB in 0.7 s.
Each refusal is still counted; the next line a client's kind of refusal gets says how many were
not logged since."""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

EVERY_S = 30.0
MAX_KEYS = 10_000  # clients x kinds remembered; past it, the oldest are forgotten


class RefusalLog:
    def __init__(self, logger: logging.Logger, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.logger, self.every_s, self._clock = logger, every_s, clock
        self._last: dict[tuple, list] = {}  # (client, kind) -> [logged at, refusals not logged since]
        self._lock = threading.Lock()
        self.refused = 0

    def note(self, client: str, kind: str, level: int, message: str, *args) -> bool:
        """Count one refusal of ``client`` (its address) of ``kind``; log ``message % args`` unless
        this client's refusals of this kind were logged less than ``every_s`` ago. Whether it was."""
        now = self._clock()
        key = (client, kind)
        with self._lock:
            self.refused += 1
            seen = self._last.get(key)
            if seen is not None and now - seen[0] < self.every_s:
                seen[1] += 1
                return False
            quiet = seen[1] if seen is not None else 0
            self._last.pop(key, None)
            self._last[key] = [now, 0]  # re-inserted: the dict stays in order of last logging
            while len(self._last) > MAX_KEYS:
                del self._last[next(iter(self._last))]
        if quiet:
            message += f" ({quiet} more like it from this client not logged)"
        self.logger.log(level, message, *args)
        return True
