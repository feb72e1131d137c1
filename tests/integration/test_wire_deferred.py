"""The wire server's answers that come later (quorum/wire/server.py ``Deferred``): answered from
another thread, by the request's timeout, exactly once either way, and leaving nothing behind in
a reference cycle (a per-request cycle made the cyclic collector pause a busy controller for
60-80 ms every second)."""
from __future__ import annotations

import concurrent.futures
import gc
import socket
import threading

import pytest

from quorum.gen.sparkraft.v1 import raft_pb2
from quorum.node.loop_thread import LoopThread
from quorum.rpc.wire_methods import BY_NAME
from quorum.wire.frames import FrameReader, Status, encode_request
from quorum.wire.server import Deferred, WireServer

APPEND = BY_NAME["Append"]


class Handler:
    """Answers each Append later: its future is completed by ``complete`` (from a test thread),
    or never, for the timeout to answer."""

    def __init__(self):
        self.seen = 0
        self.waiting: dict[int, concurrent.futures.Future] = {}  # only until completed
        self.started = False  # whether the work has begun at once (then a timeout cannot cancel it)

    def __call__(self, conn, request):
        future = concurrent.futures.Future()
        if self.started:
            future.set_running_or_notify_cancel()
        self.waiting[self.seen] = future
        self.seen += 1
        return Deferred(future, lambda f: raft_pb2.AppendResponse(last_offset=f.result()))

    def complete(self) -> None:
        for i in list(self.waiting):
            future = self.waiting.pop(i)
            if not future.done():
                future.set_result(i)


@pytest.fixture
def served():
    loop = LoopThread("test-wire-loop")
    handler = Handler()
    server = WireServer("127.0.0.1", 0, {APPEND.number: handler}, loop, max_request_bytes=1 << 20).start()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        yield handler, sock
    finally:
        sock.close()
        server.stop()
        loop.stop()


def _request(corr: int, timeout_ms: int) -> bytes:
    return encode_request(APPEND.number, corr, timeout_ms, raft_pb2.AppendRequest(records=[b"x"]).SerializeToString())


def _answers(sock, n: int) -> dict:
    reader, answers = FrameReader(1 << 20, requests=False), {}
    while len(answers) < n:
        data = sock.recv(1 << 16)
        assert data, f"the connection closed after {len(answers)} answers"
        for frame in reader.feed(data):
            assert frame.corr not in answers, f"request {frame.corr} answered twice"
            answers[frame.corr] = frame
    return answers


def test_answers_from_another_thread_leave_no_reference_cycles(served):
    handler, sock = served
    n = 300
    gc.collect()
    gc.disable()
    try:
        sock.sendall(b"".join(_request(corr, 10_000) for corr in range(1, n + 1)))
        while handler.seen < n:  # every request reached the handler (256 at most in flight...)
            threading.Event().wait(0.01)
            handler.complete()  # ...so some are answered to let the rest be read
        handler.complete()
        answers = _answers(sock, n)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, (Deferred, concurrent.futures.Future))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert all(a.status is Status.OK for a in answers.values())
    assert sorted(raft_pb2.AppendResponse.FromString(a.body).last_offset for a in answers.values()) == list(range(n))
    assert left == [], f"{len(left)} answered requests were left in reference cycles"


def test_a_request_not_answered_in_time_gets_deadline_exceeded_once(served):
    handler, sock = served
    sock.sendall(_request(1, 50))
    answer = _answers(sock, 1)[1]
    assert answer.status is Status.DEADLINE_EXCEEDED
    assert handler.waiting[0].cancelled()  # the work is told it is not wanted any more
    sock.sendall(_request(2, 10_000))  # a late completion of the first is not answered a second time
    while handler.seen < 2:
        threading.Event().wait(0.01)
    handler.complete()
    assert list(_answers(sock, 1)) == [2]


def test_a_correlation_id_already_in_flight_is_refused(served):
    handler, sock = served
    sock.sendall(_request(7, 10_000) + _request(7, 10_000))
    refusal = _answers(sock, 1)[7]
    assert refusal.status is Status.INVALID_REQUEST and b"already in flight" in refusal.body
    handler.complete()
    answer = _answers(sock, 1)[7]
    assert answer.status is Status.OK and handler.seen == 1


def test_a_late_answer_never_goes_to_a_newer_request_of_the_same_correlation_id(served):
    handler, sock = served
    handler.started = True  # work under way is not stopped by its request's timeout
    sock.sendall(_request(5, 50))
    assert _answers(sock, 1)[5].status is Status.DEADLINE_EXCEEDED  # the first request with corr 5 expired
    first = handler.waiting.pop(0)
    sock.sendall(_request(5, 10_000))  # the id is free again: a new request takes it
    while handler.seen < 2:
        threading.Event().wait(0.01)
    first.set_result(111)  # the expired one's work ends late: its answer is not wanted any more
    handler.complete()  # the new one's answer
    answer = _answers(sock, 1)[5]
    assert answer.status is Status.OK and raft_pb2.AppendResponse.FromString(answer.body).last_offset == 1
