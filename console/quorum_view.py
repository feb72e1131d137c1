"""The quorum as its leader describes it, for the console's overview (when given the controllers).

A controller that is down, or a quorum without a leader, is something the overview shows, not an
error of the page: :meth:`QuorumView.describe` answers the failure's one line instead.
"""
from __future__ import annotations

import threading
import time
from typing import Optional

from quorum.rpc.quorum_status import replication_rows, status_fields
from quorum.rpc.raft_client import RaftClient

DESCRIBE_TIMEOUT_S = 3.0


class QuorumView:
    def __init__(self, bootstrap: str, security=None):
        self._client = RaftClient(bootstrap, timeout=DESCRIBE_TIMEOUT_S, security=security)
        self._lock = threading.Lock()  # one describe at a time: pages asking together share its answer
        self._last: Optional[tuple[float, dict]] = None

    def describe(self, max_age_s: float = 0.5) -> dict:
        """``status`` and ``replication`` as ``quorum describe`` prints them, or ``error``."""
        with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < max_age_s:
                return self._last[1]
            try:
                info = self._client.describe_quorum()
                answer = {"status": status_fields(info), "replication": replication_rows(info)}
            except Exception as e:  # the page says why; the console goes on
                answer = {"error": " ".join(str(e).split()) or type(e).__name__}
            self._last = (time.monotonic(), answer)
            return answer

    def close(self) -> None:
        self._client.close()
