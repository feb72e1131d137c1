"""Three real RaftNodes in one process: gRPC on 127.0.0.1 ephemeral ports, FileLogs on disk.

Elects, commits, delivers committed batches to listeners in order and exactly once, refuses writes
on followers, hands leadership over on a graceful shutdown, restarts on existing storage, and
serves RaftClient (through a follower and past a dead bootstrap server).
"""
from __future__ import annotations

import socket
import threading
import time

import grpc
import pytest

from quorum.errors import Errors, NotLeaderError, SparkraftError
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.log import control_records
from quorum.log.batch import Batch
from quorum.log.errors import StorageError
from quorum.log.meta_properties import format_storage, random_cluster_id
from quorum.node import RaftNode
from quorum.raft.settings import RaftSettings
from quorum.rpc.peer_identity import METADATA_KEY
from quorum.rpc.raft_client import RaftClient

SETTINGS = RaftSettings(election_timeout_ms=200, fetch_timeout_ms=1000, request_timeout_ms=1000)
VOTERS = (1, 2, 3)


class Quorum:
    """Three nodes formatted under ``root``; ``start``/``stop``/``restart`` one by id."""

    def __init__(self, root, cluster_id=None, settings=None):
        self.root = root
        self.settings = settings or SETTINGS
        self.cluster_id = cluster_id or random_cluster_id()
        self.nodes: dict[int, RaftNode] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        for i in VOTERS:
            format_storage(self.dir(i), self.cluster_id, i)

    def dir(self, i):
        return self.root / f"c{i}"

    def start_all(self):
        for i in VOTERS:
            self.nodes[i] = RaftNode(i, {v: ("127.0.0.1", 0) for v in VOTERS}, ("127.0.0.1", 0), self.dir(i),
                                     self.settings, raw_appends=True)
        self.addresses = {i: ("127.0.0.1", n.port) for i, n in self.nodes.items()}
        for n in self.nodes.values():
            n.set_voter_addresses(self.addresses)
        for n in self.nodes.values():
            n.start()

    def restart(self, i):
        """Start node ``i`` again on its storage and its old port."""
        self.nodes[i] = RaftNode(i, self.addresses, self.addresses[i], self.dir(i), SETTINGS).start()
        return self.nodes[i]

    def leader(self, timeout=10.0, exclude=()) -> RaftNode:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, n in self.nodes.items():
                if i not in exclude and n.status().state == "Leader":
                    return n
            time.sleep(0.01)
        raise AssertionError(f"no leader within {timeout}s: {[n.status() for n in self.nodes.values()]}")

    def followers(self, timeout=10.0):
        """The other running nodes, once they all follow the current leader."""
        leader = self.leader(timeout)
        deadline = time.monotonic() + timeout
        others = [n for n in self.nodes.values() if n is not leader and n.status().state != "Unstarted"
                  and n.fatal_error is None and n.wait_stopped(0) is False]
        while time.monotonic() < deadline:
            if all(n.status().state == "Follower" and n.status().leader_id == leader.node_id for n in others):
                return others
            time.sleep(0.01)
        raise AssertionError(f"followers did not settle: {[n.status() for n in others]}")

    def bootstrap(self, ids=VOTERS):
        return ",".join(f"127.0.0.1:{self.addresses[i][1]}" for i in ids)

    def stop_all(self):
        for n in self.nodes.values():
            n.shutdown(graceful=False)


@pytest.fixture
def quorum(tmp_path):
    q = Quorum(tmp_path)
    q.start_all()
    try:
        yield q
    finally:
        q.stop_all()


class Recorder:
    """A commit listener that remembers every batch and the thread it ran on."""

    def __init__(self):
        self.batches: list[Batch] = []
        self.threads: set[str] = set()
        self.cond = threading.Condition()

    def __call__(self, batches):
        with self.cond:
            self.threads.add(threading.current_thread().name)
            self.batches.extend(batches)
            self.cond.notify_all()

    def wait_until(self, end_offset, timeout=10.0):
        with self.cond:
            assert self.cond.wait_for(lambda: self.batches and self.batches[-1].end_offset >= end_offset, timeout), \
                f"listener reached {self.batches[-1].end_offset if self.batches else 0}, not {end_offset}"

    def records(self):
        """offset -> record of the data (non-control) batches."""
        out = {}
        for b in self.batches:
            if not b.control:
                for k, r in enumerate(b.records):
                    out[b.base_offset + k] = r
        return out


