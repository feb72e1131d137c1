"""Kafka 4 on sparkraft's controllers: a Kafka 4.4 broker on three sparkraft controllers (one port
each) sees Kafka's own metadata.version and feature levels, and serves Kafka 4's group protocols
through a SIGKILL of the active controller: a KIP-848 consumer group (``group.protocol=consumer``,
which needs ``group.version`` 1) and a KIP-932 share group (``share.version`` 1, its
``share.auto.offset.reset`` a group config set with ``kafka-configs --entity-type groups``); and a
transactional producer at ``transaction.version`` 2 (KIP-890), whose committed transactions a
read_committed reader sees and whose aborted ones it does not."""
from __future__ import annotations

import re
import subprocess

import pytest
from apache_kafka import KafkaBrokers, java, java_clients, kafka_tool, need_kafka, until_ok
from conftest import free_ports, wait_for
from processes import watched

pytestmark = pytest.mark.slow

BROKER = 101
MESSAGES = 2000


def _features(bootstrap_server: str) -> dict[str, str]:
    """``kafka-features describe`` through a broker: feature -> its finalized level as Kafka prints it."""
    out = until_ok("kafka-features", "--bootstrap-server", bootstrap_server, "describe")
    return dict(re.findall(r"^Feature: (\S+)\s.*FinalizedVersionLevel: (\S+)", out, re.M))


