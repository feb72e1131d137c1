"""Dynamic configs: IncrementalAlterConfigs and DescribeConfigs (Kafka's ConfigurationControlManager).

Known keys live in one table: type, default, validator, and for a topic key its broker-level
synonym (a cluster-wide dynamic value of ``log.retention.ms`` is what a topic without its own
``retention.ms`` gets). Values are checked as Kafka's ConfigDef does, with its messages
("Invalid value x for configuration retention.ms: Not a number of type LONG").

Operations per key: SET, DELETE, APPEND and SUBTRACT (the last two on LIST keys only, starting
from the current value or the default). A resource with any bad key gets INVALID_CONFIG and no
records; other resources of the request are not affected.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from quorum.controller import api, group_configs
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.configs import BROKER, CLUSTER, GROUP, TOPIC, ConfigResource
from quorum.metadata.image import MetadataImage

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: str  # BOOLEAN, STRING, INT, LONG, DOUBLE, LIST, CLASS, PASSWORD
    default: Optional[str]
    at_least: Optional[float] = None
    at_most: Optional[float] = None
    one_of: Optional[tuple[str, ...]] = None  # for STRING / each LIST element
    synonym: Optional[str] = None  # topic key -> the broker key that supplies its default


def _k(name, type_, default, at_least=None, at_most=None, one_of=None, synonym=None) -> ConfigDef:
    return ConfigDef(name, type_, default, at_least, at_most, one_of, synonym)


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _k("cleanup.policy", "LIST", "delete", one_of=("compact", "delete"), synonym="log.cleanup.policy"),
    _k("compression.type", "STRING", "producer", one_of=COMPRESSION_TYPES, synonym="compression.type"),
    _k("delete.retention.ms", "LONG", "86400000", at_least=0, synonym="log.cleaner.delete.retention.ms"),
    _k("file.delete.delay.ms", "LONG", "60000", at_least=0, synonym="log.segment.delete.delay.ms"),
    _k("flush.messages", "LONG", str(LONG_MAX), at_least=1, synonym="log.flush.interval.messages"),
    _k("flush.ms", "LONG", str(LONG_MAX), at_least=0, synonym="log.flush.interval.ms"),
    # replication throttles (a reassignment sets and clears them: kafka-reassign-partitions --throttle, --verify)
    _k("follower.replication.throttled.replicas", "LIST", ""),
    _k("index.interval.bytes", "INT", "4096", at_least=0, synonym="log.index.interval.bytes"),
    _k("leader.replication.throttled.replicas", "LIST", ""),
    _k("local.retention.bytes", "LONG", "-2", at_least=-2, synonym="log.local.retention.bytes"),
    _k("local.retention.ms", "LONG", "-2", at_least=-2, synonym="log.local.retention.ms"),
    _k("max.compaction.lag.ms", "LONG", str(LONG_MAX), at_least=1,
       synonym="log.cleaner.max.compaction.lag.ms"),
    _k("max.message.bytes", "INT", "1048588", at_least=0, synonym="message.max.bytes"),
    _k("message.timestamp.after.max.ms", "LONG", "3600000", at_least=0,
       synonym="log.message.timestamp.after.max.ms"),
    _k("message.timestamp.before.max.ms", "LONG", str(LONG_MAX), at_least=0,
       synonym="log.message.timestamp.before.max.ms"),
    _k("message.timestamp.type", "STRING", "CreateTime", one_of=("CreateTime", "LogAppendTime"),
       synonym="log.message.timestamp.type"),
    _k("min.cleanable.dirty.ratio", "DOUBLE", "0.5", at_least=0, at_most=1,
       synonym="log.cleaner.min.cleanable.ratio"),
    _k("min.compaction.lag.ms", "LONG", "0", at_least=0, synonym="log.cleaner.min.compaction.lag.ms"),
    _k("min.insync.replicas", "INT", "1", at_least=1, synonym="min.insync.replicas"),
    _k("preallocate", "BOOLEAN", "false", synonym="log.preallocate"),
    _k("remote.storage.enable", "BOOLEAN", "false"),
    _k("retention.bytes", "LONG", "-1", synonym="log.retention.bytes"),
    _k("retention.ms", "LONG", "604800000", at_least=-1, synonym="log.retention.ms"),
    _k("segment.bytes", "INT", "1073741824", at_least=14, synonym="log.segment.bytes"),
    _k("segment.index.bytes", "INT", "10485760", at_least=4, synonym="log.index.size.max.bytes"),
    _k("segment.jitter.ms", "LONG", "0", at_least=0, synonym="log.roll.jitter.ms"),
    _k("segment.ms", "LONG", "604800000", at_least=1, synonym="log.roll.ms"),
    _k("unclean.leader.election.enable", "BOOLEAN", "false", synonym="unclean.leader.election.enable"),
]}

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    _k("auto.create.topics.enable", "BOOLEAN", "true"),
    _k("background.threads", "INT", "10", at_least=1),
    _k("compression.type", "STRING", "producer", one_of=COMPRESSION_TYPES),
    # log directories taking no new replicas (KIP-1066: "*" for all); the broker checks they are its own
    _k("cordoned.log.dirs", "LIST", ""),
    _k("default.replication.factor", "INT", "1", at_least=1),
    _k("delete.topic.enable", "BOOLEAN", "true"),
    _k("follower.replication.throttled.rate", "LONG", str(LONG_MAX), at_least=0),
    _k("leader.replication.throttled.rate", "LONG", str(LONG_MAX), at_least=0),
    _k("log.cleaner.delete.retention.ms", "LONG", "86400000", at_least=0),
    _k("log.cleaner.max.compaction.lag.ms", "LONG", str(LONG_MAX), at_least=1),
    _k("log.cleaner.min.cleanable.ratio", "DOUBLE", "0.5", at_least=0, at_most=1),
    _k("log.cleaner.min.compaction.lag.ms", "LONG", "0", at_least=0),
    _k("log.cleaner.threads", "INT", "1", at_least=0),
    _k("log.cleanup.policy", "LIST", "delete", one_of=("compact", "delete")),
    _k("log.flush.interval.messages", "LONG", str(LONG_MAX), at_least=1),
    _k("log.flush.interval.ms", "LONG", None),
    _k("log.index.interval.bytes", "INT", "4096", at_least=0),
    _k("log.index.size.max.bytes", "INT", "10485760", at_least=4),
    _k("log.local.retention.bytes", "LONG", "-2", at_least=-2),
    _k("log.local.retention.ms", "LONG", "-2", at_least=-2),
    _k("log.message.timestamp.after.max.ms", "LONG", "3600000", at_least=0),
    _k("log.message.timestamp.before.max.ms", "LONG", str(LONG_MAX), at_least=0),
    _k("log.message.timestamp.type", "STRING", "CreateTime", one_of=("CreateTime", "LogAppendTime")),
    _k("log.preallocate", "BOOLEAN", "false"),
    _k("log.retention.bytes", "LONG", "-1"),
    _k("log.retention.check.interval.ms", "LONG", "300000", at_least=1),
    _k("log.retention.hours", "INT", "168"),
    _k("log.retention.minutes", "INT", None),
    _k("log.retention.ms", "LONG", None),
    _k("log.roll.hours", "INT", "168", at_least=1),
    _k("log.roll.jitter.ms", "LONG", None),
    _k("log.roll.ms", "LONG", None),
    _k("log.segment.bytes", "INT", "1073741824", at_least=14),
    _k("log.segment.delete.delay.ms", "LONG", "60000", at_least=0),
    _k("max.connections", "INT", str(INT_MAX), at_least=0),
    _k("max.connections.per.ip", "INT", str(INT_MAX), at_least=0),
    _k("message.max.bytes", "INT", "1048588", at_least=0),
    _k("min.insync.replicas", "INT", "1", at_least=1),
    _k("num.io.threads", "INT", "8", at_least=1),
    _k("num.network.threads", "INT", "3", at_least=1),
    _k("num.partitions", "INT", "1", at_least=1),
    _k("num.recovery.threads.per.data.dir", "INT", "2", at_least=1),
    _k("num.replica.fetchers", "INT", "1"),
    _k("replica.alter.log.dirs.io.max.bytes.per.second", "LONG", str(LONG_MAX), at_least=0),
    _k("unclean.leader.election.enable", "BOOLEAN", "false"),
]}

GROUP_CONFIGS: dict[str, ConfigDef] = {row[0]: _k(*row) for row in group_configs.GROUP_KEYS}

SOURCE_TOPIC = "DYNAMIC_TOPIC_CONFIG"
SOURCE_BROKER = "DYNAMIC_BROKER_CONFIG"
SOURCE_DEFAULT_BROKER = "DYNAMIC_DEFAULT_BROKER_CONFIG"
SOURCE_GROUP = "GROUP_CONFIG"
SOURCE_DEFAULT = "DEFAULT_CONFIG"


def _invalid(value: str, d: ConfigDef, why: str) -> SparkraftError:
    return SparkraftError(Errors.INVALID_CONFIG, f"Invalid value {value} for configuration {d.name}: {why}")


# What Java's Long.parseLong and a finite Double.parseDouble take (Kafka parses with them after a
# trim): Python's int() and float() also take "1_000", "nan", "inf" and non-ASCII digits.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?")


def parse_java_number(s: str, kind: str) -> float:
    """``s`` as Java parses a config of type INT, LONG or DOUBLE; ValueError if it would not, or if
    it is out of range or not finite."""
    if kind == "DOUBLE":
        if not _JAVA_DECIMAL.fullmatch(s):
            raise ValueError(s)
        n = float(s.rstrip("fFdD"))
        if not math.isfinite(n):
            raise ValueError(s)
        return n
    if not _JAVA_INTEGER.fullmatch(s):
        raise ValueError(s)
    n = int(s)
    limit = INT_MAX if kind == "INT" else LONG_MAX
    if not -limit - 1 <= n <= limit:
        raise ValueError(s)
    return n


def parse_java_int(s: str) -> int:
    """``s`` as Java's Integer.parseInt reads it: an optional sign, then decimal digits (Unicode's
    too, as Character.digit takes them), within int32; ValueError otherwise. Python's int() would
    also take spaces, underscores and any size."""
    digits = s[1:] if s[:1] in ("+", "-") else s
    if not digits.isdecimal():
        raise ValueError(s)
    n = int(s)
    if not -INT_MAX - 1 <= n <= INT_MAX:
        raise ValueError(s)
    return n


def _number(value: str, d: ConfigDef) -> float:
    try:
        n = parse_java_number(value.strip(), d.type)
    except ValueError:
        raise _invalid(value, d, f"Not a number of type {d.type}") from None
    if d.at_least is not None and n < d.at_least:
        raise _invalid(value, d, f"Value must be at least {_fmt(d.at_least)}")
    if d.at_most is not None and n > d.at_most:
        raise _invalid(value, d, f"Value must be no more than {_fmt(d.at_most)}")
    return n


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def validate_value(d: ConfigDef, value: str) -> None:
    """Raise INVALID_CONFIG if ``value`` is not a valid value of ``d``."""
    if d.type in ("INT", "LONG", "DOUBLE"):
        _number(value, d)
    elif d.type == "BOOLEAN":
        if value.strip().lower() not in ("true", "false"):
            raise _invalid(value, d, "Expected value to be either true or false")
    elif d.type == "STRING":
        if d.one_of is not None and value.strip() not in d.one_of:
            raise _invalid(value, d, f"String must be one of: {', '.join(d.one_of)}")
    elif d.type == "LIST":
        parts = split_list(value)
        if d.one_of is not None:
            for part in parts:
                if part not in d.one_of:
                    raise _invalid(value, d, f"String must be one of: {', '.join(d.one_of)}")


def split_list(value: Optional[str]) -> list[str]:
    if value is None or not value.strip():
        return []
    return [p.strip() for p in value.split(",") if p.strip()]


def definitions(resource: ConfigResource) -> dict[str, ConfigDef]:
    if resource.type == GROUP:
        return GROUP_CONFIGS
    return TOPIC_CONFIGS if resource.type == TOPIC else BROKER_CONFIGS


def definition(resource: ConfigResource, name: str) -> ConfigDef:
    d = definitions(resource).get(name)
    if d is None:
        what = {TOPIC: "topic", GROUP: "group"}.get(resource.type, "broker")
        raise SparkraftError(Errors.INVALID_CONFIG, f"Unknown {what} config name: {name}")
    return d


def validate_topic_configs(configs: Sequence[tuple[str, str]]) -> None:
    """CreateTopics: every key known and every value valid, each key once."""
    seen = set()
    for name, value in configs:
        if name in seen:
            raise SparkraftError(Errors.INVALID_CONFIG, f"Duplicate config key {name}")
        seen.add(name)
        if value is None:
            raise SparkraftError(Errors.INVALID_CONFIG, f"Null value not supported for topic config {name}")
        validate_value(definition(ConfigResource(TOPIC, ""), name), value)


def resource_of(key: api.ConfigResourceKey) -> ConfigResource:
    """The record's resource for an API resource key; INVALID_REQUEST if it cannot be one."""
    kind = key.type.upper()
    if kind == "CLUSTER":
        if key.name:
            raise SparkraftError(Errors.INVALID_REQUEST, "A CLUSTER resource has no name")
        return CLUSTER
    if kind == "TOPIC":
        if not key.name:
            raise SparkraftError(Errors.INVALID_REQUEST, "A TOPIC resource needs a topic name")
        return ConfigResource(TOPIC, key.name)
    if kind == "BROKER":  # a broker id, or empty for the cluster default (Kafka's validateBrokerName)
        if key.name:
            try:
                parse_java_int(key.name)
            except ValueError:
                raise SparkraftError(Errors.INVALID_REQUEST,
                                     f"Illegal non-integral BROKER resource type name: {key.name}") from None
        return ConfigResource(BROKER, key.name)
    if kind == "GROUP":  # a consumer, share or streams group's own configs (the group need not exist yet)
        if not key.name:
            raise SparkraftError(Errors.INVALID_REQUEST, "A GROUP resource needs a group id")
        return ConfigResource(GROUP, key.name)
    raise SparkraftError(Errors.INVALID_REQUEST, f"Unsupported resource type {key.type}")


