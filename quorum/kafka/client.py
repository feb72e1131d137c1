"""KafkaConnection: a bare, blocking Kafka-protocol connection to one broker or controller, kio's
types over one socket (TLS and a SASL/SCRAM login when its ClientSecurity says so).

Real clients (librdkafka, kafka-python, aiokafka) pick brokers themselves; what must ask one
particular node uses this: the reader of an Apache Kafka quorum's log (quorum/kafka_import/reader.py),
and tests and benchmarks that time one request or send what no client would (a bad frame, an
unknown API). It is no client library: no retries, no routing, no ApiVersions negotiation.
"""
from __future__ import annotations

import io
import socket
import struct
from typing import Any, Optional

from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseV1
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.serial import entity_reader, entity_writer

from quorum.errors import Errors, SparkraftError
from quorum.kafka import schemas
from quorum.security import scram
from quorum.security.client import ClientSecurity


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
    response_type = schemas.response_type(body_type_of_request.__api_key__, body_type_of_request.__version__)
    header_type = ResponseV1 if response_type.__flexible__ and body_type_of_request.__api_key__ != 18 else ResponseV0
    header, used = entity_reader(header_type)(payload, 0)
    response, _ = entity_reader(response_type)(payload, used)
    return header.correlation_id, response


class KafkaConnection:
    def __init__(self, host: str, port: int, timeout: float = 10.0, security: Optional[ClientSecurity] = None):
        """Connected, TLS's handshake done and SASL's login made when ``security`` asks for them;
        SparkraftError SASL_AUTHENTICATION_FAILED (Kafka's message) when the login is refused."""
        sock = socket.create_connection((host, port), timeout=timeout)
        context = security.ssl_context(alpn=None) if security is not None else None
        try:
            self.sock = context.wrap_socket(sock, server_hostname=host) if context else sock
        except BaseException:
            sock.close()
            raise
        self.correlation_id = 0
        if security is not None and security.sasl_mechanism:
            try:
                self._log_in(security)
            except BaseException:
                self.close()
                raise

    def _log_in(self, security: ClientSecurity) -> None:
        """SaslHandshake v1 then SCRAM's two SaslAuthenticate rounds (KIP-152); the server's proof
        that it holds the credential is checked too."""
        mechanism = security.sasl_mechanism
        shaken = self.request(SaslHandshakeRequest(mechanism=mechanism))
        if int(shaken.error_code) != 0:
            raise SparkraftError(Errors.UNSUPPORTED_SASL_MECHANISM, f"the server does not take {mechanism} "
                                 f"(it takes {', '.join(shaken.mechanisms) or 'none'})")
        client = scram.ClientExchange(scram.mechanism(mechanism), security.sasl_username, security.sasl_password)
        first = self.request(SaslAuthenticateRequest(auth_bytes=client.first()))
        if int(first.error_code) == 0:
            final = self.request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
        else:
            final = first
        if int(final.error_code) != 0:
            raise SparkraftError(Errors.SASL_AUTHENTICATION_FAILED,
                                 f"{mechanism} login as {security.sasl_username!r} refused: "
                                 f"{final.error_message or Errors(int(final.error_code)).name}")
        try:
            client.verify(final.auth_bytes)
        except scram.ScramError as e:
            raise SparkraftError(Errors.SASL_AUTHENTICATION_FAILED,
                                 f"the server could not prove it holds {security.sasl_username!r}'s credential: {e}")

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
            chunk = self.sock.recv(min(n - len(out), 1 << 20))
            if not chunk:
                raise ConnectionError("the other side closed the connection")
            out += chunk
        return bytes(out)

    def request(self, body: Any, timeout: Optional[float] = None) -> Any:
        """Send ``body`` (a kio request dataclass) and read its response (within ``timeout``
        seconds, else the connection's). ConnectionError on an answer to another request."""
        self.correlation_id += 1
        if timeout is not None:
            self.sock.settimeout(timeout)
        self.send_raw(encode_request(body, self.correlation_id))
        correlation_id, response = decode_response(body, self.read_frame())
        if correlation_id != self.correlation_id:
            raise ConnectionError(f"answer {correlation_id} to request {self.correlation_id}")
        return response
