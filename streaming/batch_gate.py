"""One micro-batch at a time, and none once the job is stopping: what the one-cluster materialiser
(streaming/materializer.py) and a fleet's job (streaming/fleet_job.py) share for a clean stop.

A stop waits for the micro-batch in flight (``refuse``), and a micro-batch that starts after it is
failed before it writes anything (StoppingError), so Spark never records it as done and replays it
at the next start: nothing is half written, and every offset lands exactly once either way.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class StoppingError(Exception):
    """A micro-batch refused because the job is stopping (it runs again at the next start)."""


class BatchGate:
    def __init__(self):
        self.lock = threading.Lock()  # held while a micro-batch runs
        self._refusing = False

    @contextlib.contextmanager
    def batch(self, batch_id: int) -> Iterator[None]:
        """Hold the gate for micro-batch ``batch_id``; StoppingError if the job is stopping."""
        with self.lock:
            if self._refusing:
                raise StoppingError(f"micro-batch {batch_id} refused: the job is stopping (it runs again at "
                                    f"the next start)")
            yield

    def refuse(self, timeout: float) -> bool:
        """From now on refuse every micro-batch, once the one running (if any) has finished; False
        if it did not finish within ``timeout`` seconds (later ones are refused all the same)."""
        finished = self.lock.acquire(timeout=timeout)
        self._refusing = True
        if finished:
            self.lock.release()
        return finished

    @property
    def busy(self) -> bool:
        """Whether a micro-batch is running now."""
        return self.lock.locked()
