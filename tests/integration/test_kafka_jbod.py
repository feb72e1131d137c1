"""JBOD (KIP-858) with a real Apache Kafka 4.4 broker on sparkraft's controllers: broker 101 has two
log directories. Its replicas start UNASSIGNED (it has more than one), it says where it put each
(AssignReplicasToDirs), and when one directory fails (replaced by a file, so Kafka's next
checkpoint there fails) its heartbeat names it offline: the controllers take its replicas there out
of their ISRs and move their leaderships to broker 102, keep those in the other directory, and the
Delta tables show the broker's one online directory and each partition's directories. Before that,
broker 101 cordons its directories (KIP-1066, ``cordoned.log.dirs``, metadata.version 4.3-IV0): the
controllers record them and place no new replica on it until it uncordons them."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from apache_kafka import KafkaBrokers, need_kafka, until_ok
from conftest import free_ports, sparkraft_cmd, wait_for
from processes import watched

pytestmark = pytest.mark.slow

PARTITIONS = 8
MIGRATING, UNASSIGNED = "AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"


def _cli_json(cp, *args: str):
    out = subprocess.run(sparkraft_cmd(*args, "--json", "--bootstrap-controller", cp.bootstrap()),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _directory_ids(root) -> dict[str, str]:
    """A formatted Kafka log directory's id, from its meta.properties: path -> id."""
    found = {}
    for props in root.glob("*/meta.properties"):
        fields = dict(line.split("=", 1) for line in props.read_text().splitlines() if "=" in line)
        found[str(props.parent)] = fields["directory.id"].strip()
    return found


