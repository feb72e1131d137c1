"""What a controller answers Apache Kafka's brokers, as Kafka's ControllerApis does: their
registration and heartbeats, ISR changes, producer id blocks, and the admin requests they forward
in an Envelope. Each becomes the controller's own request (quorum/controller/api.py), sent through
the listener's ``ctx.controller`` (the active controller, here or forwarded), so a Kafka broker is
registered, fenced, unfenced and shut down by the same code as a sparkraft broker.

A Kafka broker's metadata.version range is in Kafka's levels: it is compatible when it holds the
level sparkraft presents (quorum/kafka_log/export.py); sparkraft's own checks then see the levels
of sparkraft's metadata.version. A broker of another cluster, or one whose range does not hold that
level, is refused with Kafka's error and a log line naming the mismatch, and nothing is written.
"""
from __future__ import annotations

import logging
import struct

from quorum.controller import api, registration_bounds
from quorum.errors import Errors, SparkraftError
from quorum.kafka.codec import (
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    encode_response,
    topic_id_text,
    topic_uuid,
)
from quorum.kafka_log.wire import Reader
from quorum.metadata.features import METADATA_VERSION
from quorum.metadata.versions import release
from quorum.refusal_log import RefusalLog
from quorum.security.authorizer import cluster_action
from quorum.security.principal import Caller

log = logging.getLogger(__name__)
REFUSALS = RefusalLog(log)

SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
# features a Kafka broker names that sparkraft's controller does not finalize: passed on as the
# broker says (a level never finalized here is 0, which every broker supports)
_RAFT_FEATURES = frozenset({"kraft.version"})  # the Raft log's own: checked by the quorum, not here


def _error(e: SparkraftError) -> Errors:
    return e.error if e.error < 10_000 else Errors.UNKNOWN_SERVER_ERROR


def _call(ctx, request):
    """The controller's reply to ``request`` on behalf of the connection's principal, or the
    SparkraftError that stands for it."""
    try:
        reply, _committed = ctx.controller.call_committed(request, on_behalf_of=ctx.on_behalf_of,
                                                             context=ctx.audit_context)
        return reply
    except SparkraftError as e:
        return e


def _refuse(ctx, broker_id: int, error: Errors, why: str) -> dict:
    REFUSALS.note(ctx.client_host, f"registration-{error.name}", logging.WARNING,
                  "Controller %d refused the registration of broker %d: %s", ctx.broker_id, broker_id, why)
    return {"throttle_time": 0, "error_code": error, "broker_epoch": -1}


# --- BrokerRegistration ---------------------------------------------------------------------------

def broker_registration(ctx, req, version: int) -> dict:
    # counted before anything else is looked at (the frame's size, codec.py, bounded the objects)
    too_many = registration_bounds.count_refusal(len(req.listeners), len(req.features),
                                                 len(getattr(req, "log_dirs", ()) or ()))
    if too_many is not None:
        return _refuse(ctx, req.broker_id, Errors.INVALID_REQUEST, too_many)
    if req.cluster_id != ctx.cluster_id:
        return _refuse(ctx, req.broker_id, Errors.INCONSISTENT_CLUSTER_ID,
                       f"it is in cluster {req.cluster_id}, this controller in {ctx.cluster_id}")
    levels = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
    lo, hi = levels.get(METADATA_VERSION, (0, 0))
    current = ctx.image().features.metadata_version or 0
    if not lo <= current <= hi:
        return _refuse(ctx, req.broker_id, Errors.UNSUPPORTED_VERSION,
                       f"it supports metadata.version {lo} to {hi} ({release(lo)} to {release(hi)}), and this "
                       f"cluster's is {current} ({release(current)})")
    features = tuple((name, lo_, hi_) for name, (lo_, hi_) in sorted(levels.items())
                     if name != METADATA_VERSION and name not in _RAFT_FEATURES)
    endpoints = []
    for listener in req.listeners:
        protocol = SECURITY_PROTOCOLS.get(listener.security_protocol)
        if protocol is None:
            return _refuse(ctx, req.broker_id, Errors.INVALID_REGISTRATION,
                           f"listener {listener.name} has an unknown security protocol {listener.security_protocol}")
        endpoints.append(api.BrokerEndpoint(listener.name, listener.host, listener.port, protocol))
    request = api.RegisterBrokerRequest(
        broker_id=req.broker_id, cluster_id=req.cluster_id, incarnation_id=topic_id_text(req.incarnation_id),
        endpoints=tuple(endpoints), rack=req.rack, min_metadata_version=lo, max_metadata_version=hi,
        features=features, log_dirs=tuple(topic_id_text(d) for d in getattr(req, "log_dirs", ()) or ()))
    # a Kafka broker has at least one listener (sparkraft's own tests and simulation register
    # brokers with none: the controller's check leaves that out)
    why = registration_bounds.refusal(request) or (None if endpoints else "a broker registers at least one listener")
    if why is not None:
        return _refuse(ctx, req.broker_id, Errors.INVALID_REQUEST, why)
    reply = _call(ctx, request)
    if isinstance(reply, SparkraftError):
        return _refuse(ctx, req.broker_id, _error(reply), reply.message)
    return {"throttle_time": 0, "error_code": Errors.NONE, "broker_epoch": reply.broker_epoch}