def test_elects_one_leader_that_everyone_follows(quorum):
    leader = quorum.leader()
    ids = {n.wait_for_leader(10) for n in quorum.nodes.values()}
    assert ids == {leader.node_id}
    st = leader.status()
    assert st.state == "Leader" and st.leader_id == leader.node_id and st.epoch >= 1
    desc = leader.describe_quorum()
    assert desc.leader_id == leader.node_id and [v.replica_id for v in desc.voters] == [1, 2, 3]
    # times are wall-clock ms (the node anchors its monotonic clock at the wall clock)
    now_ms = time.time() * 1000
    assert all(abs(v.last_fetch_ms - now_ms) < 60_000 for v in desc.voters if v.last_fetch_ms is not None)
    with pytest.raises(NotLeaderError) as e:
        quorum.followers()[0].describe_quorum()
    assert e.value.leader_id == leader.node_id


def test_propose_commit_and_listeners_in_order_exactly_once(quorum):
    leader = quorum.leader()
    recorders = {i: Recorder() for i in VOTERS}
    for i, n in quorum.nodes.items():
        n.add_commit_listener(recorders[i])
    expected = {}
    futures = []
    for k in range(300):
        records = [f"r{k}-{j}".encode() for j in range(k % 3 + 1)]
        futures.append((records, leader.propose(records)))
    for records, f in futures:
        last = f.result(timeout=10)
        for j, r in enumerate(records):
            expected[last - len(records) + 1 + j] = r
    end = max(expected) + 1
    for i, rec in recorders.items():
        rec.wait_until(end)
        offsets = [b.base_offset for b in rec.batches]
        assert offsets == sorted(offsets) and len(offsets) == len(set(offsets)), f"node {i}: out of order"
        # contiguous from the log start: every offset exactly once
        assert rec.batches[0].base_offset == 0
        for a, b in zip(rec.batches, rec.batches[1:]):
            assert b.base_offset == a.end_offset
        assert rec.records() == expected
        # the first batch is the leader's LeaderChange control record
        first = rec.batches[0]
        assert first.control and control_records.decode_control(first.records[0]).type == control_records.LEADER_CHANGE
        assert all(name.startswith(f"raft-{i}-listener") for name in rec.threads)
    st = leader.status()
    assert st.high_watermark == end and st.log_end_offset == end


def test_a_listener_added_late_gets_everything_from_the_start(quorum):
    leader = quorum.leader()
    last = leader.propose([b"a", b"b"]).result(10)
    rec = Recorder()
    quorum.followers()[0].add_commit_listener(rec)
    rec.wait_until(last + 1)
    assert rec.records() == {last - 1: b"a", last: b"b"}


def test_follower_refuses_proposals_and_names_the_leader(quorum):
    leader = quorum.leader()
    follower = quorum.followers()[0]
    follower.wait_for_leader(10)
    with pytest.raises(NotLeaderError) as e:
        follower.propose([b"x"]).result(5)
    assert e.value.leader_id == leader.node_id
    assert e.value.epoch == leader.status().epoch
    assert e.value.error is Errors.NOT_LEADER_OR_FOLLOWER


def test_graceful_leader_shutdown_hands_over_without_waiting_for_a_timeout(tmp_path):
    # Followers would wait 60 s for a silent leader before campaigning, so a successor within
    # the 20 s wait below can only come from the leader's EndQuorumEpoch.
    quorum = Quorum(tmp_path, settings=RaftSettings(election_timeout_ms=200, fetch_timeout_ms=60_000,
                                                    request_timeout_ms=1000))
    quorum.start_all()
    try:
        _hand_over(quorum)
    finally:
        quorum.stop_all()


def _hand_over(quorum):
    old = quorum.leader(timeout=20)
    old.propose([b"before"]).result(10)
    epoch = old.status().epoch
    old.shutdown(graceful=True)
    new = quorum.leader(timeout=20, exclude=(old.node_id,))
    assert new.node_id != old.node_id and new.status().epoch > epoch
    last = new.propose([b"after"]).result(10)
    assert last >= 2
    with pytest.raises(NotLeaderError):
        old.propose([b"x"]).result(1)


