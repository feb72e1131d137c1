"""``sparkraft topics|configs|brokers`` against three real controller processes.

Brokers register and keep heartbeating from threads of the test (``LiveBrokers``). Checks the exact JSON shapes of DESIGN §10, and that bad input prints one line
starting with Kafka's error name, exits non-zero and changes nothing.
"""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import sparkraft_cmd

from quorum.errors import SparkraftError

pytestmark = pytest.mark.slow

pytest.importorskip("quorum.controller.core")

BROKER_KEYS = {"broker_id", "fenced", "in_controlled_shutdown", "broker_epoch", "rack", "endpoints"}


def sparkraft(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from conftest import ControllerProcesses, LiveBrokers

    from quorum.rpc.controller_client import ControllerClient

    cp = ControllerProcesses(tmp_path_factory.mktemp("topics-cli"))
    brokers = None
    try:
        cp.format()
        cp.start()
        cp.wait_leader()
        admin = ControllerClient(cp.bootstrap(), timeout=20)
        brokers = LiveBrokers(admin, cp.cluster_id)
        brokers.wait_unfenced()
        yield cp
    except SparkraftError:
        print(cp.dump_outputs())
        raise
    finally:
        if brokers is not None:
            brokers.close()
            admin.close()
        cp.close()


def ok(*args: str) -> str:
    result = sparkraft(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_create_describe_list_json_shapes(cluster):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    out = ok("topics", "create", "--topic", "orders", "--partitions", "3", "--replication-factor", "2",
             "--config", "retention.ms=60000", *boot)
    assert out.strip() == "Created topic orders."

    d = json.loads(ok("topics", "describe", "--topic", "orders", "--json", *boot))
    assert set(d) == {"name", "topic_id", "partitions", "configs"}
    assert d["name"] == "orders" and isinstance(d["topic_id"], str) and len(d["topic_id"]) == 22
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    for p in d["partitions"]:
        assert set(p) == {"partition", "leader", "replicas", "isr", "leader_epoch"}
        assert len(p["replicas"]) == 2 and p["leader"] in p["replicas"] and isinstance(p["leader_epoch"], int)
    assert d["configs"] == {"retention.ms": "60000"}

    text = ok("topics", "describe", "--topic", "orders", *boot)
    assert text.startswith("Topic: orders\tTopicId: ") and "PartitionCount: 3" in text

    assert "orders" in json.loads(ok("topics", "list", "--json", *boot))

    brokers = json.loads(ok("brokers", "list", "--json", *boot))
    assert [b["broker_id"] for b in brokers] == [101, 102, 103]
    for b in brokers:
        assert set(b) == BROKER_KEYS
        assert b["fenced"] is False and b["in_controlled_shutdown"] is False
        assert b["endpoints"] == [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 19000 + b["broker_id"],
                                   "security_protocol": "PLAINTEXT"}]
    assert [b["rack"] for b in brokers] == ["rack-a", "rack-b", "rack-c"]

    ok("configs", "alter", "--entity-type", "topics", "--entity-name", "orders",
       "--add-config", "cleanup.policy=compact", "--delete-config", "retention.ms", *boot)
    rows = json.loads(ok("configs", "describe", "--entity-type", "topics", "--entity-name", "orders", "--json", *boot))
    assert all(set(r) == {"name", "value", "source"} for r in rows)
    by_name = {r["name"]: r for r in rows}
    assert by_name["cleanup.policy"] == {"name": "cleanup.policy", "value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert by_name.get("retention.ms", {}).get("source") != "DYNAMIC_TOPIC_CONFIG"

    ok("topics", "delete", "--topic", "orders", *boot)
    assert "orders" not in json.loads(ok("topics", "list", "--json", *boot))


def test_alter_adds_partitions_and_refuses_anything_else(cluster):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("topics", "create", "--topic", "growing", "--partitions", "2", "--replication-factor", "2", *boot)
    before = json.loads(ok("topics", "describe", "--topic", "growing", "--json", *boot))
    assert ok("topics", "alter", "--topic", "growing", "--partitions", "5", *boot).strip() == \
        "Topic growing has 5 partitions now."
    after = json.loads(ok("topics", "describe", "--topic", "growing", "--json", *boot))
    assert after["topic_id"] == before["topic_id"]
    assert after["partitions"][:2] == before["partitions"]  # the old ones untouched
    assert [p["partition"] for p in after["partitions"]] == [0, 1, 2, 3, 4]
    for p in after["partitions"][2:]:  # the new ones as a new topic's: the same replication factor, led
        assert len(p["replicas"]) == 2 and len(set(p["replicas"])) == 2 and p["leader"] in p["replicas"]
        assert set(p["replicas"]) <= {101, 102, 103} and p["isr"] == p["replicas"]
    for args, error in [(("--topic", "growing", "--partitions", "3"), "INVALID_PARTITIONS"),
                        (("--topic", "growing", "--partitions", "5"), "INVALID_PARTITIONS"),
                        (("--topic", "nope", "--partitions", "9"), "UNKNOWN_TOPIC_OR_PARTITION")]:
        result = sparkraft("topics", "alter", *args, *boot)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"{error}: "), (args, result.stderr)
    assert json.loads(ok("topics", "describe", "--topic", "growing", "--json", *boot)) == after
    ok("topics", "delete", "--topic", "growing", *boot)


def test_leader_election_reports_as_kafka_does(cluster):
    """What kafka-leader-election prints and exits with (the elections themselves are the
    controller's, tested in tests/unit/controller/test_controller_requests.py)."""
    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("topics", "create", "--topic", "elect", "--partitions", "2", "--replication-factor", "3", *boot)
    before = json.loads(ok("topics", "describe", "--topic", "elect", "--json", *boot))
    for kind in ("PREFERRED", "UNCLEAN", "preferred"):
        out = ok("leader-election", "--election-type", kind, "--topic", "elect", "--partition", "1", *boot)
        assert out.strip() == "Valid replica already elected for partitions elect-1"
    result = sparkraft("leader-election", "--election-type", "PREFERRED", "--topic", "nope", "--partition", "0", *boot)
    assert result.returncode == 1
    assert result.stdout.strip().startswith("Error completing leader election (PREFERRED) for partition: nope-0: "
                                            "UNKNOWN_TOPIC_OR_PARTITION: ")
    out = ok("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions", *boot)
    assert "Error" not in out  # every leader here is its preferred replica, or was made so
    for bad in (("--topic", "elect"), ("--all-topic-partitions", "--partition", "0"), ("--partition", "0")):
        result = sparkraft("leader-election", "--election-type", "PREFERRED", *bad, *boot)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("ERROR: "), (bad, result.stderr)
    after = json.loads(ok("topics", "describe", "--topic", "elect", "--json", *boot))
    assert [p["leader"] for p in after["partitions"]] == [p["replicas"][0] for p in before["partitions"]]
    ok("topics", "delete", "--topic", "elect", *boot)


def test_an_election_of_many_partitions_is_answered_in_runs_and_printed_whole(cluster):
    """A topic's partitions led by another replica than their first (the replica order rotated, as
    after a rolling restart): ElectLeaders of every partition elects them all, the real controller
    answers the client in a run per topic (ElectLeadersResult.more_partitions), and the command
    prints every one of them."""
    from quorum.controller import api
    from quorum.errors import Errors
    from quorum.rpc.controller_client import ControllerClient

    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("topics", "create", "--topic", "rotated", "--partitions", "40", "--replication-factor", "3", *boot)
    with ControllerClient(cluster.bootstrap(), timeout=20) as admin:
        described = admin.describe_topic("rotated")
        moves = [(api.TopicPartition("rotated", p.partition), p.replicas[1:] + p.replicas[:1])
                 for p in described.partitions]
        assert all(r.error is Errors.NONE for r in admin.alter_reassignments(moves))
        results = admin.elect_leaders("PREFERRED", [tp for tp, _ in moves[:20]])
        assert isinstance(results, api.PartitionResults)
        assert [r[1] for r in results.runs()] == [list(range(20))]  # one run, in partition order
        assert all(r.error is Errors.NONE for r in results) and len(results) == 20
    out = ok("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions", *boot)
    (line,) = [x for x in out.splitlines() if x.startswith("Successfully completed leader election (PREFERRED) "
                                                           "for partitions ")]
    elected = line.split(" for partitions ", 1)[1].split(", ")  # (other tests' topics may be in it too)
    assert [x for x in elected if x.startswith("rotated-")] == [f"rotated-{i}" for i in range(20, 40)]
    after = json.loads(ok("topics", "describe", "--topic", "rotated", "--json", *boot))
    assert all(p["leader"] == p["replicas"][0] for p in after["partitions"])
    # on the wire: a run is one result to a client that asks for runs, one result each to one that does not
    import grpc

    from quorum.gen.sparkraft.v1 import controller_pb2, controller_pb2_grpc

    leader = cluster.wait_leader().leader_id
    with ControllerClient(cluster.bootstrap(), timeout=20) as admin, \
            grpc.insecure_channel(f"127.0.0.1:{cluster.ports[leader]}") as channel:
        stub = controller_pb2_grpc.ControllerStub(channel)
        for by_topic in (True, False):
            rotate = [(api.TopicPartition("rotated", p["partition"]), p["replicas"][1:] + p["replicas"][:1])
                      for p in after["partitions"][:5]]
            assert all(r.error is Errors.NONE for r in admin.alter_reassignments(rotate))
            after = json.loads(ok("topics", "describe", "--topic", "rotated", "--json", *boot))
            answer = stub.ElectLeaders(controller_pb2.ElectLeadersRequest(
                election_type="PREFERRED", all_partitions=True, results_by_topic=by_topic), timeout=20)
            assert answer.error == 0, answer.error_message
            if by_topic:
                assert [(r.partition.partition, list(r.more_partitions)) for r in answer.results] == [(0, [1, 2, 3, 4])]
            else:
                assert [(r.partition.partition, list(r.more_partitions)) for r in answer.results] == \
                    [(i, []) for i in range(5)]
    ok("topics", "delete", "--topic", "rotated", *boot)


def test_cluster_unregister_takes_a_broker_out_of_the_metadata(cluster):
    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient
    from quorum.uuids import random_uuid

    boot = ("--bootstrap-controller", cluster.bootstrap())
    with ControllerClient(cluster.bootstrap(), timeout=20) as admin:  # a broker that is gone for good
        admin.register_broker(api.RegisterBrokerRequest(150, cluster.cluster_id, random_uuid(),
                                                        (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 19150),)))
    assert 150 in [b["broker_id"] for b in json.loads(ok("brokers", "list", "--json", *boot))]
    assert ok("cluster", "unregister", "--id", "150", *boot).strip() == "Broker 150 is no longer registered."
    assert [b["broker_id"] for b in json.loads(ok("brokers", "list", "--json", *boot))] == [101, 102, 103]
    result = sparkraft("cluster", "unregister", "--id", "150", *boot)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("BROKER_ID_NOT_REGISTERED: ")


