"""Properties parsing and the typed node config: defaults, checks and one-line errors."""
from __future__ import annotations

import dataclasses
import logging

import pytest

from quorum.config import KEYS, REQUIRED, ConfigError, NodeConfig, load_config, parse_host_port
from quorum.properties import parse_properties
from quorum.raft.settings import RaftSettings

CONTROLLER = """\
# conf/controller-1.properties
process.roles=controller
node.id=1
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
listeners=CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
metadata.log.dir=/var/lib/sparkraft/c1
metrics.listener=127.0.0.1:7071
"""

BROKER = """\
process.roles=broker
node.id=101
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
listeners=PLAINTEXT://127.0.0.1:9092
controller.listener.names=CONTROLLER
broker.rack=rack-a
metadata.log.dir=/var/lib/sparkraft/b101
"""


def config(text: str, **overrides: str) -> NodeConfig:
    props = parse_properties(text)
    props.update(overrides)
    return NodeConfig.from_properties(props, source="c.properties")


def with_key(text: str, key: str, value: str | None) -> dict[str, str]:
    props = parse_properties(text)
    if value is None:
        props.pop(key)
    else:
        props[key] = value
    return props


# --- properties format -----------------------------------------------------------------------


def test_properties_separators_comments_and_trimming():
    text = "# comment\n! also a comment\n\n  a = 1  \nb: two\nc three\nd=\ne=x=y\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "three", "d": "", "e": "x=y"}


def test_properties_line_continuation_and_escapes():
    text = "voters=1@h:1,\\\n        2@h:2\npath=C\\:\\\\dir\\tx\nkey\\ with\\ space=\\u0041\nlast=1\n"
    assert parse_properties(text) == {
        "voters": "1@h:1,2@h:2", "path": "C:\\dir\tx", "key with space": "A", "last": "1",
    }


def test_properties_even_backslashes_do_not_continue_and_last_duplicate_wins():
    assert parse_properties("a=x\\\\\nb=1\nb=2\n") == {"a": "x\\", "b": "2"}


def test_properties_bad_unicode_escape():
    with pytest.raises(ValueError, match="uxxxx"):
        parse_properties("a=\\u12\n")


# --- typed config ----------------------------------------------------------------------------


def test_controller_example_parses_with_defaults():
    c = config(CONTROLLER)
    assert c.node_id == 1 and c.is_controller and not c.is_broker
    assert c.voters == {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9094), 3: ("127.0.0.1", 9095)}
    assert c.listeners == {"CONTROLLER": ("127.0.0.1", 9093)}
    assert c.controller_listener == ("127.0.0.1", 9093)
    assert c.log_dir == "/var/lib/sparkraft/c1"
    assert c.metrics_listener == ("127.0.0.1", 7071)
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (c.request_timeout_ms, c.retry_backoff_ms, c.append_linger_ms) == (2000, 20, 25)
    assert (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms) == (9000, 2000)
    assert c.log_segment_bytes == 1073741824
    assert c.log_max_record_bytes_between_snapshots == 20971520
    assert c.log_max_snapshot_interval_ms == 3600000
    assert (c.max_retention_bytes, c.max_retention_ms, c.max_idle_interval_ms) == (104857600, 604800000, 500)
    assert c.broker_rack is None and c.bootstrap_servers is None


def test_broker_example_parses():
    c = config(BROKER)
    assert c.is_broker and not c.is_controller and c.node_id == 101
    assert c.broker_rack == "rack-a" and c.controller_listener is None
    assert c.listeners == {"PLAINTEXT": ("127.0.0.1", 9092)}


def test_raft_settings_carry_the_quorum_timeouts():
    c = config(CONTROLLER, **{"controller.quorum.fetch.timeout.ms": "3000",
                              "controller.quorum.append.linger.ms": "5"})
    settings = c.raft_settings()
    assert isinstance(settings, RaftSettings)
    assert settings.fetch_timeout_ms == 3000 and settings.append_linger_ms == 5
    assert settings.election_timeout_ms == 1000


def test_every_key_fills_exactly_one_field():
    fields = {f.name for f in dataclasses.fields(NodeConfig)} - {"given"}  # the file's own text, not a key
    attrs = [key.attr for key in KEYS.values()]
    assert sorted(attrs) == sorted(fields)
    assert all(key.doc for key in KEYS.values())


def test_the_keys_the_file_gave_are_kept_as_given():
    c = config(BROKER, **{"log.retention.ms": "5", "no.such.key": "x", "max.connections": "20"})
    # known keys only, as written (log.retention.ms is a dynamic broker config, not a key of the file)
    assert c.given == {**parse_properties(BROKER), "max.connections": "20"}


