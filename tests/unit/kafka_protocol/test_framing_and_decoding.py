"""The Kafka listener's framing and request decoding, sans I/O: sizes out of bounds are refused
before anything is buffered, and no bytes whatever make the decoder fail other than with its two
refusals (fuzzed with hypothesis, bounded)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

from quorum.kafka.apis import SUPPORTED
from quorum.kafka.client import encode_request
from quorum.kafka.codec import MalformedRequest, UnsupportedRequest, decode_request
from quorum.kafka.framing import FrameError, FrameReader, frame


def test_frames_split_and_joined_anyhow_come_out_whole_and_in_order():
    payloads = [b"a" * 10, b"b" * 300, b"c" * 12]
    stream = b"".join(frame(p) for p in payloads)
    for cut in range(1, 40):
        reader, out = FrameReader(), []
        for i in range(0, len(stream), cut):
            out += reader.feed(stream[i:i + cut])
        assert out == payloads and not reader.partial


@pytest.mark.parametrize("size", [2**31 - 1, 100 * 1024 * 1024 + 1, -1, 0, 9])
def test_a_size_out_of_bounds_is_refused_before_its_bytes_are_held(size):
    reader = FrameReader()
    with pytest.raises(FrameError):
        reader.feed(struct.pack(">i", size) + b"x" * 50)


def _metadata_request(correlation_id: int = 1) -> bytes:
    body = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
                           allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return encode_request(body, correlation_id)[4:]  # the payload, without its size


def test_a_request_decodes_with_its_header():
    r = decode_request(_metadata_request(7), SUPPORTED)
    assert (r.api_key, r.api_version, r.correlation_id, r.client_id) == (3, 12, 7, "tests")
    assert r.body.topics[0].name == "orders"


def test_unknown_api_keys_and_versions_are_refused_with_the_correlation_id():
    for key, version in ((0, 0), (1, 2), (999, 0), (3, 99), (-1, 0)):  # Produce v0, Fetch v2: older than served
        with pytest.raises(UnsupportedRequest) as refused:
            decode_request(struct.pack(">hhih", key, version, 42, -1), SUPPORTED)
        assert refused.value.correlation_id == 42


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_are_refused_cleanly(data):
    try:
        decode_request(data, SUPPORTED)
    except (MalformedRequest, UnsupportedRequest):
        pass


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_valid_request_with_bytes_changed_or_cut_is_refused_cleanly(data):
    payload = bytearray(_metadata_request())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(payload) - 1))
        payload[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    try:
        decode_request(bytes(payload[:cut]), SUPPORTED)
    except (MalformedRequest, UnsupportedRequest):
        pass
