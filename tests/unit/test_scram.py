"""SCRAM: RFC 7677's test vector on both sides, and the server's logins and session tokens
(quorum/security/sasl_server.py): wrong passwords, unknown users, replayed and out-of-order messages,
expired, forged and revoked tokens, bounded state."""
import base64

import pytest

from quorum.errors import Errors, SparkraftError
from quorum.metadata.pmap import PMap
from quorum.metadata.scram import ScramImage
from quorum.security import sasl_server, scram
from quorum.security.sasl_server import AUTHORIZATION, BEARER, ScramAuthenticator
from quorum.security.scram import MECHANISMS, ClientExchange, ScramError, ServerExchange

# RFC 7677, section 3
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
SHA256, SHA512 = MECHANISMS["SCRAM-SHA-256"], MECHANISMS["SCRAM-SHA-512"]


def rfc_credential():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    return SHA256.credential(SHA256.salted_password("pencil", salt, 4096), salt, 4096)


def test_the_client_side_matches_rfc_7677():
    client = ClientExchange(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def test_the_server_side_matches_rfc_7677(monkeypatch):
    monkeypatch.setattr(scram, "_nonce", lambda: RFC_SERVER_NONCE)
    server = ServerExchange(SHA256, {"user": rfc_credential()}.get, b"decoy")
    assert server.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.username == "user"


def test_a_wrong_proof_and_an_unknown_user_fail_alike():
    def attempt(user, password, credentials):
        server = ServerExchange(SHA512, credentials.get, b"decoy-key")
        client = ClientExchange(SHA512, user, password)
        client_final = client.final(server.first(client.first()))
        server.final(client_final)

    credentials = {"alice": SHA512.new_credential("right")}
    attempt("alice", "right", credentials)
    messages = []
    for user, password in (("alice", "wrong"), ("mallory", "anything")):
        with pytest.raises(ScramError) as e:
            attempt(user, password, credentials)
        messages.append(str(e.value))
    assert messages[0] == messages[1] == ServerExchange.FAILED.format("SCRAM-SHA-512")
    # the unknown user's salt is made up but stable, so asking twice does not tell them apart
    firsts = [ServerExchange(SHA512, credentials.get, b"k").first(b"n,,n=mallory,r=abc").split(b",")[1]
              for _ in range(2)]
    assert firsts[0] == firsts[1]


@pytest.mark.parametrize("message", [b"", b"x", b"p=tls-unique,,n=a,r=b", b"n,,r=abc", b"n,,n=a",
                                     b"n,,n=a=,r=b", b"n,,n=a,r=", "n,,n=\u00e9,r=\udcff".encode("utf-8", "surrogatepass"),
                                     b"n,,n=a,r=b" + b"x" * 5000])
def test_malformed_client_first_messages_are_refused(message):
    with pytest.raises(ScramError):
        ServerExchange(SHA256, {}.get, b"k").first(message)


def test_user_names_are_escaped_as_rfc_5802_says():
    assert scram.escape_name("a,b=c") == "a=2Cb=3Dc"
    assert scram.unescape_name("a=2Cb=3Dc") == "a,b=c"
    credentials = {"a,b=c": SHA256.new_credential("pw")}
    server = ServerExchange(SHA256, credentials.get, b"k")
    client = ClientExchange(SHA256, "a,b=c", "pw")
    client.verify(server.final(client.final(server.first(client.first()))))
    assert server.username == "a,b=c"


# -- the server's logins and tokens ----------------------------------------------------------------
class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def authenticator(clock=None, **users):
    auth = ScramAuthenticator(lifetime_ms=60_000, clock=clock or Clock())
    auth.follow(image(**users))
    return auth


def image(**users):
    return ScramImage(PMap.from_dict({(u, SHA512.code): SHA512.new_credential(pw) for u, pw in users.items()}))


def login(auth, user, password, mechanism="SCRAM-SHA-512"):
    client = ClientExchange(MECHANISMS[mechanism], user, password)
    first = auth.authenticate(mechanism, client.first())
    final_message = client.final(first.auth_bytes)
    reply = auth.authenticate(mechanism, final_message)
    client.verify(reply.auth_bytes)
    return reply, final_message


def metadata(token):
    return ((AUTHORIZATION, BEARER + token),)


def test_a_restarted_controller_checks_no_login_until_it_has_replayed_its_log():
    auth = ScramAuthenticator(lifetime_ms=60_000, clock=Clock())
    auth.follow(image(), loaded=False)  # started: alice is further on in the log than replayed so far
    with pytest.raises(SparkraftError) as e:
        login(auth, "alice", "secret")
    assert e.value.error is Errors.NOT_CONTROLLER and "replaying" in e.value.message  # not "invalid credentials"
    auth.follow(image(alice="secret"), loaded=True)
    assert login(auth, "alice", "secret")[0].token
    auth.follow(image(alice="secret"), loaded=False)  # loaded stays loaded (a later lag is a standby's)
    assert login(auth, "alice", "secret")[0].token


def test_a_login_gives_a_token_that_names_the_user_until_it_expires():
    clock = Clock()
    auth = authenticator(clock, alice="secret")
    reply, _ = login(auth, "alice", "secret")
    assert reply.token and reply.lifetime_ms == 60_000
    assert auth.principal_of(metadata(reply.token)) == "User:alice"
    assert auth.principal_of((("other", "x"),)) is None  # no token: not a SCRAM caller
    clock.now += 59.0
    assert auth.principal_of(metadata(reply.token)) == "User:alice"
    clock.now += 2.0
    with pytest.raises(SparkraftError) as e:
        auth.principal_of(metadata(reply.token))
    assert e.value.error is Errors.SASL_AUTHENTICATION_FAILED and "authenticate again" in e.value.message


def test_a_wrong_password_gets_sasl_authentication_failed_and_no_token():
    auth = authenticator(alice="secret")
    with pytest.raises(SparkraftError) as e:
        login(auth, "alice", "guess")
    assert e.value.error is Errors.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in e.value.message


def test_a_replayed_client_final_message_is_refused():
    auth = authenticator(alice="secret")
    _, final_message = login(auth, "alice", "secret")
    with pytest.raises(SparkraftError) as e:
        auth.authenticate("SCRAM-SHA-512", final_message)
    assert e.value.error is Errors.SASL_AUTHENTICATION_FAILED and "start again" in e.value.message


def test_tokens_cannot_be_forged_moved_or_outlive_the_credential():
    auth = authenticator(alice="secret", bob="other")
    reply, _ = login(auth, "alice", "secret")
    prefix, payload, signature = reply.token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    forged_payload = base64.urlsafe_b64encode(bytes(raw[:-5]) + b"bob").decode().rstrip("=")  # alice -> bob
    longer = bytearray(raw)
    longer[1:9] = (2**62).to_bytes(8, "big")  # a far expiry
    longer_payload = base64.urlsafe_b64encode(bytes(longer)).decode().rstrip("=")
    for bad in (f"{prefix}.{forged_payload}.{signature}", f"{prefix}.{longer_payload}.{signature}",
                reply.token[:-2], "garbage", "", f"{prefix}..", "x" * 5000):
        with pytest.raises(SparkraftError):
            auth.principal_of(metadata(bad))
    other_server = authenticator(alice="secret")  # another controller, or this one restarted
    other_server.follow(auth._image)
    with pytest.raises(SparkraftError):
        other_server.principal_of(metadata(reply.token))
    auth.follow(image(alice="changed", bob="other"))  # the password changed: its sessions end
    with pytest.raises(SparkraftError):
        auth.principal_of(metadata(reply.token))


def test_exchange_state_is_bounded_and_expires(monkeypatch):
    auth = authenticator(alice="secret")
    monkeypatch.setattr(sasl_server, "MAX_PENDING", 3)
    clients = [ClientExchange(SHA512, "alice", "secret") for _ in range(4)]
    firsts = [auth.authenticate("SCRAM-SHA-512", c.first()) for c in clients[:3]]
    with pytest.raises(SparkraftError) as e:
        auth.authenticate("SCRAM-SHA-512", clients[3].first())
    assert e.value.error is Errors.ILLEGAL_SASL_STATE
    reply = auth.authenticate("SCRAM-SHA-512", clients[0].final(firsts[0].auth_bytes))  # frees a place
    assert reply.token
    auth.authenticate("SCRAM-SHA-512", clients[3].first())
    monkeypatch.setattr(sasl_server, "MAX_PENDING", 10)
    monkeypatch.setattr(sasl_server, "PENDING_TIMEOUT_S", -1.0)  # an exchange left waiting expires
    late = ClientExchange(SHA512, "alice", "secret")
    first = auth.authenticate("SCRAM-SHA-512", late.first())
    with pytest.raises(SparkraftError, match="expired"):
        auth.authenticate("SCRAM-SHA-512", late.final(first.auth_bytes))


def test_mechanisms_must_match_and_be_known():
    auth = authenticator(alice="secret")
    with pytest.raises(SparkraftError) as e:
        auth.authenticate("PLAIN", b"\0alice\0secret")
    assert e.value.error is Errors.UNSUPPORTED_SASL_MECHANISM
    # alice has a SHA-512 credential only: a SHA-256 login fails like a wrong password
    with pytest.raises(SparkraftError) as e:
        login(auth, "alice", "secret", mechanism="SCRAM-SHA-256")
    assert e.value.error is Errors.SASL_AUTHENTICATION_FAILED
    client = ClientExchange(SHA512, "alice", "secret")
    first = auth.authenticate("SCRAM-SHA-512", client.first())
    with pytest.raises(SparkraftError):  # the final step under another mechanism than the first
        auth.authenticate("SCRAM-SHA-256", client.final(first.auth_bytes))