def _check_exists(image: MetadataImage, resource: ConfigResource) -> None:
    if resource.type == TOPIC and image.topics.ids_by_name.get(resource.name) is None:
        raise SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{resource.name}' does not exist.")


def alter_resource(image: MetadataImage, resource: ConfigResource,
                   ops: Sequence[api.AlterableConfig]) -> list[pb.ConfigRecord]:
    """The records of one resource's alterations; SparkraftError if any is invalid."""
    _check_exists(image, resource)
    current: Mapping[str, str] = image.configs.configs(resource)
    new: dict[str, Optional[str]] = {}
    for op in ops:
        d = definition(resource, op.name)
        value = new[op.name] if op.name in new else current.get(op.name)
        kind = op.op.upper()
        if kind == "SET":
            if op.value is None:
                raise SparkraftError(Errors.INVALID_REQUEST, f"Null value not supported for : {op.name}")
            validate_value(d, op.value)
            value = op.value
        elif kind == "DELETE":
            value = None
        elif kind in ("APPEND", "SUBTRACT"):
            if d.type != "LIST":
                raise SparkraftError(Errors.INVALID_CONFIG,
                                     f"Can't {kind} to key {op.name} because its type is not LIST.")
            parts = split_list(value if value is not None else d.default)
            given = split_list(op.value)
            if kind == "APPEND":
                parts += [p for p in given if p not in parts]
            else:
                parts = [p for p in parts if p not in given]
            value = ",".join(parts)
            validate_value(d, value)
        else:
            raise SparkraftError(Errors.INVALID_REQUEST, f"Unknown alter config operation {op.op}")
        new[op.name] = value
    if resource.type == GROUP:
        group_configs.validate({k: v for k, v in {**current, **new}.items() if v is not None})
    records = []
    for name, value in new.items():
        if current.get(name) == value:
            continue
        r = pb.ConfigRecord(resource_type=resource.type, resource_name=resource.name, name=name)
        if value is not None:
            r.value = value
        records.append(r)
    return records


