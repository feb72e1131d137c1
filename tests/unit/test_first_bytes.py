"""Telling a controller port's protocols apart from their first bytes: real ClientHellos made by
Python's ssl (as the wire's clients and Kafka's clients in Python make them), gRPC's preface, the
frames of the wire and of Kafka's protocol as their own encoders write them."""
from __future__ import annotations

import ssl

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from quorum.kafka.client import encode_request
from quorum.wire.first_bytes import (
    HTTP2_PREFACE,
    NEED_MORE,
    WIRE_ALPN,
    Protocol,
    Unknown,
    alpn_offered,
    classify,
)
from quorum.wire.frames import encode_request as encode_wire_request


def client_hello(alpn=None) -> bytes:
    """The first record a TLS client sends, from a real handshake's first flight."""
    context = ssl.create_default_context()
    if alpn:
        context.set_alpn_protocols(alpn)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="controller.example")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_tls_is_routed_by_the_alpn_its_client_hello_offers():
    assert classify(client_hello(["h2"]), tls_listener=True) == Protocol.GRPC
    assert classify(client_hello(["grpc-exp", "h2"]), tls_listener=True) == Protocol.GRPC
    assert classify(client_hello([WIRE_ALPN]), tls_listener=True) == Protocol.WIRE
    assert classify(client_hello(), tls_listener=True) == Protocol.KAFKA
    assert alpn_offered(client_hello(["h2", WIRE_ALPN])[5:]) == ["h2", WIRE_ALPN]


def test_a_client_hello_not_all_arrived_asks_for_more():
    hello = client_hello(["h2"])
    for cut in (1, 4, 5, 60, len(hello) - 1):
        assert classify(hello[:cut], tls_listener=True) is NEED_MORE


def test_plaintext_protocols_are_told_apart():
    wire = encode_wire_request(7, 1, 1000, b"\x08\x01")
    kafka = encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 5)
    assert classify(wire, tls_listener=False) == Protocol.WIRE
    assert classify(kafka, tls_listener=False) == Protocol.KAFKA
    assert classify(HTTP2_PREFACE, tls_listener=False) == Protocol.GRPC
    assert classify(b"PRI", tls_listener=False) is NEED_MORE
    assert classify(kafka[:4], tls_listener=False) is NEED_MORE


def test_the_wrong_security_protocol_and_junk_get_one_line():
    assert isinstance(classify(client_hello(), tls_listener=False), Unknown)
    assert "in the clear on a TLS listener" in classify(HTTP2_PREFACE, tls_listener=True).why
    junk = classify(b"GET / HTTP/1.1\r\n", tls_listener=False)
    assert isinstance(junk, Unknown) and "\n" not in junk.why
    assert isinstance(classify(b"\x16\x03\x01\xff\xff" + b"\0" * 10, tls_listener=True), Unknown)  # a 64 KiB record
    assert isinstance(classify(b"\x16\x03\x01\x00\x05" + b"\x02\x00\x00\x01\x00", tls_listener=True), Unknown)