def test_broker_and_cluster_configs(cluster):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("configs", "alter", "--entity-type", "cluster", "--add-config", "log.retention.ms=2000", *boot)
    ok("configs", "alter", "--entity-type", "brokers", "--entity-name", "101",
       "--add-config", "log.retention.ms=1000,log.cleanup.policy=[delete,compact]", *boot)
    rows = json.loads(ok("configs", "describe", "--entity-type", "cluster", "--json", *boot))
    assert {"name": "log.retention.ms", "value": "2000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"} in rows
    assert all(r["source"] != "DEFAULT_CONFIG" for r in rows)
    rows = json.loads(ok("configs", "describe", "--entity-type", "brokers", "--entity-name", "101", "--json", *boot))
    by_name = {r["name"]: r for r in rows}
    assert by_name["log.retention.ms"] == {"name": "log.retention.ms", "value": "1000",
                                           "source": "DYNAMIC_BROKER_CONFIG"}
    assert by_name["log.cleanup.policy"]["value"] == "delete,compact"
    everything = json.loads(ok("configs", "describe", "--entity-type", "brokers", "--entity-name", "101", "--all",
                               "--json", *boot))
    assert any(r["source"] == "DEFAULT_CONFIG" for r in everything) and len(everything) > len(rows)


@pytest.mark.parametrize("args,error", [
    (("--topic", "bad/name", "--partitions", "1", "--replication-factor", "1"), "INVALID_TOPIC_EXCEPTION"),
    (("--topic", "..", "--partitions", "1", "--replication-factor", "1"), "INVALID_TOPIC_EXCEPTION"),
    (("--topic", "zero", "--partitions", "0", "--replication-factor", "1"), "INVALID_PARTITIONS"),
    (("--topic", "rf-too-high", "--partitions", "1", "--replication-factor", "4"), "INVALID_REPLICATION_FACTOR"),
    (("--topic", "bad-config", "--partitions", "1", "--replication-factor", "1", "--config", "no.such.key=1"),
     "INVALID_CONFIG"),
    (("--topic", "bad-config2", "--partitions", "1", "--replication-factor", "1", "--config", "noequals"),
     "INVALID_CONFIG"),
])
def test_bad_create_prints_one_line_and_changes_nothing(cluster, args, error):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    before = ok("topics", "list", "--json", *boot)
    result = sparkraft("topics", "create", *args, *boot)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{error}: "), result.stderr
    assert ok("topics", "list", "--json", *boot) == before


