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
from quorum.controller.topics_control import validate_topic_name
from quorum.errors import Errors, SparkraftError
from quorum.kafka.codec import topic_id_text, topic_uuid
from quorum.metadata.image import MetadataImage
from quorum.metadata.topics import NO_LEADER

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
# Kafka's config resource types and sources (ConfigResource.Type, DescribeConfigsResponse.ConfigSource)
RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER"}
RESOURCE_CODES = {v: k for k, v in RESOURCE_TYPES.items()}
CONFIG_SOURCES = {"DYNAMIC_TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2, "DYNAMIC_DEFAULT_BROKER_CONFIG": 3,
                  "STATIC_BROKER_CONFIG": 4, "DEFAULT_CONFIG": 5}


# --- Metadata ---------------------------------------------------------------------------------

def _listener_endpoints(image: MetadataImage, listener: str) -> dict[int, tuple]:
    """broker id -> (host, port, rack) of each unfenced broker with an endpoint on ``listener``."""
    out = {}
    for b in image.cluster.brokers.values():
        if b.fenced:
            continue
        for e in b.endpoints:
            if e.name == listener:
                out[b.broker_id] = (e.host, e.port, b.rack)
                break
    return out


def _partition(pid: int, p, endpoints: dict, live: set) -> dict:
    error = Errors.NONE
    if p.leader == NO_LEADER:
        error = Errors.LEADER_NOT_AVAILABLE
    elif p.leader not in endpoints:
        error = Errors.LISTENER_NOT_FOUND if p.leader in live else Errors.LEADER_NOT_AVAILABLE
    return {"error_code": error, "partition_index": pid, "leader_id": p.leader, "leader_epoch": p.leader_epoch,
            "replica_nodes": p.replicas, "isr_nodes": p.isr,
            "offline_replicas": tuple(r for r in p.replicas if r not in live)}


def _topic(topic, endpoints: dict, live: set) -> dict:
    return {"error_code": Errors.NONE, "name": topic.name, "topic_id": topic_uuid(topic.topic_id),
            "is_internal": False, "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
            "partitions": [_partition(pid, topic.partitions[pid], endpoints, live) for pid in sorted(topic.partitions)]}


def _missing_topic(name: Optional[str], topic_id, error: Errors) -> dict:
    return {"error_code": error, "name": name, "topic_id": topic_id, "partitions": [],
            "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED}


def metadata(ctx, req, version: int) -> dict:
    image = ctx.image()
    endpoints = _listener_endpoints(image, ctx.listener)
    live = {b.broker_id for b in image.cluster.brokers.values() if not b.fenced}
    topics = image.topics
    asked = req.topics
    out = []
    if asked is None or (version == 0 and not asked):
        for name in sorted(topics.ids_by_name):
            out.append(_topic(topics.by_id[topics.ids_by_name[name]], endpoints, live))
    else:
        for t in asked:
            name = getattr(t, "name", None)
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid.int != 0:
                topic = topics.topic(topic_id_text(tid))
                if topic is None:
                    out.append(_missing_topic(None, tid, Errors.UNKNOWN_TOPIC_ID))
                    continue
            else:
                try:
                    validate_topic_name(name or "")
                except SparkraftError:
                    out.append(_missing_topic(name, None, Errors.INVALID_TOPIC_EXCEPTION))
                    continue
                topic = topics.topic_by_name(name)
                if topic is None:
                    out.append(_missing_topic(name, None, Errors.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
            out.append(_topic(topic, endpoints, live))
    brokers = [{"node_id": b, "host": h, "port": p, "rack": r} for b, (h, p, r) in sorted(endpoints.items())]
    return {"throttle_time": 0, "brokers": brokers, "cluster_id": ctx.cluster_id,
            "controller_id": ctx.controller_id(image), "topics": out,
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED, "error_code": Errors.NONE}


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
            "cluster_id": ctx.cluster_id, "controller_id": ctx.controller_id(image), "brokers": brokers,
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
        _key, error, message, entries = configs_control.describe(image, api.ConfigResourceKey(kind, r.resource_name))
        wanted = set(r.configuration_keys) if r.configuration_keys else None
        configs = [{"name": e.name, "value": None if e.sensitive else e.value, "read_only": False,
                    "config_source": CONFIG_SOURCES.get(e.source, 0), "is_default": e.source == "DEFAULT_CONFIG",
                    "is_sensitive": e.sensitive, "synonyms": [], "documentation": None}
                   for e in entries if wanted is None or e.name in wanted]
        results.append({**base, "error_code": error, "error_message": message or None, "configs": configs})
    return {"throttle_time": 0, "results": results}


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


def describe_acls(ctx, req, version: int) -> dict:
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


QUOTA_MATCH = {0: "EXACT", 1: "DEFAULT", 2: "ANY"}


def describe_client_quotas(ctx, req, version: int) -> dict:
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


def controller_id_of(broker_id: int, image: MetadataImage) -> int:
    """What Metadata and DescribeCluster call the controller. Clients send controller-bound requests
    (CreateTopics...) there; a KRaft broker names a live broker, which forwards them, so this broker
    names itself (its image has caught up to its registration before it answers)."""
    return broker_id
