"""A controller's one port (quorum/wire/shared_port.py), against a real controller process: the
same address serves sparkraft's CLI (the wire), gRPC, and Kafka's protocol; what is none of them
gets one line or is closed, and the controller goes on leading; a second controller listener
(Kafka's protocol only) still works, and the CLI sent there says what it is."""
from __future__ import annotations

import json
import socket
import subprocess

import grpc
import pytest
from conftest import ControllerProcesses, kafka_answers, sparkraft_cmd, wait_for
from kio.schema.describe_cluster.v1.request import DescribeClusterRequest

from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.kafka.client import KafkaConnection

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    cp = ControllerProcesses(tmp_path_factory.mktemp("one-port"), voters=(1,), kafka_listener="KAFKA")
    cp.format()
    cp.start()
    try:
        cp.wait_leader(timeout=60)
        wait_for(lambda: kafka_answers(cp.ports[1]), 60, "Kafka's protocol on the controller's port")
        yield cp
    finally:
        cp.close()


def _cli(cp, bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args, "--bootstrap-controller", bootstrap), capture_output=True, text=True,
                          timeout=60)


def test_the_cli_grpc_and_kafkas_protocol_share_the_controllers_port(controller):
    cp = controller
    port = cp.ports[1]
    out = _cli(cp, f"127.0.0.1:{port}", "quorum", "describe", "--status", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["LeaderId"] == 1
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        described = raft_pb2_grpc.RaftStub(channel).DescribeQuorum(raft_pb2.DescribeQuorumRequest(), timeout=10)
        assert described.leader_id == 1
        wire = raft_pb2_grpc.RaftStub(channel).WireEndpoint(raft_pb2.WireEndpointRequest(), timeout=10)
        assert wire.port == port, "the wire is on the same port"
    with KafkaConnection("127.0.0.1", port) as kafka:
        cluster = kafka.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                       endpoint_type=2))
    assert cluster.error_code == 0 and cluster.cluster_id == cp.cluster_id
    assert [(b.broker_id, b.port) for b in cluster.brokers] == [(1, port)]
    assert cluster.controller_id == 1


def test_what_no_protocol_begins_with_is_closed_and_changes_nothing(controller):
    cp = controller
    port = cp.ports[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _until_closed(s)
    assert answer.startswith(b"HTTP/1.0 400 Bad Request")
    assert answer.rstrip().endswith(b"this is a sparkraft controller port (Raft, sparkraft's wire and gRPC, "
                                    b"Kafka's protocol), not HTTP/1")
    for junk in (b"\x00\x00\x00\x10\x07" + b"\xff" * 16,  # a frame whose sixth byte is no version or API key
                 b"\x16\x03\x01\x00\x30" + b"\x01" * 48):  # TLS on a PLAINTEXT listener
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(junk)
            assert _until_closed(s) == b""
    assert cp.wait_leader(timeout=10).leader_id == 1
    assert kafka_answers(port)
    log = cp.output(1).read_text()
    assert "closing the connection from 127.0.0.1: a TLS handshake on a listener without TLS" in log


def test_the_cli_at_a_second_controller_listener_is_told_what_it_reached(controller):
    cp = controller
    out = _cli(cp, f"127.0.0.1:{cp.kafka_ports[1]}", "quorum", "describe", "--status")
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "it is a controller's second listener" in lines[0], out.stderr
    assert kafka_answers(cp.kafka_ports[1]), "the second listener still answers Kafka's protocol"


def _until_closed(sock) -> bytes:
    heard = b""
    while chunk := sock.recv(1 << 16):
        heard += chunk
    return heard
