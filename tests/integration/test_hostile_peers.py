"""Raft requests from someone posing as a voter, sent with the generated gRPC stubs to real
controller processes: refused before the core sees them, never counted, never fatal.

The scenario that lost an acknowledged write: both followers paused, a client sends Fetch with a
follower's replica_id at the leader's log end. The leader must not count it, so an append it
cannot replicate is never acknowledged.
"""
from __future__ import annotations

import signal
import threading
import time

import grpc
import pytest
from conftest import wait_for

from quorum.errors import SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc.peer_identity import METADATA_KEY

pytestmark = pytest.mark.slow


def stub(cp, node_id):
    channel = grpc.insecure_channel(f"127.0.0.1:{cp.ports[node_id]}")
    return channel, raft_pb2_grpc.RaftStub(channel)


def refused(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as e:
        call()
    assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED, e.value
    return e.value


def test_requests_posing_as_a_voter_are_refused_and_change_nothing(controller_processes):
    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    info = cp.wait_leader()
    leader, epoch = info.leader_id, info.leader_epoch
    follower = next(v for v in cp.voters if v != leader)
    channel, s = stub(cp, leader)
    forged_credentials = ((METADATA_KEY, f"{follower}:{'ab' * 16}"),)
    try:
        fetch = raft_pb2.FetchRequest(cluster_id=cp.cluster_id, epoch=epoch, replica_id=follower,
                                      fetch_offset=0, last_fetched_epoch=0, max_wait_ms=0, max_bytes=1024)
        e = refused(lambda: s.Fetch(fetch, timeout=5))
        assert "carries no peer credentials" in e.details()
        e = refused(lambda: s.Fetch(fetch, timeout=5, metadata=forged_credentials))
        assert "does not vouch for it" in e.details()
        e = refused(lambda: s.Fetch(fetch, timeout=5, metadata=((METADATA_KEY, f"{leader}:{'cd' * 16}"),)))
        assert "credentials are node" in e.details()
        # the BeginQuorumEpoch that used to kill the leader, and the Vote that used to stop the quorum
        begin = raft_pb2.BeginQuorumEpochRequest(cluster_id=cp.cluster_id, epoch=epoch, leader_id=follower)
        refused(lambda: s.BeginQuorumEpoch(begin, timeout=5, metadata=forged_credentials))
        vote = raft_pb2.VoteRequest(cluster_id=cp.cluster_id, epoch=2 ** 31 - 1, candidate_id=follower,
                                    last_epoch=2 ** 31 - 1, last_offset=1 << 40, voter_id=leader)
        for target in cp.voters:  # a majority elected the leader; the third may still be starting
            wait_for(lambda: "started: cluster" in cp.output(target).read_text(errors="replace"), 60,
                     f"controller {target} to listen")
        for target in cp.voters:
            ch, other = stub(cp, target)
            with ch:
                refused(lambda: other.Vote(vote, timeout=5))
        # an observer (replica_id -1) needs no credentials and is served
        observer = raft_pb2.FetchRequest(cluster_id=cp.cluster_id, epoch=epoch, replica_id=-1, fetch_offset=0,
                                         last_fetched_epoch=0, max_wait_ms=0, max_bytes=1024)
        assert s.Fetch(observer, timeout=5).error == 0
    finally:
        channel.close()
    time.sleep(1.0)  # an election would have started by now
    after = cp.wait_leader()
    assert (after.leader_id, after.leader_epoch) == (leader, epoch)
    assert all(cp.alive(v) for v in cp.voters)
    with cp.client() as c:
        c.append([b"still-writable"])
    output = cp.output(leader).read_text()
    assert "refused FetchRequest from" in output and f"as voter {follower}" in output


def test_a_forged_follower_fetch_cannot_get_a_write_acknowledged(controller_processes):
    cp = controller_processes(raft_only=True)
    cp.format()
    cp.start()
    info = cp.wait_leader()
    leader = info.leader_id
    followers = [v for v in cp.voters if v != leader]
    with cp.client() as c:
        c.append([b"before"])
    stop = threading.Event()
    forged = {"sent": 0, "answered": 0}

    def forge() -> None:
        channel, s = stub(cp, leader)
        last = None  # (epoch, leader's log end) as last described: an attacker keeps forging after a resign
        with channel:
            while not stop.is_set():
                try:
                    d = s.DescribeQuorum(raft_pb2.DescribeQuorumRequest(cluster_id=cp.cluster_id), timeout=2)
                    if d.current_voters:
                        last = (d.leader_epoch, max(v.log_end_offset for v in d.current_voters))
                except grpc.RpcError:
                    pass
                if last is None:
                    time.sleep(0.05)
                    continue
                epoch, end = last
                for f in followers:
                    request = raft_pb2.FetchRequest(cluster_id=cp.cluster_id, epoch=epoch, replica_id=f,
                                                    fetch_offset=end, last_fetched_epoch=epoch,
                                                    max_wait_ms=0, max_bytes=1024)
                    forged["sent"] += 1
                    try:  # short: a refusal may wait on proving a paused follower's session
                        s.Fetch(request, timeout=0.5, metadata=((METADATA_KEY, f"{f}:{'ee' * 16}"),))
                        forged["answered"] += 1  # it reached the core
                    except grpc.RpcError:
                        pass
                time.sleep(0.01)

    for f in followers:
        cp.send(f, signal.SIGSTOP)
    forger = threading.Thread(target=forge, daemon=True)
    forger.start()
    try:
        wait_for(lambda: forged["sent"] >= 10, 30, "forged fetches on their way")
        with cp.client(timeout=4, rpc_timeout=4) as c:
            with pytest.raises(SparkraftError):
                c.append([b"never-acknowledged"])  # no follower holds it: it must not be acknowledged
    finally:
        stop.set()
        forger.join(10)
        for f in followers:
            cp.send(f, signal.SIGCONT)
    assert forged["sent"] > 0 and forged["answered"] == 0
    cp.kill(leader)
    cp.wait_leader(exclude=(leader,))