def test_other_errors_are_one_line(cluster):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    for args, error in [
        (("topics", "describe", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (("topics", "delete", "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION"),
        (("configs", "alter", "--entity-type", "topics", "--entity-name", "nope", "--add-config", "retention.ms=1"),
         "UNKNOWN_TOPIC_OR_PARTITION"),
        (("configs", "alter", "--entity-type", "topics"), "INVALID_REQUEST"),
    ]:
        result = sparkraft(*args, *boot)
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and lines[0].startswith(f"{error}: "), (args, result.stderr)


def test_help():
    for args in (["topics", "create"], ["topics", "alter"], ["leader-election"], ["reassign-partitions"], ["topics", "describe"],
                 ["configs", "alter"], ["brokers", "list"], ["cluster", "unregister"],
                 ["broker", "start"]):
        result = sparkraft(*args, "--help")
        assert result.returncode == 0 and result.stdout.startswith("usage: sparkraft"), result


def test_a_metadata_controller_refuses_raw_appends_and_keeps_working(cluster):
    from quorum.rpc.raft_client import RaftClient

    boot = ("--bootstrap-controller", cluster.bootstrap())
    before = json.loads(ok("topics", "list", "--json", *boot))
    with RaftClient(cluster.bootstrap(), timeout=5) as c:
        with pytest.raises(SparkraftError) as e:
            c.append([b"not a metadata record"])
    assert e.value.error.name == "INVALID_REQUEST" and "--raft-only" in e.value.message
    ok("topics", "create", "--topic", "after-raw-append", "--partitions", "1", "--replication-factor", "1", *boot)
    assert sorted(json.loads(ok("topics", "list", "--json", *boot))) == sorted(before + ["after-raw-append"])


def test_a_large_topic_is_described_a_page_at_a_time(cluster):
    from quorum.controller.read_requests import PARTITION_PAGE
    from quorum.rpc.controller_client import ControllerClient

    n = 2 * PARTITION_PAGE + 500
    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("topics", "create", "--topic", "wide", "--partitions", str(n), "--replication-factor", "1", *boot)
    with ControllerClient(cluster.bootstrap(), timeout=20) as c:
        pages = list(c.describe_topic_pages("wide"))
        assert [len(p.partitions) for p in pages] == [PARTITION_PAGE, PARTITION_PAGE, 500]
        assert [p.next_partition for p in pages] == [PARTITION_PAGE, 2 * PARTITION_PAGE, 0]
        assert all(p.partition_count == n for p in pages)
        (small,) = c.describe_topics(["wide"], first_partition=7, partition_limit=3)
        assert [p.partition for p in small.partitions] == [7, 8, 9] and small.next_partition == 10
        whole = c.describe_topic("wide")
        assert [p.partition for p in whole.partitions] == list(range(n))
    d = json.loads(ok("topics", "describe", "--topic", "wide", "--json", *boot))
    assert set(d) == {"name", "topic_id", "partitions", "configs"}
    assert [p["partition"] for p in d["partitions"]] == list(range(n))
    text = ok("topics", "describe", "--topic", "wide", *boot).splitlines()
    assert text[0].startswith("Topic: wide\t") and f"PartitionCount: {n}\t" in text[0] and len(text) == n + 1


def test_reassign_partitions_execute_verify_cancel_as_kafka(cluster, tmp_path):
    """kafka-reassign-partitions' JSON and lines. Nothing here moves a replica into an ISR (these
    brokers are heartbeats only), so a reassignment adding a broker stays in flight until cancelled;
    one that only reorders completes at once."""
    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("topics", "create", "--topic", "moving", "--partitions", "2", "--replication-factor", "2", *boot)
    parts = {p["partition"]: p["replicas"] for p in json.loads(ok("topics", "describe", "--topic", "moving",
                                                                  "--json", *boot))["partitions"]}
    spare = ({101, 102, 103} - set(parts[1])).pop()
    target = {0: parts[0][::-1], 1: [spare, parts[1][0]]}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": p, "replicas": r} for p, r in target.items()]}))
    out = ok("reassign-partitions", "--execute", "--reassignment-json-file", str(plan), *boot)
    lines = out.strip().splitlines()
    assert lines[0] == "Current partition replica assignment"
    rollback = json.loads(lines[2])
    assert {p["partition"]: p["replicas"] for p in rollback["partitions"]} == parts
    assert lines[-1] == "Successfully started partition reassignments for moving-0,moving-1"
    result = sparkraft("reassign-partitions", "--verify", "--reassignment-json-file", str(plan), *boot)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["Status of partition reassignment:",
                                          "Reassignment of partition moving-0 is completed.",
                                          "Reassignment of partition moving-1 is still in progress."]
    out = ok("reassign-partitions", "--cancel", "--reassignment-json-file", str(plan), *boot)
    assert out.strip() == "Successfully cancelled partition reassignment for: moving-1"
    now = {p["partition"]: p["replicas"] for p in json.loads(ok("topics", "describe", "--topic", "moving",
                                                                "--json", *boot))["partitions"]}
    assert now == {0: target[0], 1: parts[1]}
    result = sparkraft("reassign-partitions", "--cancel", "--reassignment-json-file", str(plan), *boot)
    assert result.returncode == 1 and result.stderr.startswith("NO_REASSIGNMENT_IN_PROGRESS: ")


@pytest.mark.parametrize("entries, error", [
    ([{"topic": "moving2", "partition": 0, "replicas": [101, 999]}], "INVALID_REPLICA_ASSIGNMENT: "),
    ([{"topic": "moving2", "partition": 0, "replicas": [101, 101]}], "INVALID_REPLICA_ASSIGNMENT: "),
    ([{"topic": "moving2", "partition": 0, "replicas": []}], "INVALID_REPLICA_ASSIGNMENT: "),
    ([{"topic": "moving2", "partition": 0, "replicas": [101]}] * 2, "INVALID_REQUEST: "),
    ([{"topic": "nope", "partition": 0, "replicas": [101]}], "UNKNOWN_TOPIC_OR_PARTITION: "),
    ([{"topic": "moving2", "partition": 7, "replicas": [101]}], "UNKNOWN_TOPIC_OR_PARTITION: "),
    ([{"topic": "moving2", "partition": "0", "replicas": [101]}], "ERROR: "),
    ([], "INVALID_REQUEST: "),
])
def test_a_bad_reassignment_is_one_line_and_changes_nothing(cluster, tmp_path, entries, error):
    from quorum.controller.api import CreatableTopic
    from quorum.rpc.controller_client import ControllerClient

    boot = ("--bootstrap-controller", cluster.bootstrap())
    admin = ControllerClient(cluster.bootstrap(), timeout=20)  # the state checks, without a process each
    admin.create_topics([CreatableTopic("moving2", 1, 2)])  # TOPIC_ALREADY_EXISTS after the first case
    before = admin.describe_topic("moving2")
    plan = tmp_path / "bad.json"
    plan.write_text(json.dumps({"version": 1, "partitions": entries}))
    result = sparkraft("reassign-partitions", "--execute", "--reassignment-json-file", str(plan), *boot)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith(error), result.stderr
    assert result.stdout == ""
    assert admin.describe_topic("moving2") == before
    admin.close()


def test_reassign_partitions_generate_proposes_over_the_broker_list(cluster, tmp_path):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    ok("topics", "create", "--topic", "spread", "--partitions", "4", "--replication-factor", "2", *boot)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "spread"}]}))
    before = ok("topics", "describe", "--topic", "spread", "--json", *boot)
    out = ok("reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics),
             "--broker-list", "102,103", *boot)
    lines = out.strip().splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment configuration"
    current, proposed = json.loads(lines[1]), json.loads(lines[4])
    assert [p["partition"] for p in current["partitions"]] == [0, 1, 2, 3]
    assert [p["partition"] for p in proposed["partitions"]] == [0, 1, 2, 3]
    assert all(sorted(p["replicas"]) == [102, 103] for p in proposed["partitions"])
    assert ok("topics", "describe", "--topic", "spread", "--json", *boot) == before  # nothing changed
    result = sparkraft("reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics),
                       "--broker-list", "102,999", *boot)
    assert result.returncode == 1 and result.stderr.startswith("INVALID_REPLICA_ASSIGNMENT: ")


