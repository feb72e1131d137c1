"""Apache Kafka's own command-line tools (4.4.0, the Java AdminClient inside them) against sparkraft
brokers, each a real JVM process from Maven Central's jars (scripts/fetch_jars.py), each answer
compared with what sparkraft's own CLI says of the same cluster; and Kafka's quorum tool against a
real Apache Kafka node beside sparkraft's against a sparkraft quorum, field for field.

Skipped with one line where the jars are not there (.ci/run resolves them before the tests)."""
from __future__ import annotations

import json
import re
import subprocess

import pytest
from apache_kafka import OLD_TOOLS, KafkaNode, kafka_tool, need_kafka, without_jvm_noise
from conftest import free_ports, sparkraft_cmd, wait_for
from test_kafka_clients import BROKERS
from test_kafka_clients import cluster as cluster_of_kafka_clients  # noqa: F401 (a fixture)

from quorum.kafka.apis import SUPPORTED
from quorum.log.meta_properties import random_cluster_id

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def cluster(cluster_of_kafka_clients):
    """test_kafka_clients' cluster (3 controllers, brokers 101 and 102, their Kafka listeners
    answering), with Kafka's jars required first."""
    need_kafka()
    return cluster_of_kafka_clients


def _sparkraft(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _tool(tool: str, *args: str) -> str:
    out = kafka_tool(tool, *args)
    assert out.returncode == 0, f"{tool} {' '.join(args)}: exit {out.returncode}\n{out.stderr[-3000:]}"
    assert not [line for line in without_jvm_noise(out.stderr) if "ERROR" in line or "Exception" in line], out.stderr
    return out.stdout


def _partition_lines(text: str) -> dict[int, dict[str, str]]:
    """kafka-topics --describe's partition lines, by partition: field -> value."""
    rows = {}
    for line in text.splitlines():
        if "\tPartition: " in line:
            fields = dict(re.findall(r"(\w+): ([^\t]*)", line))
            rows[int(fields["Partition"])] = fields
    return rows


def test_kafka_topics_creates_lists_and_describes_as_sparkraft_sees_it(cluster):
    cp, brokers = cluster
    bs = f"127.0.0.1:{brokers.ports[101]}"
    out = _tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "java-made", "--partitions", "4",
                "--replication-factor", "2", "--config", "retention.ms=3600000")
    assert "Created topic java-made." in out
    assert "java-made" in _tool("kafka-topics", "--bootstrap-server", bs, "--list").split()
    ours = json.loads(wait_for(lambda: (o := _sparkraft("topics", "describe", "--topic", "java-made", "--json",
                                                          "--bootstrap-controller", cp.bootstrap())).returncode == 0
                               and o.stdout, 30, "java-made at the controllers"))
    wait_for(lambda: len(_partition_lines(_tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic",
                                                "java-made"))) == 4, 30, "four partitions in broker 101's image")
    theirs = _partition_lines(_tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", "java-made"))
    assert len(ours["partitions"]) == 4
    for p in ours["partitions"]:
        row = theirs[p["partition"]]
        assert int(row["Leader"]) == p["leader"]
        assert [int(r) for r in row["Replicas"].split(",")] == p["replicas"]
        assert [int(r) for r in row["Isr"].split(",")] == p["isr"]
    configs = _tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                    "--entity-name", "java-made")
    assert "retention.ms=3600000" in configs


def test_kafka_cluster_and_api_versions_name_what_sparkraft_serves(cluster):
    cp, brokers = cluster
    bs = f"127.0.0.1:{brokers.ports[102]}"
    assert _tool("kafka-cluster", "cluster-id", "--bootstrap-server", bs).strip() == f"Cluster ID: {cp.cluster_id}"
    listing = _tool("kafka-broker-api-versions", "--bootstrap-server", bs)
    for b in BROKERS:
        assert f"127.0.0.1:{brokers.ports[b]} (id: {b} rack: null" in listing
    advertised = dict(re.findall(r"\((\d+)\): (\d+ to \d+|\d+|UNSUPPORTED)", listing))
    for key, (lo, hi) in SUPPORTED.items():
        if str(key) in advertised:  # keys the Java client knows of
            assert advertised[str(key)] == (f"{lo} to {hi}" if lo != hi else f"{lo}"), key


