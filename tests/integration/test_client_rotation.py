"""Brokers keep their sessions while a controller is paused, whichever it is: clients try a server
that just timed out after the others, start from a server of their own, and a new active
controller gives every registered broker a fresh session.

It used to be that pausing the controller listed first fenced every broker: each heartbeat tried
that node first and spent its whole budget waiting for it.
"""
from __future__ import annotations

import signal
import threading
import time

import grpc
import pytest
from conftest import LiveBrokers, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("pause", ["first-listed follower", "first-listed leader"])
def test_pausing_the_first_listed_controller_fences_no_broker(controller_processes, pause):
    from quorum.controller.api import DescribeClusterRequest
    from quorum.gen.sparkraft.v1 import controller_pb2_grpc
    from quorum.rpc import controller_convert as cc
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    leader = cp.wait_leader().leader_id
    if pause == "first-listed leader":
        first = leader
    else:
        first = next(v for v in cp.voters if v != leader)
    order = [first] + [v for v in cp.voters if v != first]
    # as `broker start` builds its client: the whole heartbeat budget is one attempt's timeout
    heartbeat_client = ControllerClient(cp.bootstrap(order), timeout=2.0, rpc_timeout=2.0)
    others = [v for v in cp.voters if v != first]
    brokers = LiveBrokers(heartbeat_client, cp.cluster_id, heartbeat_interval_ms=2000)
    fenced_seen: set[int] = set()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.3):
            for v in others:
                try:
                    fenced_seen.update(b.broker_id for b in seen_by(v) if b.fenced)
                except Exception:
                    pass  # a failover in progress

    def seen_by(voter: int):
        """The brokers as this voter's replayed metadata shows them, asked of it alone: a
        ControllerClient would prefer the active controller's answer, and fall back on a standby's
        older one when the active controller (the paused one) does not answer."""
        with grpc.insecure_channel(cp.bootstrap([voter])) as channel:
            resp = controller_pb2_grpc.ControllerStub(channel).DescribeCluster(
                cc.request_to_proto(DescribeClusterRequest()), timeout=2)
        return cc.reply_from_proto("DescribeCluster", resp).brokers

    def unfenced_as_seen_by(voter: int) -> bool:
        try:
            seen = seen_by(voter)
        except grpc.RpcError:  # a standby still starting its controller on a loaded machine
            return False
        return len(seen) == len(brokers.epochs) and not any(b.fenced for b in seen)

    try:
        brokers.wait_unfenced()
        # A standby learns of a commit a fetch later: until it has replayed the unfencing records it
        # still shows the brokers as registered-and-fenced. That is lag, not fencing; and pausing
        # the leader right then would keep the standbys lagging until a new leader is elected.
        for v in others:
            wait_for(lambda: unfenced_as_seen_by(v), 20, f"controller {v} to see every broker unfenced")
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        cp.send(first, signal.SIGSTOP)
        time.sleep(15)  # well past broker.session.timeout.ms (9 s)
        stop.set()  # watched while it was paused: once resumed, a stale leader may still act on
        t.join(10)  # its own stopped clock before it learns of its successor (nothing it writes commits)
        cp.send(first, signal.SIGCONT)
        wait_for(lambda: cp.wait_leader() is not None, 20, "a leader")
        assert fenced_seen == set(), f"brokers fenced while controller {first} was paused: {sorted(fenced_seen)}"
    finally:
        stop.set()
        cp.send(first, signal.SIGCONT)
        brokers.close()
        heartbeat_client.close()
