"""A whole cluster of real processes on 127.0.0.1: 3 ``sparkraft controller start`` + 3 ``sparkraft
broker start``.

One scenario, in order: brokers register and are unfenced; topics and configs are created; SIGKILL of
the active controller keeps everything (served by the new one); SIGKILL of a broker fences it after
its session timeout (1.5 s here) and moves its leaderships; SIGTERM of a broker performs a controlled
shutdown that moves its leaderships before the process exits 0.
"""
from __future__ import annotations

import re
import signal

import pytest
from conftest import BrokerProcesses, wait_for

from quorum.controller import api
from quorum.errors import SparkraftError

pytestmark = pytest.mark.slow

pytest.importorskip("quorum.controller.core")

from quorum.rpc.controller_client import ControllerClient  # noqa: E402

SESSION = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300"}
BROKERS = ((101, "rack-a"), (102, "rack-b"), (103, "rack-c"))


def brokers_by_id(client) -> dict[int, api.BrokerDescription]:
    try:
        return {b.broker_id: b for b in client.describe_cluster().brokers}
    except SparkraftError:
        return {}


def leaders(client, topic: str) -> list[int]:
    return [p.leader for p in client.describe_topic(topic).partitions]


def _metadata_summary(log_path) -> list[dict]:
    """The broker's last words about its metadata: offset reached, records fetched, where from."""
    pattern = re.compile(r"metadata at offset (-?\d+); (\d+) records fetched since it started from (\w+)")
    found = [m.groups() for m in pattern.finditer(log_path.read_text())]
    assert found, f"no metadata summary in {log_path}"
    return [{"offset": int(o), "fetched": int(f), "source": s} for o, f, s in found]


def test_cluster_of_processes_survives_controller_and_broker_failures(controller_processes, tmp_path):
    cp = controller_processes(**SESSION)
    cp.format()
    cp.start()
    brokers = BrokerProcesses(tmp_path, cp, dict(BROKERS), SESSION)
    client = ControllerClient(cp.bootstrap(), timeout=20, rpc_timeout=1.0)
    try:
        cp.wait_leader()
        for broker_id, _ in BROKERS:
            brokers.start(broker_id)
        wait_for(lambda: (bs := brokers_by_id(client)) and len(bs) == 3 and not any(b.fenced for b in bs.values()),
                 20, "three unfenced brokers")
        assert {b.rack for b in brokers_by_id(client).values()} == {"rack-a", "rack-b", "rack-c"}

        # topics and configs through the active controller
        client.create_topic("orders", 6, 3, [("retention.ms", "60000")])
        client.create_topic("payments", 3, 2)
        client.alter_configs(api.ConfigResourceKey("TOPIC", "payments"),
                             [api.AlterableConfig("cleanup.policy", "SET", "compact")])
        orders = client.describe_topic("orders")
        assert set(leaders(client, "orders")) == {101, 102, 103}

        # SIGKILL the active controller: everything is still there, served by the new one
        first = client.describe_cluster().controller_id
        cp.kill(first)
        cp.wait_leader(exclude=(first,))
        client.create_topic("after-failover", 1, 3)
        assert client.describe_cluster().controller_id not in (None, first)
        assert set(client.list_topics()) == {"orders", "payments", "after-failover"}
        assert client.describe_topic("orders").topic_id == orders.topic_id
        entries = {e.name: e.value for e in client.describe_configs(api.ConfigResourceKey("TOPIC", "payments"))}
        assert entries["cleanup.policy"] == "compact"
        entries = {e.name: e.value for e in client.describe_configs(api.ConfigResourceKey("TOPIC", "orders"))}
        assert entries["retention.ms"] == "60000"
        wait_for(lambda: len(bs := brokers_by_id(client)) == 3 and not any(b.fenced for b in bs.values()),
                 10, "brokers heartbeating with the new controller")

        # SIGKILL a broker: fenced after the session timeout, its leaderships move
        brokers.procs[101].kill()
        brokers.procs[101].wait(10)
        wait_for(lambda: brokers_by_id(client).get(101) and brokers_by_id(client)[101].fenced, 10,
                 "broker 101 fenced after its session timeout")
        wait_for(lambda: 101 not in leaders(client, "orders"), 5, "leaderships moved off broker 101")
        for p in client.describe_topic("orders").partitions:
            assert p.leader in (102, 103) and 101 not in p.isr

        # SIGTERM a broker: controlled shutdown moves its leaderships before it exits
        assert 102 in leaders(client, "orders")
        brokers.procs[102].send_signal(signal.SIGTERM)
        assert brokers.procs[102].wait(15) == 0, "broker 102 did not exit cleanly"
        assert 102 not in leaders(client, "orders"), "broker 102 exited while still leading partitions"
        assert all(p.leader == 103 for p in client.describe_topic("orders").partitions)
        b102 = brokers_by_id(client)[102]
        assert b102.fenced or b102.in_controlled_shutdown
        stopped = _metadata_summary(tmp_path / "broker-102.log")[-1]

        # Restart it: it starts from its cache, fetches only what came after, and is unfenced
        client.create_topic("while-102-was-down", 50, 1)
        brokers.start(102)
        wait_for(lambda: (b := brokers_by_id(client).get(102)) and not b.fenced, 20, "broker 102 unfenced again")
        brokers.procs[102].send_signal(signal.SIGTERM)
        assert brokers.procs[102].wait(15) == 0
        restarted = _metadata_summary(tmp_path / "broker-102.log")[-1]
        assert restarted["source"] == "cache"
        assert restarted["fetched"] == restarted["offset"] - stopped["offset"], "fetched only what it missed"
        assert restarted["fetched"] >= 51  # the topic created while it was down, at least
    except BaseException:
        print(cp.dump_outputs())
        print(brokers.dump())
        raise
    finally:
        client.close()
        brokers.close()
