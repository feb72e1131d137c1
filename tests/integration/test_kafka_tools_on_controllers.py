"""Apache Kafka's own tools (4.4.0, from Maven Central's jars) given ``--bootstrap-controller``
(KIP-919) against sparkraft controller processes whose second controller listener speaks Kafka's
protocol: each answer compared with what sparkraft's own CLI says of the same quorum, field by field.

Skipped with one line where the jars are not there (.ci/run resolves them before the tests)."""
from __future__ import annotations

import json
import re
import socket
import struct
import subprocess

import pytest
from apache_kafka import OLD_TOOLS, jshell, kafka_tool, need_kafka, without_jvm_noise
from conftest import ControllerProcesses, kafka_listener_quorum, sparkraft_cmd, wait_for

from quorum.kafka.controller_apis import CONTROLLER
from quorum.metadata.versions import release

pytestmark = pytest.mark.slow


def _sparkraft_json(*args: str):
    out = subprocess.run(sparkraft_cmd(*args, "--json"), capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _tool(tool: str, *args: str, kafka: str = "kafka-4.4.0") -> str:
    out = kafka_tool(tool, *args, kafka=kafka)
    assert out.returncode == 0, f"{tool} {' '.join(args)}: exit {out.returncode}\n{out.stderr[-3000:]}"
    assert not [line for line in without_jvm_noise(out.stderr) if "ERROR" in line or "Exception" in line], out.stderr
    return out.stdout


def _kafka(cp: ControllerProcesses, i: int) -> str:
    return f"127.0.0.1:{cp.kafka_ports[i]}"


def _status(text: str) -> dict:
    """``kafka-metadata-quorum describe --status`` as a dict (the voter lists parsed)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        value = value.strip()
        out[key] = json.loads(value) if value.startswith("[") else int(value) if re.fullmatch(r"-?\d+", value) else value
    return out


def _replication(text: str) -> dict[int, dict]:
    """``describe --replication``'s rows by node id."""
    lines = [re.split(r"\s+", line.strip()) for line in text.strip().splitlines()]
    header = lines[0]
    return {int(row[0]): dict(zip(header, row)) for row in lines[1:]}


@pytest.fixture(scope="module")
def quorum(tmp_path_factory):
    """A static quorum of three sparkraft controllers, each also answering Kafka's protocol."""
    need_kafka()
    with kafka_listener_quorum(tmp_path_factory.mktemp("controllers")) as cp:
        yield cp



def test_kafka_metadata_quorum_describes_the_quorum_as_sparkraft_does(quorum):
    cp = quorum
    ours = _sparkraft_json("quorum", "describe", "--status", "--bootstrap-controller", cp.bootstrap())
    theirs = _status(_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 2), "describe", "--status"))
    assert list(theirs) == list(ours)  # the same fields, in the same order
    for key in ("ClusterId", "LeaderId", "LeaderEpoch", "CurrentVoters", "CurrentObservers"):
        assert theirs[key] == ours[key], key
    assert theirs["HighWatermark"] >= ours["HighWatermark"] > 0

    theirs = _replication(_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 3), "describe",
                                "--replication"))
    ours = {r["NodeId"]: r for r in _sparkraft_json("quorum", "describe", "--replication",
                                                     "--bootstrap-controller", cp.bootstrap())}
    assert set(theirs) == set(ours) == set(cp.voters)
    for node_id, row in theirs.items():
        assert row["Status"] == ours[node_id]["Status"]
        assert row["DirectoryId"] == ours[node_id]["DirectoryId"]
        assert int(row["LastFetchTimestamp"]) > 0 and int(row["LogEndOffset"]) > 0


