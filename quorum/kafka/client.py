"""KafkaConnection: a bare, blocking Kafka-protocol connection to one broker, kio's types over one
socket, for the tests and benchmarks.

Real clients (librdkafka, kafka-python, aiokafka) pick brokers themselves; what must ask one
particular broker, time one request, or send what no client would (a bad frame, an unknown API)
uses this. It is no client library: no retries, no routing, no ApiVersions negotiation.
"""
from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseV1
from kio.serial import entity_reader, entity_writer


def encode_request(body: Any, correlation_id: int) -> bytes:
    """``body`` (a kio request dataclass) framed with its header, as a client sends it."""
    buffer = io.BytesIO()
    header_type = HeaderV2 if body.__flexible__ else HeaderV1
    entity_writer(header_type)(buffer, header_type(request_api_key=body.__api_key__,
                                                   request_api_version=body.__version__,
                                                   correlation_id=correlation_id, client_id="tests"))
    entity_writer(type(body))(buffer, body)
    payload = buffer.getvalue()
    return struct.pack(">i", len(payload)) + payload


def decode_response(body_type_of_request: Any, payload: bytes) -> Any:
    """A response payload (without its size) to the request type ``body_type_of_request``."""
    response_type = load_response_schema(body_type_of_request.__api_key__, body_type_of_request.__version__)
    header_type = ResponseV1 if response_type.__flexible__ and body_type_of_request.__api_key__ != 18 else ResponseV0
    header, used = entity_reader(header_type)(payload, 0)
    response, _ = entity_reader(response_type)(payload, used)
    return header.correlation_id, response


class KafkaConnection:
    def __init__(self, host: str, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "KafkaConnection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exactly(4))
        return self._exactly(size)

    def closed_by_peer(self) -> bool:
        """True if the broker closed the connection (reads end), False if it is still open."""
        try:
            return self.sock.recv(1) == b""
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def _exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    def request(self, body: Any) -> Any:
        """Send ``body`` (a kio request dataclass) and read its response."""
        self.correlation_id += 1
        self.send_raw(encode_request(body, self.correlation_id))
        correlation_id, response = decode_response(body, self.read_frame())
        assert correlation_id == self.correlation_id
        return response