def test_features_describe_and_a_downgrade_kafkas_rules_refuse_then_allow(cluster, tmp_path):
    """kafka-features' describe lines, metadata.version by Kafka's names; a downgrade that would leave
    ELR without the metadata.version it needs is refused, and goes through with ELR lowered in the
    same command; a reassignment in flight survives any level (Kafka's always had them); the upgrade
    back restores the level."""
    boot = ("--bootstrap-controller", cluster.bootstrap())
    rows = {r["feature"]: r for r in json.loads(ok("features", "describe", "--json", *boot))}
    assert rows["metadata.version"]["finalized_version_level"] == 33
    assert (rows["metadata.version"]["supported_min_version"], rows["metadata.version"]["supported_max_version"]) \
        == (14, 33)
    assert rows["eligible.leader.replicas.version"]["supported_max_version"] == 1
    assert rows["sparkraft.version"]["finalized_version_level"] == 1
    line = next(x for x in ok("features", "describe", *boot).splitlines() if x.startswith("Feature: metadata.version"))
    assert line.startswith("Feature: metadata.version\tSupportedMinVersion: 3.6-IV2\tSupportedMaxVersion: 4.4-IV2\t"
                           "FinalizedVersionLevel: 4.4-IV2\tEpoch: ")
    ok("features", "upgrade", "--feature", "eligible.leader.replicas.version=1", *boot)
    ok("topics", "create", "--topic", "downgraded", "--partitions", "1", "--replication-factor", "1", *boot)
    (part,) = json.loads(ok("topics", "describe", "--topic", "downgraded", "--json", *boot))["partitions"]
    spare = sorted({101, 102, 103} - set(part["replicas"]))[0]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "downgraded", "partition": 0,
                                                              "replicas": [spare]}]}))
    ok("reassign-partitions", "--execute", "--reassignment-json-file", str(plan), *boot)  # stays in flight here
    try:
        result = sparkraft("features", "downgrade", "--metadata", "3.9", *boot)
        assert result.returncode == 1
        assert result.stdout.startswith("Could not downgrade metadata.version to 21. INVALID_UPDATE_VERSION: "
                                        "Invalid update version 21 for feature metadata.version. "
                                        "eligible.leader.replicas.version 1 needs metadata.version 23"), result.stdout
        assert json.loads(ok("features", "describe", "--json", *boot))[0]["finalized_version_level"] == 33
        out = ok("features", "downgrade", "--metadata", "3.6-IV2", "--feature", "eligible.leader.replicas.version=0",
                 *boot)
        assert "metadata.version was downgraded to 14." in out and \
            "eligible.leader.replicas.version was downgraded to 0." in out, out
        (now,) = json.loads(ok("topics", "describe", "--topic", "downgraded", "--json", *boot))["partitions"]
        assert set(now["replicas"]) == set(part["replicas"]) | {spare}, "the reassignment is still in flight"
    finally:
        assert "metadata.version was upgraded to 33." in ok("features", "upgrade", "--metadata", "4.4-IV2", *boot)