def test_a_failed_log_directory_moves_its_replicas_leaderships_and_the_tables_show_it(controller_processes,
                                                                                      tmp_path):
    need_kafka()
    cp = controller_processes(**{"broker.session.timeout.ms": "6000"})
    cp.format()
    cp.start()
    cp.wait_leader(timeout=60)
    root = tmp_path / "kafka"
    root.mkdir()
    voters = ",".join(f"{i}@127.0.0.1:{cp.ports[i]}" for i in cp.voters)
    kb = KafkaBrokers(root, cp.cluster_id, voters, "CONTROLLER", dict(zip((101, 102), free_ports(2))),
                      extra={"offsets.topic.replication.factor": 2, "log.flush.offset.checkpoint.interval.ms": 500})
    jbod = [root / "data-101-a", root / "data-101-b"]
    config = kb.config(101)
    config.write_text(config.read_text().replace(f"log.dirs={root / 'data-101'}",
                                                 "log.dirs=" + ",".join(str(d) for d in jbod)))
    kb.format()
    ids = _directory_ids(root)
    dir_a, dir_b = ids[str(jbod[0])], ids[str(jbod[1])]
    for b in (101, 102):
        kb.start(b)
    with watched(cp.dump_outputs, kb.dump, closing=(kb.close,)):
        wait_for(lambda: all("has been unfenced" in kb.log(b) for b in (101, 102)), 180, "both brokers unfenced")
        brokers = {b["broker_id"]: b for b in _cli_json(cp, "brokers", "list")}
        assert set(brokers) == {101, 102}
        until_ok("kafka-topics", "--bootstrap-server", kb.bootstrap_server, "--create", "--topic", "jbod",
                 "--replica-assignment", ",".join(["101:102"] * PARTITIONS))

        def directories() -> dict[int, str]:
            """Each partition's directory of broker 101's replica, in the controllers' image (the shell)."""
            return {pid: p["directories"][p["replicas"].index(101)] if p["directories"] else MIGRATING
                    for pid, p in _partitions_in_shell(cp).items()}

        # broker 101 picked a directory for each of its replicas and told the controllers
        wait_for(lambda: set(directories().values()) <= {dir_a, dir_b} and len(directories()) == PARTITIONS, 120,
                 "broker 101's replicas assigned to its directories (AssignReplicasToDirs)")
        placed = directories()
        in_b = sorted(pid for pid, d in placed.items() if d == dir_b)
        assert in_b and len(in_b) < PARTITIONS, placed  # Kafka spreads them over both
        described = _cli_json(cp, "topics", "describe", "--topic", "jbod")["partitions"]
        assert all(p["leader"] == 101 for p in described), described

        # KIP-1066: broker 101 cordons both its directories (a dynamic broker config); new topics go elsewhere
        def cordoned() -> "list | None":
            return _shell_json(cp, "/image/cluster/101")[0]["cordoned_log_dirs"]

        until_ok("kafka-configs", "--bootstrap-server", kb.bootstrap_server, "--alter", "--entity-type", "brokers",
                 "--entity-name", "101", "--add-config", "cordoned.log.dirs=*")
        wait_for(lambda: sorted(cordoned() or []) == sorted([dir_a, dir_b]), 120, "broker 101's directories cordoned")
        for topic in ("elsewhere", "anywhere"):
            until_ok("kafka-topics", "--bootstrap-server", kb.bootstrap_server, "--create", "--topic", topic,
                     "--partitions", "6", "--replication-factor", "1")
            replicas = {b for p in _cli_json(cp, "topics", "describe", "--topic", topic)["partitions"]
                        for b in p["replicas"]}
            assert (replicas == {102}) if topic == "elsewhere" else (101 in replicas), (topic, replicas)
            if topic == "elsewhere":
                until_ok("kafka-configs", "--bootstrap-server", kb.bootstrap_server, "--alter", "--entity-type",
                         "brokers", "--entity-name", "101", "--delete-config", "cordoned.log.dirs")
                wait_for(lambda: cordoned() == [], 120, "broker 101's directories uncordoned")

        # directory b fails: a file where the directory was, so the next checkpoint there fails
        shutil.rmtree(jbod[1])
        jbod[1].write_text("not a directory")
        wait_for(lambda: all(p["leader"] == 102 and 101 not in p["isr"]
                             for p in _cli_json(cp, "topics", "describe", "--topic", "jbod")["partitions"]
                             if p["partition"] in in_b), 120,
                 "the replicas in the failed directory out of their ISRs, broker 102 leading them")
        after = {p["partition"]: p for p in _cli_json(cp, "topics", "describe", "--topic", "jbod")["partitions"]}
        for pid, p in after.items():
            if pid not in in_b:
                assert p["leader"] == 101 and 101 in p["isr"], (pid, p)  # the other directory's are untouched
        assert not {b["broker_id"]: b for b in _cli_json(cp, "brokers", "list")}[101]["fenced"]

        tables = _tables(cp, tmp_path)
        broker_101 = {r["broker_id"]: r for r in tables["brokers"]}[101]
        assert broker_101["log_dirs"] == [dir_a], broker_101
        rows = {r["partition"]: r for r in tables["partitions"] if r["topic_name"] == "jbod"}
        for pid in in_b:
            assert rows[pid]["directories"][0] == dir_b and 101 not in rows[pid]["isr"], rows[pid]


def _tables(cp, tmp_path) -> dict[str, list[dict]]:
    """The Delta tables at their newest cut, written by ``sparkraft materialize --available-now``."""
    from delta_tables.cut import latest_cut, read_table, tables_at

    wh, ck = tmp_path / "wh", tmp_path / "ck"
    out = subprocess.run(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse",
                                       str(wh), "--checkpoint", str(ck), "--available-now"),
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    tables = tables_at(str(wh), latest_cut(str(wh)))
    return {name: read_table(tables[name]).to_pylist() for name in ("brokers", "partitions")}


def _partitions_in_shell(cp) -> dict[int, dict]:
    """``cat /image/topics/byName/jbod/N`` in ``sparkraft shell``: each partition as the image has it."""
    return dict(enumerate(_shell_json(cp, *(f"/image/topics/byName/jbod/{pid}" for pid in range(PARTITIONS)))))


def _shell_json(cp, *paths: str) -> list:
    """``cat`` of each of ``paths`` in ``sparkraft shell`` against the controllers, as JSON values."""
    script = "".join(f"cat {path}\n" for path in paths)
    out = subprocess.run(sparkraft_cmd("shell", "--bootstrap-controller", cp.bootstrap()), input=script,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    decoder, found, at = json.JSONDecoder(), [], out.stdout.find("{")
    while at != -1:
        value, end = decoder.raw_decode(out.stdout, at)
        found.append(value)
        at = out.stdout.find("{", end)
    return found
