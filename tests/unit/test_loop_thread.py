"""The node's event loop (quorum/node/loop_thread.py): uvloop's where installed, asyncio's on request."""
from __future__ import annotations

import asyncio

import pytest

from quorum.node.loop_thread import LoopThread, new_event_loop


def test_the_node_loop_is_uvloop_where_installed_and_asyncio_on_request(monkeypatch):
    uvloop = pytest.importorskip("uvloop")
    loop = new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
    monkeypatch.setenv("SPARKRAFT_EVENT_LOOP", "asyncio")
    loop = new_event_loop()
    try:
        assert not isinstance(loop, uvloop.Loop) and isinstance(loop, asyncio.AbstractEventLoop)
    finally:
        loop.close()


def test_a_loop_thread_runs_calls_from_other_threads_and_stops():
    thread = LoopThread("test-loop")
    try:
        assert not thread.in_loop()

        async def where():
            return thread.in_loop()
        assert thread.run(where(), 5) is True
        done = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "ok"), thread.loop).result(5)
        assert done == "ok"
    finally:
        thread.stop()
    assert thread.loop.is_closed()
