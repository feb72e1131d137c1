"""``sparkraft brokers list``'s table: a name, host or rack holding a control character (a broker
registered before names were checked, or one read from another Kafka cluster's log) is shown
escaped, one row per broker."""
from __future__ import annotations

from quorum.controller import api
from sparkraft.commands.brokers import format_brokers


def test_control_characters_in_a_registration_are_escaped_one_row_per_broker():
    broker = api.BrokerDescription(7, False, False, 3, "r\ta", (api.BrokerEndpoint("PLAIN\nTEXT", "h\x1b[31m", 9092),))
    lines = format_brokers([broker]).splitlines()
    assert len(lines) == 2, lines
    assert "PLAIN\\nTEXT://h\\x1b[31m:9092" in lines[1] and "r\\ta" in lines[1]