def test_kafka_cluster_and_features_through_a_controller(quorum):
    cp = quorum
    assert _tool("kafka-cluster", "cluster-id", "--bootstrap-controller", _kafka(cp, 1)).strip() == \
        f"Cluster ID: {cp.cluster_id}"
    # each controller registers its Kafka listener in the log (KIP-919): any controller of this static
    # quorum names all three, and Kafka's AdminClient is told which one is active
    for i in cp.voters:
        wait_for(lambda i=i: all(re.search(rf"^{j}\s+127\.0\.0\.1\s+{cp.kafka_ports[j]}\s+null\s+controller",
                                           _tool("kafka-cluster", "list-endpoints", "--bootstrap-controller",
                                                 _kafka(cp, i)), re.M) for j in cp.voters),
                 60, f"controller {i} to name every controller")
    leader = cp.wait_leader().leader_id
    told = jshell(f"""
import org.apache.kafka.clients.admin.*;
var props = new Properties();
props.put("bootstrap.controllers", "{_kafka(cp, 2)}");
try (var admin = Admin.create(props)) {{
    var d = admin.describeCluster();
    System.out.println("ACTIVE " + d.controller().get().id() + " NODES " + d.nodes().get().size());
}}""", cp.root)
    assert f"ACTIVE {leader} NODES 3" in told, told

    described = _tool("kafka-features", "--bootstrap-controller", _kafka(cp, 2), "describe")
    theirs = {m["Feature"]: m for m in (dict(re.findall(r"(\w+): (\S+(?: \d+)?)", line))
                                        for line in described.splitlines() if line.startswith("Feature:"))}
    ours = {f["feature"]: f for f in _sparkraft_json("features", "describe", "--bootstrap-controller", cp.bootstrap())}
    assert set(theirs) == set(ours)
    for name, f in ours.items():
        levels = [theirs[name][k].split()[-1] for k in ("SupportedMinVersion", "SupportedMaxVersion",
                                                           "FinalizedVersionLevel")]
        # metadata.version is Kafka's own: its tool prints Kafka's names for the levels
        shown = release if name == "metadata.version" else str
        assert levels == [shown(f["supported_min_version"]), shown(f["supported_max_version"]),
                          shown(f["finalized_version_level"])], name
    assert theirs["metadata.version"]["SupportedMinVersion"] == "3.6-IV2"
    assert "eligible.leader.replicas.version can be upgraded to 1." in _tool(
        "kafka-features", "--bootstrap-controller", _kafka(cp, 2), "upgrade", "--feature",
        "eligible.leader.replicas.version=1", "--dry-run")
    ELR = "eligible.leader.replicas.version"

    def elr() -> int:
        return next(f["finalized_version_level"] for f in _sparkraft_json(
            "features", "describe", "--bootstrap-controller", cp.bootstrap()) if f["feature"] == ELR)
    assert elr() == 0, "the dry run changed nothing"
    assert f"{ELR} was upgraded to 1." in _tool("kafka-features", "--bootstrap-controller", _kafka(cp, 3), "upgrade",
                                                 "--feature", f"{ELR}=1")
    assert elr() == 1
    assert f"{ELR} was downgraded to 0." in _tool("kafka-features", "--bootstrap-controller", _kafka(cp, 1),
                                                   "downgrade", "--feature", f"{ELR}=0")
    assert elr() == 0


