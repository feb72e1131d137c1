"""Names and numbers a request carries as text are read as Java reads them, whatever the request:
a BROKER config resource is an int32 broker id or empty, exactly as Integer.parseInt takes it
(no spaces, no underscores, nothing past int32). Anything else is INVALID_REQUEST with one line,
and nothing is written. Property tests over arbitrary text, against an oracle written apart from
the code (a regex of Java's grammar and the int32 range)."""
from __future__ import annotations

import re

from controller_helpers import controller, metadata_written
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from quorum.controller import api
from quorum.errors import Errors

# Java's Integer.parseInt: an optional sign, then one or more decimal digits (Unicode category Nd,
# which is what Python's \d matches in a str pattern), within int32.
JAVA_INT = re.compile(r"[+-]?\d+")


def java_accepts(name: str) -> bool:
    if name == "":
        return True  # the cluster default
    if not JAVA_INT.fullmatch(name):
        return False
    return -(2**31) <= int(name) <= 2**31 - 1


names = st.one_of(
    st.text(max_size=12),
    st.from_regex(r"\A[ +\-]?[0-9_ ]{0,25}\Z"),
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(["1_0", " 1", "1 ", "99999999999999999999999", "2147483647", "2147483648", "-2147483648",
                     "-2147483649", "+7", "+", "-", "٣", "0x10", "1e3", "1.0", "101"]),
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(name=names)
@example(name="1_0")
@example(name=" 1")
@example(name="99999999999999999999999")
def test_a_broker_config_resource_is_written_only_under_a_java_int_name(name):
    c, _ = controller(1)
    key = api.ConfigResourceKey("BROKER", name)
    end = c.end_offset
    (r,) = c.request(api.IncrementalAlterConfigsRequest(((key, (api.AlterableConfig("log.retention.ms", "SET",
                                                                                      "1000"),)),)))
    if java_accepts(name):
        assert r.error is Errors.NONE, r.message
        assert metadata_written(c, end) == 1
    else:
        assert r.error is Errors.INVALID_REQUEST
        assert r.message == f"Illegal non-integral BROKER resource type name: {name}"
        assert metadata_written(c, end) == 0  # nothing written


@SETTINGS
@given(name=names)
def test_a_broker_config_resource_is_described_only_under_a_java_int_name(name):
    c, _ = controller(1)
    ((_key, error, message, entries),) = c.core.describe_configs(
        api.DescribeConfigsRequest((api.ConfigResourceKey("BROKER", name),)))
    if java_accepts(name):
        assert error is Errors.NONE and entries
    else:
        assert error is Errors.INVALID_REQUEST and "non-integral" in message and entries == []
