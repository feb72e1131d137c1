"""Security against real ``sparkraft controller start`` processes, with certificates made by the test:
three controllers whose listener is SSL with mutual TLS (``ssl.client.auth=required``), principals
from ``CN=...`` by Kafka's mapping rules, the StandardAuthorizer on and ``User:admin`` a super user.

Every refusal is checked from outside (the CLI's one line, Kafka's error name, exit 1) and for what
it must not do: nothing changes, and allowed work goes on.
"""
from __future__ import annotations

import json
import signal
import ssl
import subprocess
import threading

import grpc
import pytest
from conftest import sparkraft_cmd, wait_for
from pki import Pki, secure_controller_props

from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc.controller_client import ControllerClient
from quorum.security.client import ClientSecurity

pytestmark = pytest.mark.slow


@pytest.fixture
def secure(controller_processes, tmp_path):
    """Three secured controllers, started, with a leader; ``.pki``, ``.admin`` (a --command-config)."""
    pki = Pki(tmp_path / "pki")
    admin = pki.client_config("admin", keystore=pki.keystore("admin"))
    cp = controller_processes(per_node=lambda i: secure_controller_props(pki, i),
                              security=ClientSecurity.from_file(str(admin)))
    cp.pki, cp.admin = pki, admin
    cp.format()
    cp.start()
    cp.wait_leader(timeout=30)
    return cp


def start_broker(cp, broker_id: int, cn: str) -> subprocess.Popen:
    """A ``sparkraft broker start`` process reaching the controllers over mutual TLS as ``CN=cn``."""
    from conftest import free_ports

    pki = cp.pki
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in cp.ports.items())
    props = {"process.roles": "broker", "node.id": broker_id, "controller.quorum.voters": voters,
             "controller.listener.names": "CONTROLLER", "listeners": f"PLAINTEXT://127.0.0.1:{free_ports(1)[0]}",
             "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT",
             "ssl.keystore.location": pki.keystore(cn), "ssl.truststore.location": pki.truststore,
             "metadata.log.dir": cp.root / f"b{broker_id}", "broker.heartbeat.interval.ms": 500}
    config = cp.root / f"broker-{broker_id}.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = open(cp.root / f"broker-{broker_id}.log", "ab")
    proc = subprocess.Popen(sparkraft_cmd("broker", "start", "--config", str(config)), stdout=out,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    cp.procs[broker_id] = proc  # stopped with the controllers
    cp._outputs.append(out)
    return proc


def cli(cp, *args: str, config=None, timeout: float = 60):
    argv = sparkraft_cmd(*args, "--bootstrap-controller", cp.bootstrap(), "--timeout", "10",
                         *(["--command-config", str(config)] if config else []))
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def ok(cp, *args: str, config=None) -> str:
    result = cli(cp, *args, config=config or cp.admin)
    assert result.returncode == 0, result.stderr
    return result.stdout


def refused(cp, *args: str, config, error: str) -> str:
    """The command fails with one stderr line starting with ``error``; returns that line."""
    result = cli(cp, *args, config=config)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"{error}: "), result.stderr
    return lines[0]


def topics(cp) -> list[str]:
    return json.loads(ok(cp, "topics", "list", "--json"))


# -- transport ------------------------------------------------------------------------------------
def test_tls_refusals_each_get_one_clear_line(secure, tmp_path):
    pki = secure.pki
    # a plaintext client at an SSL listener
    line = refused(secure, "topics", "list", config=None, error="SSL_HANDSHAKE_FAILED")
    assert "speaks TLS" in line
    # a client certificate from another CA
    other = Pki(tmp_path / "other", name="other-ca")
    stranger = pki.client_config("stranger", keystore=other.keystore("admin"))
    line = refused(secure, "topics", "list", config=stranger, error="SSL_HANDSHAKE_FAILED")
    assert "refused this client's certificate" in line
    # no client certificate at all, where one is required
    anonymous = pki.client_config("anonymous")
    line = refused(secure, "topics", "list", config=anonymous, error="SSL_HANDSHAKE_FAILED")
    assert "requires a client certificate" in line
    # a server this client does not trust
    distrustful = pki.client_config("distrustful", keystore=pki.keystore("admin"), truststore=other.truststore)
    line = refused(secure, "topics", "list", config=distrustful, error="SSL_HANDSHAKE_FAILED")
    assert "not trusted" in line
    # an expired certificate: the CLI says so before it connects...
    expired = pki.client_config("expired", keystore=pki.expired_keystore("admin"))
    assert "expired" in refused(secure, "topics", "list", config=expired, error="ERROR")
    # ...and the listener refuses it from a client that does not check
    key = pki.expired_keystore("admin").read_bytes()
    creds = grpc.ssl_channel_credentials(pki.truststore.read_bytes(), key, key)
    with grpc.secure_channel(secure.bootstrap([1]), creds) as channel:
        with pytest.raises(grpc.RpcError) as e:
            raft_pb2_grpc.RaftStub(channel).DescribeQuorum(raft_pb2.DescribeQuorumRequest(), timeout=5)
        assert e.value.code() is grpc.StatusCode.UNAVAILABLE
    # and a good certificate works
    assert topics(secure) == []