def test_kafka_configs_and_acls_through_a_controller_change_what_sparkraft_shows(quorum):
    cp = quorum
    assert "Completed updating default config for brokers in the cluster." in _tool(
        "kafka-configs", "--bootstrap-controller", _kafka(cp, 3), "--alter", "--entity-type", "brokers",
        "--entity-default", "--add-config", "log.retention.ms=3600000")
    ours = {c["name"]: c for c in _sparkraft_json("configs", "describe", "--entity-type", "brokers",
                                                   "--entity-default", "--bootstrap-controller", cp.bootstrap())}
    assert ours["log.retention.ms"]["value"] == "3600000"
    # read back through another controller: it has replayed the change before the write was answered
    assert "log.retention.ms=3600000 sensitive=false" in _tool(
        "kafka-configs", "--bootstrap-controller", _kafka(cp, 1), "--describe", "--entity-type", "brokers",
        "--entity-default")
    # a group's own configs (KIP-848, KIP-932) written by Kafka's tool, read back by sparkraft's CLI
    _tool("kafka-configs", "--bootstrap-controller", _kafka(cp, 2), "--alter", "--entity-type", "groups",
          "--entity-name", "sharing", "--add-config", "share.auto.offset.reset=earliest")
    ours = {c["name"]: c for c in _sparkraft_json("configs", "describe", "--entity-type", "groups", "--entity-name",
                                                   "sharing", "--bootstrap-controller", cp.bootstrap())}
    assert ours["share.auto.offset.reset"] == {"name": "share.auto.offset.reset", "value": "earliest",
                                               "source": "GROUP_CONFIG"}

    _tool("kafka-acls", "--bootstrap-controller", _kafka(cp, 1), "--add", "--allow-principal", "User:alice",
          "--operation", "Read", "--topic", "orders", "--resource-pattern-type", "prefixed")
    acls = [a for a in _sparkraft_json("acls", "--list", "--bootstrap-controller", cp.bootstrap())
            if a["resource_name"] == "orders"]
    assert [(a["principal"], a["operation"], a["pattern_type"]) for a in acls] == [("User:alice", "READ", "PREFIXED")]
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in _tool(
        "kafka-acls", "--bootstrap-controller", _kafka(cp, 2), "--list")
    _tool("kafka-acls", "--bootstrap-controller", _kafka(cp, 2), "--remove", "--force", "--allow-principal",
          "User:alice", "--operation", "Read", "--topic", "orders", "--resource-pattern-type", "prefixed")
    assert not [a for a in _sparkraft_json("acls", "--list", "--bootstrap-controller", cp.bootstrap())
                if a["resource_name"] == "orders"]
    # a CIDR block as the host (metadata.version 4.4-IV1); a malformed one is refused with Kafka's message
    _tool("kafka-acls", "--bootstrap-controller", _kafka(cp, 1), "--add", "--allow-principal", "User:bob",
          "--allow-host", "10.0.0.0/8", "--operation", "Read", "--topic", "payments")
    assert [a["host"] for a in _sparkraft_json("acls", "--list", "--bootstrap-controller", cp.bootstrap())
            if a["resource_name"] == "payments"] == ["10.0.0.0/8"]
    bad = kafka_tool("kafka-acls", "--bootstrap-controller", _kafka(cp, 1), "--add", "--allow-principal", "User:bob",
                     "--allow-host", "10.0.0.0/33", "--operation", "Read", "--topic", "payments")
    assert "Invalid CIDR notation '10.0.0.0/33': Value [33] not in range [0,32]" in bad.stdout + bad.stderr, \
        bad.stdout + bad.stderr


def test_a_controller_advertises_only_what_it_answers_and_refuses_what_it_does_not(quorum):
    cp = quorum
    listing = kafka_tool("kafka-broker-api-versions", "--bootstrap-server", _kafka(cp, 1))
    # the broker tool asks Metadata, which a controller does not serve (as Kafka's controllers do not)
    assert listing.returncode != 0
    advertised = {key for key in CONTROLLER.supported}
    assert 3 not in advertised and 0 not in advertised  # no Metadata, no Produce
    # the quorum's requests, and what Apache Kafka's brokers send their controllers (Fetch of the
    # metadata log, registration, heartbeats, ISR changes, producer ids, forwarded requests)
    assert {55, 60, 80, 81, 18, 1, 62, 63, 56, 67, 58} <= advertised


@pytest.mark.parametrize("release", OLD_TOOLS)
def test_the_tools_of_older_kafka_releases_negotiate_with_a_controller(quorum, release):
    """Kafka 3.7's and 3.9's clients ask ApiVersions v3, in which a feature whose lowest version is 0
    must be left out (3.7's client ended its network thread on one, KAFKA-17011)."""
    need_kafka(release)
    cp = quorum
    assert _tool("kafka-cluster", "cluster-id", "--bootstrap-controller", _kafka(cp, 2), kafka=release).strip() == \
        f"Cluster ID: {cp.cluster_id}"
    status = _tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 3), "describe", "--status",
                   kafka=release)
    ours = _sparkraft_json("quorum", "describe", "--status", "--bootstrap-controller", cp.bootstrap())
    assert f"LeaderId:               {ours['LeaderId']}" in status
    features = _tool("kafka-features", "--bootstrap-controller", _kafka(cp, 1), "describe", kafka=release)
    ours = sorted(f["feature"] for f in _sparkraft_json("features", "describe", "--bootstrap-controller",
                                                        cp.bootstrap()))
    # 3.7 asks ApiVersions v3: only the features whose lowest version is above 0 (metadata.version);
    # 3.9 asks v4, which carries them all
    expected = ["metadata.version"] if release == "kafka-tools-3.7.2" else ours
    assert sorted(re.findall(r"Feature: (\S+)", features)) == expected
    # metadata.version is Kafka's own numbering: 3.x names the levels it knows as Kafka does
    assert "SupportedMinVersion: 3.6-IV2" in features


