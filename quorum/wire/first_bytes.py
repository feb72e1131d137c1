"""Which protocol a connection speaks, from its first bytes (sans-I/O): what lets one controller
port carry the Raft quorum, sparkraft's wire and gRPC clients, and Kafka's protocol, as one
Apache Kafka controller listener does.

- gRPC in the clear opens with HTTP/2's connection preface, ``PRI * HTTP/2.0``;
- the wire and Kafka's protocol both open with a 4-byte frame size, then the wire's version byte
  (1) or the high byte of Kafka's API key (0: no API key reaches 256);
- TLS opens with a handshake record holding the ClientHello, read before any decryption: gRPC
  offers ALPN ``h2``, sparkraft's wire clients offer ``sparkraft-wire`` (WIRE_ALPN), and Kafka's
  clients offer none. The TLS session stays end to end with the server that gets the connection,
  so client certificates are verified where they always were.

:func:`classify` says which, NEED_MORE (look again when more has arrived), or why none.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Optional, Union

WIRE_ALPN = "sparkraft-wire"
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
TLS_HANDSHAKE = 0x16
CLIENT_HELLO = 1
ALPN_EXTENSION = 16
MAX_TLS_RECORD = 16384 + 2048  # a TLSPlaintext record's largest fragment, with slack for TLS 1.2 padding
FIRST_BYTES_WANTED = 5  # enough to tell the wire from Kafka, and to read a TLS record's header
WIRE_VERSION = 1  # quorum/wire/frames.py's VERSION: the byte after the wire's frame size


class Protocol(enum.Enum):
    GRPC = "gRPC"
    WIRE = "sparkraft's wire"
    KAFKA = "Kafka's protocol"


@dataclass(frozen=True, slots=True)
class Unknown:
    """Bytes no protocol of this port begins with: ``why``, in one line."""

    why: str


NEED_MORE = None
Classified = Union[Protocol, Unknown, None]


def classify(head: bytes, tls_listener: bool) -> Classified:
    """The protocol of a connection whose first bytes are ``head`` (as many as have arrived), on a
    listener that does (``tls_listener``) or does not serve TLS; NEED_MORE if ``head`` is too short."""
    if not head:
        return NEED_MORE
    if head[0] == TLS_HANDSHAKE:
        if not tls_listener:
            return Unknown("a TLS handshake on a listener without TLS (its security protocol is PLAINTEXT)")
        return _classify_tls(head)
    if tls_listener:
        return Unknown("bytes in the clear on a TLS listener (its security protocol is SSL)")
    if HTTP2_PREFACE.startswith(head[:len(HTTP2_PREFACE)]):
        return Protocol.GRPC if len(head) >= 4 else NEED_MORE
    if len(head) < FIRST_BYTES_WANTED:
        return NEED_MORE
    if head[4] == 0:
        return Protocol.KAFKA
    if head[4] == WIRE_VERSION:
        return Protocol.WIRE
    return Unknown(f"the first bytes {head[:8].hex()} begin none of gRPC, sparkraft's wire, Kafka's protocol")


def _classify_tls(head: bytes) -> Classified:
    if len(head) < 5:
        return NEED_MORE
    length = struct.unpack_from(">H", head, 3)[0]
    if length > MAX_TLS_RECORD:
        return Unknown(f"a TLS record of {length} bytes (at most {MAX_TLS_RECORD})")
    if len(head) < 5 + length:
        return NEED_MORE
    protocols = alpn_offered(head[5:5 + length])
    if protocols is None:
        return Unknown("a TLS handshake whose first record is not a ClientHello")
    if "h2" in protocols:
        return Protocol.GRPC
    if WIRE_ALPN in protocols:
        return Protocol.WIRE
    return Protocol.KAFKA


def alpn_offered(hello: bytes) -> Optional[list[str]]:
    """The ALPN protocol names a ClientHello handshake message offers ([] for none), or None if
    ``hello`` is not a whole ClientHello (a ClientHello split over several records is not
    supported: clients send it in one)."""
    try:
        if hello[0] != CLIENT_HELLO:
            return None
        end = 4 + int.from_bytes(hello[1:4], "big")
        if end > len(hello):
            return None
        at = 4 + 2 + 32  # legacy version, random
        at += 1 + hello[at]  # session id
        at += 2 + int.from_bytes(hello[at:at + 2], "big")  # cipher suites
        at += 1 + hello[at]  # compression methods
        if at == end:
            return []  # no extensions
        ext_end = at + 2 + int.from_bytes(hello[at:at + 2], "big")
        at += 2
        while at + 4 <= min(ext_end, end):
            kind = int.from_bytes(hello[at:at + 2], "big")
            size = int.from_bytes(hello[at + 2:at + 4], "big")
            body = hello[at + 4:at + 4 + size]
            if len(body) != size:
                return None
            if kind == ALPN_EXTENSION:
                return _alpn_names(body)
            at += 4 + size
        return []
    except IndexError:
        return None


def _alpn_names(body: bytes) -> list[str]:
    names, at = [], 2  # the list's 2-byte length first
    while at < len(body):
        size = body[at]
        names.append(body[at + 1:at + 1 + size].decode("ascii", "replace"))
        at += 1 + size
    return names