def test_openssl_sees_the_listeners_certificate_and_its_demand_for_ours(secure):
    """The handshake checked from outside, with ``openssl s_client``."""
    pki, port = secure.pki, secure.ports[1]
    admin = pki.keystore("admin")
    def s_client(*extra: str) -> str:
        argv = ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", str(pki.truststore),
                "-alpn", "h2", "-verify_return_error", "-brief", *extra]
        # stdin stays open a second, long enough to hear the listener end the connection if it does
        result = subprocess.run(["sh", "-c", 'sleep 1 | "$@"', "s_client", *argv], capture_output=True, text=True,
                                errors="replace", timeout=30)
        return (result.stdout + result.stderr).replace("CN = ", "CN=")

    out = s_client("-cert", str(admin), "-key", str(admin))
    assert "Verification: OK" in out and "CN=controller-1" in out and "eof" not in out.lower(), out
    # without a certificate of ours the listener ends the connection right after the handshake
    out = s_client()
    assert "Verification: OK" in out and ("unexpected eof" in out.lower() or "certificate required" in out), out


# -- the Raft listener ----------------------------------------------------------------------------
def _raft_stub(secure, keystore):
    key = keystore.read_bytes()
    creds = grpc.ssl_channel_credentials(secure.pki.truststore.read_bytes(), key, key)
    channel = grpc.secure_channel(secure.bootstrap([secure.wait_leader().leader_id]), creds)
    return channel, raft_pb2_grpc.RaftStub(channel)


def test_a_valid_certificate_of_a_stranger_cannot_vote_or_fetch_as_a_voter(secure):
    before = secure.wait_leader()
    leader = before.leader_id
    voter = next(v for v in (1, 2, 3) if v != leader)
    for cn in ("mallory", f"controller-{6 - leader - voter}"):  # a stranger, and another voter's principal
        channel, stub = _raft_stub(secure, secure.pki.keystore(cn))
        with channel:
            for call, request in (
                    ("Vote", raft_pb2.VoteRequest(cluster_id=secure.cluster_id, epoch=before.leader_epoch + 5,
                                                  candidate_id=voter, last_epoch=99, last_offset=10 ** 6)),
                    ("Fetch", raft_pb2.FetchRequest(cluster_id=secure.cluster_id, epoch=before.leader_epoch,
                                                    replica_id=voter, fetch_offset=10 ** 6))):
                with pytest.raises(grpc.RpcError) as e:
                    getattr(stub, call)(request, timeout=5)
                assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED, (cn, call)
                assert f"not voter {voter}'s principal" in e.value.details()
        # a stranger may not even fetch as an observer; another controller may
        now = secure.wait_leader()  # (on a loaded machine a real election may have come meanwhile)
        channel, stub = _raft_stub(secure, secure.pki.keystore(cn))
        with channel:
            observer = raft_pb2.FetchRequest(cluster_id=secure.cluster_id, epoch=now.leader_epoch, replica_id=-1,
                                             fetch_offset=0)
            if cn == "mallory":
                with pytest.raises(grpc.RpcError) as e:
                    stub.Fetch(observer, timeout=5)
                assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED
            else:
                assert stub.Fetch(observer, timeout=5).error == 0
    after = secure.wait_leader()
    # the forged votes (epoch + 5) moved no one: an election of the machine's own making adds 1 or 2
    assert after.leader_epoch < before.leader_epoch + 5, (before, after)
    assert topics(secure) == []