def test_kafka_quorum_tool_on_apache_kafka_and_ours_on_sparkraft_print_the_same_fields(cluster, tmp_path):
    """`kafka-metadata-quorum describe --status` against a real Apache Kafka node, and
    `sparkraft quorum describe --status` against sparkraft: the same fields in the same order, each
    the same kind of value."""
    cp, _ = cluster
    broker_port, controller_port = free_ports(2)
    node = KafkaNode(tmp_path, broker_port, controller_port)
    node.format(random_cluster_id())
    node.start()
    try:
        def described():
            out = kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", node.bootstrap_controller,
                             "describe", "--status", timeout=60)
            return out.stdout if out.returncode == 0 and "HighWatermark" in out.stdout else None
        theirs = wait_for(described, 120, "Apache Kafka's quorum to answer")
    except BaseException:
        print(node.log()[-5000:])
        raise
    finally:
        node.stop()
    ours = _sparkraft("quorum", "describe", "--status", "--bootstrap-controller", cp.bootstrap()).stdout

    def fields(text: str) -> list[tuple[str, str]]:
        out = []
        for line in text.splitlines():
            key, _, value = line.partition(":")
            value = value.strip()
            kind = "list" if value.startswith("[") else "int" if re.fullmatch(r"-?\d+", value) else "text"
            out.append((key, kind))
        return out
    assert fields(ours) == fields(theirs), (ours, theirs)
    voters = json.loads(re.search(r"CurrentVoters:\s+(\[.*\])", theirs).group(1))
    ours_voters = json.loads(re.search(r"CurrentVoters:\s+(\[.*\])", ours).group(1))
    assert set(voters[0]) == set(ours_voters[0])  # id, directoryId, endpoints


def test_kafka_admin_tools_change_what_sparkraft_then_shows(cluster):
    """Each change made with Kafka's tools through a sparkraft broker (forwarded to the active
    controller), read back with sparkraft's CLI from the controllers."""
    cp, brokers = cluster
    bs, bc = f"127.0.0.1:{brokers.ports[102]}", cp.bootstrap()
    _tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "tooled", "--partitions", "2",
          "--replication-factor", "2")
    _tool("kafka-topics", "--bootstrap-server", bs, "--alter", "--topic", "tooled", "--partitions", "5")
    described = json.loads(wait_for(lambda: (o := _sparkraft("topics", "describe", "--topic", "tooled", "--json",
                                                             "--bootstrap-controller", bc)).returncode == 0
                                    and len(json.loads(o.stdout)["partitions"]) == 5 and o.stdout, 30, "5 partitions"))
    assert len(described["partitions"]) == 5

    assert "Completed updating config for topic tooled." in _tool(
        "kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name", "tooled",
        "--add-config", "retention.ms=1000,cleanup.policy=compact")
    assert "Completed updating default config for brokers in the cluster." in _tool(
        "kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "brokers", "--entity-default",
        "--add-config", "log.retention.ms=7200000")

    def config(*entity: str) -> dict:
        out = _sparkraft("configs", "describe", *entity, "--json", "--bootstrap-controller", bc)
        assert out.returncode == 0, out.stderr
        return {e["name"]: e["value"] for e in json.loads(out.stdout)}
    assert config("--entity-type", "topics", "--entity-name", "tooled") == {"retention.ms": "1000",
                                                                           "cleanup.policy": "compact"}
    assert config("--entity-type", "brokers", "--entity-default")["log.retention.ms"] == "7200000"

    _tool("kafka-acls", "--bootstrap-server", bs, "--add", "--allow-principal", "User:alice", "--operation", "Read",
          "--topic", "tooled")
    acls = _sparkraft("acls", "--list", "--json", "--bootstrap-controller", bc)
    assert acls.returncode == 0, acls.stderr
    assert {"principal": "User:alice", "operation": "READ", "resource_name": "tooled"}.items() <= \
        next(a for a in json.loads(acls.stdout) if a["resource_name"] == "tooled").items()
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in _tool(
        "kafka-acls", "--bootstrap-server", bs, "--list", "--topic", "tooled")

    endpoints = _tool("kafka-cluster", "list-endpoints", "--bootstrap-server", bs)
    for b in BROKERS:
        assert re.search(rf"^{b}\s+127\.0\.0\.1\s+{brokers.ports[b]}\s+null\s+unfenced\s+broker", endpoints, re.M)

    _tool("kafka-topics", "--bootstrap-server", bs, "--delete", "--topic", "tooled")
    wait_for(lambda: "tooled" not in json.loads(_sparkraft("topics", "list", "--json", "--bootstrap-controller",
                                                           bc).stdout), 30, "tooled deleted")


