"""The requests a broker forwards to the active controller (Kafka's forwarding, KIP-590).

Each function turns the Kafka request into the controller's request (quorum/controller/api.py),
sends it with the broker's ControllerClient (which finds the active controller and follows it
through a failover), and turns the reply back into the Kafka response as a dict. A request the
controller could not be reached for gets the error on every item, as Kafka's forwarding answers.

Read-your-writes: the controller's answer carries its committed offset (at or past the request's
records); the broker waits (bounded) until its own image has reached it, so the client's next
Metadata request to the same broker shows the change.
"""
from __future__ import annotations

from quorum.controller import api
from quorum.controller.configs_control import resource_of
from quorum.errors import Errors, SparkraftError
from quorum.kafka.answers import RESOURCE_TYPES, acl_codes, acl_filter
from quorum.kafka.codec import topic_id_text, topic_uuid

READ_YOUR_WRITES_TIMEOUT_S = 10.0
ALTER_OPS = {0: "SET", 1: "DELETE", 2: "APPEND", 3: "SUBTRACT"}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
ELECTION_TYPES = {0: "PREFERRED", 1: "UNCLEAN"}
UPGRADE_TYPES = {1: "UPGRADE", 2: "SAFE_DOWNGRADE", 3: "UNSAFE_DOWNGRADE"}


def _send(ctx, request):
    """The controller's reply, or the SparkraftError that stands for it on every item; once the
    broker's image has what the controller had committed when it answered (bounded: a slow image
    delays the answer, it does not fail it)."""
    try:
        reply, committed = ctx.controller.call_committed(request, on_behalf_of=ctx.on_behalf_of,
                                                             context=ctx.audit_context)
    except SparkraftError as e:
        return e
    ctx.wait_for(committed, READ_YOUR_WRITES_TIMEOUT_S)
    return reply


def _error(e: SparkraftError) -> dict:
    return {"error_code": e.error if e.error < 10_000 else Errors.UNKNOWN_SERVER_ERROR,
            "error_message": e.message}


def _ok(error: Errors, message: str) -> dict:
    return {"error_code": error, "error_message": message or None}


# --- registrations ---------------------------------------------------------------------------

def unregister_broker(ctx, req, version: int) -> dict:
    """``kafka-cluster unregister --id N``: a broker gone for good."""
    reply = _send(ctx, api.UnregisterBrokerRequest(req.broker_id))
    return {"throttle_time": 0, **(_error(reply) if isinstance(reply, SparkraftError) else _ok(Errors.NONE, ""))}


def unregister_controller(ctx, req, version: int) -> dict:
    """``kafka-cluster unregister-controller --id N`` (4.4-IV2): a controller taken out of the quorum."""
    reply = _send(ctx, api.UnregisterControllerRequest(req.controller_id))
    return {"throttle_time": 0, **(_error(reply) if isinstance(reply, SparkraftError) else _ok(Errors.NONE, ""))}


# --- topics -----------------------------------------------------------------------------------

def create_topics(ctx, req, version: int) -> dict:
    topics = []
    for t in req.topics:
        assignments = tuple(tuple(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index))
        topics.append(api.CreatableTopic(t.name, t.num_partitions, t.replication_factor, assignments,
                                         tuple((c.name, c.value) for c in t.configs)))
    reply = _send(ctx, api.CreateTopicsRequest(tuple(topics), bool(req.validate_only)))
    out = []
    for i, t in enumerate(req.topics):
        if isinstance(reply, SparkraftError):
            out.append({"name": t.name, **_error(reply)})
            continue
        r = reply[i]
        item = {"name": r.name, **_ok(r.error, r.message)}
        if r.error is Errors.NONE:
            item.update(topic_id=topic_uuid(r.topic_id) if r.topic_id else None,
                        num_partitions=r.num_partitions, replication_factor=r.replication_factor)
        out.append(item)
    return {"throttle_time": 0, "topics": out}


def delete_topics(ctx, req, version: int) -> dict:
    if version >= 6:
        names = tuple(t.name for t in req.topics if t.name)
        ids = tuple(topic_id_text(t.topic_id) for t in req.topics if not t.name)
        asked = [(t.name, t.topic_id) for t in req.topics]
    else:
        names, ids = tuple(req.topic_names), ()
        asked = [(n, None) for n in req.topic_names]
    reply = _send(ctx, api.DeleteTopicsRequest(names, ids))
    out = []
    results = iter(() if isinstance(reply, SparkraftError) else reply)
    for name, tid in asked:
        if isinstance(reply, SparkraftError):
            out.append({"name": name, "topic_id": tid, **_error(reply)})
            continue
        r = next(results)
        out.append({"name": r.name or name, "topic_id": topic_uuid(r.topic_id) if r.topic_id else tid,
                    **_ok(r.error, r.message)})
    return {"throttle_time": 0, "responses": out}


