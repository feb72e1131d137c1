"""Day-2 operations on real processes on 127.0.0.1: 3 ``sparkraft controller start`` + 4 ``sparkraft
broker start``, driven through the ``sparkraft`` commands an operator would type.

One scenario, in order:

1. Decommission broker 104: ``reassign-partitions --generate`` over 101-103, ``--execute``, then
   SIGKILL of the active controller while the reassignments are in flight. The partitions' leader
   brokers bring the new replicas into the ISRs (AlterPartition) and the new active controller
   completes the reassignments; ``--verify`` says so; broker 104 then holds no replica, stops and
   is unregistered.
2. A rolling restart of brokers 101-103 (SIGTERM, restart, wait until it is back in every ISR, as
   an operator waits for no under-replicated partitions): each restart moves leadership away, and
   the active controller's automatic leader balance gives it back to the preferred replicas.
"""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import BrokerProcesses, sparkraft_cmd, wait_for

pytestmark = pytest.mark.slow

pytest.importorskip("quorum.controller.core")

from quorum.rpc.controller_client import ControllerClient  # noqa: E402

SETTINGS = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300",
            "leader.imbalance.check.interval.seconds": "1"}
BROKERS = (101, 102, 103, 104)


def sparkraft(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def unfenced(client) -> set[int]:
    try:
        return {b.broker_id for b in client.describe_cluster().brokers if not b.fenced}
    except Exception:  # a controller failing over
        return set()


def partitions(client, *topics):
    return [p for t in topics for p in client.describe_topic(t).partitions]


def under_replicated(client, *topics) -> list:
    return [p for p in partitions(client, *topics) if len(p.isr) < len(p.replicas)]


def test_decommission_by_reassignment_and_a_rolling_restart(controller_processes, tmp_path):
    cp = controller_processes(**SETTINGS)
    cp.format()
    cp.start()
    brokers = BrokerProcesses(tmp_path, cp, {b: None for b in BROKERS}, SETTINGS)
    client = ControllerClient(cp.bootstrap(), timeout=30, rpc_timeout=1.0)
    boot = ("--bootstrap-controller", cp.bootstrap())
    try:
        cp.wait_leader()
        for b in BROKERS:
            brokers.start(b)
        wait_for(lambda: unfenced(client) == set(BROKERS), 30, "four unfenced brokers")
        client.create_topic("orders", 8, 2)
        client.create_topic("events", 12, 3)
        assert any(104 in p.replicas for p in partitions(client, "orders", "events"))

        # 1. decommission broker 104 by reassignment, with the active controller killed midway
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "orders"}, {"topic": "events"}]}))
        generated = sparkraft("reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics),
                              "--broker-list", "101,102,103", *boot)
        assert generated.returncode == 0, generated.stderr
        plan = tmp_path / "plan.json"
        plan.write_text(generated.stdout.strip().splitlines()[-1])
        executed = sparkraft("reassign-partitions", "--execute", "--reassignment-json-file", str(plan), *boot)
        assert executed.returncode == 0, executed.stdout + executed.stderr
        assert executed.stdout.strip().splitlines()[-1].startswith("Successfully started partition reassignments")
        active = client.describe_cluster().controller_id
        cp.kill(active)
        cp.wait_leader(exclude=(active,))

        def verified():
            return sparkraft("reassign-partitions", "--verify", "--reassignment-json-file", str(plan),
                             *boot).returncode == 0
        wait_for(verified, 60, "every reassignment completed", interval=0.5)
        wanted = {(e["topic"], e["partition"]): tuple(e["replicas"]) for e in json.loads(plan.read_text())["partitions"]}
        for topic in ("orders", "events"):
            for p in client.describe_topic(topic).partitions:
                assert p.replicas == wanted[(topic, p.partition)]
                assert 104 not in p.replicas and 104 not in p.isr and p.leader in p.isr
        assert client.list_reassignments() == ()
        assert brokers.stop(104) == 0
        out = sparkraft("cluster", "unregister", "--id", "104", *boot)
        assert out.returncode == 0 and out.stdout.strip() == "Broker 104 is no longer registered.", out.stderr
        assert {b.broker_id for b in client.describe_cluster().brokers} == {101, 102, 103}

        # 2. a rolling restart; leadership returns to the preferred replicas by itself
        def balanced():
            return all(p.leader == p.replicas[0] for p in partitions(client, "orders", "events"))
        wait_for(balanced, 30, "leaders on their preferred replicas before the roll", interval=0.2)
        for b in (101, 102, 103):
            assert brokers.stop(b) == 0, f"broker {b} did not exit cleanly"
            assert all(p.leader != b for p in partitions(client, "orders", "events")), f"{b} still leads"
            brokers.start(b)
            wait_for(lambda: b in unfenced(client), 30, f"broker {b} unfenced again")
            wait_for(lambda: not under_replicated(client, "orders", "events"), 30,
                     f"broker {b} back in every ISR", interval=0.2)
        wait_for(balanced, 30, "leaders balanced again after the roll", interval=0.2)
        assert {p.leader for p in partitions(client, "orders", "events")} == {101, 102, 103}
    except BaseException:
        print(cp.dump_outputs())
        print(brokers.dump())
        raise
    finally:
        client.close()
        brokers.close()