def test_kafka_metadata_quorum_through_a_broker_describes_the_quorum_as_sparkraft_does(cluster):
    """A broker answers DescribeQuorum from the quorum's leader, as Kafka's brokers forward it."""
    cp, brokers = cluster
    bs = f"127.0.0.1:{brokers.ports[101]}"
    theirs = _tool("kafka-metadata-quorum", "--bootstrap-server", bs, "describe", "--status")
    ours = json.loads(_sparkraft("quorum", "describe", "--status", "--json", "--bootstrap-controller",
                                cp.bootstrap()).stdout)
    values = dict(line.split(":", 1) for line in theirs.splitlines() if ":" in line)
    assert [k.strip() for k in values] == list(ours)
    assert values["ClusterId"].strip() == cp.cluster_id
    assert int(values["LeaderId"]) == ours["LeaderId"] and int(values["LeaderEpoch"]) == ours["LeaderEpoch"]
    assert json.loads(values["CurrentVoters"]) == ours["CurrentVoters"]
    replication = _tool("kafka-metadata-quorum", "--bootstrap-server", bs, "describe", "--replication")
    rows = {int(line.split()[0]): line.split()[-1] for line in replication.strip().splitlines()[1:]}
    assert rows == {r["NodeId"]: r["Status"] for r in json.loads(_sparkraft(
        "quorum", "describe", "--replication", "--json", "--bootstrap-controller", cp.bootstrap()).stdout)}



def test_what_a_metadata_cluster_does_not_serve_is_refused_by_kafkas_tools_at_once(cluster):
    """Consumer groups and transactions are not in the brokers' ApiVersions, so Kafka's own tools
    stop at once with Kafka's UnsupportedVersionException naming the request, instead of waiting
    for a coordinator that will never come."""
    _, brokers = cluster
    bs = f"127.0.0.1:{brokers.ports[101]}"
    groups = kafka_tool("kafka-consumer-groups", "--bootstrap-server", bs, "--list", timeout=120)
    assert "UnsupportedVersionException" in groups.stdout + groups.stderr
    assert "The node does not support LIST_GROUPS" in groups.stdout + groups.stderr
    transactions = kafka_tool("kafka-transactions", "--bootstrap-server", bs, "list", timeout=120)
    assert transactions.returncode != 0
    assert "Failed to list transactions: The node does not support LIST_TRANSACTIONS" in transactions.stderr


def test_kafka_leader_election_elects_the_preferred_leader_as_sparkraft_sees_it(cluster):
    cp, brokers = cluster
    bs, bc = f"127.0.0.1:{brokers.ports[101]}", cp.bootstrap()
    _tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "elected", "--partitions", "2",
          "--replication-factor", "2")
    out = kafka_tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "preferred", "--topic",
                     "elected", "--partition", "0")
    # the preferred replica already leads: Kafka's tool says so (ELECTION_NOT_NEEDED) and exits 0
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Valid replica already elected for partitions elected-0" in out.stdout, out.stdout
    described = json.loads(_sparkraft("topics", "describe", "--topic", "elected", "--json", "--bootstrap-controller",
                                      bc).stdout)
    first = next(p for p in described["partitions"] if p["partition"] == 0)
    assert first["leader"] == first["replicas"][0]
    # unclean: a live in-sync leader needs no election either
    out = kafka_tool("kafka-leader-election", "--bootstrap-server", bs, "--election-type", "unclean", "--topic",
                     "elected", "--partition", "1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Valid replica already elected for partitions elected-1" in out.stdout, out.stdout


def test_kafka_reassign_partitions_moves_a_replica_as_sparkraft_then_shows(cluster, tmp_path):
    """kafka-topics --replica-assignment places it; kafka-reassign-partitions --generate proposes,
    --execute moves, --verify waits for the move, as sparkraft's own describe then shows."""
    cp, brokers = cluster
    bs, bc = f"127.0.0.1:{brokers.ports[101]}", cp.bootstrap()
    _tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "moved", "--replica-assignment", "101")
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "moved"}]}))
    proposed = _tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--generate", "--topics-to-move-json-file",
                     str(topics), "--broker-list", "102")
    # the current assignment names broker 101's log directory, which its DescribeLogDirs answered
    assert re.search(r'\{"topic":"moved","partition":0,"replicas":\[101\],"log_dirs":\["/[^"]*b101"\]\}', proposed), \
        proposed
    assert '{"topic":"moved","partition":0,"replicas":[102],"log_dirs":["any"]}' in proposed, proposed
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [102]}]}))
    assert "Successfully started partition reassignment for moved-0" in _tool(
        "kafka-reassign-partitions", "--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan))
    def verified():
        out = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--verify", "--reassignment-json-file",
                         str(plan))
        return "Reassignment of partition moved-0 is completed." in out.stdout and out.returncode == 0
    wait_for(verified, 60, "the move verified complete")
    cancelled = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--cancel", "--reassignment-json-file",
                           str(plan))
    # nothing left to cancel once it completed: Kafka's tool says so, and clears the throttles
    assert cancelled.returncode == 0, cancelled.stderr[-2000:]
    assert "None of the specified partition reassignments are active." in cancelled.stdout, cancelled.stdout
    described = json.loads(_sparkraft("topics", "describe", "--topic", "moved", "--json", "--bootstrap-controller",
                                      bc).stdout)
    assert [(p["replicas"], p["leader"]) for p in described["partitions"]] == [([102], 102)]