def test_unknown_key_warns_and_is_ignored(caplog):
    with caplog.at_level(logging.WARNING):
        c = config(CONTROLLER, **{"log.retention.hours": "1"})
    assert c.node_id == 1
    assert "unknown configuration key 'log.retention.hours'" in caplog.text


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("node.id", "abc", "expected an integer >= 0"),
        ("node.id", "-1", "expected an integer >= 0"),
        ("process.roles", "controller,zookeeper", "expected 'controller', 'broker'"),
        ("controller.quorum.voters", "1@host", "expected ID@HOST:PORT"),
        ("controller.quorum.voters", "1@h:1,1@h:2", "distinct ids"),
        ("controller.quorum.voters", "x@h:1", "expected ID@HOST:PORT"),
        ("listeners", "127.0.0.1:9093", "expected NAME://HOST:PORT"),
        ("controller.quorum.election.timeout.ms", "0", "expected an integer >= 1"),
        ("controller.quorum.fetch.timeout.ms", "2s", "expected an integer >= 1"),
        ("metrics.listener", "127.0.0.1:99999", "expected HOST:PORT"),
        ("metadata.log.dir", "", "expected a non-empty value"),
    ],
)
def test_bad_value_is_one_line_naming_key_value_and_expectation(key, value, expected):
    with pytest.raises(ConfigError) as info:
        NodeConfig.from_properties(with_key(CONTROLLER, key, value), source="c.properties")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"c.properties: invalid value {value!r} for {key}: ")
    assert expected in message


@pytest.mark.parametrize("key", [k.name for k in KEYS.values() if k.default is REQUIRED])
def test_required_key_missing(key):
    with pytest.raises(ConfigError, match=f"c.properties: {key} is required"):
        NodeConfig.from_properties(with_key(CONTROLLER, key, None), source="c.properties")


def test_controller_node_id_must_be_a_voter():
    with pytest.raises(ConfigError) as info:
        config(CONTROLLER, **{"node.id": "4"})
    assert str(info.value) == "c.properties: node.id 4 is not in controller.quorum.voters (1, 2, 3)"


def test_controller_needs_voters_and_its_listener():
    with pytest.raises(ConfigError, match="a controller needs controller.quorum.voters .a static quorum. or "
                                          "controller.quorum.bootstrap.servers"):
        NodeConfig.from_properties(with_key(CONTROLLER, "controller.quorum.voters", None))
    with pytest.raises(ConfigError, match="not both"):
        config(CONTROLLER, **{"controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    dynamic = NodeConfig.from_properties({**with_key(CONTROLLER, "controller.quorum.voters", None),
                                          "controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    assert dynamic.dynamic_quorum and dynamic.voters is None and dynamic.bootstrap_servers == (("127.0.0.1", 9093),)
    with pytest.raises(ConfigError, match="listeners must include the controller listener CONTROLLER"):
        config(CONTROLLER, listeners="PLAINTEXT://127.0.0.1:9092")
    with pytest.raises(ConfigError, match="controller.listener.names is required"):
        NodeConfig.from_properties(with_key(CONTROLLER, "controller.listener.names", None))


def test_controller_listener_port_differing_from_voter_entry_warns(caplog):
    with caplog.at_level(logging.WARNING):
        config(CONTROLLER, listeners="CONTROLLER://127.0.0.1:9999")
    assert "differs from node 1's voter entry 127.0.0.1:9093" in caplog.text


def test_broker_checks():
    with pytest.raises(ConfigError, match="node.id 1 is in controller.quorum.voters"):
        config(BROKER, **{"node.id": "1"})
    with pytest.raises(ConfigError, match="must not include the controller listener CONTROLLER"):
        config(BROKER, listeners="PLAINTEXT://:9092,CONTROLLER://:9093")
    with pytest.raises(ConfigError, match="needs controller.quorum.voters or"):
        NodeConfig.from_properties(with_key(BROKER, "controller.quorum.voters", None))
    props = with_key(BROKER, "controller.quorum.voters", None)
    props["controller.quorum.bootstrap.servers"] = "127.0.0.1:9093, [::1]:9094"
    c = NodeConfig.from_properties(props)
    assert c.voters is None and c.bootstrap_servers == (("127.0.0.1", 9093), ("::1", 9094))


def test_combined_roles():
    c = config(CONTROLLER, **{"process.roles": "broker,controller",
                              "listeners": "PLAINTEXT://:9092,CONTROLLER://127.0.0.1:9093"})
    assert c.is_broker and c.is_controller
    assert c.listeners["PLAINTEXT"] == ("", 9092)


def test_parse_host_port():
    assert parse_host_port("localhost:1") == ("localhost", 1)
    assert parse_host_port("[::1]:9093") == ("::1", 9093)
    for bad in ("localhost", "h:0", "h:x", "h:65536", "a:b:1"):
        with pytest.raises(ValueError):
            parse_host_port(bad)


def test_load_config_reads_a_file(tmp_path):
    path = tmp_path / "c.properties"
    path.write_text(CONTROLLER)
    assert load_config(path).node_id == 1


def test_load_config_missing_or_unreadable(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.properties")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path)  # a directory
    bad = tmp_path / "bad.properties"
    bad.write_bytes(b"node.id=\xff\n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(bad)