def test_proposals_fail_when_leadership_is_lost_before_they_commit(quorum):
    leader = quorum.leader()
    quorum.followers()
    epoch = leader.status().epoch
    gate = threading.Event()
    leader._call(lambda core, now: gate.wait(5))  # hold the event loop
    pending = [leader.propose([f"doomed-{k}".encode()]) for k in range(5)]
    resigned = leader._call(lambda core, now: core.resign(now))  # same round: nothing was sent yet
    gate.set()
    resigned.result(5)
    for f in pending:
        with pytest.raises(NotLeaderError):
            f.result(5)
    # the quorum carries on under a leader of a later epoch
    deadline = time.monotonic() + 10
    while True:
        new = quorum.leader(timeout=10)
        if new.status().epoch > epoch:
            break
        assert time.monotonic() < deadline, "no leader of a later epoch"
        time.sleep(0.01)
    assert new.propose([b"later"]).result(10) >= 1


def test_restart_on_existing_storage_catches_up(quorum):
    leader = quorum.leader()
    follower = quorum.followers()[0]
    fid = follower.node_id
    follower.shutdown()
    last = None
    for k in range(20):
        last = leader.propose([f"while-down-{k}".encode()]).result(10)
    node = quorum.restart(fid)
    rec = Recorder()
    node.add_commit_listener(rec)
    rec.wait_until(last + 1)
    assert rec.records()[last] == b"while-down-19"
    assert node.wait_for_leader(10) == leader.node_id


def test_raft_client_through_a_follower_and_past_a_dead_server(quorum):
    leader = quorum.leader()
    follower = quorum.followers()[0]
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    bootstrap = f"127.0.0.1:{dead},127.0.0.1:{follower.port}"
    with RaftClient(bootstrap, timeout=10) as client:
        info = client.describe_quorum()
        assert info.leader_id == leader.node_id and info.cluster_id == quorum.cluster_id
        assert client.leader_endpoint == f"127.0.0.1:{leader.port}"
        base, last = client.append([b"c1", b"c2", b"c3"])
        assert last == base + 2
    rec = Recorder()
    leader.add_commit_listener(rec)
    rec.wait_until(last + 1)
    assert [rec.records()[o] for o in range(base, last + 1)] == [b"c1", b"c2", b"c3"]


def test_client_writes_never_take_the_threads_raft_needs(quorum):
    """Each client write holds an RPC thread until it commits, and committing needs the followers'
    Fetches, which need threads too. With every client slot taken, one more write is refused at
    once (REQUEST_TIMED_OUT, which clients retry) instead of queueing in front of Raft, and the
    quorum goes on committing; freed, the slots take writes again."""
    import grpc

    from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
    from quorum.node.server import DEFAULT_RPC_WORKERS, RAFT_RESERVED_WORKERS

    leader = quorum.leader()
    slots = leader.client_slots
    assert slots.limit == DEFAULT_RPC_WORKERS - RAFT_RESERVED_WORKERS
    held = 0
    while slots._free.acquire(blocking=False):  # every waiting-write slot taken
        held += 1
    try:
        with grpc.insecure_channel(f"127.0.0.1:{leader.port}") as channel:
            resp = raft_pb2_grpc.RaftStub(channel).Append(raft_pb2.AppendRequest(records=[b"one more"]), timeout=5)
        assert resp.error == Errors.REQUEST_TIMED_OUT and "already waiting" in resp.error_message
        hw = leader.status().high_watermark
        leader.propose([b"raft itself still commits"]).result(timeout=5)
        assert leader.status().high_watermark > hw
    finally:
        for _ in range(held):
            slots._free.release()
    with RaftClient(quorum.bootstrap(), timeout=10) as client:
        client.append([b"and clients again"])


def test_raft_client_errors(quorum):
    with RaftClient(quorum.bootstrap(), cluster_id=random_cluster_id(), timeout=3) as client:
        with pytest.raises(SparkraftError) as e:
            client.describe_quorum()
        assert e.value.error is Errors.INCONSISTENT_CLUSTER_ID
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with RaftClient(f"127.0.0.1:{dead}", timeout=0.5) as client:
        with pytest.raises(SparkraftError) as e:
            client.append([b"x"])
        assert e.value.error is Errors.NETWORK_EXCEPTION and f"127.0.0.1:{dead}" in str(e.value)


