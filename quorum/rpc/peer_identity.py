"""Who is on the other end of a Raft request: a voter's identity bound to its listener address.

A Raft request names its sender inside the message (a Fetch's ``replica_id``, a Vote's
``candidate_id``, a BeginQuorumEpoch's ``leader_id``), and the leader counts a voter's Fetch
towards the high watermark. Believing that name would let any client that reaches the port pose
as a follower and have a write acknowledged that no follower holds. Without TLS (where the
certificate's principal will be the identity) the one thing only the real voter N has is its
listener, the address every voter's config gives for N. So:

- every node makes a random **session token** when it starts and sends
  ``sparkraft-peer: <node id>:<token>`` as gRPC metadata with each Raft request it makes;
- a node receiving a request that claims to come from voter N takes it only if the metadata names
  N and the token matches N's **proof**: N's answer, at N's configured address, to ``VerifyPeer``
  with a random nonce of the receiver's, HMAC-SHA256(key = N's token, nonce). The receiver keeps
  (nonce, proof) per voter, so checking any token afterwards is one local HMAC; a token that does
  not match is refused at once. A voter that restarted has a new token: the receiver asks for a
  new proof then, at most once a second per voter, so made-up tokens cost the node one HMAC each
  and its peers one VerifyPeer a second at most;
- anything else claiming a voter's id is refused with UNAUTHENTICATED before the core sees it.
  Observers (``replica_id`` -1, or an id that is not a voter's) need no token: the core never
  counts them.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from typing import Callable, Optional

import grpc

from quorum.config import HostPort
from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc
from quorum.rpc.convert import format_endpoint
from quorum.rpc.peer_client import CHANNEL_OPTIONS, METADATA_KEY
from quorum.security.client import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

VERIFY_TIMEOUT_S = 2.0
REPROVE_EVERY_S = 1.0  # a voter's proof is asked for again at most this often
MAX_TOKEN_CHARS = 128
NEEDS_PROOF = "needs the voter's proof"  # check(): only VerifyPeer can tell

Prover = Callable[[HostPort, int, bytes], Optional[bytes]]  # (address, node id, nonce) -> proof


def new_session_token() -> str:
    return secrets.token_hex(16)


def proof_of(token: str, nonce: bytes) -> bytes:
    return hmac.new(token.encode(), nonce, hashlib.sha256).digest()


def peer_metadata(node_id: int, token: str) -> tuple[tuple[str, str], ...]:
    """The metadata a node sends with each Raft request it makes."""
    return ((METADATA_KEY, f"{node_id}:{token}"),)


def claimed_peer(metadata) -> Optional[tuple[int, str]]:
    """(node id, token) from a request's invocation metadata, or None if absent or malformed."""
    for key, value in metadata or ():
        if key == METADATA_KEY:
            node, sep, token = str(value).partition(":")
            if sep and token and len(token) <= MAX_TOKEN_CHARS and node.isdigit() and len(node) <= 10:
                return int(node), token
            return None
    return None


class _Proof:
    __slots__ = ("nonce", "proof", "asked_at", "token")

    def __init__(self):
        self.nonce = b""
        self.proof: Optional[bytes] = None
        self.asked_at = float("-inf")
        self.token: Optional[str] = None  # the token this proof was found to vouch for


