"""The job's watchdog: a streaming query that stops making progress while the log moves on is
noticed, and recovered within a bound the job states.

Progress is any of: a new progress event of the query (Spark reports one per micro-batch, and one
every 10 s while there is no data), a micro-batch running in the materialiser (a long one is work,
not a stall), the tables' offset moving. The quorum's high watermark is read every few seconds
beside the query (``log_end``, also the lag metric). When nothing has progressed for
``stall_after_s`` while the log holds records the tables do not, the query is stalled: the job says
so in one warning, counts it (``sparkraft_materializer_stalls_total``) and ends the Python processes
serving the query's source (the planning side Spark starts per query, which a lost connection
can leave waiting: seen once in seven runs after a second SIGKILL of it). Spark then fails the
query, and the job starts it again from its checkpoint as for any transient failure. A query that
does not end within ``stall_after_s`` more raises :class:`QueryStalled`: the job exits 1, for its
service manager to start it again. So a stall costs at most twice ``stall_after_s`` plus a restart.

A micro-batch that hangs inside the materialiser is not judged here: the source's reads and the
Delta commits carry their own deadlines.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Callable, Optional

from quorum.metrics.processes import cmdline, descendants

log = logging.getLogger("streaming.job")

STALL_AFTER_S = 60.0  # --stall-timeout's default
LOG_END_POLL_S = 5.0
CHECK_EVERY_S = 1.0
SOURCE_RUNNER = "python_streaming_source_runner"  # PySpark's process serving a Python source's planning side


class QueryStalled(RuntimeError):
    """The stalled query did not end when its source's processes were ended."""

    one_line = True


class Watchdog:
    def __init__(self, materializer, log_end: Callable[[], int], stall_after_s: float = STALL_AFTER_S,
                 end_source: Optional[Callable[[], list[int]]] = None):
        """``log_end()``: the quorum's high watermark (raises when it cannot be read); ``end_source()``:
        SIGKILL the query's source processes, their pids (default: this process's descendants
        running PySpark's source runner)."""
        self.materializer, self.stall_after_s = materializer, stall_after_s
        self.end_source = end_source or end_source_runners
        self.stalls = 0
        self.log_end: Optional[int] = None  # the high watermark last read (None: not yet, or unreachable)
        self._read_log_end = log_end
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="watchdog-log-end", daemon=True)
        self._checked = 0.0
        self._seen: tuple = ()
        self._since = time.monotonic()  # of the last progress
        self._ended_at: Optional[float] = None  # when the stalled query's source was ended

    def start(self) -> "Watchdog":
        self._poller.start()
        return self

    def close(self) -> None:
        self._stop.set()

    @property
    def lag(self) -> Optional[int]:
        """Records committed in the log that the tables do not hold yet."""
        return None if self.log_end is None else max(0, self.log_end - self.materializer.next_offset)

    def _poll(self) -> None:
        while True:
            try:
                self.log_end = self._read_log_end()
            except Exception as e:  # noqa: BLE001 - an unreachable quorum is the source's to report, not a stall
                log.debug("The watchdog could not read the log's end: %s", e)
                self.log_end = None
            if self._stop.wait(LOG_END_POLL_S):
                return

    def watch(self, query) -> None:
        """A new query: its progress counts from now."""
        self._seen, self._since, self._ended_at = self._observe(query), time.monotonic(), None

    def _observe(self, query) -> tuple:
        progress = query.lastProgress or {}
        return progress.get("batchId"), progress.get("timestamp"), self.materializer.next_offset

    def check(self, query, now: Optional[float] = None) -> None:
        """Called from the job's loop while ``query`` runs; acts on a stall (see the module's doc)."""
        now = time.monotonic() if now is None else now
        if now - self._checked < CHECK_EVERY_S:
            return
        self._checked = now
        seen, lag = self._observe(query), self.lag
        if seen != self._seen or self.materializer.in_batch or not lag:
            self._seen, self._since, self._ended_at = seen, now, None  # progress, or nothing to do
            return
        if now - self._since < self.stall_after_s:
            return
        if self._ended_at is None:
            self.stalls += 1
            pids = self.end_source()
            log.warning("The streaming query made no progress for %.0fs while the log holds %d records the tables "
                        "do not (up to offset %d); ending its source's processes %s so that it fails and starts "
                        "again from its checkpoint", now - self._since, lag, self.log_end - 1, pids or "(none found)")
            self._ended_at = now
        elif now - self._ended_at >= self.stall_after_s:
            raise QueryStalled(f"the streaming query stalled (no progress for {now - self._since:.0f}s with "
                               f"{lag} records to apply) and did not end when its source's processes were ended: "
                               f"the job exits for its service manager to start it again")


def source_runners(root: int) -> list[int]:
    """The processes under ``root`` that run PySpark's source runner (Linux's /proc; elsewhere none)."""
    return [p for p in descendants(root) if SOURCE_RUNNER in cmdline(p)]


def end_source_runners(root: Optional[int] = None) -> list[int]:
    """SIGKILL the processes under ``root`` (this one) that run PySpark's source runner; their pids."""
    pids = source_runners(os.getpid() if root is None else root)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
