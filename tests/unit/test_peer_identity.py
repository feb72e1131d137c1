"""PeerIdentities without a network: the prover stands in for VerifyPeer at each voter's listener."""
from __future__ import annotations

from quorum.rpc import peer_identity
from quorum.rpc.peer_identity import PeerIdentities, peer_metadata, proof_of

ADDRESSES = {1: ("h", 1), 2: ("h", 2), 3: ("h", 3)}


class Voters:
    """The real voters' tokens, and a count of the proofs asked for."""

    def __init__(self):
        self.tokens = {2: "token-of-2", 3: "token-of-3"}
        self.asked = 0

    def prove(self, address, node_id, nonce):
        self.asked += 1
        token = self.tokens.get(node_id)
        return None if token is None else proof_of(token, nonce)


def identities(voters: Voters) -> PeerIdentities:
    return PeerIdentities(1, "cluster", lambda: ADDRESSES, prover=voters.prove, token="token-of-1")


def test_a_voter_is_taken_once_its_listener_vouches_for_its_token(monkeypatch):
    v = Voters()
    ids = identities(v)
    assert ids.refusal(2, peer_metadata(2, "token-of-2")) is None
    assert ids.refusal(2, peer_metadata(2, "token-of-2")) is None
    assert v.asked == 1  # proven once, then checked locally


def test_forgeries_are_refused(monkeypatch):
    v = Voters()
    ids = identities(v)
    assert "no peer credentials" in ids.refusal(2, ())
    assert "credentials are node 3's" in ids.refusal(2, peer_metadata(3, "token-of-3"))
    assert "does not vouch" in ids.refusal(2, peer_metadata(2, "guess"))
    assert "not this node's" in ids.refusal(1, peer_metadata(1, "guess"))
    assert ids.refusal(1, peer_metadata(1, "token-of-1")) is None
    assert ids.refusal(-1, ()) is None and ids.refusal(7, ()) is None  # observers and strangers: not voters


def test_a_flood_of_made_up_tokens_asks_a_voter_at_most_once_a_second(monkeypatch):
    v = Voters()
    ids = identities(v)
    now = [100.0]
    monkeypatch.setattr(peer_identity.time, "monotonic", lambda: now[0])
    for i in range(1000):
        assert ids.refusal(2, peer_metadata(2, f"guess-{i}")) is not None
    assert v.asked == 1
    now[0] += 1.5
    ids.refusal(2, peer_metadata(2, "guess-again"))
    assert v.asked == 2
    # the real voter is still taken at once: the proof that came back vouches for its token
    assert ids.refusal(2, peer_metadata(2, "token-of-2")) is None and v.asked == 2


def test_a_restarted_voter_is_proven_again(monkeypatch):
    v = Voters()
    ids = identities(v)
    now = [100.0]
    monkeypatch.setattr(peer_identity.time, "monotonic", lambda: now[0])
    assert ids.refusal(3, peer_metadata(3, "token-of-3")) is None
    v.tokens[3] = "new-token-of-3"  # restarted with a new session token
    now[0] += 2
    assert ids.refusal(3, peer_metadata(3, "new-token-of-3")) is None
    assert "does not vouch" in ids.refusal(3, peer_metadata(3, "token-of-3"))  # the old one is gone


def test_proving_answers_only_for_this_node_and_cluster():
    ids = identities(Voters())
    assert ids.prove("cluster", 1, b"n" * 16) == proof_of("token-of-1", b"n" * 16)
    assert ids.prove("cluster", 2, b"n" * 16) is None
    assert ids.prove("other", 1, b"n" * 16) is None
    assert ids.prove("cluster", 1, b"") is None