@pytest.mark.parametrize("release", OLD_TOOLS)
def test_the_tools_of_older_kafka_releases_negotiate_with_a_broker(cluster, release):
    cp, brokers = cluster
    need_kafka(release)
    bs = f"127.0.0.1:{brokers.ports[102]}"
    out = kafka_tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", f"old-{release}",
                     "--partitions", "2", "--replication-factor", "2", kafka=release)
    assert out.returncode == 0, out.stderr[-2000:]
    out = kafka_tool("kafka-topics", "--bootstrap-server", bs, "--describe", "--topic", f"old-{release}",
                     kafka=release)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = _partition_lines(out.stdout)
    ours = json.loads(_sparkraft("topics", "describe", "--topic", f"old-{release}", "--json",
                                 "--bootstrap-controller", cp.bootstrap()).stdout)
    assert sorted(rows) == [p["partition"] for p in ours["partitions"]]
    for p in ours["partitions"]:
        assert int(rows[p["partition"]]["Leader"]) == p["leader"]
    out = kafka_tool("kafka-cluster", "cluster-id", "--bootstrap-server", bs, kafka=release)
    assert out.stdout.strip() == f"Cluster ID: {cp.cluster_id}", out.stderr[-2000:]


def test_kafka_configs_alters_client_quotas_as_sparkraft_then_shows(cluster):
    cp, brokers = cluster
    bs = f"127.0.0.1:{brokers.ports[101]}"
    assert "Completed updating config for client c-quota." in _tool(
        "kafka-configs", "--bootstrap-server", bs, "--alter", "--entity-type", "clients", "--entity-name", "c-quota",
        "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    described = _tool("kafka-configs", "--bootstrap-server", bs, "--describe", "--entity-type", "clients",
                      "--entity-name", "c-quota")
    assert "producer_byte_rate=1024.0" in described and "consumer_byte_rate=2048.0" in described, described
    out = _sparkraft("configs", "describe", "--entity-type", "clients", "--entity-name", "c-quota", "--json",
                     "--bootstrap-controller", cp.bootstrap())
    assert out.returncode == 0, out.stderr
    assert {(e["name"], float(e["value"])) for e in json.loads(out.stdout)} >= {("producer_byte_rate", 1024.0),
                                                                                ("consumer_byte_rate", 2048.0)}


def test_a_fenced_broker_is_listed_so_and_nothing_is_moved_onto_it(cluster, tmp_path):
    """Broker 102 paused (SIGSTOP): it is fenced, and `kafka-cluster list-endpoints
    --include-fenced-brokers` says so (KIP-1073), the plain listing leaves it out, and Kafka's
    reassignment tool will not move a replica onto it."""
    import signal

    cp, brokers = cluster
    bs, bc = f"127.0.0.1:{brokers.ports[101]}", cp.bootstrap()
    _tool("kafka-topics", "--bootstrap-server", bs, "--create", "--topic", "stuck", "--replica-assignment", "101")
    paused = brokers.procs[102]
    paused.send_signal(signal.SIGSTOP)
    try:
        def listed_fenced():
            out = kafka_tool("kafka-cluster", "list-endpoints", "--bootstrap-server", bs, "--include-fenced-brokers")
            return re.search(rf"^102\s+127\.0\.0\.1\s+{brokers.ports[102]}\s+null\s+fenced\s+broker", out.stdout, re.M)
        wait_for(listed_fenced, 60, "broker 102 listed as fenced")
        assert not re.search(r"^102\s", _tool("kafka-cluster", "list-endpoints", "--bootstrap-server", bs), re.M)
        plan = tmp_path / "stuck.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "stuck", "partition": 0,
                                                                  "replicas": [101, 102]}]}))
        # Kafka's tool moves nothing onto a broker it is not told of (a fenced one), as against Kafka
        refused = kafka_tool("kafka-reassign-partitions", "--bootstrap-server", bs, "--execute",
                             "--reassignment-json-file", str(plan))
        assert "Unknown broker id 102" in refused.stdout, refused.stdout[-2000:]
        described = json.loads(_sparkraft("topics", "describe", "--topic", "stuck", "--json",
                                          "--bootstrap-controller", bc).stdout)
        assert [p["replicas"] for p in described["partitions"]] == [[101]]
    finally:
        paused.send_signal(signal.SIGCONT)
    wait_for(lambda: re.search(r"^102\s.*\bunfenced\b", _tool("kafka-cluster", "list-endpoints", "--bootstrap-server",
                                                              bs), re.M), 60, "broker 102 unfenced again")
