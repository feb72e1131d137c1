"""Principals from certificates (Kafka's SslPrincipalMapper rules, its own test cases), client
``--command-config`` files, node security keys, and key stores that are refused with one line."""
from __future__ import annotations

import datetime

import pytest
from pki import Pki

from quorum.config import ConfigError, NodeConfig
from quorum.security.client import ClientSecurity
from quorum.security.node_security import NodeSecurity
from quorum.security.principal import Caller, PrincipalMapper, peer_host
from quorum.security.tls import ServerTls, load_key_store


@pytest.mark.parametrize("rules, dn, name", [
    ("DEFAULT", "CN=Duke,OU=JavaSoft,O=Sun Microsystems", "CN=Duke,OU=JavaSoft,O=Sun Microsystems"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=kafka1,OU=ServiceUsers,O=Org,C=US", "kafka1"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT", "CN=adminUser,OU=Admin,O=Org", "CN=adminUser,OU=Admin,O=Org"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
     "DEFAULT", "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Santa Clara,ST=CA,C=US", "duke@javasoft"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
     "DEFAULT", "CN=Duke,OU=ServiceUsers,O=Org", "duke"),
    ("RULE:^CN=(.*?),.*$/$1/U, DEFAULT", "CN=alice,O=x", "ALICE"),
    ("RULE:^CN=(.*?),.*$/$1/", "O=x", None),
])
def test_principal_mapping_rules_as_kafka(rules, dn, name):
    assert PrincipalMapper(rules).name(dn) == name


@pytest.mark.parametrize("rules", ["RULE:abc", "garbage", "RULE:(/x/", ""])
def test_unreadable_rules_are_refused(rules):
    with pytest.raises(ValueError):
        PrincipalMapper(rules)


def test_peer_hosts():
    assert peer_host("ipv4:127.0.0.1:5000") == "127.0.0.1"
    assert peer_host("ipv6:[::1]:5000") == "::1"
    # the wire and the Kafka listener name a peer host:port; ACLs match on its host, not its port
    assert NodeSecurity().wire_caller("127.0.0.1:5000", None) == Caller("User:ANONYMOUS", "127.0.0.1")
    assert NodeSecurity().wire_caller("[::1]:5000", None).host == "::1"


def test_client_config_files(tmp_path):
    f = tmp_path / "c.properties"
    f.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\nsasl.password=s3cret\n")
    security = ClientSecurity.from_file(str(f))
    assert (security.protocol, security.sasl_username) == ("SASL_SSL", "alice")
    assert "s3cret" not in repr(security)  # never printed
    for text, problem in [("security.protocol=TLS\n", "security.protocol"),
                          ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "sasl.mechanism"),
                          ("ssl.keystore.type=JKS\n", "not supported"),
                          ("sasl.jaas.config=x\n", "unknown client key")]:
        f.write_text(text)
        with pytest.raises(ValueError, match=problem):
            ClientSecurity.from_file(str(f))
    with pytest.raises(ValueError, match="cannot read --command-config"):
        ClientSecurity.from_file(str(tmp_path / "missing"))


BASE = {"process.roles": "controller", "node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": "/tmp/x"}


