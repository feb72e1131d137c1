"""Which configuration keys are Apache Kafka's, asked of Apache Kafka 4.4's own config definitions
(its jars, through jshell): the reference docs say so for every key, and a key marked Kafka's must
be Kafka's."""
from __future__ import annotations

import pytest

from apache_kafka import jshell

from quorum.config import KAFKA, KAFKA_3, KAFKA_AUTHORIZER, KEYS, SPARKRAFT

pytestmark = pytest.mark.slow

# What Kafka itself defines: the broker and controller's ConfigDef, and StandardAuthorizer's own keys.
SCRIPT = """
var names = new java.util.TreeSet<String>(org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF.names());
System.out.println("CONFIG " + String.join(" ", names));
System.out.println("AUTHORIZER " + org.apache.kafka.metadata.authorizer.StandardAuthorizer.SUPER_USERS_CONFIG + " "
    + org.apache.kafka.metadata.authorizer.StandardAuthorizer.ALLOW_EVERYONE_IF_NO_ACL_IS_FOUND_CONFIG);
"""


@pytest.fixture(scope="module")
def kafka_names(tmp_path_factory) -> dict[str, set[str]]:
    stdout = jshell(SCRIPT, tmp_path_factory.mktemp("jshell"))
    lines = dict(line.split(" ", 1) for line in stdout.splitlines() if line.startswith(("CONFIG ", "AUTHORIZER ")))
    assert set(lines) == {"CONFIG", "AUTHORIZER"}, stdout
    return {kind: set(names.split()) for kind, names in lines.items()}


def test_every_key_marked_kafkas_is_in_kafkas_own_definitions(kafka_names):
    for key in KEYS.values():
        in_config = key.name in kafka_names["CONFIG"]
        if key.origin == KAFKA:
            assert in_config, f"{key.name} is marked Apache Kafka's, but Kafka 4.4 does not define it"
        elif key.origin == KAFKA_AUTHORIZER:
            assert key.name in kafka_names["AUTHORIZER"], key.name
        else:
            assert key.origin in (KAFKA_3, SPARKRAFT), key.origin
            assert not in_config, f"{key.name} is Kafka's own key: mark it so"


def test_kafkas_names_were_read_whole(kafka_names):
    # the definitions hold the keys every Kafka broker has: a sign jshell printed the whole set
    assert {"node.id", "process.roles", "listeners", "log.dirs", "controller.quorum.voters"} <= kafka_names["CONFIG"]
    assert len(kafka_names["CONFIG"]) > 200
