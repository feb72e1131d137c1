"""Group configs (KIP-848, KIP-932, KIP-1071): dynamic configs of one consumer, share or streams
group, ConfigResource type GROUP (32), kept as CONFIG_RECORDs like a topic's and applied by Kafka's
brokers' group coordinators. The group need not exist (it lives in the brokers, not the log).

The keys, types, defaults and lower bounds are Kafka 4.4's GroupConfig; a group's whole resulting
set is then checked against the ranges a group coordinator accepts at its default broker settings
(``group.consumer.min.session.timeout.ms`` ... ), with Kafka's messages, as Kafka's controller checks
them against its own configuration."""
from __future__ import annotations

import re
from collections.abc import Mapping

from quorum.errors import Errors, SparkraftError

# name, type, default, least value, allowed values (configs_control makes them ConfigDefs)
GROUP_KEYS = (
    ("consumer.session.timeout.ms", "INT", "45000", 1),
    ("consumer.heartbeat.interval.ms", "INT", "5000", 1),
    ("consumer.assignment.interval.ms", "INT", "1000", 0),
    ("consumer.assignor.offload.enable", "BOOLEAN", "true"),
    ("share.session.timeout.ms", "INT", "45000", 1),
    ("share.heartbeat.interval.ms", "INT", "5000", 1),
    ("share.record.lock.duration.ms", "INT", "30000", 1000),
    ("share.delivery.count.limit", "INT", "5", 2),
    ("share.partition.max.record.locks", "INT", "2000", 100),
    ("share.auto.offset.reset", "STRING", "latest"),  # its forms are checked by validate
    ("share.isolation.level", "STRING", "read_uncommitted", None, ("read_committed", "read_uncommitted")),
    ("share.renew.acknowledge.enable", "BOOLEAN", "true"),
    ("share.assignment.interval.ms", "INT", "1000", 0),
    ("share.assignor.offload.enable", "BOOLEAN", "true"),
    ("streams.session.timeout.ms", "INT", "45000", 1),
    ("streams.heartbeat.interval.ms", "INT", "5000", 1),
    ("streams.num.standby.replicas", "INT", "0", 0),
    ("streams.initial.rebalance.delay.ms", "INT", "3000", 0),
    ("streams.assignment.interval.ms", "INT", "1000", 0),
    ("streams.assignor.offload.enable", "BOOLEAN", "true"),
    ("streams.task.offset.interval.ms", "INT", "60000", 1),
    ("streams.num.warmup.replicas", "INT", "2", 0),
    ("streams.rack.aware.assignment.tags", "LIST", ""),
    ("streams.acceptable.recovery.lag", "LONG", "10000", 0),
    ("streams.assignor.name", "STRING", None),
    ("errors.deadletterqueue.topic.name", "STRING", ""),
    ("errors.deadletterqueue.copy.record.enable", "BOOLEAN", "false"),
)

# what a group coordinator at its default broker settings accepts: (least, most), None = no bound
_RANGES = {
    "consumer.session.timeout.ms": (45000, 60000), "consumer.heartbeat.interval.ms": (5000, 15000),
    "consumer.assignment.interval.ms": (0, 15000),
    "share.session.timeout.ms": (45000, 60000), "share.heartbeat.interval.ms": (5000, 15000),
    "share.assignment.interval.ms": (0, 15000), "share.record.lock.duration.ms": (15000, 60000),
    "share.delivery.count.limit": (2, 10), "share.partition.max.record.locks": (100, 4000),
    "streams.session.timeout.ms": (45000, 60000), "streams.heartbeat.interval.ms": (5000, 15000),
    "streams.assignment.interval.ms": (0, 15000),
    "streams.num.standby.replicas": (None, 2), "streams.num.warmup.replicas": (None, 20),
    "streams.task.offset.interval.ms": (15000, None),
}
_ASSIGNORS = ("sticky",)  # group.streams.assignors at its default

# Java's Duration.parse: PnDTnHnMn.nS, each part optional but not all, signs allowed
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?=[-+0-9])(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)


def _offset_reset_ok(value: str) -> bool:
    value = value.strip()  # the keywords and the prefix are case-sensitive; the duration is not
    if value in ("latest", "earliest"):
        return True
    if not value.startswith("by_duration:"):
        return False
    m = _DURATION.fullmatch(value.removeprefix("by_duration:"))
    if m is None or not any(m.group(i) for i in range(2, 6)):
        return False
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in range(2, 6))
    total = (days * 86400 + hours * 3600 + minutes * 60 + seconds) * (-1 if m.group(1) == "-" else 1)
    return total >= 0  # a negative duration is refused, as Kafka's validator does


def _invalid(message: str) -> SparkraftError:
    return SparkraftError(Errors.INVALID_CONFIG, message)


def validate(configs: Mapping[str, str]) -> None:
    """A group's resulting configs (each value already valid for its type): INVALID_CONFIG with
    Kafka's message if a group coordinator would refuse them."""
    for name, (least, most) in _RANGES.items():
        if name not in configs:
            continue
        n = int(configs[name].strip())
        if least is not None and most is not None and not least <= n <= most:
            raise _invalid(f"{name} must be in the range {least} to {most} inclusive.")
        if least is not None and most is None and n < least:
            raise _invalid(f"{name} must be greater than or equal to {least}")
        if most is not None and least is None and n > most:
            raise _invalid(f"{name} must be less than or equal to {most}")
    reset = configs.get("share.auto.offset.reset")
    if reset is not None and not _offset_reset_ok(reset):
        raise _invalid(f"Invalid value {reset} for configuration share.auto.offset.reset: Invalid value `{reset}` "
                       f"for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' "
                       f"or of the format 'by_duration:<PnDTnHnMn.nS>'.")
    tags = [t.strip() for t in configs.get("streams.rack.aware.assignment.tags", "").split(",") if t.strip()]
    if len(tags) != len(set(tags)):
        raise _invalid("streams.rack.aware.assignment.tags must not contain duplicate tag keys.")
    assignor = configs.get("streams.assignor.name")
    if assignor is not None and assignor.strip() not in _ASSIGNORS:
        raise _invalid(f"streams.assignor.name '{assignor}' is not a registered task assignor. Registered "
                       f"assignors are: [{', '.join(_ASSIGNORS)}].")
