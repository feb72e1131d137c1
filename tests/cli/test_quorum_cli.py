"""``sparkraft quorum describe`` against three real controller processes, and ``sparkraft demo``."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
from conftest import sparkraft_cmd, wait_for

from quorum.log.meta_properties import read_meta_properties

STATUS_KEYS = {"ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark", "MaxFollowerLag",
               "MaxFollowerLagTimeMs", "CurrentVoters", "CurrentObservers"}
REPLICATION_KEYS = {"NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                    "Status"}


# A demo takes ~30 s on an idle 2-core machine and was seen taking 90 s beside a second job: its
# ceiling is there to end a hung run, not to time a slow one.
DEMO_CEILING_S = 900


def sparkraft(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def running_quorum(controller_processes):
    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    info = cp.wait_leader()
    with cp.client() as c:
        c.append([b"one", b"two"])
    # wait until the followers have fetched in the leader's epoch, so the rows are complete
    wait_for(lambda: all(v.last_fetch_ms for v in cp.wait_leader().voters), 10, "every voter to fetch")
    return cp, info.leader_id


@pytest.mark.slow
def test_describe_status_and_replication_json(running_quorum):
    cp, leader = running_quorum
    follower = next(i for i in cp.voters if i != leader)
    # pointed at a follower, with a dead server first: it finds the leader
    bootstrap = f"127.0.0.1:{dead_port()},127.0.0.1:{cp.ports[follower]}"

    result = sparkraft("quorum", "describe", "--status", "--bootstrap-controller", bootstrap, "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert set(status) == STATUS_KEYS
    assert status["ClusterId"] == cp.cluster_id
    assert status["LeaderId"] == leader
    assert status["LeaderEpoch"] >= 1
    assert status["HighWatermark"] >= 3  # LeaderChange + our two records
    assert [v["id"] for v in status["CurrentVoters"]] == [1, 2, 3]
    for v in status["CurrentVoters"]:  # a static quorum: the directory ids its replicas fetch with
        assert v["directoryId"] == read_meta_properties(cp.log_dir(v["id"])).directory_id
        assert v["endpoints"] == [f"CONTROLLER://127.0.0.1:{cp.ports[v['id']]}"]
    assert status["CurrentObservers"] == []
    assert isinstance(status["MaxFollowerLag"], int) and isinstance(status["MaxFollowerLagTimeMs"], int)

    result = sparkraft("quorum", "describe", "--replication", "--bootstrap-controller", bootstrap, "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list) and len(rows) == 3
    for row in rows:
        assert set(row) == REPLICATION_KEYS
    assert rows[0]["NodeId"] == leader and rows[0]["Status"] == "Leader" and rows[0]["Lag"] == 0
    assert sorted(r["NodeId"] for r in rows) == [1, 2, 3]
    assert {r["Status"] for r in rows[1:]} == {"Follower"}
    now_ms = time.time() * 1000
    for r in rows:  # wall-clock milliseconds
        assert abs(r["LastFetchTimestamp"] - now_ms) < 60_000, r
        assert r["LogEndOffset"] >= 0 and r["Lag"] >= 0


@pytest.mark.slow
def test_describe_text_is_kafka_like(running_quorum):
    cp, leader = running_quorum
    result = sparkraft("quorum", "describe", "--status", "--bootstrap-controller", cp.bootstrap())
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["ClusterId", "LeaderId", "LeaderEpoch", "HighWatermark",
                                                      "MaxFollowerLag", "MaxFollowerLagTimeMs", "CurrentVoters",
                                                      "CurrentObservers"]
    assert lines[1].split() == ["LeaderId:", str(leader)]
    assert lines[6].startswith('CurrentVoters:          [{"id": 1, "directoryId": ')
    result = sparkraft("quorum", "describe", "--replication", "--bootstrap-controller", cp.bootstrap())
    assert result.returncode == 0, result.stderr
    table = [line.split() for line in result.stdout.splitlines()]
    assert table[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                        "Status"]
    assert table[1][0] == str(leader) and table[1][-1] == "Leader"
    assert len(table) == 4


def test_describe_with_nothing_reachable_is_one_line():
    result = sparkraft("quorum", "describe", "--status", "--timeout", "1",
                       "--bootstrap-controller", f"127.0.0.1:{dead_port()}")
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("NETWORK_EXCEPTION: no controller reachable")


def test_describe_needs_status_or_replication_and_a_valid_address():
    result = sparkraft("quorum", "describe", "--bootstrap-controller", "127.0.0.1:9093")
    assert result.returncode == 1 and result.stderr.splitlines() == [
        "ERROR: sparkraft quorum describe: one of the arguments --status --replication is required "
        "(see sparkraft quorum describe --help)"]
    result = sparkraft("quorum", "describe", "--status", "--bootstrap-controller", "nohost")
    assert result.returncode == 1 and result.stderr.startswith("ERROR: invalid controller address 'nohost'")


@pytest.mark.slow
def test_demo_runs_a_quorum_and_prints_its_status(tmp_path, fixed_ports):
    result = sparkraft("demo", "--dir", str(tmp_path / "demo"), timeout=DEMO_CEILING_S)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Traceback" not in result.stderr
    for key in ("ClusterId:", "LeaderId:", "HighWatermark:", 'CurrentVoters:          [{"id": 1, '):
        assert key in out, out
    assert "NodeId  DirectoryId             LogEndOffset  Lag" in out
    assert "3 of 3 brokers registered and unfenced" in out
    assert out.count("nothing to load: it reads the log from its start") == 3  # a first start replays the log
    assert "Topic: orders\tTopicId: " in out and "PartitionCount: 6" in out
    assert "BrokerId  Fenced" in out
    assert "at consistent cut offset" in out and "Leaders per broker" in out and "(3 rows)" in out
    assert "broker 104: metadata from delta at offset" in out
    # a real Kafka client (librdkafka) through broker 101: listed, created (forwarded), listed again
    assert "create_topics([NewTopic('clicks', 4, 3)]) through broker 101, forwarded to controller" in out
    assert "list_topics('clicks'): 4 partitions" in out
    # the SQL commands it prints run as printed against the warehouse it kept
    printed = [line.split(": ", 1)[1] for line in out.splitlines() if line.strip().startswith("-- ")
               and ": sparkraft sql " in line]
    assert len(printed) == 4, out
    for command in printed:
        run = subprocess.run(["bash", "-c", command.replace("sparkraft ", f"{sys.executable} -m sparkraft ", 1)],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "row" in run.stdout, (command, run.stderr)
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == [
        "broker-101", "broker-102", "broker-103", "broker-104", "checkpoint", "controller-1", "controller-2", "controller-3",
        "warehouse"]
    # a second run reuses the formatted storage, and each broker starts from its cache
    again = sparkraft("demo", "--dir", str(tmp_path / "demo"), timeout=DEMO_CEILING_S)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already formatted" in again.stdout
    assert again.stdout.count("metadata from cache at offset") == 3
    assert "TOPIC_ALREADY_EXISTS" in again.stdout and "list_topics('clicks'): 4 partitions" in again.stdout


@pytest.mark.slow
def test_the_secure_demo_runs_over_mutual_tls_with_the_authorizer(tmp_path, fixed_ports):
    """``demo --secure``: the same cluster with every connection over mutual TLS, each node under its
    own principal, and the streaming job reading by an ACL; the admin config it writes works for the
    CLI against the listeners it used (a listener check from outside, while they ran, is in
    tests/integration/test_security_processes.py)."""
    from quorum.security.tls import load_key_store

    result = sparkraft("demo", "--secure", "--dir", str(tmp_path / "demo"), timeout=DEMO_CEILING_S)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "SSL listeners, mutual TLS, StandardAuthorizer, super user User:admin" in out
    # the brokers' Kafka listeners are what they are registered as: SSL, where librdkafka reaches them as User:admin
    assert "SSL://127.0.0.1:" in out and "PLAINTEXT://" not in out
    assert "create_topics([NewTopic('clicks', 4, 3)]) through broker 101, forwarded to controller" in out
    assert "3 of 3 brokers registered and unfenced" in out  # brokers act for themselves as User:broker-N
    assert "ALLOW User:materializer CLUSTER_ACTION on the cluster" in out
    assert "User:stranger creating a topic: TOPIC_AUTHORIZATION_FAILED" in out
    assert "SCRAM user alice: logged in with SCRAM-SHA-512, may DESCRIBE topics audit-*, sees ['audit-log']" in out
    alice = tmp_path / "demo" / "pki" / "alice.properties"
    assert alice.stat().st_mode & 0o077 == 0 and "sasl.password=" in alice.read_text()
    assert "at consistent cut offset" in out and "acls v" in out  # the job read the log under its ACLs
    assert "broker 104: metadata from delta at offset" in out
    pki = tmp_path / "demo" / "pki"
    assert load_key_store(str(pki / "controller-1.pem")).subject.startswith("CN=controller-1,")
    assert (pki / "admin.pem").stat().st_mode & 0o077 == 0  # keys readable by their owner only
    assert "ssl.keystore.location=" in (pki / "admin.properties").read_text()
    rows = sparkraft("sql", "SELECT principal, operation FROM acls ORDER BY operation, principal", "--warehouse",
                     str(tmp_path / "demo" / "warehouse"), "--json")
    assert json.loads(rows.stdout) == [{"principal": "User:materializer", "operation": "CLUSTER_ACTION"},
                                       {"principal": "User:alice", "operation": "DESCRIBE"},
                                       {"principal": "User:materializer", "operation": "DESCRIBE"}]
    users = sparkraft("sql", "SELECT name, mechanism, iterations FROM users", "--warehouse",
                      str(tmp_path / "demo" / "warehouse"), "--json")
    assert json.loads(users.stdout) == [{"name": "alice", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]
    assert alice.read_text().split("sasl.password=")[1].split("\n")[0] not in result.stdout + result.stderr


def test_help():
    for args in (["controller", "start"], ["quorum", "describe"], ["demo"]):
        result = sparkraft(*args, "--help")
        assert result.returncode == 0 and result.stdout.startswith("usage: sparkraft"), result


@pytest.mark.slow
def test_describe_right_after_start_says_what_the_quorum_knows(controller_processes):
    """Asked the moment a leader answers, describe waits the few milliseconds a new leader needs to
    know its high watermark and its followers (it printed HighWatermark -1, MaxFollowerLagTimeMs -1
    and an all-zero directory id, and a call a second later did not)."""
    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    deadline = time.monotonic() + 60
    while True:
        result = sparkraft("quorum", "describe", "--status", "--bootstrap-controller", cp.bootstrap(), "--json",
                           "--timeout", "30")
        if result.returncode == 0 or time.monotonic() > deadline:
            break
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["HighWatermark"] >= 1
    assert all(v["directoryId"] != "AAAAAAAAAAAAAAAAAAAAAA" for v in status["CurrentVoters"]), status
    assert status["MaxFollowerLagTimeMs"] >= 0