def incremental_alter(image: MetadataImage, req: api.IncrementalAlterConfigsRequest
                      ) -> tuple[list[pb.ConfigRecord], tuple[api.AlterConfigsResult, ...]]:
    records: list[pb.ConfigRecord] = []
    results = []
    seen = set()
    for key, ops in req.resources:
        try:
            if key in seen:
                raise SparkraftError(Errors.INVALID_REQUEST, "Duplicate resource in the request")
            seen.add(key)
            resource = resource_of(key)
            changes = alter_resource(image, resource, ops)
        except SparkraftError as e:
            results.append(api.AlterConfigsResult(key, e.error, e.message))
            continue
        if not req.validate_only:
            records.extend(changes)
        results.append(api.AlterConfigsResult(key))
    return records, tuple(results)


def topic_value(image: MetadataImage, topic: str, name: str) -> Optional[str]:
    """A topic config's value in effect: the topic's own, else the cluster's dynamic default (its
    broker synonym), else the definition's default (as ``describe`` reports it)."""
    own = image.configs.value(ConfigResource(TOPIC, topic), name)
    if own is not None:
        return own
    d = TOPIC_CONFIGS.get(name)
    if d is not None and d.synonym is not None:
        cluster = image.configs.value(CLUSTER, d.synonym)
        if cluster is not None:
            return cluster
    return d.default if d is not None else None