def test_refuses_unformatted_storage_a_busy_port_and_a_locked_directory(quorum, tmp_path):
    with pytest.raises(StorageError, match="not formatted"):
        RaftNode(1, {1: ("127.0.0.1", 0)}, ("127.0.0.1", 0), tmp_path / "blank")
    other = tmp_path / "other"
    format_storage(other, random_cluster_id(), 1)
    busy = quorum.nodes[1].port
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{busy}: address already in use"):
        RaftNode(1, {1: ("127.0.0.1", busy)}, ("127.0.0.1", busy), other)
    with pytest.raises(StorageError, match="in use by another sparkraft process"):
        RaftNode(1, quorum.addresses, ("127.0.0.1", 0), quorum.dir(1))
    with pytest.raises(StorageError, match="node.id=2"):
        RaftNode(2, {2: ("127.0.0.1", 0)}, ("127.0.0.1", 0), other)
    # the failed attempts left the directory usable
    RaftNode(1, {1: ("127.0.0.1", 0)}, ("127.0.0.1", 0), other).shutdown()


def test_a_node_formatted_for_another_cluster_refuses_to_start(quorum, tmp_path):
    quorum.leader()
    foreign_dir = tmp_path / "foreign"
    format_storage(foreign_dir, random_cluster_id(), 3)
    addresses = dict(quorum.addresses)
    addresses[3] = ("127.0.0.1", 0)
    node = RaftNode(3, addresses, ("127.0.0.1", 0), foreign_dir, SETTINGS)
    try:
        with pytest.raises(SparkraftError) as e:
            node.start()
        assert e.value.error is Errors.INCONSISTENT_CLUSTER_ID
        assert quorum.cluster_id in str(e.value)
    finally:
        node.shutdown()


def test_a_node_not_yet_running_answers_unavailable_and_logs_no_refusal(quorum, tmp_path, caplog):
    """While a node still asks the voters for their cluster id it already listens; the leader's
    BeginQuorumEpoch arriving then must be told to come back, not checked against a voter that will
    not vouch for it (a node of another cluster used to log a refused impersonation before its one
    INCONSISTENT_CLUSTER_ID line)."""
    leader = quorum.leader()
    foreign_dir = tmp_path / "foreign"
    format_storage(foreign_dir, random_cluster_id(), 3)
    node = RaftNode(3, dict(quorum.addresses), ("127.0.0.1", 0), foreign_dir, SETTINGS)
    channel = grpc.insecure_channel(f"127.0.0.1:{node.port}")
    begin = raft_pb2.BeginQuorumEpochRequest(cluster_id=quorum.cluster_id, epoch=leader.status().epoch,
                                             leader_id=leader.node_id)
    try:
        with caplog.at_level("WARNING"), pytest.raises(grpc.RpcError) as e:
            raft_pb2_grpc.RaftStub(channel).BeginQuorumEpoch(
                begin, timeout=5, metadata=((METADATA_KEY, f"{leader.node_id}:{'ab' * 16}"),))
        assert e.value.code() is grpc.StatusCode.UNAVAILABLE, e.value
        assert "not running" in e.value.details()
        # (the fixture's own quorum may hold an election meanwhile on a loaded machine: its Vote
        # refusals are not this node's)
        assert not [r for r in caplog.records if "refused BeginQuorumEpoch" in r.getMessage()]
    finally:
        channel.close()
        node.shutdown()


def test_a_proposal_cancelled_before_the_loop_takes_it_is_dropped_quietly(quorum, caplog):
    """A caller that gives up (a request's deadline) cancels its proposal: the records are never
    appended, and the commit-latency callback says nothing (it used to log a CancelledError each
    time, a flood under overload)."""
    leader = quorum.leader()
    busy = leader._call(lambda core, now: time.sleep(0.3))  # hold the event loop for a moment
    end_before = leader.status().log_end_offset
    with caplog.at_level("ERROR"):
        future = leader.propose([b"never"])
        assert future.cancel()
        busy.result(5)
        time.sleep(0.2)
    assert not [r for r in caplog.records if "exception calling callback" in r.getMessage()]
    assert all(b"never" not in r for b in leader.log.batches(end_before, leader.log.end_offset) for r in b.records)
