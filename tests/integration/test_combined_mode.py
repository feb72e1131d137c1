"""Combined mode on real processes: three nodes with ``process.roles=broker,controller``, as Kafka's
quickstart runs them, each a voter of the quorum and a registered broker in one process.

The quorum elects and the three brokers are unfenced; a topic of RF 3 gets leaders on all three;
SIGTERM of the node whose broker leads something moves those leaderships away (controlled shutdown)
before the process exits 0, and the other two keep serving; started again (``sparkraft broker
start`` on the same file), the node rejoins the quorum and its broker the ISRs.
"""
from __future__ import annotations

import subprocess

import pytest
from conftest import free_ports, sparkraft_cmd, wait_for

pytestmark = pytest.mark.slow

pytest.importorskip("quorum.controller.core")

from quorum.rpc.controller_client import ControllerClient  # noqa: E402

FAST = {"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "300"}


def unfenced(client) -> set[int]:
    try:
        return {b.broker_id for b in client.describe_cluster().brokers if not b.fenced}
    except Exception:
        return set()


def test_three_combined_nodes_serve_stop_and_rejoin(controller_processes):
    cp = controller_processes(**{"process.roles": "broker,controller"}, **FAST)
    broker_ports = dict(zip(cp.voters, free_ports(len(cp.voters))))
    for i in cp.voters:  # each node: its controller listener, and a broker listener beside it
        props = dict(line.split("=", 1) for line in cp.config(i).read_text().splitlines() if "=" in line)
        props["listeners"] = f"CONTROLLER://127.0.0.1:{cp.ports[i]},PLAINTEXT://127.0.0.1:{broker_ports[i]}"
        cp.config(i).write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    cp.format()
    cp.start()
    client = ControllerClient(cp.bootstrap(), timeout=30, rpc_timeout=1.0)
    try:
        cp.wait_leader()
        wait_for(lambda: unfenced(client) == {1, 2, 3}, 30, "three combined nodes' brokers unfenced")
        endpoints = {b.broker_id: b.endpoints for b in client.describe_cluster().brokers}
        assert all([e.name for e in eps] == ["PLAINTEXT"] for eps in endpoints.values())
        client.create_topic("quickstart", 6, 3)
        leaders = {p.leader for p in client.describe_topic("quickstart").partitions}
        assert leaders == {1, 2, 3}

        cp.send(2, 15)  # SIGTERM
        assert cp.procs[2].wait(30) == 0, "node 2 did not exit cleanly"
        output = cp.output(2).read_text()
        assert "controlled shutdown complete" in output
        cp.wait_leader(exclude=(2,))
        # (read once a new active controller answers: a standby's image may lag a moment behind)
        wait_for(lambda: all(p.leader in (1, 3) for p in client.describe_topic("quickstart").partitions), 10,
                 "node 2's leaderships on nodes 1 and 3")
        client.create_topic("while-2-is-down", 1, 2)  # the other two still form the quorum

        out = open(cp.output(2), "ab")
        cp.procs[2] = subprocess.Popen(sparkraft_cmd("broker", "start", "--config", str(cp.config(2))),
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        cp._outputs.append(out)
        wait_for(lambda: 2 in unfenced(client), 30, "node 2's broker unfenced again")
        wait_for(lambda: all(len(p.isr) == 3 for p in client.describe_topic("quickstart").partitions), 30,
                 "node 2's broker back in every ISR")
        def node_2_caught_up():
            info = cp.wait_leader()
            ends = {v.replica_id: v.log_end_offset for v in info.voters}
            return ends.get(2, -1) >= info.high_watermark - 1
        wait_for(node_2_caught_up, 30, "node 2's controller caught up with the quorum")
    except BaseException:
        print(cp.dump_outputs())
        raise
    finally:
        client.close()
