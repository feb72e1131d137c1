"""The streaming job's hold on the log (quorum/controller/log_holds.py): after each micro-batch the
materialiser committed (the tables hold everything before its end offset), the job tells the
controllers so, and their retention never deletes what the job has not read and kept. That is how log cleanup
never loses audit entries the ``audit`` table does not have yet (docs/use/audit.md).

Off the query's path: a commit hands the offset to a thread of its own and returns; while one call
is out, later offsets replace each other (only the newest matters). A quorum that cannot be
reached is logged, and the next commit tries again."""
from __future__ import annotations

import logging
import threading
from typing import Optional

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 10.0


class LogHolder:
    """``quorum``: how to reach the controllers (``bootstrap``, ``security``)."""

    def __init__(self, quorum, holder: str):
        self.quorum, self.holder = quorum, holder
        self._lock = threading.Lock()
        self._wanted: Optional[int] = None  # the newest offset not yet sent
        self._thread: Optional[threading.Thread] = None
        self._client = None
        self.held: Optional[int] = None  # the offset the controllers last said they hold from
        self._failing = False

    def committed(self, offset: int) -> None:
        """The tables hold everything before ``offset``: hold the log from there (in the background)."""
        with self._lock:
            self._wanted = offset
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._send, name="log-hold", daemon=True)
                self._thread.start()

    def _send(self) -> None:
        from quorum.controller.api import HoldLogRequest

        while True:
            with self._lock:
                offset, self._wanted = self._wanted, None
                if offset is None:
                    return
            try:
                if self._client is None:
                    from quorum.rpc.controller_client import ControllerClient

                    self._client = ControllerClient(self.quorum.bootstrap, timeout=CALL_TIMEOUT_S,
                                                    security=self.quorum.security)
                self.held = self._client.call(HoldLogRequest(self.holder, offset)).offset
                if self._failing:
                    log.info("The log is held for %s again (from offset %d)", self.holder, self.held)
                self._failing = False
            except Exception as e:  # the next commit tries again; retention keeps the older hold meanwhile
                if not self._failing:
                    log.warning("Could not hold the log from offset %d for %s: %s", offset, self.holder, e)
                self._failing = True

    def close(self) -> None:
        """Waits for the hold in flight (the job's last batch's), then closes the client."""
        thread = self._thread
        if thread is not None:
            thread.join(CALL_TIMEOUT_S)
        if self._client is not None:
            self._client.close()
