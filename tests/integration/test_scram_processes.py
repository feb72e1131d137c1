"""SCRAM users against real ``sparkraft controller start`` processes: an SSL listener without client
certificates (people log in with a password), the StandardAuthorizer on, ``User:admin`` a super user
created by ``storage format --add-scram``. Every refusal is one CLI line with Kafka's error name, and
passwords, salts, keys and tokens reach no log, no dump-log output and no file beside the log.
"""
from __future__ import annotations

import json
import subprocess
import time

import grpc
import pytest
from conftest import LiveBrokers, free_ports, sparkraft_cmd, wait_for
from pki import MAPPING_RULES, Pki
from test_security_processes import cli, ok, refused, topics

from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2, controller_pb2_grpc
from quorum.rpc.controller_client import ControllerClient
from quorum.rpc.sasl_login import ScramLogin
from quorum.security.client import ClientSecurity
from quorum.security.scram import MECHANISMS, ClientExchange

pytestmark = pytest.mark.slow

ADMIN_SECRET, ALICE_SECRET = "admin-secret,with]odd=chars", "alice-secret-1"
REAUTH_MS = 3000


def _formatted(controller_processes, tmp_path, voters=(1, 2, 3), **extra: str):
    """Three controllers with SSL listeners, the StandardAuthorizer, and ``User:admin`` (a super
    user, SCRAM-SHA-512) in their bootstrap metadata; formatted, not started. ``extra``: more
    properties for each."""
    pki = Pki(tmp_path / "pki")
    cp = controller_processes(voters=voters, per_node=lambda i: {**extra,
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.location": str(pki.keystore(f"controller-{i}")),
        "ssl.truststore.location": str(pki.truststore),
        "ssl.principal.mapping.rules": MAPPING_RULES,
        "authorizer.class.name": "StandardAuthorizer",
        "super.users": "User:admin",
        "connections.max.reauth.ms": str(REAUTH_MS)})
    cp.pki = pki
    mutual = extra.get("ssl.client.auth") == "required"  # then every client shows a certificate too
    cp.admin = pki.client_config("admin-sasl", protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username="admin",
                                 password=ADMIN_SECRET, keystore=pki.keystore("admin-device") if mutual else None)
    cp.security = ClientSecurity.from_file(str(cp.admin))
    cp.format_dynamic({i: ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={ADMIN_SECRET}]"]
                       for i in cp.voters})
    return cp


@pytest.fixture
def scram(controller_processes, tmp_path):
    yield from running(_formatted(controller_processes, tmp_path))


def running(cp):
    """Start ``_formatted``'s controllers, with one broker, until the test ends."""
    cp.start()
    cp.wait_leader(timeout=30)
    # one broker, registering as the admin user (a super user), so topics can be placed
    client = ControllerClient(cp.bootstrap(), timeout=30, security=cp.security)
    brokers = LiveBrokers(client, cp.cluster_id, brokers=((101, None),), port_base=free_ports(1)[0])
    try:
        brokers.wait_unfenced()
        yield cp
    finally:
        brokers.close()
        client.close()


def user_config(cp, name: str, password: str, mechanism: str = "SCRAM-SHA-512"):
    return cp.pki.client_config(f"{name}-{abs(hash(password))}", protocol="SASL_SSL", mechanism=mechanism,
                                username=name, password=password)