class PeerIdentities:
    """Both sides of VerifyPeer for one node: proving its own token, checking its peers'."""

    def __init__(self, node_id: int, cluster_id: str, addresses: Callable[[], dict[int, HostPort]],
                 prover: Optional[Prover] = None, token: Optional[str] = None,
                 security: ClientSecurity = PLAINTEXT):
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.token = token or new_session_token()  # this process's own
        self._addresses = addresses  # voter id -> its configured listener address
        self._prove_at = prover or self._ask
        self._security = security  # how VerifyPeer reaches a voter's listener
        self._proofs: dict[int, _Proof] = {}
        self._lock = threading.Lock()

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return peer_metadata(self.node_id, self.token)

    # -- answering VerifyPeer ------------------------------------------------------------
    def prove(self, cluster_id: str, node_id: int, nonce: bytes) -> Optional[bytes]:
        """This node's proof over ``nonce``, if the question is meant for it."""
        if cluster_id != self.cluster_id or node_id != self.node_id or not 8 <= len(nonce) <= 64:
            return None
        return proof_of(self.token, nonce)

    # -- checking a request --------------------------------------------------------------
    def check(self, claimed_id: int, metadata):
        """What ``refusal`` would say without asking anyone: None (take it), why not, or
        NEEDS_PROOF when only the claimed voter's answer to VerifyPeer can tell (which blocks)."""
        voters = self._addresses()
        if claimed_id not in voters:
            return None  # an observer (or no voter at all): the core never counts it
        peer = claimed_peer(metadata)
        if peer is None:
            return (f"it claims to come from voter {claimed_id} but carries no peer credentials (an observer "
                    f"fetches with replica_id -1)")
        node, token = peer
        if node != claimed_id:
            return f"it claims to come from voter {claimed_id} but its credentials are node {node}'s"
        if node == self.node_id:
            return None if hmac.compare_digest(token, self.token) else "its credentials are not this node's"
        return None if self._matches(node, token) else NEEDS_PROOF

    def refusal(self, claimed_id: int, metadata) -> Optional[str]:
        """None if a request naming ``claimed_id`` as its sender may be taken; else why not. May ask
        the claimed voter for a new proof (VerifyPeer, up to VERIFY_TIMEOUT_S)."""
        verdict = self.check(claimed_id, metadata)
        if verdict is not NEEDS_PROOF:
            return verdict
        node, token = claimed_peer(metadata)
        address = self._addresses().get(node)
        if address is None or not self._reprove(node, address) or not self._matches(node, token):
            where = f"{address[0]}:{address[1]}" if address else "(no longer a voter)"
            return f"voter {node}'s listener at {where} does not vouch for it"
        return None

    def _matches(self, node: int, token: str) -> bool:
        p = self._proofs.get(node)
        if p is None or p.proof is None:
            return False
        if p.token is not None and hmac.compare_digest(token, p.token):
            return True  # the token its proof already vouched for: no HMAC on every request
        if hmac.compare_digest(proof_of(token, p.nonce), p.proof):
            p.token = token
            return True
        return False

    def _reprove(self, node: int, address: HostPort) -> bool:
        """Ask ``node`` for a fresh proof, unless one was asked for within REPROVE_EVERY_S (by this
        call or another); True if a new proof came back."""
        with self._lock:
            p = self._proofs.setdefault(node, _Proof())
            now = time.monotonic()
            if now - p.asked_at < REPROVE_EVERY_S:
                return False
            p.asked_at = now
        nonce = secrets.token_bytes(16)
        proof = self._prove_at(address, node, nonce)
        if proof is None:
            return False
        with self._lock:
            p.nonce, p.proof, p.token = nonce, proof, None
        log.info("Node %d: voter %d's session proven at its listener %s:%d", self.node_id, node, *address)
        return True

    def _ask(self, address: HostPort, node_id: int, nonce: bytes) -> Optional[bytes]:
        """VerifyPeer at ``address``; None if it cannot be asked or does not answer as ``node_id``."""
        with self._security.channel(format_endpoint(*address), options=CHANNEL_OPTIONS) as channel:
            try:
                resp = raft_pb2_grpc.RaftStub(channel).VerifyPeer(
                    raft_pb2.VerifyPeerRequest(cluster_id=self.cluster_id, node_id=node_id, nonce=nonce),
                    timeout=VERIFY_TIMEOUT_S)
            except grpc.RpcError as e:
                log.info("Node %d: cannot ask voter %d at %s:%d to prove its session (%s)", self.node_id,
                         node_id, *address, e.code().name if e.code() else e)
                return None
        return resp.proof if resp.error == 0 and resp.proof else None
