"""The requests a broker answers from its own metadata image, as Kafka's KRaft brokers do
(``KafkaApis`` over ``KRaftMetadataCache``): no controller is asked.

Each function takes the :class:`~quorum.kafka.apis.KafkaContext`, the decoded request and its
version, and returns the response as a dict (see :func:`quorum.kafka.codec.materialize`). The
reads themselves are the controller's own functions over an image (configs_control.describe,
acls_control.describe...), so a broker and the controller answer the same image the same way.
"""
from __future__ import annotations

from typing import Optional

from quorum.controller import acls_control, api, configs_control, quotas_control, reassign_control
from quorum.errors import Errors, SparkraftError
from quorum.kafka.metadata_answer import AUTHORIZED_OPERATIONS_OMITTED
from quorum.security.authorizer import cluster_action, group_action, topic_action

# Kafka's config resource types and sources (ConfigResource.Type, DescribeConfigsResponse.ConfigSource)
RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER", 32: "GROUP"}
CONFIG_SOURCES = {"DYNAMIC_TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2, "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
                  "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5, "GROUP_CONFIG": 8}


# --- Metadata, DescribeCluster -----------------------------------------------------------------

def metadata(ctx, req, version: int):
    """Encoded a topic at a time, what did not change taken from what was kept (metadata_answer.py)."""
    image = ctx.image()
    may_describe = None
    if ctx.security.authorizer is not None:
        may_describe = lambda topic: ctx.may(topic_action("DESCRIBE", topic))  # noqa: E731
    return ctx.metadata_answers.answer(image, req, version, ctx.cluster_id, ctx.controller_id, may_describe)


def describe_cluster(ctx, req, version: int) -> dict:
    image = ctx.image()
    include_fenced = getattr(req, "include_fenced_brokers", False)
    if getattr(req, "endpoint_type", 1) != 1:  # 2 = controllers: Kafka answers those on controller listeners
        return {"error_code": Errors.UNSUPPORTED_ENDPOINT_TYPE, "error_message":
                "a broker describes brokers (endpoint type 1) only", "cluster_id": ctx.cluster_id, "brokers": []}
    brokers = []
    for b in sorted(image.cluster.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced and not include_fenced:
            continue
        e = next((e for e in b.endpoints if e.name == ctx.listener), None)
        if e is None:
            continue
        brokers.append({"broker_id": b.broker_id, "host": e.host, "port": e.port, "rack": b.rack,
                        "is_fenced": b.fenced})
    return {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None, "endpoint_type": 1,
            "cluster_id": ctx.cluster_id, "controller_id": ctx.controller_id, "brokers": brokers,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


# --- DescribeConfigs --------------------------------------------------------------------------

def describe_configs(ctx, req, version: int) -> dict:
    image = ctx.image()
    results = []
    for r in req.resources:
        kind = RESOURCE_TYPES.get(r.resource_type)
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name, "configs": []}
        if kind is None:
            results.append({**base, "error_code": Errors.INVALID_REQUEST,
                            "error_message": f"Unsupported resource type {r.resource_type}"})
            continue
        allowed = ctx.may(topic_action("DESCRIBE_CONFIGS", r.resource_name) if kind == "TOPIC"
                          else group_action("DESCRIBE_CONFIGS", r.resource_name) if kind == "GROUP"
                          else cluster_action("DESCRIBE_CONFIGS"))
        if not allowed:
            error = {"TOPIC": Errors.TOPIC_AUTHORIZATION_FAILED, "GROUP": Errors.GROUP_AUTHORIZATION_FAILED}.get(
                kind, Errors.CLUSTER_AUTHORIZATION_FAILED)
            results.append({**base, "error_code": error, "error_message": f"DESCRIBE_CONFIGS of {r.resource_name!r} "
                            f"is not allowed"})
            continue
        _key, error, message, entries = configs_control.describe(image, api.ConfigResourceKey(kind, r.resource_name))
        if kind == "BROKER" and error == Errors.NONE and r.resource_name == str(ctx.broker_id):
            entries = with_static_configs(entries, ctx.static_configs)
        wanted = set(r.configuration_keys) if r.configuration_keys else None
        configs = [{"name": e.name, "value": None if e.sensitive else e.value, "read_only": False,
                    "config_source": CONFIG_SOURCES.get(e.source, 0), "is_default": e.source == "DEFAULT_CONFIG",
                    "is_sensitive": e.sensitive, "synonyms": [], "documentation": None}
                   for e in entries if wanted is None or e.name in wanted]
        results.append({**base, "error_code": error, "error_message": message or None, "configs": configs})
    return {"throttle_time": 0, "results": results}


SENSITIVE_WORDS = ("password", "secret", "sasl.jaas")


def with_static_configs(entries: list, static: dict) -> list:
    """This broker's entries with its configuration file's keys as Kafka reports them: a key set in
    the file and nowhere dynamically is STATIC_BROKER_CONFIG (dynamic values take precedence, as in
    Kafka); a secret's value is never shown."""
    by_name = {e.name: e for e in entries}
    for name, value in static.items():
        current = by_name.get(name)
        if current is None or current.source == "DEFAULT_CONFIG":
            sensitive = any(w in name for w in SENSITIVE_WORDS)
            by_name[name] = api.ConfigEntry(name, None if sensitive else value, "STATIC_BROKER_CONFIG", sensitive)
    return [by_name[n] for n in sorted(by_name)]


# --- ACLs -------------------------------------------------------------------------------------

def acl_filter(resource_type: int, resource_name, pattern_type: int, principal, host, operation: int,
               permission: int) -> api.AclBinding:
    """Kafka's codes as the controller's AclBinding filter (names; "ANY" and None match anything)."""
    return api.AclBinding(acls_control._RT.Name(resource_type), resource_name or "",
                          acls_control._PT.Name(pattern_type), principal or "", host or "",
                          acls_control._OP.Name(operation), acls_control._PERM.Name(permission))


def acl_codes(b: api.AclBinding) -> dict:
    return {"resource_type": acls_control._RT.Value(b.resource_type), "resource_name": b.resource_name,
            "pattern_type": acls_control._PT.Value(b.pattern_type), "principal": b.principal, "host": b.host,
            "operation": acls_control._OP.Value(b.operation), "permission_type": acls_control._PERM.Value(b.permission_type)}


def _cluster_refused(ctx, operation: str) -> Optional[dict]:
    """The error fields when the client may not ``operation`` the cluster, else None."""
    if ctx.may(cluster_action(operation)):
        return None
    return {"error_code": Errors.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": f"{operation} on the cluster is not allowed"}


def describe_acls(ctx, req, version: int) -> dict:
    refused = _cluster_refused(ctx, "DESCRIBE")
    if refused is not None:
        return {"throttle_time": 0, **refused, "resources": []}
    try:
        f = acl_filter(req.resource_type_filter, req.resource_name_filter, getattr(req, "pattern_type_filter", 3),
                       req.principal_filter, req.host_filter, req.operation, req.permission_type)
        found = acls_control.describe(ctx.image(), f)
    except (SparkraftError, ValueError) as e:
        error = e.error if isinstance(e, SparkraftError) else Errors.INVALID_REQUEST
        return {"throttle_time": 0, "error_code": error, "error_message": str(getattr(e, "message", e)),
                "resources": []}
    by_resource: dict[tuple, list] = {}
    for b in found:
        codes = acl_codes(b)
        key = (codes["resource_type"], codes["resource_name"], codes["pattern_type"])
        by_resource.setdefault(key, []).append({k: codes[k] for k in ("principal", "host", "operation",
                                                                     "permission_type")})
    return {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
            "resources": [{"resource_type": rt, "resource_name": rn, "pattern_type": pt, "acls": acls}
                          for (rt, rn, pt), acls in by_resource.items()]}


# --- reassignments, quotas --------------------------------------------------------------------

def list_partition_reassignments(ctx, req, version: int) -> dict:
    refused = _cluster_refused(ctx, "DESCRIBE")
    if refused is not None:
        return {"throttle_time": 0, **refused, "topics": []}
    partitions = None
    if req.topics is not None:
        partitions = tuple(api.TopicPartition(t.name, p) for t in req.topics for p in t.partition_indexes)
    ongoing = reassign_control.ongoing(ctx.image(), api.ListPartitionReassignmentsRequest(partitions))
    topics: dict[str, list] = {}
    for o in ongoing:
        topics.setdefault(o.partition.topic, []).append({
            "partition_index": o.partition.partition, "replicas": o.replicas,
            "adding_replicas": o.adding_replicas, "removing_replicas": o.removing_replicas})
    return {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()]}


def describe_log_dirs(ctx, req, version: int) -> dict:
    """The broker's one log directory (``log.dirs``' first, else ``metadata.log.dir``), with the
    replicas its image places on this broker, each of size 0 and no lag: sparkraft brokers hold no
    partition data. Kafka's reassignment tool reads it to map each replica to its directory."""
    refused = _cluster_refused(ctx, "DESCRIBE")
    if refused is not None:
        return {"throttle_time": 0, "error_code": refused["error_code"], "results": []}
    image, broker = ctx.image(), ctx.broker_id
    wanted = None if req.topics is None else {t.topic: set(t.partitions) for t in req.topics}
    topics = []
    for name in image.topics.topic_names() if wanted is None else sorted(wanted):
        topic = image.topics.topic_by_name(name)
        if topic is None:
            continue
        partitions = [{"partition_index": i, "partition_size": 0, "offset_lag": 0, "is_future_key": False}
                      for i, p in sorted(topic.partitions.items())
                      if broker in p.replicas and (wanted is None or i in wanted[name])]
        if partitions:
            topics.append({"name": name, "partitions": partitions})
    given = ctx.static_configs
    log_dir = (given.get("log.dirs") or "").split(",")[0] or given.get("metadata.log.dir") or "/"
    return {"throttle_time": 0, "error_code": Errors.NONE, "results": [
        {"error_code": Errors.NONE, "log_dir": log_dir, "topics": topics, "total_bytes": -1, "usable_bytes": -1}]}


QUOTA_MATCH = {0: "EXACT", 1: "DEFAULT", 2: "ANY"}


def describe_client_quotas(ctx, req, version: int) -> dict:
    refused = _cluster_refused(ctx, "DESCRIBE_CONFIGS")
    if refused is not None:
        return {"throttle_time": 0, **refused, "entries": None}
    try:
        components = tuple((c.entity_type, QUOTA_MATCH[c.match_type], c.match if c.match_type == 0 else None)
                           for c in req.components)
        entries = quotas_control.describe(ctx.image(), api.DescribeClientQuotasRequest(components, req.strict))
    except KeyError as e:
        return {"throttle_time": 0, "error_code": Errors.INVALID_REQUEST, "error_message": f"match type {e}",
                "entries": None}
    except SparkraftError as e:
        return {"throttle_time": 0, "error_code": e.error, "error_message": e.message, "entries": None}
    return {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None, "entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in e.entity],
         "values": [{"key": k, "value": v} for k, v in e.values]} for e in entries]}
