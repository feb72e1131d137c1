"""The wire's frames, sans-I/O: whatever way the bytes are cut, the same frames come out; a frame
that breaks the protocol or its size limit is an error before anything is buffered."""
from __future__ import annotations

import random

import pytest

from quorum.rpc.wire_methods import BY_NAME, METHODS
from quorum.wire.frames import (
    FrameError,
    FrameReader,
    Request,
    Response,
    Status,
    encode_request,
    encode_response,
)


def _requests(n: int, rng: random.Random) -> list[Request]:
    return [Request(rng.choice(list(METHODS)), rng.randrange(2**32), rng.randrange(60_000),
                    rng.randbytes(rng.choice((0, 1, 17, 300, 70_000)))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_requests_come_out_whole_however_the_stream_is_cut(seed):
    rng = random.Random(seed)
    sent = _requests(40, rng)
    stream = b"".join(encode_request(r.method, r.corr, r.timeout_ms, r.body) for r in sent)
    reader = FrameReader(1 << 20, requests=True)
    got, at = [], 0
    while at < len(stream):
        step = rng.choice((1, 2, 7, 4096, 100_000))
        got += reader.feed(stream[at:at + step])
        at += step
    assert got == sent
    assert reader.buffered == 0


def test_responses_round_trip_with_their_status():
    sent = [Response(1, Status.OK, b"answer"), Response(2**32 - 1, Status.UNAUTHENTICATED, b"who are you"),
            Response(7, Status.DEADLINE_EXCEEDED, b"")]
    stream = b"".join(encode_response(r.corr, r.status, r.body) for r in sent)
    assert FrameReader(1024, requests=False).feed(stream) == sent


def test_a_frame_claiming_2_gib_is_refused_from_its_size_alone():
    reader = FrameReader(8 << 20, requests=True)
    with pytest.raises(FrameError, match="larger than this side accepts"):
        reader.feed((2**31).to_bytes(4, "big") + b"\x01\x04")
    assert reader.buffered < 16  # nothing of the claimed 2 GiB was waited for or kept


@pytest.mark.parametrize("stream, why", [
    ((3).to_bytes(4, "big") + b"abc", "shorter than its header"),
    (encode_request(1, 1, 0, b"")[:4] + b"\x09" + encode_request(1, 1, 0, b"")[5:], "frame version 9"),
])
def test_malformed_request_frames_are_errors(stream, why):
    with pytest.raises(FrameError, match=why):
        FrameReader(1024, requests=True).feed(stream)


def test_an_unknown_response_status_is_an_error():
    frame = bytearray(encode_response(1, Status.OK, b""))
    frame[5] = 200
    with pytest.raises(FrameError, match="unknown response status 200"):
        FrameReader(1024, requests=False).feed(bytes(frame))


def test_a_truncated_frame_waits_for_the_rest():
    frame = encode_request(BY_NAME["Fetch"].number, 5, 100, b"x" * 50)
    reader = FrameReader(1024, requests=True)
    assert reader.feed(frame[:-1]) == []
    assert reader.feed(frame[-1:]) == [Request(BY_NAME["Fetch"].number, 5, 100, b"x" * 50)]


def test_every_method_has_a_distinct_number_and_a_grpc_methods_name():
    from quorum.gen.sparkraft.v1 import controller_pb2_grpc, raft_pb2_grpc

    assert len({m.number for m in METHODS.values()}) == len(METHODS)
    served = {name for servicer in (raft_pb2_grpc.RaftServicer, controller_pb2_grpc.ControllerServicer)
              for name in dir(servicer) if not name.startswith("_")}
    # Hello and Forward are the wire's own (gRPC says the same in its handshake and metadata)
    assert {m.name for m in METHODS.values() if m.name not in ("Hello", "Forward")} <= served
