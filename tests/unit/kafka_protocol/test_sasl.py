"""SASL/SCRAM on a Kafka listener, over a real socket: a client logs in before anything else, a
failed login closes the connection after its answer, the login's user is the connection's principal
(forwarded with its writes), a re-login must be the same user, and an expired login ends the
connection at its next request. Real clients (librdkafka) log in against broker processes in
tests/integration/test_kafka_clients_secure.py."""
from __future__ import annotations

import socket
import time

import pytest
from kafka_helpers import InMemoryController, broker_with_orders
from kio.index import load_request_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from quorum.controller import api
from quorum.errors import Errors
from quorum.kafka.client import KafkaConnection
from quorum.kafka.codec import materialize
from quorum.kafka.server import KafkaListener
from quorum.security.node_security import NodeSecurity
from quorum.security.sasl_server import SaslLogin
from quorum.security.scram import MECHANISMS, ClientExchange
from sparkraft.commands.scram_specs import upsertion

METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


class RecordingController(InMemoryController):
    """Remembers whom each forwarded request was for."""

    def __init__(self, c):
        super().__init__(c)
        self.on_behalf_of = []

    def call_committed(self, request, timeout=None, on_behalf_of=None, context=None):
        self.on_behalf_of.append(on_behalf_of)
        return super().call_committed(request, timeout, on_behalf_of)


@pytest.fixture
def sasl_listener():
    def start(lifetime_ms: int = 60_000):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        c, ctx = broker_with_orders(port)
        for user, password in (("alice", "alice-secret"), ("bob", "bob-secret")):
            c.request(api.AlterUserScramCredentialsRequest(upsertions=(
                upsertion(MECHANISMS["SCRAM-SHA-512"], user, {"password": password}),)))
        ctx.controller = RecordingController(c)
        ctx.security = NodeSecurity(sasl_login=SaslLogin(lifetime_ms))
        listener = KafkaListener(ctx, "127.0.0.1", port).start()
        started.append(listener)
        return port, ctx
    started = []
    yield start
    for listener in started:
        listener.stop()


def login(conn: KafkaConnection, user: str, password: str, mechanism: str = "SCRAM-SHA-512"):
    """The handshake and the two-step exchange; the last SaslAuthenticate answer."""
    shaken = conn.request(SaslHandshakeRequest(mechanism=mechanism))
    assert int(shaken.error_code) == 0 and mechanism in shaken.mechanisms
    client = ClientExchange(MECHANISMS[mechanism], user, password)
    first = conn.request(SaslAuthenticateRequest(auth_bytes=client.first()))
    assert int(first.error_code) == 0
    final = conn.request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
    if int(final.error_code) == 0:
        client.verify(final.auth_bytes)  # the broker proved it holds alice's credential
    return final


def test_nothing_but_api_versions_and_a_login_is_served_before_the_login(sasl_listener):
    port, _ctx = sasl_listener()
    with KafkaConnection("127.0.0.1", port) as conn:
        keys = {k.api_key for k in conn.request(ApiVersionsRequest(client_software_name="t",
                                                                   client_software_version="1")).api_keys}
        assert {17, 36} <= keys
        with pytest.raises((ConnectionError, OSError, EOFError)):
            conn.request(METADATA)
        assert conn.closed_by_peer()


def test_a_login_makes_the_connection_the_users_and_its_writes_are_forwarded_as_the_user(sasl_listener):
    port, ctx = sasl_listener(lifetime_ms=60_000)
    with KafkaConnection("127.0.0.1", port) as conn:
        final = login(conn, "alice", "alice-secret")
        assert final.session_lifetime.total_seconds() == 60
        assert [t.name for t in conn.request(METADATA).topics] == ["orders"]
        created = conn.request(materialize(load_request_schema(19, 7), {"topics": [{
            "name": "alices", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
            "timeout": 10_000, "validate_only": False}))
        assert int(created.topics[0].error_code) == 0
        assert ctx.controller.on_behalf_of == [("User:alice", "127.0.0.1")]
        assert int(login(conn, "alice", "alice-secret").error_code) == 0  # a re-login, as the same user
        refused = login(conn, "bob", "bob-secret")  # ... not as another
        assert int(refused.error_code) == Errors.SASL_AUTHENTICATION_FAILED
        assert conn.closed_by_peer()


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "alice-secret")])
def test_a_failed_login_is_answered_alike_for_a_wrong_password_and_an_unknown_user_then_closed(
        sasl_listener, user, password):
    port, _ctx = sasl_listener()
    with KafkaConnection("127.0.0.1", port) as conn:
        final = login(conn, user, password)
        assert int(final.error_code) == Errors.SASL_AUTHENTICATION_FAILED
        assert final.error_message == "Authentication failed during authentication due to invalid credentials " \
                                      "with SASL mechanism SCRAM-SHA-512"
        assert conn.closed_by_peer()


def test_an_unknown_mechanism_or_a_step_out_of_order_closes_the_connection(sasl_listener):
    port, _ctx = sasl_listener()
    with KafkaConnection("127.0.0.1", port) as conn:
        shaken = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert int(shaken.error_code) == Errors.UNSUPPORTED_SASL_MECHANISM
        assert set(shaken.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert conn.closed_by_peer()
    with KafkaConnection("127.0.0.1", port) as conn:
        early = conn.request(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc"))
        assert int(early.error_code) == Errors.ILLEGAL_SASL_STATE
        assert conn.closed_by_peer()
    with KafkaConnection("127.0.0.1", port) as conn:
        conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        garbage = conn.request(SaslAuthenticateRequest(auth_bytes=b"\xff\x00 not scram"))
        assert int(garbage.error_code) == Errors.SASL_AUTHENTICATION_FAILED
        assert conn.closed_by_peer()


def test_an_expired_login_ends_the_connection_at_its_next_request(sasl_listener):
    port, _ctx = sasl_listener(lifetime_ms=200)
    with KafkaConnection("127.0.0.1", port) as conn:
        assert int(login(conn, "alice", "alice-secret").error_code) == 0
        time.sleep(0.5)
        with pytest.raises((ConnectionError, OSError, EOFError)):
            conn.request(METADATA)
        assert conn.closed_by_peer()