def test_client_quota_configs_as_kafka_configs(cluster):
    boot = ("--bootstrap-controller", cluster.bootstrap())
    out = ok("configs", "alter", "--entity-type", "users", "--entity-name", "quota-user", "--add-config",
             "producer_byte_rate=1024,consumer_byte_rate=2048", *boot)
    assert out.strip() == "Completed updating config for user-principal 'quota-user'."
    ok("configs", "alter", "--entity-type", "users", "--entity-name", "quota-user", "--entity-type", "clients",
       "--entity-name", "app", "--add-config", "request_percentage=50", *boot)
    ok("configs", "alter", "--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=10", *boot)
    ok("configs", "alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config",
       "connection_creation_rate=5", *boot)
    out = ok("configs", "describe", "--entity-type", "users", "--entity-name", "quota-user", *boot)
    assert out.strip() == ("Quota configs for user-principal 'quota-user' are consumer_byte_rate=2048.0, "
                           "producer_byte_rate=1024.0")
    out = ok("configs", "describe", "--entity-type", "users", "--entity-name", "quota-user", "--entity-type",
             "clients", *boot)
    assert out.strip() == "Quota configs for client-id 'app', user-principal 'quota-user' are request_percentage=50.0"
    out = ok("configs", "describe", "--entity-type", "clients", "--entity-default", *boot)
    assert out.strip() == "Quota configs for the default client-id are producer_byte_rate=10.0"
    rows = json.loads(ok("configs", "describe", "--entity-type", "ips", "--json", *boot))
    assert rows == [{"entity": {"ip": "10.1.2.3"}, "name": "connection_creation_rate", "value": 5.0,
                     "source": "DYNAMIC_QUOTA_CONFIG"}]
    ok("configs", "alter", "--entity-type", "users", "--entity-name", "quota-user", "--delete-config",
       "consumer_byte_rate", *boot)
    out = ok("configs", "describe", "--entity-type", "users", "--entity-name", "quota-user", *boot)
    assert out.strip() == "Quota configs for user-principal 'quota-user' are producer_byte_rate=1024.0"