# -- authorization --------------------------------------------------------------------------------
def test_the_authorizer_enforces_kafkas_rules_and_denied_requests_change_nothing(secure):
    pki = secure.pki
    alice = pki.client_config("alice", keystore=pki.keystore("alice"))
    start_broker(secure, 101, "broker-101")  # its own principal: it registers and heartbeats for itself
    ok(secure, "brokers", "list", "--wait-unfenced", "1")
    ok(secure, "topics", "create", "--topic", "seed", "--partitions", "1", "--replication-factor", "1")
    # no ACL at all: alice may do nothing (allow.everyone.if.no.acl.found is false)
    refused(secure, "topics", "create", "--topic", "orders-1", "--partitions", "1", "--replication-factor", "1",
            config=alice, error="TOPIC_AUTHORIZATION_FAILED")
    assert json.loads(ok(secure, "topics", "list", "--json", config=alice)) == []  # seed is not hers to see
    refused(secure, "topics", "describe", "--topic", "seed", config=alice, error="TOPIC_AUTHORIZATION_FAILED")
    refused(secure, "acls", "--add", "--allow-principal", "User:alice", "--operation", "All", "--cluster",
            config=alice, error="CLUSTER_AUTHORIZATION_FAILED")
    refused(secure, "configs", "alter", "--entity-type", "brokers", "--add-config",
            "log.retention.ms=1000", config=alice, error="CLUSTER_AUTHORIZATION_FAILED")
    # a prefixed ALLOW of CREATE, and DESCRIBE through it
    ok(secure, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Create", "--operation", "Describe",
       "--topic", "orders-", "--resource-pattern-type", "prefixed")
    ok(secure, "topics", "create", "--topic", "orders-1", "--partitions", "1", "--replication-factor", "1", config=alice)
    # DENY wins over the prefixed ALLOW
    ok(secure, "acls", "--add", "--deny-principal", "User:alice", "--operation", "Create", "--topic", "orders-secret")
    refused(secure, "topics", "create", "--topic", "orders-secret", "--partitions", "1", "--replication-factor", "1",
            config=alice, error="TOPIC_AUTHORIZATION_FAILED")
    # only DESCRIBE on orders-1: deleting it is refused
    refused(secure, "topics", "delete", "--topic", "orders-1", config=alice, error="TOPIC_AUTHORIZATION_FAILED")
    assert json.loads(ok(secure, "topics", "list", "--json", config=alice)) == ["orders-1"]
    assert topics(secure) == ["orders-1", "seed"]  # the super user sees all; the refusals changed nothing
    listed = json.loads(ok(secure, "acls", "--list", "--principal", "User:alice", "--json"))
    assert {(a["operation"], a["permission_type"], a["resource_name"], a["pattern_type"]) for a in listed} == {
        ("CREATE", "ALLOW", "orders-", "PREFIXED"), ("DESCRIBE", "ALLOW", "orders-", "PREFIXED"),
        ("CREATE", "DENY", "orders-secret", "LITERAL")}
    # every controller decides alike: a standby answers alice's read with the same refusal
    leader = secure.wait_leader().leader_id
    standby = next(v for v in (1, 2, 3) if v != leader)
    result = subprocess.run(sparkraft_cmd("topics", "describe", "--topic", "seed", "--bootstrap-controller",
                                          secure.bootstrap([standby]), "--command-config", str(alice)),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr.startswith("TOPIC_AUTHORIZATION_FAILED"), result.stderr
    # removing the DENY lets the ALLOW through
    out = ok(secure, "acls", "--remove", "--deny-principal", "User:alice", "--operation", "Create",
             "--topic", "orders-secret")
    assert "Removed 1 ACL binding" in out
    ok(secure, "topics", "create", "--topic", "orders-secret", "--partitions", "1", "--replication-factor", "1",
       config=alice)


def test_a_restarted_controller_refuses_no_read_by_acls_it_has_not_replayed(secure):
    pki = secure.pki
    alice = ClientSecurity.from_file(str(pki.client_config("alice", keystore=pki.keystore("alice"))))
    ok(secure, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", "watched")
    lone = secure.wait_leader().leader_id  # it has the ACL in its log
    for i in secure.voters:
        secure.kill(i)
    secure.start([lone])  # alone it learns nothing is committed, so it replays none of its log

    def describe(timeout: float) -> Errors:
        with ControllerClient(secure.bootstrap([lone]), timeout=timeout, security=alice) as client:
            with pytest.raises(SparkraftError) as e:
                client.describe_topic("watched")
        return e.value.error

    assert describe(15) is Errors.NOT_CONTROLLER  # not TOPIC_AUTHORIZATION_FAILED: it is not sure yet
    secure.start([i for i in secure.voters if i != lone])
    # replayed: alice may describe it, and there is no such topic
    wait_for(lambda: describe(5) is Errors.UNKNOWN_TOPIC_OR_PARTITION, 30, f"controller {lone} replaying its ACLs")


# -- rotation ---------------------------------------------------------------------------------------
def _served_serial(port: int, pki: Pki, keystore) -> int:
    context = ssl.create_default_context(cafile=str(pki.truststore))
    context.check_hostname = False
    context.load_cert_chain(str(keystore))
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        from cryptography import x509
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_certificates_rotate_on_sighup_under_a_write_load_and_a_leader_kill(secure):
    pki, admin_keystore = secure.pki, secure.pki.keystore("admin")
    acked, errors, stop = [], [], threading.Event()

    def write():
        from quorum.controller import api
        from quorum.rpc.controller_client import ControllerClient

        with ControllerClient(secure.bootstrap(), timeout=30, security=secure.security) as c:
            k = 0
            while not stop.is_set():
                try:
                    c.alter_configs(api.ConfigResourceKey("BROKER", ""),
                                    [api.AlterableConfig("log.retention.ms", "SET", str(1000 + k))])
                    acked.append(1000 + k)
                except SparkraftError as e:
                    errors.append(str(e))
                k += 1

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    wait_for(lambda: len(acked) >= 20, 60, "writes before the rotation")
    old = {i: _served_serial(secure.ports[i], pki, admin_keystore) for i in (1, 2, 3)}
    for i in (1, 2, 3):  # new keys and certificates in place of the old files, then SIGHUP
        pki.keystore(f"controller-{i}")
        secure.send(i, signal.SIGHUP)
    wait_for(lambda: all(_served_serial(secure.ports[i], pki, admin_keystore) != old[i] for i in (1, 2, 3)), 30,
             "every listener serving its new certificate")
    n = len(acked)
    wait_for(lambda: len(acked) >= n + 20, 60, "writes after the rotation")
    leader = secure.wait_leader().leader_id
    secure.kill(leader)
    secure.wait_leader(exclude=(leader,), timeout=30)
    n = len(acked)
    wait_for(lambda: len(acked) >= n + 20, 60, "writes after the leader was killed")
    stop.set()
    writer.join(30)
    assert all(secure.alive(i) for i in (1, 2, 3) if i != leader)
    # the last acknowledged value is what the controllers hold
    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    with ControllerClient(secure.bootstrap([i for i in (1, 2, 3) if i != leader]), security=secure.security) as c:
        entries = {e.name: e.value for e in c.describe_configs(api.ConfigResourceKey("BROKER", ""))}
    assert entries["log.retention.ms"] == str(acked[-1])
    assert all("AUTHORIZATION" not in e and "SSL" not in e for e in errors), errors[:3]


def test_a_broker_cannot_act_for_another_broker_id(secure):
    """Broker 101 started with broker 102's certificate: its registration is refused by principal
    (not a super user, no CLUSTER_ACTION), so it never registers; the real broker 102 does."""
    impostor = start_broker(secure, 101, "broker-102")
    start_broker(secure, 102, "broker-102")
    ok(secure, "brokers", "list", "--wait-unfenced", "1")
    log = secure.root / "broker-101.log"
    wait_for(lambda: "CLUSTER_AUTHORIZATION_FAILED" in log.read_text(errors="replace"), 60,
             "broker 101's refusal in its log")
    assert [b["broker_id"] for b in json.loads(ok(secure, "brokers", "list", "--json"))] == [102]
    assert impostor.poll() is None or impostor.returncode != 0