def _frame(api_key: int, version: int, body: bytes = b"", correlation: int = 7) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation, -1)  # request header v1, no client id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def _closed(address: tuple[str, int], data: bytes) -> bool:
    with socket.create_connection(address, timeout=10) as s:
        s.sendall(data)
        s.settimeout(10)
        try:
            return s.recv(4096) == b""
        except ConnectionResetError:
            return True


def test_bad_frames_on_a_controllers_kafka_listener_close_the_connection_and_change_nothing(quorum):
    cp = quorum
    before = cp.wait_leader()
    address = ("127.0.0.1", cp.kafka_ports[before.leader_id])
    assert _closed(address, struct.pack(">i", 2**31 - 1))  # a 2 GiB frame
    assert _closed(address, struct.pack(">i", -5))  # a negative one
    assert _closed(address, _frame(3, 12))  # Metadata: not served by a controller
    assert _closed(address, _frame(9999, 0))  # an unknown API key
    assert _closed(address, _frame(55, 2, b"\xff\xff\xff"))  # DescribeQuorum that does not decode
    after = cp.wait_leader()
    assert (after.leader_id, after.leader_epoch) == (before.leader_id, before.leader_epoch)
    assert "ClusterId" in _tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, before.leader_id),
                                "describe", "--status")


def test_kafka_metadata_quorum_adds_and_removes_sparkraft_controllers(tmp_path):
    """A dynamic quorum grown and shrunk with Kafka's tool: add-controller reads each new
    controller's own properties file and meta.properties, as an operator runs it; the voters then
    announce their Kafka listeners, which DescribeCluster (list-endpoints) names."""
    need_kafka()
    cp = ControllerProcesses(tmp_path, dynamic=True, kafka_listener="KAFKA")
    try:
        cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
        cp.start()
        cp.wait_leader(timeout=30)
        for i in (2, 3):
            out = _tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 1), "--command-config",
                        str(cp.config(i)), "add-controller")
            assert re.match(rf"Added controller {i} with directory id \S+ and endpoints: "
                            rf"CONTROLLER://127.0.0.1:{cp.ports[i]}, KAFKA://127.0.0.1:{cp.kafka_ports[i]}", out), out
        status = _sparkraft_json("quorum", "describe", "--status", "--bootstrap-controller", cp.bootstrap())
        assert sorted(v["id"] for v in status["CurrentVoters"]) == [1, 2, 3]
        for v in status["CurrentVoters"]:
            assert f"KAFKA://127.0.0.1:{cp.kafka_ports[v['id']]}" in v["endpoints"]
        endpoints = _tool("kafka-cluster", "list-endpoints", "--bootstrap-controller", _kafka(cp, 3))
        for i in cp.voters:
            assert re.search(rf"^{i}\s+127\.0\.0\.1\s+{cp.kafka_ports[i]}\s+null\s+controller", endpoints, re.M)

        directory = next(v["directoryId"] for v in status["CurrentVoters"] if v["id"] == 2)
        assert f"Removed KRaft controller 2 with directory id {directory}" in _tool(
            "kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 3), "remove-controller", "--controller-id",
            "2", "--controller-directory-id", directory)
        rows = _replication(_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 3), "describe",
                                  "--replication"))
        wait_for(lambda: _replication(_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 1),
                                            "describe", "--replication"))[2]["Status"] == "Observer", 30,
                 "controller 2 shown as an observer")
        ours = {r["NodeId"]: r["Status"] for r in _sparkraft_json("quorum", "describe", "--replication",
                                                                   "--bootstrap-controller", cp.bootstrap())}
        assert ours[2] == "Observer" and sorted(s for i, s in ours.items() if i != 2) == ["Follower", "Leader"]
        assert set(rows) == {1, 2, 3}
        # a wrong directory id is Kafka's error, and changes nothing
        out = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 1), "remove-controller",
                         "--controller-id", "3", "--controller-directory-id", directory)
        assert out.returncode != 0 and "VoterNotFoundException" in out.stderr, out.stderr[-2000:]
        assert sorted(v["id"] for v in _sparkraft_json("quorum", "describe", "--status", "--bootstrap-controller",
                                                      cp.bootstrap())["CurrentVoters"]) == [1, 3]

        # controller 2, out of the quorum, is stopped and unregistered (metadata.version 4.4-IV2), as
        # Kafka's tool does it; the active controller cannot unregister itself
        def registered() -> list[str]:
            out = subprocess.run(sparkraft_cmd("shell", "--bootstrap-controller", cp.bootstrap()),
                                 input="ls /image/controllers\n", capture_output=True, text=True, timeout=60)
            return re.findall(r"\b\d+\b", out.stdout)

        cp.stop(2)
        wait_for(lambda: "2" in registered(), 60, "controller 2's registration in the image")
        out = kafka_tool("kafka-cluster", "unregister-controller", "--bootstrap-controller", _kafka(cp, 3), "--id", "2")
        assert out.returncode == 0, out.stderr[-2000:]
        again = kafka_tool("kafka-cluster", "unregister-controller", "--bootstrap-controller", _kafka(cp, 3), "--id",
                           "2")
        assert again.returncode != 0 and "Controller ID 2 is not currently registered." in again.stdout + again.stderr
        assert sorted(registered()) == ["1", "3"]
        leader = cp.wait_leader().leader_id
        itself = kafka_tool("kafka-cluster", "unregister-controller", "--bootstrap-controller", _kafka(cp, 3), "--id",
                            str(leader))
        assert itself.returncode != 0 and "Controller cannot unregister itself while it is active." in \
            itself.stdout + itself.stderr
    except BaseException:
        print(cp.dump_outputs())
        raise
    finally:
        cp.close()