def test_node_security_keys(tmp_path):
    pki = Pki(tmp_path)
    config = NodeConfig.from_properties({**BASE, "listener.security.protocol.map": "CONTROLLER:SSL",
                                         "ssl.keystore.location": str(pki.keystore("controller-1")),
                                         "ssl.truststore.location": str(pki.truststore), "ssl.client.auth": "required",
                                         "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/",
                                         "authorizer.class.name": "StandardAuthorizer",
                                         "super.users": "User:admin;User:CN=ops,O=x"})
    security = config.node_security("CONTROLLER")
    assert security.mutual_tls and security.client.protocol == "SSL" and security.client.keystore
    assert security.authorizer.super_users == {"User:admin", "User:CN=ops,O=x"}
    assert security.is_voter(Caller("User:controller-2", "h", True, by_certificate=True), 2)
    assert not security.is_voter(Caller("User:controller-2", "h", True, by_certificate=True), 3)
    assert security.node_id_of(Caller("User:broker-101", "h", True, by_certificate=True)) == 101
    # a SCRAM user named like a node is still not that node: only a certificate proves one
    assert not security.is_voter(Caller("User:controller-2", "h", True), 2)
    assert not security.is_broker(Caller("User:broker-101", "h", True), 101)
    assert security.node_id_of(Caller("User:broker-101", "h", True)) is None
    assert security.scram is not None and security.scram.lifetime_ms == 300_000
    assert NodeConfig.from_properties(BASE).node_security("CONTROLLER").tls is None
    for extra, problem in [({"listener.security.protocol.map": "CONTROLLER:SSL"}, "ssl.keystore.location is not set"),
                           ({"listener.security.protocol.map": "CONTROLLER:SASL_SSL", "ssl.keystore.location": "k"},
                            r"the first controller listener \(the quorum's\) is PLAINTEXT or SSL"),
                           ({"listener.security.protocol.map": "CONTROLLER:TLS"}, "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
                           ({"ssl.client.auth": "always"}, "none, requested, required"),
                           ({"ssl.client.auth": "required"}, "needs ssl.truststore.location"),
                           ({"super.users": "admin"}, "TYPE:NAME"),
                           ({"ssl.keystore.type": "JKS"}, "expected PEM"),
                           ({"controller.quorum.voter.principal": "User:c"}, "{node.id}"),
                           ({"ssl.principal.mapping.rules": "RULE:x"}, "invalid rule")]:
        with pytest.raises(ConfigError, match=problem.replace("|", r"\|").replace("{", r"\{").replace("}", r"\}")):
            NodeConfig.from_properties({**BASE, **extra})


def test_bad_key_stores_are_one_clear_line(tmp_path):
    pki = Pki(tmp_path)
    good = pki.keystore("x")
    only_cert = tmp_path / "only-cert.pem"
    only_cert.write_bytes(pki.truststore.read_bytes())
    with pytest.raises(ValueError, match="one PEM private key"):
        load_key_store(str(only_cert))
    other = Pki(tmp_path / "o", "o").keystore("y").read_bytes()
    mixed = tmp_path / "mixed.pem"
    mixed.write_bytes(other[:other.index(b"-----BEGIN CERTIFICATE")] + good.read_bytes()[
        good.read_bytes().index(b"-----BEGIN CERTIFICATE"):])
    with pytest.raises(ValueError, match="does not belong"):
        load_key_store(str(mixed))
    with pytest.raises(ValueError, match="expired"):
        load_key_store(str(pki.expired_keystore("z")))
    with pytest.raises(ValueError, match="cannot read the key store"):
        load_key_store(str(tmp_path / "nope.pem"))
    assert load_key_store(str(good)).not_after > datetime.datetime.now(datetime.timezone.utc)


def test_a_reload_that_finds_bad_files_keeps_the_old_certificate(tmp_path):
    pki = Pki(tmp_path)
    keystore = pki.keystore("controller-1")
    tls = ServerTls(str(keystore), str(pki.truststore), "required")
    assert tls.fetch() is None  # nothing asked: nothing new
    keystore.write_text("not a key store")
    tls.reload()
    assert tls.fetch() is None and tls.reloads == 0
    pki.keystore("controller-1")
    tls.reload()
    assert tls.fetch() is not None and tls.reloads == 1
    assert NodeSecurity(tls=tls).mutual_tls


def test_the_secured_example_configuration_loads_with_certificates_from_the_throwaway_ca(tmp_path, capsys):
    """conf/secure/ as its comments say to use it: certificates from ``python -m
    quorum.security.throwaway_ca``, then every controller's key files load and the clients' settings parse."""
    from pathlib import Path

    from quorum.properties import parse_properties
    from quorum.security import throwaway_ca

    conf = Path(__file__).resolve().parents[2] / "conf" / "secure"
    pki = tmp_path / "pki"
    throwaway_ca.main([str(pki), "controller-1", "controller-2", "controller-3", "admin", "guest"])
    assert str(pki / "ca.pem") in capsys.readouterr().out

    def here(path: Path) -> dict:
        text = path.read_text().replace("/tmp/sparkraft-secure/pki", str(pki))
        return parse_properties(text)

    for i in (1, 2, 3):
        config = NodeConfig.from_properties(here(conf / f"controller-{i}.properties"))
        security = config.node_security("CONTROLLER")
        assert security.mutual_tls and security.scram is not None and security.authorizer is not None
        assert security.mapper.principal(f"CN=controller-{i},O=sparkraft demo") == f"User:controller-{i}"
    admin = ClientSecurity.from_properties(here(conf / "admin.properties"))
    alice = ClientSecurity.from_properties(here(conf / "alice.properties"))
    assert admin.protocol == "SSL" and alice.protocol == "SASL_SSL" and alice.sasl_username == "alice"
    admin.channel_credentials()
    alice.channel_credentials()


def test_the_caller_is_worked_out_only_for_an_authorizer_but_a_presented_token_must_verify():
    from quorum.errors import Errors, SparkraftError
    from quorum.security.authorizer import Authorizer
    from quorum.security.sasl_server import AUTHORIZATION, BEARER, ScramAuthenticator

    class Context:
        def __init__(self, metadata=()):
            self.metadata = metadata

        def peer(self):
            return "ipv4:127.0.0.1:5000"

        def invocation_metadata(self):
            return self.metadata

        def auth_context(self):
            raise AssertionError("no certificate is looked at without an authorizer")

    bad_token = Context(((AUTHORIZATION, BEARER + "srt1.AAAA.BBBB"),))
    without = NodeSecurity(scram=ScramAuthenticator())
    assert without.authorizing_caller(Context()) is None
    with pytest.raises(SparkraftError) as e:
        without.authorizing_caller(bad_token)
    assert e.value.error is Errors.SASL_AUTHENTICATION_FAILED
    deciding = NodeSecurity(authorizer=Authorizer(), scram=ScramAuthenticator())
    assert deciding.authorizing_caller(Context()).principal == "User:ANONYMOUS"
    with pytest.raises(SparkraftError):
        deciding.authorizing_caller(bad_token)


BROKER = {"process.roles": "broker", "node.id": "101", "controller.quorum.voters": "1@127.0.0.1:9093",
          "controller.listener.names": "CONTROLLER", "metadata.log.dir": "/tmp/x"}


def test_a_brokers_sasl_listeners_ask_a_login_and_no_client_certificate(tmp_path):
    pki = Pki(tmp_path)
    config = NodeConfig.from_properties({
        **BROKER, "listeners": "SASL_PLAINTEXT://127.0.0.1:9092,SECURE://127.0.0.1:9094",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SECURE:SASL_SSL",
        "ssl.keystore.location": str(pki.keystore("broker-101")), "ssl.truststore.location": str(pki.truststore),
        "ssl.client.auth": "required", "connections.max.reauth.ms": "60000"})
    assert config.security_protocol("SASL_PLAINTEXT") == "SASL_PLAINTEXT"  # named after its protocol
    plain, secure = config.node_security("SASL_PLAINTEXT"), config.node_security("SECURE")
    assert plain.tls is None and plain.sasl_login.session_lifetime_ms == 60_000
    assert secure.tls is not None and not secure.mutual_tls and secure.sasl_login is not None
    assert config.node_security("CONTROLLER").sasl_login is None
    with pytest.raises(ConfigError, match="SECURE is SASL_SSL .* ssl.keystore.location is not set"):
        NodeConfig.from_properties({**BROKER, "listeners": "SECURE://127.0.0.1:9094",
                                    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SECURE:SASL_SSL"})
