"""Kafka clients over mutual TLS, with the authorizer on, against real processes: 3 secured
controllers (tests/pki.py), broker 101 whose Kafka listener is SSL with client certificates and
whose own authorizer decides reads from its image's ACLs. The client's principal travels with every
forwarded request (KIP-590), so the controllers authorize the client, not the broker; a client that
sends the forwarding metadata itself is refused. The broker's second listener is SASL_SSL: a SCRAM user
logs in with SCRAM-SHA-512 (librdkafka), and is then the principal of its connection, authorized as
such; a wrong password is refused."""
from __future__ import annotations

import subprocess

import pytest
from conftest import free_ports, sparkraft_cmd, wait_for
from pki import MAPPING_RULES, Pki, secure_controller_props

pytestmark = pytest.mark.slow

confluent_admin = pytest.importorskip("confluent_kafka.admin")

from quorum.controller import api  # noqa: E402
from quorum.errors import Errors, SparkraftError  # noqa: E402
from quorum.rpc.controller_client import ControllerClient  # noqa: E402
from quorum.security.client import ClientSecurity  # noqa: E402
from quorum.security.scram import MECHANISMS  # noqa: E402
from sparkraft.commands.scram_specs import upsertion  # noqa: E402


def kafka_admin(pki: Pki, cn: str, port: int):
    from confluent_kafka.admin import AdminClient

    keystore = str(pki.keystore(cn))
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                        "ssl.ca.location": str(pki.truststore), "ssl.certificate.location": keystore,
                        "ssl.key.location": keystore, "ssl.endpoint.identification.algorithm": "none"})


def scram_admin(pki: Pki, port: int, user: str, password: str, **extra):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                        "ssl.ca.location": str(pki.truststore), "ssl.endpoint.identification.algorithm": "none",
                        **extra})


def error_code(future) -> int:
    try:
        future.result(60)
    except Exception as e:
        return e.args[0].code()
    return 0


def test_the_client_principal_is_authorized_through_the_broker(controller_processes, tmp_path):
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    pki = Pki(tmp_path / "pki")
    admin_config = pki.client_config("admin", keystore=pki.keystore("admin"))
    cp = controller_processes(per_node=lambda i: secure_controller_props(pki, i),
                              security=ClientSecurity.from_file(str(admin_config)))
    cp.format()
    cp.start()
    cp.wait_leader(timeout=30)
    port, sasl_port = free_ports(2)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in cp.ports.items())
    props = {"process.roles": "broker", "node.id": 101, "controller.quorum.voters": voters,
             "controller.listener.names": "CONTROLLER",
             "listeners": f"SSL://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_port}",
             "listener.security.protocol.map": "CONTROLLER:SSL,SSL:SSL,SASL_SSL:SASL_SSL",
             "ssl.keystore.location": pki.keystore("broker-101"), "ssl.truststore.location": pki.truststore,
             "ssl.client.auth": "required", "ssl.principal.mapping.rules": MAPPING_RULES,
             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "super.users": "User:admin", "metadata.log.dir": tmp_path / "b101", "broker.heartbeat.interval.ms": 500}
    config = tmp_path / "broker-101.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    out = open(tmp_path / "broker-101.log", "ab")
    broker = subprocess.Popen(sparkraft_cmd("broker", "start", "--config", str(config)), stdout=out,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        admin = kafka_admin(pki, "admin", port)
        wait_for(lambda: 101 in admin.list_topics(timeout=10).brokers, 60, "broker 101 answering over TLS")
        assert error_code(admin.create_topics([NewTopic("secret", 2, 1)])["secret"]) == 0

        alice = kafka_admin(pki, "alice", port)
        assert "secret" not in alice.list_topics(timeout=30).topics  # no DESCRIBE: not listed
        # forwarded as alice: the controllers refuse her, though broker-101 itself may act for itself
        assert error_code(alice.create_topics([NewTopic("alice-1", 1, 1)])["alice-1"]) == \
            Errors.TOPIC_AUTHORIZATION_FAILED
        controller = ControllerClient(cp.bootstrap(), timeout=30, security=ClientSecurity.from_file(str(admin_config)))
        assert "alice-1" not in controller.list_topics()

        grants = [AclBinding(ResourceType.TOPIC, "secret", ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                  AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                             AclOperation.CREATE, AclPermissionType.ALLOW)]
        for f in admin.create_acls(grants).values():  # forwarded as admin, a super user
            f.result(60)
        wait_for(lambda: "secret" in alice.list_topics(timeout=30).topics, 30, "alice sees secret")
        assert error_code(alice.create_topics([NewTopic("alice-1", 1, 1)])["alice-1"]) == 0
        assert "alice-1" in controller.list_topics()

        # a client cannot claim to forward for someone else: only nodes and CLUSTER_ACTION may
        as_alice = ControllerClient(cp.bootstrap(), timeout=10, security=ClientSecurity.from_file(
            str(pki.client_config("alice", keystore=pki.keystore("alice")))))
        with pytest.raises(SparkraftError) as refused:
            as_alice.call_committed(api.CreateTopicsRequest((api.CreatableTopic("forged", 1, 1),)),
                                    on_behalf_of=("User:admin", "127.0.0.1"))
        assert refused.value.error is Errors.CLUSTER_AUTHORIZATION_FAILED
        assert "forged" not in controller.list_topics()
        as_alice.close()

        # SASL_SSL: bob logs in with SCRAM and acts as User:bob
        controller.call(api.AlterUserScramCredentialsRequest(upsertions=(
            upsertion(MECHANISMS["SCRAM-SHA-512"], "bob", {"password": "bob-secret"}),)))
        bob = scram_admin(pki, sasl_port, "bob", "bob-secret")
        wait_for(lambda: 101 in bob.list_topics(timeout=10).brokers, 60, "bob logged in (once broker 101 has him)")
        assert 101 in bob.list_topics(timeout=30).brokers and "secret" not in bob.list_topics(timeout=30).topics
        assert error_code(bob.create_topics([NewTopic("bob-1", 1, 1)])["bob-1"]) == Errors.TOPIC_AUTHORIZATION_FAILED
        for f in admin.create_acls([AclBinding(ResourceType.TOPIC, "bob-", ResourcePatternType.PREFIXED, "User:bob",
                                               "*", AclOperation.CREATE, AclPermissionType.ALLOW)]).values():
            f.result(60)
        assert error_code(bob.create_topics([NewTopic("bob-1", 1, 1)])["bob-1"]) == 0
        assert "bob-1" in controller.list_topics()
        from confluent_kafka import KafkaError, KafkaException
        errors = []
        impostor = scram_admin(pki, sasl_port, "bob", "not-bobs", error_cb=errors.append)
        with pytest.raises(KafkaException):
            impostor.list_topics(timeout=10)
        impostor.poll(1)  # error callbacks are served here
        assert any(e.code() == KafkaError._AUTHENTICATION and "invalid credentials" in e.str() for e in errors), errors
        controller.close()
    finally:
        broker.kill()
        broker.wait(10)
        out.close()