@pytest.mark.parametrize("args, error", [
    (["--entity-type", "ips", "--entity-name", "not-an-ip", "--add-config", "connection_creation_rate=1"],
     "INVALID_REQUEST: not-an-ip is not a valid IP"),
    (["--entity-type", "users", "--entity-name", "u", "--add-config", "connection_creation_rate=1"],
     "INVALID_REQUEST: Quota key connection_creation_rate does not apply"),
    (["--entity-type", "clients", "--entity-name", "c", "--add-config", "bogus=1"], "INVALID_REQUEST: Unknown quota key"),
    (["--entity-type", "clients", "--entity-name", "c", "--add-config", "producer_byte_rate=fast"], "INVALID_CONFIG: "),
    (["--entity-type", "users", "--entity-name", "u", "--entity-type", "ips", "--entity-name", "1.2.3.4",
      "--add-config", "producer_byte_rate=1"], "INVALID_REQUEST: Invalid quota entity combination"),
    (["--entity-type", "topics", "--entity-default", "--add-config", "retention.ms=1"], "INVALID_REQUEST: "),
])
def test_a_bad_client_quota_is_one_line_and_changes_nothing(cluster, args, error):
    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    boot = ("--bootstrap-controller", cluster.bootstrap())
    with ControllerClient(cluster.bootstrap(), timeout=20) as admin:  # the state checks, without a process each
        before = admin.call(api.DescribeClientQuotasRequest(()))
        result = sparkraft("configs", "alter", *args, *boot)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith(error), result.stderr
        assert admin.call(api.DescribeClientQuotasRequest(())) == before