def test_kafka_4_brokers_see_kafkas_levels_and_serve_consumer_and_share_groups(controller_processes, tmp_path):
    need_kafka()
    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader(timeout=60)
    root = tmp_path / "kafka"
    root.mkdir()
    voters = ",".join(f"{i}@127.0.0.1:{cp.ports[i]}" for i in cp.voters)
    kb = KafkaBrokers(root, cp.cluster_id, voters, "CONTROLLER", {BROKER: free_ports(1)[0]}, extra={
        "share.coordinator.state.topic.replication.factor": 1, "share.coordinator.state.topic.min.isr": 1})
    kb.format()
    kb.start(BROKER)
    with watched(cp.dump_outputs, kb.dump, closing=(kb.close,)):
        wait_for(lambda: "has been unfenced" in kb.log(BROKER), 180, "the Kafka broker unfenced")
        server = kb.bootstrap_server
        levels = _features(server)
        assert levels["metadata.version"] == "4.4-IV2" and levels["group.version"] == "0", levels
        assert "sparkraft.version" not in levels, "sparkraft's own feature never reaches Kafka's brokers"
        until_ok("kafka-features", "--bootstrap-server", server, "upgrade", "--feature", "group.version=1",
                 "--feature", "share.version=1", "--feature", "transaction.version=2")
        levels = _features(server)
        assert (levels["group.version"], levels["share.version"], levels["transaction.version"]) == ("1", "1", "2"), \
            levels

        until_ok("kafka-topics", "--bootstrap-server", server, "--create", "--topic", "k4", "--partitions", "3",
                 "--replication-factor", "1")
        # a share group's configs are the group's own (KIP-932): set through the broker, which forwards
        # them to the controllers; a value Kafka's group coordinator refuses gets Kafka's message
        bad = kafka_tool("kafka-configs", "--bootstrap-server", server, "--alter", "--entity-type", "groups",
                         "--entity-name", "sharing", "--add-config", "share.record.lock.duration.ms=70000")
        assert bad.returncode != 0 and "must be in the range 15000 to 60000 inclusive" in bad.stdout + bad.stderr, \
            bad.stdout + bad.stderr
        until_ok("kafka-configs", "--bootstrap-server", server, "--alter", "--entity-type", "groups",
                 "--entity-name", "sharing", "--add-config", "share.auto.offset.reset=earliest")
        wait_for(lambda: "share.auto.offset.reset=earliest" in kafka_tool(
            "kafka-configs", "--bootstrap-server", server, "--describe", "--entity-type", "groups",
            "--entity-name", "sharing").stdout, 60, "the broker to see the group's config")
        shared_file = tmp_path / "share.txt"
        with open(shared_file, "w") as share_out:
            share = subprocess.Popen(java("-Xmx256m", "-cp", f"{need_kafka()}/*",
                                          "org.apache.kafka.tools.consumer.ConsoleShareConsumer", "--bootstrap-server",
                                          server, "--topic", "k4", "--group", "sharing", "--timeout-ms", "30000"),
                                     stdout=share_out, stderr=subprocess.DEVNULL)
        acks = tmp_path / "acks.txt"
        with open(acks, "w") as out:
            producer = java_clients("produce", server, "k4", str(MESSAGES), "3", "100", stdout=out)
            wait_for(lambda: any(line.strip().isdigit() for line in shared_file.read_text().splitlines()), 120,
                     "the share group's first message")
            leader = cp.wait_leader(timeout=60).leader_id
            cp.kill(leader)  # the active controller, while producing and sharing
            cp.wait_leader(timeout=60, exclude=(leader,))
            cp.start([leader])
            assert producer.wait(300) == 0
        assert acks.read_text().splitlines()[-1] == "DONE failed=0"
        share.wait(180)  # it ends 30 s after its last message
        shared = [int(line) for line in shared_file.read_text().splitlines() if line.strip().isdigit()]
        # from the earliest offset of every partition (the group's config), each message at least once
        # (a share group's promise; a record whose acquisition lock lapsed may come twice)
        assert sorted(set(shared)) == list(range(MESSAGES)), \
            f"the share group got {len(set(shared))} of {MESSAGES} messages ({len(shared)} deliveries)"

        # a KIP-848 consumer group reads it all (the broker's group coordinator, group.version 1)
        config = tmp_path / "consumer.properties"
        config.write_text("group.protocol=consumer\nauto.offset.reset=earliest\n")
        stop = tmp_path / "stop"
        read = tmp_path / "read.txt"
        with open(read, "w") as out:
            consumer = java_clients("consume", server, "k4", "new-protocol", str(stop), stdout=out,
                                    env={"KAFKA_CLIENT_CONFIG": str(config)})
            wait_for(lambda: len(read.read_text().splitlines()) >= MESSAGES, 180, "the consumer group read it all")
            stop.touch()
            assert consumer.wait(120) == 0
        values = sorted(int(line.split()[2]) for line in read.read_text().splitlines() if len(line.split()) == 3)
        assert values == list(range(MESSAGES))
        described = until_ok("kafka-consumer-groups", "--bootstrap-server", server, "--describe", "--group",
                             "new-protocol", "--state")
        assert "uniform" in described, f"not KIP-848's server-side assignor: {described}"

        # transactions at transaction.version 2, through another SIGKILL of the active controller
        until_ok("kafka-topics", "--bootstrap-server", server, "--create", "--topic", "tx", "--partitions", "3",
                 "--replication-factor", "1")
        done = tmp_path / "tx.txt"
        with open(done, "w") as out:
            transactional = java_clients("txproduce", server, "tx", "800", "50", stdout=out)
            wait_for(lambda: "COMMITTED" in done.read_text(), 120, "the first committed transaction")
            leader = cp.wait_leader(timeout=60).leader_id
            cp.kill(leader)
            cp.wait_leader(timeout=60, exclude=(leader,))
            cp.start([leader])
            assert transactional.wait(300) == 0
        outcome = done.read_text().split()
        committed = {int(outcome[i + 1]) for i, word in enumerate(outcome) if word == "COMMITTED"}
        aborted = {int(outcome[i + 1]) for i, word in enumerate(outcome) if word == "ABORTED"}
        assert len(committed) == 12 and len(aborted) == 4 and outcome[-1] == "DONE", outcome[-6:]
        isolation = tmp_path / "read_committed.properties"
        isolation.write_text("isolation.level=read_committed\n")
        read = tmp_path / "tx-read.txt"
        with open(read, "w") as out:
            reader = java_clients("read", server, "tx", stdout=out, env={"KAFKA_CLIENT_CONFIG": str(isolation)})
            assert reader.wait(300) == 0
        seen = sorted(int(line.split()[2]) for line in read.read_text().splitlines() if len(line.split()) == 3)
        assert seen == sorted(n for first in committed for n in range(first, first + 50)), \
            "a read_committed reader sees every committed transaction's messages once, and no aborted one"