def test_scram_users_log_in_and_are_authorized_by_their_principal(scram):
    cp = scram
    bootstrap_file = cp.log_dir(1) / "bootstrap.checkpoint"
    assert bootstrap_file.stat().st_mode & 0o077 == 0 and ADMIN_SECRET.encode() not in bootstrap_file.read_bytes()
    ok(cp, "topics", "create", "--topic", "orders", "--partitions", "1", "--replication-factor", "1")
    # a wrong password, and an unknown user, get the same one line and change nothing
    for name, password in (("admin", "guess"), ("mallory", "x")):
        line = refused(cp, "topics", "create", "--topic", "evil", "--partitions", "1", "--replication-factor", "1",
                       config=user_config(cp, name, password), error="SASL_AUTHENTICATION_FAILED")
        assert "invalid credentials" in line
    # setting a password over a connection without TLS is refused before anything is sent
    plain = cp.pki.root / "plain.properties"
    plain.write_text("security.protocol=PLAINTEXT\n")
    refused(cp, "configs", "alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
            "SCRAM-SHA-512=[password=x]", config=plain, error="INVALID_REQUEST")
    ok(cp, "configs", "alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
       f"SCRAM-SHA-512=[password={ALICE_SECRET}],SCRAM-SHA-256=[iterations=8192,password={ALICE_SECRET}]")
    alice = user_config(cp, "alice", ALICE_SECRET)
    # alice is authenticated but has no ACLs: refused by the authorizer, as User:alice
    line = refused(cp, "topics", "create", "--topic", "alice-1", "--partitions", "1", "--replication-factor", "1",
                   config=alice, error="TOPIC_AUTHORIZATION_FAILED")
    assert "User:alice" in line
    ok(cp, "acls", "--add", "--allow-principal", "User:alice", "--operation", "CREATE", "--topic", "alice-",
       "--resource-pattern-type", "PREFIXED")
    ok(cp, "topics", "create", "--topic", "alice-1", "--partitions", "1", "--replication-factor", "1", config=alice)
    # her SHA-256 credential works too; describing users shows mechanisms and iterations only
    ok(cp, "topics", "create", "--topic", "alice-2", "--partitions", "1", "--replication-factor", "1",
       config=user_config(cp, "alice", ALICE_SECRET, "SCRAM-SHA-256"))
    rows = json.loads(ok(cp, "configs", "describe", "--entity-type", "users", "--json"))
    assert sorted((r["user"], r["name"], r["value"]) for r in rows) == [
        ("admin", "SCRAM-SHA-512", "iterations=4096"), ("alice", "SCRAM-SHA-256", "iterations=8192"),
        ("alice", "SCRAM-SHA-512", "iterations=4096")]
    text = ok(cp, "configs", "describe", "--entity-type", "users", "--entity-name", "alice")
    assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in text
    refused(cp, "configs", "describe", "--entity-type", "users", "--entity-name", "nobody", config=cp.admin,
            error="RESOURCE_NOT_FOUND")
    # alice may not manage users (ALTER on the cluster)
    refused(cp, "configs", "alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
            "SCRAM-SHA-512=[password=b]", config=alice, error="CLUSTER_AUTHORIZATION_FAILED")
    # a new password: the old one stops working at once, the new one works
    ok(cp, "configs", "alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
       "SCRAM-SHA-512=[password=alice-secret-2]", "--delete-config", "SCRAM-SHA-256")
    # (each controller stops taking the old one when it replays the change, as Kafka's brokers do)
    wait_for(lambda: cli(cp, "topics", "list", config=alice).returncode == 1, 20, "the old password refused")
    refused(cp, "topics", "list", config=alice, error="SASL_AUTHENTICATION_FAILED")
    ok(cp, "topics", "list", config=user_config(cp, "alice", "alice-secret-2"))
    assert topics(cp) == ["alice-1", "alice-2", "orders"]

    # no password or token in any controller's output; dump-log shows credentials redacted
    for i in cp.voters:
        output = cp.output(i).read_text(errors="replace")
        assert ADMIN_SECRET not in output and ALICE_SECRET not in output and "srt1." not in output
    wait_for(lambda: b"alice" in b"".join(p.read_bytes() for p in cp.partition_dir(1).glob("*.log")), 20,
             "alice's credentials in controller 1's log")
    result = subprocess.run(sparkraft_cmd("dump-log", "--files", f"{cp.partition_dir(1)},{bootstrap_file}"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    credentials = [r for r in map(json.loads, result.stdout.splitlines()) if r["type"] == "USER_SCRAM_CREDENTIAL_RECORD"]
    assert {c["data"]["name"] for c in credentials} == {"admin", "alice"} and len(credentials) >= 4
    for c in credentials:
        assert c["data"]["salt"] == c["data"]["stored_key"] == c["data"]["server_key"] == "(redacted)"


def test_tokens_expire_are_renewed_and_belong_to_one_server(scram):
    cp = scram
    security = ClientSecurity.from_file(str(cp.admin))
    # a long-lived client renews its token before it expires, and after the server restarts
    with ControllerClient(cp.bootstrap(), timeout=30, security=security) as client:
        client.create_topic("t1", 1, 1)
        time.sleep(REAUTH_MS / 1000 + 0.5)
        client.create_topic("t2", 1, 1)
        leader = cp.wait_leader().leader_id
        cp.kill(leader)
        cp.start([leader])
        cp.wait_leader(timeout=30)
        client.create_topic("t3", 1, 1)
    # a token by itself: accepted by its server until it expires, by no other server
    first, second = (i for i in cp.voters if i != leader)  # both were up all along
    target = cp.bootstrap([first])
    with grpc.secure_channel(target, security.channel_credentials()) as channel:
        login = ScramLogin(security)
        metadata = login.metadata(target, channel, 10)
        stub = controller_pb2_grpc.ControllerStub(channel)
        assert stub.ListTopics(controller_pb2.ListTopicsRequest(), metadata=metadata, timeout=10).error == 0
        with grpc.secure_channel(cp.bootstrap([second]), security.channel_credentials()) as other:
            answer = controller_pb2_grpc.ControllerStub(other).ListTopics(controller_pb2.ListTopicsRequest(),
                                                                          metadata=metadata, timeout=10)
            assert answer.error == Errors.SASL_AUTHENTICATION_FAILED
        time.sleep(REAUTH_MS / 1000 + 0.5)
        answer = stub.ListTopics(controller_pb2.ListTopicsRequest(), metadata=metadata, timeout=10)
        assert answer.error == Errors.SASL_AUTHENTICATION_FAILED and "authenticate again" in answer.error_message
        # a replayed client-final message finds no exchange
        sasl = controller_pb2_grpc.SaslStub(channel)
        exchange = ClientExchange(MECHANISMS["SCRAM-SHA-512"], "admin", ADMIN_SECRET)
        first = sasl.Authenticate(controller_pb2.SaslAuthenticateRequest(mechanism="SCRAM-SHA-512",
                                                                         auth_bytes=exchange.first()), timeout=10)
        final = exchange.final(first.auth_bytes)
        answers = [sasl.Authenticate(controller_pb2.SaslAuthenticateRequest(mechanism="SCRAM-SHA-512", auth_bytes=final),
                                     timeout=10) for _ in range(2)]
        assert answers[0].error == 0 and answers[0].token
        assert answers[1].error == Errors.SASL_AUTHENTICATION_FAILED and not answers[1].token


def test_a_restarted_controller_calls_no_password_wrong_before_it_has_replayed_its_log(scram):
    cp = scram
    lone = cp.voters[0]
    for i in cp.voters:
        cp.kill(i)
    cp.start([lone])  # alone it learns nothing is committed, so it replays none of its log
    with ControllerClient(cp.bootstrap([lone]), timeout=15, security=cp.security) as client:
        with pytest.raises(SparkraftError) as e:
            client.list_topics()
    assert e.value.error is Errors.NOT_CONTROLLER and "replaying" in e.value.message, e.value  # retriable
    cp.start([i for i in cp.voters if i != lone])
    with ControllerClient(cp.bootstrap([lone]), timeout=30, security=cp.security) as client:
        wait_for(lambda: _lists_topics(client), 30, f"controller {lone} checking logins again")


def test_a_controller_that_never_heard_from_a_quorum_checks_no_login(controller_processes, tmp_path):
    """A voter whose log was empty when the others stopped (it lagged, or never ran) holds none of
    the users; alone it must not call their passwords wrong. It waits for a leader's high watermark
    (Kafka's metadata loader waits the same way) and then checks logins."""
    cp = _formatted(controller_processes, tmp_path)
    lone, *others = cp.voters
    cp.start(others)
    cp.wait_leader(timeout=30)
    with ControllerClient(cp.bootstrap(others), timeout=30, security=cp.security) as client:
        wait_for(lambda: _lists_topics(client), 30, "the admin's login on the two that formed the quorum")
    for i in others:
        cp.kill(i)
    cp.start([lone])
    with ControllerClient(cp.bootstrap([lone]), timeout=15, security=cp.security) as client:
        with pytest.raises(SparkraftError) as e:
            client.list_topics()
    assert e.value.error is Errors.NOT_CONTROLLER and "replaying" in e.value.message, e.value
    cp.start(others)
    with ControllerClient(cp.bootstrap([lone]), timeout=30, security=cp.security) as client:
        wait_for(lambda: _lists_topics(client), 60, f"controller {lone} checking logins once it heard from a leader")


def _lists_topics(client) -> bool:
    try:
        return isinstance(client.list_topics(), tuple)
    except SparkraftError as e:
        assert e.error is Errors.NOT_CONTROLLER, e  # never SASL_AUTHENTICATION_FAILED
        return False
