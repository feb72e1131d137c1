"""The wire (quorum/wire/) between real RaftNodes in one process: peers replicate over it, clients
append over it, a restarted peer is found on its new port, a node without it still takes part,
and hostile bytes on its port get a clear answer or a closed connection and change nothing."""
from __future__ import annotations

import queue
import socket
import time

import grpc
import pytest
from conftest import free_ports
from inprocess_quorum import VOTERS, Quorum, running

from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.node.loop_thread import LoopThread
from quorum.node.server import ClientSlots
from quorum.raft.messages import FetchRequest
from quorum.rpc.peer_client import PeerAnswer, PeerClient
from quorum.rpc.raft_client import RaftClient
from quorum.rpc.wire_methods import BY_NAME, HELLO
from quorum.wire.frames import FrameReader, Status, encode_request
from quorum.wire.server import WireServer


@pytest.fixture
def quorum(tmp_path):
    yield from running(Quorum(tmp_path))


class RawWire:
    """Hand-made frames on a plain socket: what a hostile or broken client sends."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.reader = FrameReader(64 << 20, requests=False)
        self.pending = []

    def send(self, data: bytes):
        self.sock.sendall(data)

    def call(self, method, request, corr=1, timeout_ms=5000):
        self.send(encode_request(method.number, corr, timeout_ms, request.SerializeToString()))
        return self.answer()

    def answer(self):
        """The next answer to a request (a Hello's, correlation id 0, is skipped)."""
        while True:
            if self.pending:
                return self.pending.pop(0)
            data = self.sock.recv(65536)
            if not data:
                return None  # closed by the node
            self.pending += [f for f in self.reader.feed(data) if f.corr != 0]

    def closed_by_node(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def test_peers_replicate_and_clients_append_over_the_wire(quorum):
    leader = quorum.leader()
    with RaftClient(quorum.bootstrap(), timeout=10) as client:
        for i in range(20):
            _, last = client.append([b"record-%d" % i])
        target = client.leader_endpoint
        assert client._wires[target][0] is not None, "the append did not take the wire"
    quorum.wait_all_reach(last)
    # Both followers fetch from the leader on its wire listener, beside the client's connection.
    peers = {c.hello_peer.partition(":")[0] for c in leader.wire.connections}
    assert peers >= {str(i) for i in VOTERS if i != leader.node_id}
    for n in quorum.nodes.values():
        assert [r for b in n.log.batches(0, last + 1) if not b.control for r in b.records][-1] == b"record-19"


def test_a_restarted_peer_is_found_on_its_new_wire_port(quorum):
    """A node's PeerClient asks a peer for its wire port, sends there, and after the peer restarts
    with a wire port of its own (controller.quorum.wire.port) finds it there: requests in between
    fail as no-answers the core retries."""
    leader = quorum.leader()
    follower = next(i for i in VOTERS if i != leader.node_id)
    loop = LoopThread("test-peer-wire")
    wire = WireServer("127.0.0.1", 0, {}, loop, 1 << 20).start()
    answers: queue.Queue = queue.Queue()
    peers = PeerClient({follower: quorum.addresses[follower]}, answers.put, wire=wire)
    observer_fetch = FetchRequest(quorum.cluster_id, 0, -1, 0, 0, 100, 1 << 20)
    corrs = iter(range(1, 10**6))

    def answered_over_the_wire_at(port) -> bool:
        """Send until an answer arrives while the peer's wire port is ``port``."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            corr = next(corrs)
            known = peers._peers.get(follower)
            over_wire = known is not None and known.wire_port == port
            peers.send(follower, corr, observer_fetch, 1000)
            got = answers.get(timeout=5)
            assert got.corr == corr
            if isinstance(got, PeerAnswer) and over_wire:
                return True
            time.sleep(0.02)
        return False

    try:
        assert answered_over_the_wire_at(quorum.nodes[follower].wire_port)
        assert any(c.hello_peer == "" for c in quorum.nodes[follower].wire.connections)
        old_port = quorum.nodes[follower].wire_port
        assert old_port == quorum.addresses[follower][1], "the wire is on the node's one port"
        quorum.restart(follower, wire_port=free_ports(1)[0])
        assert quorum.nodes[follower].wire_port != old_port
        assert answered_over_the_wire_at(quorum.nodes[follower].wire_port)
    finally:
        peers.close()
        wire.stop()
        loop.stop()


def test_a_node_without_the_wire_takes_part_over_grpc(tmp_path):
    q = Quorum(tmp_path, wire_ports={3: None})
    try:
        assert q.nodes[3].wire is None
        with grpc.insecure_channel(f"127.0.0.1:{q.addresses[3][1]}") as channel:
            assert raft_pb2_grpc.RaftStub(channel).WireEndpoint(raft_pb2.WireEndpointRequest(), timeout=5).port == 0
        with RaftClient(q.bootstrap(), timeout=10) as client:
            for i in range(5):
                _, last = client.append([b"mixed-%d" % i])
        q.wait_all_reach(last)
    finally:
        q.close()


def test_hostile_bytes_on_the_wire_get_clear_answers_and_change_nothing(quorum):
    leader = quorum.leader()
    port = leader.wire_port
    other_voter = next(i for i in VOTERS if i != leader.node_id)
    with RaftClient(quorum.bootstrap(), timeout=10) as client:
        _, before = client.append([b"before"])
    quorum.wait_all_reach(before)
    end_before = leader.status().log_end_offset

    raw = RawWire(port)  # a frame claiming 2 GiB: the connection is closed, nothing is allocated
    raw.send((2**31).to_bytes(4, "big") + b"\x01\x06\x00\x00\x00\x01")
    assert raw.closed_by_node()
    raw.close()

    raw = RawWire(port)
    answer = raw.call(BY_NAME["Append"], raft_pb2.AppendRequest(records=[b"x"]), corr=9)
    assert answer.corr == 9 and answer.status is Status.OK  # a well-formed request on this connection works
    raw.send(encode_request(99, 10, 1000, b""))  # an unknown method
    answer = raw.answer()
    assert (answer.corr, answer.status) == (10, Status.INVALID_REQUEST) and b"unknown method" in answer.body
    raw.send(encode_request(BY_NAME["Fetch"].number, 11, 1000, b"\xff\xff\xff"))  # a body that does not decode
    answer = raw.answer()
    assert (answer.corr, answer.status) == (11, Status.INVALID_REQUEST)
    # A Fetch claiming to come from a voter, without that voter's credentials, never reaches the core.
    forged = raft_pb2.FetchRequest(cluster_id=quorum.cluster_id, replica_id=other_voter, fetch_offset=10**9,
                                   last_fetched_epoch=leader.status().epoch)
    answer = raw.call(BY_NAME["Fetch"], forged, corr=12)
    assert answer.status is Status.UNAUTHENTICATED and b"no peer credentials" in answer.body
    raw.close()
    raw = RawWire(port)  # ... nor with another token in its Hello
    raw.send(encode_request(HELLO.number, 0, 0, HELLO.request(peer=f"{other_voter}:{'0' * 32}").SerializeToString()))
    answer = raw.call(BY_NAME["Fetch"], forged, corr=13)
    assert answer.status is Status.UNAUTHENTICATED
    raw.close()
    raw = RawWire(port)  # an observer needs no credentials
    answer = raw.call(BY_NAME["Fetch"], raft_pb2.FetchRequest(cluster_id=quorum.cluster_id, replica_id=-1,
                                                              fetch_offset=0, last_fetched_epoch=0), corr=14)
    assert answer.status is Status.OK  # answered by the core (what it says is the core's business)
    assert raft_pb2.FetchResponse.FromString(answer.body).leader_id == leader.node_id
    raw.send(encode_request(BY_NAME["Append"].number, 15, 1000, b"\x12\x01")[:-1])  # truncated, then gone
    raw.close()

    # The quorum's commit point counted no forged Fetch; appends go on as before.
    with RaftClient(quorum.bootstrap(), timeout=10) as client:
        _, after = client.append([b"after"])
    assert after == end_before + 1  # only the one well-formed append landed in between
    quorum.wait_all_reach(after)


def test_pipelined_appends_past_the_client_limit_are_each_answered_once(quorum):
    """One connection sends far more appends than may wait for a commit at once (the leader's wire
    limit lowered to 50 here; 4,096 by default): every one gets exactly one answer, committed or
    refused at once as retriable (REQUEST_TIMED_OUT), never dropped."""
    leader = quorum.leader()
    leader.wire_slots = ClientSlots(50)
    raw = RawWire(leader.wire_port)
    n = 1500
    body = raft_pb2.AppendRequest(records=[b"p" * 100]).SerializeToString()
    raw.send(b"".join(encode_request(BY_NAME["Append"].number, corr, 10_000, body) for corr in range(1, n + 1)))
    answers = {}
    while len(answers) < n:
        data = raw.sock.recv(1 << 20)
        assert data, f"the node closed the connection after {len(answers)} answers"
        for frame in raw.reader.feed(data):
            assert frame.corr not in answers
            answers[frame.corr] = frame
    raw.close()
    assert all(a.status is Status.OK for a in answers.values())
    replies = [raft_pb2.AppendResponse.FromString(a.body) for a in answers.values()]
    committed = [r for r in replies if r.error == 0]
    refused = [r for r in replies if r.error != 0]
    assert committed and refused and all(Errors(r.error) is Errors.REQUEST_TIMED_OUT for r in refused)
    assert len({r.last_offset for r in committed}) == len(committed)  # each at its own offset