def unclean_election_enabled(image: MetadataImage, topic: str) -> bool:
    """``unclean.leader.election.enable`` for ``topic``: may the controller give a leaderless
    partition a leader from outside its ISR (losing what only the ISR had)?"""
    return (topic_value(image, topic, "unclean.leader.election.enable") or "false").strip().lower() == "true"


def min_insync_replicas(image: MetadataImage, topic: str) -> int:
    """``min.insync.replicas`` for ``topic`` (at least 1)."""
    try:
        return max(1, int(topic_value(image, topic, "min.insync.replicas") or "1"))
    except ValueError:
        return 1


def describe(image: MetadataImage, key: api.ConfigResourceKey
             ) -> tuple[api.ConfigResourceKey, Errors, str, list[api.ConfigEntry]]:
    try:
        resource = resource_of(key)
        _check_exists(image, resource)
    except SparkraftError as e:
        return key, e.error, e.message, []
    own = image.configs.configs(resource)
    cluster = image.configs.configs(CLUSTER)
    defs = definitions(resource)
    entries = []
    for name in sorted(set(defs) | set(own)):
        d = defs.get(name)
        if name in own:
            source = {TOPIC: SOURCE_TOPIC, GROUP: SOURCE_GROUP}.get(resource.type) or (
                SOURCE_DEFAULT_BROKER if resource == CLUSTER else SOURCE_BROKER)
            entries.append(api.ConfigEntry(name, own[name], source))
            continue
        if resource.type == TOPIC:
            synonym = d.synonym if d is not None else None
            if synonym is not None and synonym in cluster:
                entries.append(api.ConfigEntry(name, cluster[synonym], SOURCE_DEFAULT_BROKER))
                continue
        elif resource.type == BROKER and resource != CLUSTER and name in cluster:
            entries.append(api.ConfigEntry(name, cluster[name], SOURCE_DEFAULT_BROKER))
            continue
        entries.append(api.ConfigEntry(name, d.default if d is not None else None, SOURCE_DEFAULT))
    return key, Errors.NONE, "", entries

