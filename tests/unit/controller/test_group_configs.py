"""Group configs (ConfigResource GROUP, 32): Kafka 4.4's keys and the ranges its group coordinator
accepts, with its messages (each message below is what Kafka 4.4's GroupConfig.validate printed
for the same input at default broker settings)."""
import pytest
from controller_helpers import controller

from quorum.controller import api
from quorum.errors import Errors
from quorum.metadata.configs import GROUP, ConfigResource

SHARING = api.ConfigResourceKey("GROUP", "sharing")


def alter(c, key, *ops):
    (r,) = c.request(api.IncrementalAlterConfigsRequest(((key, tuple(api.AlterableConfig(*o) for o in ops)),)))
    return r


def test_a_group_that_does_not_exist_yet_gets_configs_and_describes_them():
    c, _ = controller(1)
    assert alter(c, SHARING, ("share.auto.offset.reset", "SET", "earliest"),
                 ("share.record.lock.duration.ms", "SET", "20000")).error is Errors.NONE
    assert dict(c.core.image.configs.configs(ConfigResource(GROUP, "sharing"))) == {
        "share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "20000"}
    [(_, err, _, entries)] = c.core.describe_configs(api.DescribeConfigsRequest((SHARING,)))
    by = {e.name: e for e in entries}
    assert err is Errors.NONE
    assert (by["share.auto.offset.reset"].value, by["share.auto.offset.reset"].source) == ("earliest", "GROUP_CONFIG")
    assert by["consumer.session.timeout.ms"] == api.ConfigEntry("consumer.session.timeout.ms", "45000",
                                                                "DEFAULT_CONFIG")
    assert alter(c, SHARING, ("share.auto.offset.reset", "DELETE", None)).error is Errors.NONE
    assert "share.auto.offset.reset" not in c.core.image.configs.configs(ConfigResource(GROUP, "sharing"))


@pytest.mark.parametrize("ops, message", [
    ((("consumer.session.timeout.ms", "SET", "1000"),),
     "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ((("consumer.heartbeat.interval.ms", "SET", "50000"),),
     "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."),
    ((("share.record.lock.duration.ms", "SET", "70000"),),
     "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive."),
    ((("share.delivery.count.limit", "SET", "11"),),
     "share.delivery.count.limit must be in the range 2 to 10 inclusive."),
    ((("share.partition.max.record.locks", "SET", "5000"),),
     "share.partition.max.record.locks must be in the range 100 to 4000 inclusive."),
    ((("streams.num.standby.replicas", "SET", "3"),), "streams.num.standby.replicas must be less than or equal to 2"),
    ((("streams.task.offset.interval.ms", "SET", "1000"),),
     "streams.task.offset.interval.ms must be greater than or equal to 15000"),
    ((("unknown.key", "SET", "1"),), "Unknown group config name: unknown.key"),
    ((("consumer.session.timeout.ms", "SET", "abc"),),
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ((("share.auto.offset.reset", "SET", "foo"),), "Invalid value foo for configuration share.auto.offset.reset: "
     "Invalid value `foo` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' "
     "or of the format 'by_duration:<PnDTnHnMn.nS>'."),
    ((("share.auto.offset.reset", "SET", "by_duration:xx"),), "The value must be either"),
    ((("share.auto.offset.reset", "SET", "by_duration:-PT1H"),), "The value must be either"),
    ((("share.auto.offset.reset", "SET", "by_duration:PT"),), "The value must be either"),
    ((("share.auto.offset.reset", "SET", "by_duration: PT1H"),), "The value must be either"),
    ((("share.auto.offset.reset", "SET", "EARLIEST"),), "The value must be either"),
    ((("streams.rack.aware.assignment.tags", "SET", "a,a"),),
     "streams.rack.aware.assignment.tags must not contain duplicate tag keys."),
    ((("streams.assignor.name", "SET", "x"),),
     "streams.assignor.name 'x' is not a registered task assignor. Registered assignors are: [sticky]."),
])
def test_what_kafkas_group_coordinator_refuses_is_refused_with_its_message(ops, message):
    c, _ = controller(1)
    before = c.core.image
    r = alter(c, SHARING, *ops)
    assert r.error is Errors.INVALID_CONFIG and message in r.message
    assert c.core.image.same_metadata(before)


@pytest.mark.parametrize("value", ["latest", " earliest ", "by_duration:PT1H", "by_duration:P1DT2H3M4.5S",
                                   "by_duration:pt30m"])
def test_share_auto_offset_reset_takes_kafkas_forms(value):
    c, _ = controller(1)
    assert alter(c, SHARING, ("share.auto.offset.reset", "SET", value)).error is Errors.NONE


def test_a_group_resource_needs_an_id():
    c, _ = controller(1)
    r = alter(c, api.ConfigResourceKey("GROUP", ""), ("share.auto.offset.reset", "SET", "earliest"))
    assert r.error is Errors.INVALID_REQUEST
