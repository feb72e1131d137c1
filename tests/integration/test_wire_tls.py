"""The wire (quorum/wire/) on SSL listeners with mutual TLS: three in-process Raft nodes whose
listeners require client certificates (a throwaway CA), principals by Kafka's mapping rules. The
peers replicate over the wire's TLS, clients append over it, and a caller is known by its
certificate there exactly as on the gRPC listener: a stranger's valid certificate cannot claim a
voter's id, a connection without a certificate or without TLS gets nothing."""
from __future__ import annotations

import socket
import ssl

import pytest
from inprocess_quorum import VOTERS, Quorum, running
from pki import MAPPING_RULES, Pki

from quorum.gen.sparkraft.v1 import raft_pb2
from quorum.rpc.raft_client import RaftClient
from quorum.rpc.wire_methods import BY_NAME
from quorum.security.authorizer import Authorizer
from quorum.security.client import ClientSecurity
from quorum.security.node_security import NodeSecurity
from quorum.security.principal import PrincipalMapper
from quorum.security.tls import ServerTls
from quorum.wire.frames import FrameReader, Status, encode_request


class TlsQuorum(Quorum):
    """The in-process quorum with SSL listeners requiring client certificates (``CN=controller-N``),
    principals by Kafka's mapping rules, the authorizer on and ``User:admin`` a super user."""

    def __init__(self, root):
        self.pki = Pki(root / "pki")
        super().__init__(root, security=self._security)

    def _security(self, node_id: int) -> NodeSecurity:
        keystore = str(self.pki.keystore(f"controller-{node_id}"))
        return NodeSecurity(tls=ServerTls(keystore, str(self.pki.truststore), "required"),
                            mapper=PrincipalMapper(MAPPING_RULES), authorizer=Authorizer({"User:admin"}),
                            client=ClientSecurity("SSL", str(self.pki.truststore), keystore))

    def client_security(self, cn: str) -> ClientSecurity:
        return ClientSecurity("SSL", str(self.pki.truststore), str(self.pki.keystore(cn)))


@pytest.fixture
def tls_quorum(tmp_path):
    yield from running(TlsQuorum(tmp_path))


def _call(sock, method, request, corr):
    sock.sendall(encode_request(method.number, corr, 5000, request.SerializeToString()))
    reader = FrameReader(64 << 20, requests=False)
    while True:
        data = sock.recv(1 << 16)
        assert data, "the node closed the connection"
        for frame in reader.feed(data):
            if frame.corr == corr:
                return frame


def _tls_socket(q: TlsQuorum, port: int, cn=None):
    context = (q.client_security(cn) if cn else ClientSecurity("SSL", str(q.pki.truststore))).ssl_context()
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def test_peers_replicate_and_clients_append_over_the_wire_with_mutual_tls(tls_quorum):
    q = tls_quorum
    leader = q.leader()
    assert leader.wire is not None and leader.wire.tls is not None
    with RaftClient(q.bootstrap(), timeout=15, security=q.client_security("admin")) as client:
        for i in range(10):
            _, last = client.append([b"tls-%d" % i])
        assert client._wires[client.leader_endpoint][0] is not None, "the append did not take the wire"
    q.wait_all_reach(last)
    # The followers fetch on the leader's wire listener, each known by its certificate.
    subjects = {c.hello_peer.partition(":")[0]: c.peer_certificate for c in leader.wire.connections}
    followers = {str(i) for i in VOTERS if i != leader.node_id}
    assert followers <= set(subjects) and all(subjects[f] for f in followers)
    for n in q.nodes.values():
        assert [r for b in n.log.batches(0, last + 1) if not b.control for r in b.records][-1] == b"tls-9"


def test_a_certificate_is_the_callers_identity_on_the_wire(tls_quorum):
    q = tls_quorum
    leader = q.leader()
    voter = next(i for i in VOTERS if i != leader.node_id)
    epoch = leader.status().epoch
    end_before = leader.status().log_end_offset
    forged_fetch = raft_pb2.FetchRequest(cluster_id=q.cluster_id, epoch=epoch, replica_id=voter, fetch_offset=10 ** 6,
                                         last_fetched_epoch=epoch)
    forged_vote = raft_pb2.VoteRequest(cluster_id=q.cluster_id, epoch=epoch + 5, candidate_id=voter, last_epoch=99,
                                       last_offset=10 ** 6)
    observer = raft_pb2.FetchRequest(cluster_id=q.cluster_id, epoch=epoch, replica_id=-1, fetch_offset=0)
    # A stranger's valid certificate, and another voter's: neither may speak for this voter.
    other_voter = 6 - leader.node_id - voter
    for cn in ("mallory", f"controller-{other_voter}"):
        with _tls_socket(q, leader.wire_port, cn) as sock:
            for corr, request in ((1, forged_fetch), (2, forged_vote)):
                method = BY_NAME["Fetch" if corr == 1 else "Vote"]
                answer = _call(sock, method, request, corr)
                assert answer.status is Status.UNAUTHENTICATED, (cn, method.name)
                assert f"not voter {voter}'s principal".encode() in answer.body
            answer = _call(sock, BY_NAME["Fetch"], observer, 3)
            if cn == "mallory":  # nor fetch the log at all
                assert answer.status is Status.UNAUTHENTICATED
            else:
                assert answer.status is Status.OK
    # Nothing moved: same leader, same epoch, no record.
    assert q.leader() is leader and leader.status().epoch == epoch
    assert leader.status().log_end_offset == end_before


