"""Refusals a controller answers itself, before any controller handles the request (a request
carrying secrets on a listener without TLS), sent to the active controller for its audit trail
(quorum/controller/audit.py): a standby's would otherwise go unrecorded. The answer never waits:
``report`` queues the entry's fields and returns; a thread of its own sends them (RecordRefusal,
as this controller's principal) to whichever controller is active, this one included. At most
QUEUED wait; past that, and when no active controller answers, they are dropped and counted
(``dropped``), as a flood of refusals must cost the node nothing."""
from __future__ import annotations

import collections
import logging
import threading
from typing import Callable, Optional

from quorum.controller import audit
from quorum.controller.api import RecordRefusalRequest

log = logging.getLogger(__name__)

QUEUED = 1000


class RefusalReports:
    def __init__(self, node_id: int, client: Callable[[], object]):
        """``client()``: a ControllerClient to the quorum (made at the first report)."""
        self.node_id, self._make_client = node_id, client
        self._client = None
        self._queue: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self.sent = self.dropped = 0

    def report(self, row, request, error, context: Optional[audit.AuditContext]) -> None:
        """``request`` (of registry row ``row``) was refused here with ``error``; ``context``: who sent it."""
        if context is None or not audit.audited(row, request, [], True):
            return
        report = RecordRefusalRequest(
            self.node_id, context.principal, context.host, context.listener, context.software,
            context.forwarded_by, audit.request_name(row, request), tuple(audit.resources(row, request)),
            tuple(audit.changes(row, request)), int(error.error.value), error.message)
        with self._lock:
            if len(self._queue) >= QUEUED:
                self.dropped += 1
                return
            self._queue.append(report)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._send, name=f"refusal-reports-{self.node_id}",
                                                daemon=True)
                self._thread.start()

    def _send(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                report = self._queue.popleft()
            try:
                if self._client is None:
                    self._client = self._make_client()
                self._client.call(report)
                self.sent += 1
            except Exception as e:  # no active controller in time: the entry is lost, and counted
                self.dropped += 1
                log.warning("Controller %d could not have its refusal of %s by %s recorded: %s", self.node_id,
                            report.request, report.principal, e)

    def close(self) -> None:
        with self._lock:
            self._queue.clear()
            thread = self._thread
        if thread is not None:
            thread.join(5)
        if self._client is not None:
            self._client.close()
