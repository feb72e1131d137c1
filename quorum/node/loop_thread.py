"""An asyncio event loop on a thread of its own: a node's one event-loop thread, which runs the
Raft core (raft_node.py) and the wire's connections (quorum/wire/) side by side, so a request
read from a socket reaches the core, and its answer the socket, without a thread hand-off."""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Callable


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (its transports and TLS are written in C), else
    asyncio's own; SPARKRAFT_EVENT_LOOP=asyncio picks asyncio's (to measure one against the other)."""
    if os.environ.get("SPARKRAFT_EVENT_LOOP", "uvloop") == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


class LoopThread:
    def __init__(self, name: str):
        self.loop = new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def in_loop(self) -> bool:
        """True on the loop's own thread."""
        return threading.get_ident() == self._thread.ident

    def call_soon(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` on the loop, from any thread (after what is already scheduled)."""
        if self.in_loop():
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def run(self, coroutine, timeout: float):
        """Run ``coroutine`` on the loop and wait for its result (never from the loop's own thread)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """End the loop (what is scheduled runs first) and its thread."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if not self.in_loop():
                self._thread.join(timeout)
        if not self._thread.is_alive() and not self.loop.is_closed():
            self.loop.close()