def create_partitions(ctx, req, version: int) -> dict:
    updates = []
    for t in req.topics:
        if t.assignments:  # the controller places new partitions itself
            updates.append(None)
            continue
        updates.append(api.PartitionCountUpdate(t.name, t.count))
    wanted = tuple(u for u in updates if u is not None)
    reply = _send(ctx, api.CreatePartitionsRequest(wanted, bool(req.validate_only))) if wanted else ()
    results = iter(() if isinstance(reply, SparkraftError) else reply)
    out = []
    for t, u in zip(req.topics, updates):
        if u is None:
            out.append({"name": t.name, "error_code": Errors.INVALID_REPLICA_ASSIGNMENT,
                        "error_message": "explicit assignments of new partitions are not supported: the "
                                         "controller places them"})
        elif isinstance(reply, SparkraftError):
            out.append({"name": t.name, **_error(reply)})
        else:
            r = next(results)
            out.append({"name": t.name, **_ok(r.error, r.message)})
    return {"throttle_time": 0, "results": out}


# --- configs ----------------------------------------------------------------------------------

def _config_alter(ctx, req, ops_of) -> dict:
    resources, refused = [], {}
    for i, r in enumerate(req.resources):
        kind = RESOURCE_TYPES.get(r.resource_type)
        if kind is None:
            refused[i] = {"error_code": Errors.INVALID_REQUEST,
                          "error_message": f"Unsupported resource type {r.resource_type}"}
            continue
        try:
            ops = ops_of(r)
        except KeyError as e:
            refused[i] = {"error_code": Errors.INVALID_REQUEST, "error_message": f"Unknown config operation {e}"}
            continue
        resources.append((api.ConfigResourceKey(kind, r.resource_name), ops))
    reply = _send(ctx, api.IncrementalAlterConfigsRequest(tuple(resources), bool(req.validate_only))) \
        if resources else ()
    results = iter(() if isinstance(reply, SparkraftError) else reply)
    out = []
    for i, r in enumerate(req.resources):
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name}
        if i in refused:
            out.append({**base, **refused[i]})
        elif isinstance(reply, SparkraftError):
            out.append({**base, **_error(reply)})
        else:
            res = next(results)
            out.append({**base, **_ok(res.error, res.message)})
    return {"throttle_time": 0, "responses": out}


def incremental_alter_configs(ctx, req, version: int) -> dict:
    return _config_alter(ctx, req, lambda r: tuple(
        api.AlterableConfig(c.name, ALTER_OPS[c.config_operation], c.value) for c in r.configs))


def alter_configs(ctx, req, version: int) -> dict:
    """The legacy AlterConfigs replaces a resource's whole set: what is not named goes back to
    its default. Here that is a SET of each named key and a DELETE of each dynamic key not named."""
    image = ctx.image()

    def ops(r):
        kind = RESOURCE_TYPES[r.resource_type]
        current = image.configs.configs(resource_of(api.ConfigResourceKey(kind, r.resource_name)))
        named = {c.name for c in r.configs}
        return tuple([api.AlterableConfig(c.name, "SET", c.value) for c in r.configs]
                     + [api.AlterableConfig(k, "DELETE") for k in sorted(current) if k not in named])
    return _config_alter(ctx, req, ops)


# --- ACLs -------------------------------------------------------------------------------------

def create_acls(ctx, req, version: int) -> dict:
    bindings = []
    for c in req.creations:
        bindings.append(acl_filter(c.resource_type, c.resource_name, getattr(c, "resource_pattern_type", 3),
                                   c.principal, c.host, c.operation, c.permission_type))
    reply = _send(ctx, api.CreateAclsRequest(tuple(bindings)))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "results": [_error(reply) for _ in bindings]}
    return {"throttle_time": 0, "results": [_ok(r.error, r.message) for r in reply]}


def delete_acls(ctx, req, version: int) -> dict:
    filters = tuple(acl_filter(f.resource_type_filter, f.resource_name_filter, getattr(f, "pattern_type_filter", 3),
                               f.principal_filter, f.host_filter, f.operation, f.permission_type)
                    for f in req.filters)
    reply = _send(ctx, api.DeleteAclsRequest(filters))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "filter_results": [{**_error(reply), "matching_acls": []} for _ in filters]}
    out = []
    for result, removed in reply:
        out.append({**_ok(result.error, result.message),
                    "matching_acls": [{"error_code": Errors.NONE, "error_message": None, **acl_codes(b)}
                                      for b in removed]})
    return {"throttle_time": 0, "filter_results": out}


# --- reassignment, elections ------------------------------------------------------------------