# --- BrokerHeartbeat ------------------------------------------------------------------------------

def _cordoned(req):
    """A v2 heartbeat's cordoned log directories (KIP-1066), None where it says nothing (null, or v0-1)."""
    dirs = getattr(req, "cordoned_log_dirs", None)
    return None if dirs is None else tuple(topic_id_text(d) for d in dirs)


def broker_heartbeat(ctx, req, version: int) -> dict:
    reply = _call(ctx, api.BrokerHeartbeatRequest(
        broker_id=req.broker_id, broker_epoch=req.broker_epoch, current_metadata_offset=req.current_metadata_offset,
        want_fence=req.want_fence, want_shutdown=req.want_shut_down,
        offline_log_dirs=tuple(topic_id_text(d) for d in getattr(req, "offline_log_dirs", ()) or ()),
        cordoned_log_dirs=_cordoned(req)))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "error_code": _error(reply), "is_caught_up": False, "is_fenced": True,
                "should_shut_down": False}
    return {"throttle_time": 0, "error_code": Errors.NONE, "is_caught_up": reply.is_caught_up,
            "is_fenced": reply.is_fenced, "should_shut_down": reply.should_shutdown}


# --- AlterPartition -------------------------------------------------------------------------------

def alter_partition(ctx, req, version: int) -> dict:
    """ISR changes from a partition's leader (KIP-497); from v3 each new ISR member comes with the
    broker epoch the leader saw it at, and one that is not the member's registration now is
    INELIGIBLE_REPLICA (KIP-903: a broker restarted with an empty disk cannot rejoin as it was)."""
    image = ctx.image()
    asked, refused = [], {}
    for t in req.topics:
        topic_id = topic_id_text(t.topic_id)
        for p in t.partitions:
            if version >= 3:
                isr = tuple(m.broker_id for m in p.new_isr_with_epochs)
                stale = [m.broker_id for m in p.new_isr_with_epochs
                         if m.broker_epoch != -1 and _epoch_of(image, m.broker_id) not in (None, m.broker_epoch)]
                if stale:
                    refused[(topic_id, p.partition_index)] = Errors.INELIGIBLE_REPLICA
                    continue
            else:
                isr = tuple(p.new_isr)
            asked.append(api.PartitionIsr(topic_id, p.partition_index, p.leader_epoch, p.partition_epoch, isr))
    reply = _call(ctx, api.AlterPartitionRequest(req.broker_id, req.broker_epoch, tuple(asked))) if asked else []
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "error_code": _error(reply), "topics": []}
    results = {(r.topic_id, r.partition): r for r in reply}
    topics = []
    for t in req.topics:
        topic_id = topic_id_text(t.topic_id)
        partitions = []
        for p in t.partitions:
            key = (topic_id, p.partition_index)
            if key in refused:
                partitions.append({"partition_index": p.partition_index, "error_code": refused[key], "leader_id": -1,
                                   "leader_epoch": -1, "isr": [], "leader_recovery_state": 0, "partition_epoch": -1})
                continue
            r = results.get(key)
            if r is None:
                partitions.append({"partition_index": p.partition_index, "error_code": Errors.UNKNOWN_SERVER_ERROR,
                                   "leader_id": -1, "leader_epoch": -1, "isr": [], "leader_recovery_state": 0,
                                   "partition_epoch": -1})
                continue
            partitions.append({"partition_index": p.partition_index, "error_code": r.error, "leader_id": r.leader,
                               "leader_epoch": r.leader_epoch, "isr": list(r.isr), "leader_recovery_state": 0,
                               "partition_epoch": r.partition_epoch})
        topics.append({"topic_id": topic_uuid(topic_id), "partitions": partitions})
    return {"throttle_time": 0, "error_code": Errors.NONE, "topics": topics}


