"""Apache Kafka brokers of three releases on sparkraft's controllers, and a rolling upgrade under
load, as a Kafka operator does one: three controllers formatted at 3.7-IV4 (the newest level Kafka
3.7.2 reads); brokers of Kafka 3.7.2, 3.9.1 and 4.4.0 join and serve a producer; the two older
brokers are restarted one by one as 4.4.0 while it produces; then ``kafka-features upgrade
--metadata 4.4`` and ``group.version=1`` through a broker. Every acknowledged message is in the
log where its acknowledgement said; a Kafka 3.9.1 broker that tries to join afterwards is refused at
registration with Kafka's error, and the controller's log names both ranges."""
from __future__ import annotations

import re
import subprocess
import time

import pytest
from apache_kafka import KafkaBrokers, java_clients, kafka_tool, need_kafka, until_ok
from conftest import free_ports, sparkraft_cmd, wait_for
from processes import watched

pytestmark = pytest.mark.slow

OLD, MIDDLE, NEW = "kafka-3.7.2", "kafka-3.9.1", "kafka-4.4.0"
RELEASES = {101: OLD, 102: MIDDLE, 103: NEW}
LATE = 104  # a Kafka 3.9.1 broker that comes after the upgrade
MESSAGES = 6000


def _unfenced(cp, ids) -> bool:
    import json

    out = subprocess.run(sparkraft_cmd("brokers", "list", "--json", "--bootstrap-controller", cp.bootstrap()),
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        return False
    brokers = {b["broker_id"]: b for b in json.loads(out.stdout)}
    return all(b in brokers and not brokers[b]["fenced"] for b in ids)


def _metadata_version(server: str) -> str:
    out = until_ok("kafka-features", "--bootstrap-server", server, "describe")
    return re.search(r"^Feature: metadata\.version\s.*FinalizedVersionLevel: (\S+)", out, re.M).group(1)


def _in_sync(server: str) -> bool:
    out = kafka_tool("kafka-topics", "--bootstrap-server", server, "--describe", "--topic", "rolling",
                     "--under-replicated-partitions")
    return out.returncode == 0 and not out.stdout.strip()


def test_brokers_of_three_releases_join_and_roll_to_4_4_under_load(controller_processes, tmp_path):
    for release in RELEASES.values():
        need_kafka(release)
    cp = controller_processes(**{"broker.session.timeout.ms": "6000"})
    cp.format_dynamic({i: ["--release-version", "3.7-IV4"] for i in cp.voters})  # sparkraft storage format
    cp.start()
    cp.wait_leader(timeout=60)
    root = tmp_path / "kafka"
    root.mkdir()
    voters = ",".join(f"{i}@127.0.0.1:{cp.ports[i]}" for i in cp.voters)
    kb = KafkaBrokers(root, cp.cluster_id, voters, "CONTROLLER", dict(zip((*RELEASES, LATE), free_ports(4))))
    for b, release in {**RELEASES, LATE: MIDDLE}.items():
        kb.format(release, only=[b])
    for b, release in RELEASES.items():
        kb.start(b, release)
    server = ",".join(f"127.0.0.1:{kb.ports[b]}" for b in RELEASES)
    with watched(cp.dump_outputs, kb.dump, closing=(kb.close,)):
        wait_for(lambda: _unfenced(cp, RELEASES), 240, "brokers of Kafka 3.7.2, 3.9.1 and 4.4.0 unfenced")
        assert _metadata_version(server) == "3.7-IV4"
        until_ok("kafka-topics", "--bootstrap-server", server, "--create", "--topic", "rolling", "--partitions", "6",
                 "--replication-factor", "3", "--config", "min.insync.replicas=2")
        wait_for(lambda: _in_sync(server), 120, "every replica in sync")
        acks = tmp_path / "acks.txt"
        with open(acks, "w") as out:
            producer = java_clients("produce", server, "rolling", str(MESSAGES), "6", "100", stdout=out)
            for b in (101, 102):  # the older brokers, one at a time, as Kafka's upgrade notes say
                time.sleep(3)
                assert kb.stop(b, timeout=120) in (0, 143), kb.log(b)[-3000:]
                kb.start(b, NEW)
                wait_for(lambda: _unfenced(cp, (b,)), 180, f"broker {b} back as Kafka 4.4.0")
                wait_for(lambda: _in_sync(server), 180, f"every replica in sync after broker {b}")
            assert producer.wait(600) == 0
        assert acks.read_text().splitlines()[-1] == "DONE failed=0"

        upgraded = until_ok("kafka-features", "--bootstrap-server", server, "upgrade", "--metadata", "4.4",
                            "--feature", "group.version=1")
        assert "metadata.version was upgraded to 33." in upgraded and "group.version was upgraded to 1." in upgraded, \
            upgraded
        assert _metadata_version(server) == "4.4-IV2"

        kb.start(LATE, MIDDLE)  # Kafka 3.9.1 reads up to 3.9-IV0: refused
        wait_for(lambda: "refused the registration of broker 104" in "".join(
            cp.output(i).read_text(errors="replace") for i in cp.voters), 120, "broker 104 refused")
        log = "".join(cp.output(i).read_text(errors="replace") for i in cp.voters)
        assert "it supports metadata.version 1 to 21 (3.0-IV1 to 3.9-IV0), and this cluster's is 33 (4.4-IV2)" in log
        assert not _unfenced(cp, (LATE,))

        read = tmp_path / "read.txt"
        with open(read, "w") as out:
            assert java_clients("read", server, "rolling", stdout=out).wait(300) == 0
        in_log = {int(v): (int(p), int(o)) for p, o, v in (line.split() for line in read.read_text().splitlines()
                                                             if len(line.split()) == 3 and line.split()[0].isdigit())}
        acked = {int(f[3]): (int(f[1]), int(f[2])) for f in (line.split() for line in acks.read_text().splitlines())
                 if f and f[0] == "ACK"}
        assert len(acked) == MESSAGES
        lost = [v for v, where in acked.items() if in_log.get(v) != where]
        assert not lost, f"{len(lost)} acknowledged messages not where their acknowledgement said"