@pytest.mark.parametrize("args, says", [
    (["downgrade", "--metadata", "3.5-IV2", "--unsafe"], "metadata.version cannot be lower than 14 (3.6-IV2)"),
    (["upgrade", "--metadata", "34"], "supports only versions 14-33"),
    (["upgrade", "--feature", "group.version=1"], "only supports versions 0-0"),  # a sparkraft broker: no groups
    (["upgrade", "--feature", "no.such.feature=1"], "does not support the given feature"),
    (["downgrade", "--metadata", "34"], "Can't downgrade to a newer version"),
    (["upgrade", "--metadata", "3.9"], "without setting the upgrade type"),
])
def test_a_refused_feature_change_says_why_and_changes_nothing(cluster, args, says):
    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    boot = ("--bootstrap-controller", cluster.bootstrap())
    admin = ControllerClient(cluster.bootstrap(), timeout=20)  # the state checks, without a process each

    def levels():
        return admin.call(api.DescribeFeaturesRequest()).finalized

    before = levels()
    result = sparkraft("features", *args, *boot)
    lines = result.stdout.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stdout + result.stderr
    assert lines[0].startswith("Could not ") and "INVALID_UPDATE_VERSION: " in lines[0] and says in lines[0], lines[0]
    assert levels() == before
    admin.close()