def _epoch_of(image, broker_id: int):
    broker = image.cluster.brokers.get(broker_id)
    return None if broker is None else broker.broker_epoch


# --- AllocateProducerIds --------------------------------------------------------------------------

def allocate_producer_ids(ctx, req, version: int) -> dict:
    reply = _call(ctx, api.AllocateProducerIdsRequest(req.broker_id, req.broker_epoch))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "error_code": _error(reply), "producer_id_start": -1, "producer_id_len": 0}
    return {"throttle_time": 0, "error_code": Errors.NONE, "producer_id_start": reply.first_producer_id,
            "producer_id_len": reply.size}


# --- AssignReplicasToDirs (KIP-858) ----------------------------------------------------------------

def assign_replicas_to_dirs(ctx, req, version: int) -> dict:
    """A broker says which log directory each of its replicas is in; answered per partition."""
    asked = tuple(api.DirectoryAssignment(topic_id_text(t.topic_id), p.partition_index, topic_id_text(d.id_))
                  for d in req.directories for t in d.topics for p in t.partitions)
    reply = _call(ctx, api.AssignReplicasToDirsRequest(req.broker_id, req.broker_epoch, asked))
    if isinstance(reply, SparkraftError):
        return {"throttle_time": 0, "error_code": _error(reply), "directories": []}
    errors = {(r.topic_id, r.partition): r.error for r in reply}
    return {"throttle_time": 0, "error_code": Errors.NONE, "directories": [
        {"id_": d.id_, "topics": [{"topic_id": t.topic_id, "partitions": [
            {"partition_index": p.partition_index,
             "error_code": errors.get((topic_id_text(t.topic_id), p.partition_index), Errors.UNKNOWN_SERVER_ERROR)}
            for p in t.partitions]} for t in d.topics]} for d in req.directories]}


# --- Envelope (KIP-590) ---------------------------------------------------------------------------

_PRINCIPAL = struct.Struct(">h")


def principal_of(data: bytes) -> str:
    """Kafka's serialized principal (DefaultPrincipalData v0: int16 version, then type, name as
    compact strings and a token flag) as ``type:name``; ValueError if it is not one."""
    if len(data) < 2 or _PRINCIPAL.unpack_from(data)[0] != 0:
        raise ValueError("not a DefaultPrincipalData v0")
    r = Reader(data, 2)
    kind, name = r.compact_string(), r.compact_string()
    if not kind or name is None:
        raise ValueError("a principal without a type or name")
    return f"{kind}:{name}"


def envelope(ctx, req, version: int) -> dict:
    """A request a Kafka broker forwards for its client: answered here as that client's, under the
    client's principal, once the broker itself may ClusterAction the cluster."""
    if not ctx.may(cluster_action("CLUSTER_ACTION")):
        return {"error_code": Errors.CLUSTER_AUTHORIZATION_FAILED, "response_data": None}
    try:
        principal = principal_of(req.request_principal or b"")
        host = _host(req.client_host_address)
    except ValueError as e:
        REFUSALS.note(ctx.client_host, "envelope", logging.WARNING,
                      "Controller %d refused an Envelope: its principal does not decode (%s)", ctx.broker_id, e)
        return {"error_code": Errors.PRINCIPAL_DESERIALIZATION_FAILURE, "response_data": None}
    inner_ctx = ctx.for_forwarded(Caller(principal, host, authenticated=True))
    table = ctx.apis
    try:
        request = decode_request(bytes(req.request_data), table.forwardable)
    except UnsupportedRequest as e:
        forwardable = e.api_key in table.forwardable
        REFUSALS.note(ctx.client_host, "envelope", logging.WARNING, "Controller %d refused an Envelope: API key %d "
                      "v%d %s", ctx.broker_id, e.api_key, e.api_version, "at a version not served here"
                      if forwardable else "is not forwarded to a controller")
        return {"error_code": Errors.UNSUPPORTED_VERSION if forwardable else Errors.INVALID_REQUEST,
                "response_data": None}
    except MalformedRequest:
        return {"error_code": Errors.INVALID_REQUEST, "response_data": None}
    response = encode_response(request.api_key, request.correlation_id, table.handle(inner_ctx, request))
    return {"error_code": Errors.NONE, "response_data": response[4:]}  # without the frame's length


def _host(raw: bytes) -> str:
    import ipaddress

    if len(raw) not in (4, 16):
        raise ValueError(f"a client address of {len(raw)} bytes")
    return str(ipaddress.ip_address(bytes(raw)))