ADMIN_SECRET = "admin-secret-on-controllers"


def _jvm_client(pki, name: str, user: str, password: str) -> str:
    """A Kafka tool's --command-config: SASL_SSL with SCRAM-SHA-512 as ``user``."""
    path = pki.root / f"{name}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={pki.truststore}\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{user}" password="{password}";\n')
    return str(path)


def _secured_quorum(root, kafka_protocol: str):
    """Three controllers, formatted by the caller: the quorum's listener SSL with client
    certificates, the Kafka listener ``kafka_protocol``, Kafka's authorizer with User:admin a super
    user (pki.secure_controller_props); and their Pki."""
    from pki import Pki, secure_controller_props

    pki = Pki(root / "pki")
    (root / "quorum").mkdir()
    cp = ControllerProcesses(root / "quorum", kafka_listener="KAFKA", per_node=lambda i: secure_controller_props(
        pki, i, **{"listener.security.protocol.map": f"CONTROLLER:SSL,KAFKA:{kafka_protocol}"}))
    return cp, pki


def test_a_controllers_sasl_ssl_kafka_listener_logs_users_in_and_authorizes_them(tmp_path):
    """SCRAM over TLS on a controller's Kafka listener, with Kafka's authorizer: the super user
    manages users and ACLs through it, a user is refused until granted, a wrong password is Kafka's
    authentication error; through the active controller (handled there) and another (forwarded)."""
    need_kafka()
    cp, pki = _secured_quorum(tmp_path, "SASL_SSL")
    try:
        cp.format_dynamic({i: ["--add-scram", f"SCRAM-SHA-512=[name=admin,password={ADMIN_SECRET}]"]
                           for i in cp.voters})
        cp.start()
        admin = _jvm_client(pki, "admin", "admin", ADMIN_SECRET)

        def described(i: int, config: str):
            return kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, i), "--command-config",
                              config, "describe", "--status")

        status = _status(wait_for(lambda: (o := described(1, admin)).returncode == 0 and o.stdout, 120,
                                  "the admin's DescribeQuorum through controller 1's SASL_SSL listener"))
        leader = status["LeaderId"]
        other = next(i for i in cp.voters if i != leader)
        # Kafka's own AdminClient will not alter SCRAM users through controllers ("not yet supported
        # when communicating directly with the controller quorum"): sparkraft's CLI does, over gRPC
        sparkraft_admin = pki.client_config("admin-grpc", protocol="SASL_SSL", keystore=pki.keystore("admin"),
                                            mechanism="SCRAM-SHA-512", username="admin", password=ADMIN_SECRET)
        refused = kafka_tool("kafka-configs", "--bootstrap-controller", _kafka(cp, leader), "--command-config", admin,
                             "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
                             "SCRAM-SHA-512=[password=bob-secret]")
        assert refused.returncode != 0 and "UnsupportedEndpointTypeException" in refused.stderr
        for via in (leader, other):  # handled by the active controller itself, and forwarded to it
            created = subprocess.run(sparkraft_cmd(
                "configs", "alter", "--entity-type", "users", "--entity-name", f"alice{via}", "--add-config",
                f"SCRAM-SHA-512=[password=alice-secret-{via}]", "--bootstrap-controller", cp.bootstrap(),
                "--command-config", str(sparkraft_admin)), capture_output=True, text=True, timeout=120)
            assert created.returncode == 0, created.stderr
            alice = _jvm_client(pki, f"alice{via}", f"alice{via}", f"alice-secret-{via}")
            refused = wait_for(lambda: (o := described(via, alice)).returncode != 0 and o, 60,
                               f"alice{via} logged in and refused")
            assert "ClusterAuthorizationException" in refused.stderr, refused.stderr[-2000:]
            wrong = described(via, _jvm_client(pki, f"wrong{via}", f"alice{via}", "not-her-password"))
            assert wrong.returncode != 0 and "SaslAuthenticationException" in wrong.stderr, wrong.stderr[-2000:]
            assert "not-her-password" not in cp.output(via).read_text(errors="replace")
            _tool("kafka-acls", "--bootstrap-controller", _kafka(cp, via), "--command-config", admin, "--add",
                  "--allow-principal", f"User:alice{via}", "--operation", "Describe", "--cluster")
            assert _status(wait_for(lambda: (o := described(via, alice)).returncode == 0 and o.stdout, 60,
                                    f"alice{via} granted DESCRIBE"))["LeaderId"] == leader
            # granted DESCRIBE only: altering a config is still refused, and changes nothing
            out = kafka_tool("kafka-configs", "--bootstrap-controller", _kafka(cp, via), "--command-config", alice,
                             "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                             "log.retention.ms=1")
            assert out.returncode != 0 and "ClusterAuthorizationException" in out.stderr, out.stderr[-2000:]
        for i in cp.voters:
            text = cp.output(i).read_text(errors="replace")
            assert ADMIN_SECRET not in text and "alice-secret" not in text
    except BaseException:
        print(cp.dump_outputs())
        raise
    finally:
        cp.close()


def _jvm_tls_client(pki, name: str, cn) -> str:
    """A Kafka tool's --command-config: SSL, with CN=``cn``'s certificate (None: none)."""
    path = pki.root / f"{name}.properties"
    lines = ["security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={pki.truststore}"]
    if cn is not None:
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={pki.jvm_keystore(cn)}"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_controllers_ssl_kafka_listener_knows_its_clients_by_certificate(tmp_path):
    """Mutual TLS on a controller's Kafka listener with Kafka's authorizer: the super user by its
    certificate, another user refused until granted, a client without a certificate refused."""
    need_kafka()
    cp, pki = _secured_quorum(tmp_path, "SSL")
    try:
        cp.format()
        cp.start()
        admin, bob = _jvm_tls_client(pki, "admin-tls", "admin"), _jvm_tls_client(pki, "bob-tls", "bob")

        def described(config: str):
            return kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", _kafka(cp, 2), "--command-config",
                              config, "describe", "--status")

        wait_for(lambda: described(admin).returncode == 0, 120, "the admin's DescribeQuorum by certificate")
        refused = described(bob)
        assert refused.returncode != 0 and "ClusterAuthorizationException" in refused.stderr, refused.stderr[-2000:]
        nameless = described(_jvm_tls_client(pki, "no-certificate", None))
        assert nameless.returncode != 0 and ("SslAuthenticationException" in nameless.stderr
                                             or "TimeoutException" in nameless.stderr), nameless.stderr[-2000:]
        _tool("kafka-acls", "--bootstrap-controller", _kafka(cp, 3), "--command-config", admin, "--add",
              "--allow-principal", "User:bob", "--operation", "Describe", "--cluster")
        wait_for(lambda: described(bob).returncode == 0, 60, "bob granted DESCRIBE on the cluster")
    except BaseException:
        print(cp.dump_outputs())
        raise
    finally:
        cp.close()