def test_no_certificate_or_no_tls_gets_nothing_from_the_wire(tls_quorum):
    q = tls_quorum
    leader = q.leader()
    request = encode_request(BY_NAME["Fetch"].number, 1, 1000, raft_pb2.FetchRequest(
        cluster_id=q.cluster_id, replica_id=-1, fetch_offset=0).SerializeToString())
    # Plain TCP on the TLS port: the bytes are no handshake; the node ends the connection with at
    # most a TLS alert, never an answer.
    with socket.create_connection(("127.0.0.1", leader.wire_port), timeout=5) as sock:
        sock.sendall(request)
        heard = _until_closed(sock)
        assert heard == b"" or heard[0] == 0x15, heard[:16]  # 0x15: a TLS alert record
    # TLS without a client certificate, where one is required: refused at the handshake or right
    # after it (TLS 1.3 sends the refusal after the client thinks it is done), never answered.
    try:
        with _tls_socket(q, leader.wire_port) as sock:
            sock.sendall(request)
            heard = _until_closed(sock)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        heard = b""
    assert heard == b""
    # And a client that trusts another CA will not talk to the listener.
    other = Pki(q.pki.root.parent / "other", name="other-ca")
    context = ClientSecurity("SSL", str(other.truststore)).ssl_context()
    with pytest.raises(ssl.SSLCertVerificationError):
        with socket.create_connection(("127.0.0.1", leader.wire_port), timeout=5) as raw:
            context.wrap_socket(raw, server_hostname="127.0.0.1")
    with RaftClient(q.bootstrap(), timeout=15, security=q.client_security("admin")) as client:
        client.append([b"still fine"])


def _until_closed(sock) -> bytes:
    """Everything the node sends until it closes the connection (a timeout fails the test)."""
    heard = b""
    while chunk := sock.recv(1 << 16):
        heard += chunk
    return heard


def test_a_rotated_trust_store_applies_to_new_wire_connections(tls_quorum, tmp_path):
    """SIGHUP's reload on the wire: a CA dropped from the trust store is no longer trusted for new
    connections (not only new CAs added), and one added is."""
    q = tls_quorum
    leader = q.leader()
    old_ca = tmp_path / "old-ca.pem"
    old_ca.write_bytes(q.pki.truststore.read_bytes())
    new = Pki(tmp_path / "rotated", name="rotated-ca")
    observer = raft_pb2.FetchRequest(cluster_id=q.cluster_id, replica_id=-1, fetch_offset=0)

    def fetch_as(keystore) -> bool:
        """Whether an observer Fetch over a new wire connection with ``keystore`` is answered."""
        context = ClientSecurity("SSL", str(old_ca), str(keystore)).ssl_context()  # the leader's cert is old-CA
        try:
            with context.wrap_socket(socket.create_connection(("127.0.0.1", leader.wire_port), timeout=5),
                                     server_hostname="127.0.0.1") as sock:
                sock.sendall(encode_request(BY_NAME["Fetch"].number, 1, 5000, observer.SerializeToString()))
                heard = _until_closed_or_answered(sock)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return False
        return heard

    old_admin, new_admin = q.pki.keystore("admin"), new.keystore("admin")
    assert fetch_as(old_admin) and not fetch_as(new_admin)
    q.pki.truststore.write_bytes(new.truststore.read_bytes())  # the leader's trust store now names only the new CA
    leader.reload_tls()
    assert fetch_as(new_admin) and not fetch_as(old_admin)


def _until_closed_or_answered(sock) -> bool:
    reader = FrameReader(64 << 20, requests=False)
    while chunk := sock.recv(1 << 16):
        if any(frame.corr == 1 and frame.status is Status.OK for frame in reader.feed(chunk)):
            return True
    return False