def alter_partition_reassignments(ctx, req, version: int) -> dict:
    partitions = tuple(api.ReassignablePartition(api.TopicPartition(t.name, p.partition_index),
                                                 None if p.replicas is None else tuple(p.replicas))
                       for t in req.topics for p in t.partitions)
    reply = _send(ctx, api.AlterPartitionReassignmentsRequest(partitions))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, **_error(reply), "responses": []}
    by_topic: dict[str, list] = {}
    for r in reply:
        by_topic.setdefault(r.partition.topic, []).append(
            {"partition_index": r.partition.partition, **_ok(r.error, r.message)})
    return {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None,
            "responses": [{"name": n, "partitions": ps} for n, ps in by_topic.items()]}


def elect_leaders(ctx, req, version: int) -> dict:
    election = ELECTION_TYPES.get(getattr(req, "election_type", 0))
    if election is None:
        return {"throttle_time": 0, "error_code": Errors.INVALID_REQUEST, "replica_election_results": []}
    partitions = None
    if req.topic_partitions is not None:
        partitions = tuple(api.TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions)
    reply = _send(ctx, api.ElectLeadersRequest(election, partitions))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "error_code": _error(reply)["error_code"], "replica_election_results": []}
    by_topic: dict[str, list] = {}
    for r in reply:
        by_topic.setdefault(r.partition.topic, []).append(
            {"partition_id": r.partition.partition, **_ok(r.error, r.message)})
    return {"throttle_time": 0, "error_code": Errors.NONE,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


# --- quotas, SCRAM, features ------------------------------------------------------------------

def alter_client_quotas(ctx, req, version: int) -> dict:
    alterations = tuple(api.ClientQuotaAlteration(
        tuple((e.entity_type, e.entity_name) for e in entry.entity),
        tuple((op.key, None if op.remove else op.value) for op in entry.ops)) for entry in req.entries)
    reply = _send(ctx, api.AlterClientQuotasRequest(alterations, bool(req.validate_only)))
    out = []
    for i, entry in enumerate(req.entries):
        status = _error(reply) if isinstance(reply, SparkraftError) else _ok(reply[i].error, reply[i].message)
        out.append({**status, "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name}
                                         for e in entry.entity]})
    return {"throttle_time": 0, "entries": out}


def alter_user_scram_credentials(ctx, req, version: int) -> dict:
    refused, deletions, upsertions = {}, [], []
    for d in req.deletions:
        if d.mechanism not in SCRAM_MECHANISMS:
            refused[d.name] = (Errors.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {d.mechanism}")
            continue
        deletions.append(api.ScramCredentialDeletion(d.name, SCRAM_MECHANISMS[d.mechanism]))
    for u in req.upsertions:
        if u.mechanism not in SCRAM_MECHANISMS:
            refused[u.name] = (Errors.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {u.mechanism}")
            continue
        upsertions.append(api.ScramCredentialUpsertion(u.name, SCRAM_MECHANISMS[u.mechanism], u.iterations,
                                                       bytes(u.salt), bytes(u.salted_password)))
    results = []
    if deletions or upsertions:
        reply = _send(ctx, api.AlterUserScramCredentialsRequest(tuple(deletions), tuple(upsertions)))
        if isinstance(reply, SparkraftError):
            users = dict.fromkeys(c.name for c in deletions + upsertions)
            results = [{"user": u, **_error(reply)} for u in users]
        else:
            results = [{"user": r.user, **_ok(r.error, r.message)} for r in reply]
    results += [{"user": u, "error_code": e, "error_message": m} for u, (e, m) in refused.items()]
    return {"throttle_time": 0, "results": results}


def update_features(ctx, req, version: int) -> dict:
    if version == 0:  # v0 has allow_downgrade in place of the upgrade type
        kinds = {"UNSAFE_DOWNGRADE" if u.allow_downgrade else "UPGRADE" for u in req.feature_updates}
    else:
        kinds = {UPGRADE_TYPES.get(u.upgrade_type, "UPGRADE") for u in req.feature_updates}
    if len(kinds) > 1:
        return {"throttle_time": 0, "error_code": Errors.INVALID_REQUEST,
                "error_message": "one upgrade type for every feature of a request", "results": []}
    updates = tuple((u.feature, u.max_version_level) for u in req.feature_updates)
    reply = _send(ctx, api.UpdateFeaturesRequest(updates, bool(getattr(req, "validate_only", False)),
                                                 kinds.pop() if kinds else "UPGRADE"))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, **_error(reply), "results": []}
    failed = next((r for r in reply if r.error is not Errors.NONE), None)
    return {"throttle_time": 0, "error_code": Errors.NONE if failed is None else failed.error,
            "error_message": None if failed is None else failed.message,
            "results": [{"feature": name, **_ok(r.error, r.message)} for (name, _), r in zip(updates, reply)]}
