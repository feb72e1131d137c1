"""Conversion between the controller's dataclasses (quorum/controller/api.py) and their protobuf form.

The only place that does, as :mod:`quorum.rpc.convert` is for the Raft RPCs. Wire conventions:

- an error is an ``int32`` Kafka code on the wire and an :class:`~quorum.errors.Errors` member in
  Python; "none" ids are ``-1`` on the wire and ``None`` in Python;
- every response carries ``error``, ``error_message``, ``leader_id`` and ``leader_endpoint``
  (filled on NOT_CONTROLLER): :func:`error_response` builds such an answer for any RPC, and
  :func:`check_response` turns a failed one back into a :class:`SparkraftError` whose details hold
  ``leader_id`` and ``leader_endpoint``;
- requests: ``request_to_proto(req)`` / ``request_from_proto(pb)`` for every api request
  dataclass, read requests included;
- replies: ``reply_to_proto(method, reply)`` / ``reply_from_proto(method, pb)``, where ``method``
  is the RPC name and ``reply`` is what the controller answers for it (see :data:`REPLIES`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from quorum.controller import api, registration_bounds, registry
from quorum.errors import Errors, SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.rpc.convert import error_from_code

NONE = -1


# What each RPC answers with, in Python (the controller's reply, or what the client returns):
REPLIES = {
    "RegisterBroker": "api.RegisterBrokerReply",
    "BrokerHeartbeat": "api.BrokerHeartbeatReply",
    "UnregisterBroker": "None",
    "CreateTopics": "tuple[api.CreateTopicResult, ...]",
    "DeleteTopics": "tuple[api.TopicResult, ...]",
    "CreatePartitions": "tuple[api.TopicResult, ...]",
    "ElectLeaders": "tuple[api.ElectLeadersResult, ...]",
    "AlterPartition": "tuple[api.AlterPartitionResult, ...]",
    "AlterPartitionReassignments": "tuple[api.ElectLeadersResult, ...] (a partition and its outcome)",
    "ListPartitionReassignments": "tuple[api.OngoingReassignment, ...]",
    "IncrementalAlterConfigs": "tuple[api.AlterConfigsResult, ...]",
    "DescribeConfigs": "tuple[(ConfigResourceKey, Errors, message, tuple[ConfigEntry, ...]), ...]",
    "ListTopics": "tuple[str, ...] (sorted names)",
    "DescribeTopics": "tuple[api.TopicDescription | SparkraftError, ...] (one per name)",
    "DescribeCluster": "api.ClusterDescription",
    "UpdateFeatures": "tuple[api.ItemResult, ...]",
    "DescribeClientQuotas": "tuple[api.ClientQuotaEntry, ...]",
    "DescribeFeatures": "api.FeaturesDescription",
    "AlterClientQuotas": "tuple[api.ItemResult, ...]",
    "AllocateProducerIds": "api.ProducerIdsBlock",
    "CreateAcls": "tuple[api.ItemResult, ...]",
    "DeleteAcls": "tuple[(api.ItemResult, tuple[api.AclBinding, ...]), ...]",
    "DescribeAcls": "tuple[api.AclBinding, ...]",
    "AlterUserScramCredentials": "tuple[api.UserResult, ...]",
    "DescribeUserScramCredentials": "tuple[api.UserScramCredentials, ...]",
    "DescribeMigration": "api.MigrationDescription",
    "FinalizeMigration": "None",
}


def _opt(value: Optional[int]) -> int:
    return NONE if value is None else value


def _none_if_negative(value: int) -> Optional[int]:
    return None if value < 0 else value


def _opt_str(m, name: str) -> Optional[str]:
    return getattr(m, name) if m.HasField(name) else None


# -- small pieces -------------------------------------------------------------------------------
def _endpoint_to(e: api.BrokerEndpoint) -> pb.BrokerEndpoint:
    return pb.BrokerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)


def _endpoint_from(m: pb.BrokerEndpoint) -> api.BrokerEndpoint:
    return api.BrokerEndpoint(m.name, m.host, m.port, m.security_protocol or "PLAINTEXT")


def _lists_to(lists) -> list[pb.ReplicaList]:
    return [pb.ReplicaList(replicas=list(r)) for r in lists]


def _lists_from(ms) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(m.replicas) for m in ms)


def _resource_to(r: api.ConfigResourceKey) -> pb.ConfigResource:
    return pb.ConfigResource(type=r.type, name=r.name)


def _resource_from(m: pb.ConfigResource) -> api.ConfigResourceKey:
    return api.ConfigResourceKey(m.type, m.name)


def _tp_to(tp: api.TopicPartition) -> pb.TopicPartition:
    return pb.TopicPartition(topic=tp.topic, partition=tp.partition)


def _tp_from(m: pb.TopicPartition) -> api.TopicPartition:
    return api.TopicPartition(m.topic, m.partition)


def _acl_to(b: api.AclBinding) -> pb.AclBinding:
    return pb.AclBinding(resource_type=b.resource_type, resource_name=b.resource_name,
                         pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                         operation=b.operation, permission_type=b.permission_type)


def _acl_from(m: pb.AclBinding) -> api.AclBinding:
    return api.AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                          m.operation, m.permission_type)


def _item_to(r: api.ItemResult) -> pb.ItemResult:
    return pb.ItemResult(error=int(r.error), error_message=r.message)


def _item_from(m: pb.ItemResult) -> api.ItemResult:
    return api.ItemResult(error_from_code(m.error), m.error_message)


def _config_entry_to(e: api.ConfigEntry) -> pb.ConfigEntry:
    m = pb.ConfigEntry(name=e.name, source=e.source, sensitive=e.sensitive)
    if e.value is not None:
        m.value = e.value
    return m


def _config_entry_from(m: pb.ConfigEntry) -> api.ConfigEntry:
    return api.ConfigEntry(m.name, _opt_str(m, "value"), m.source, m.sensitive)


def _broker_to(b: api.BrokerDescription) -> pb.BrokerDescription:
    m = pb.BrokerDescription(broker_id=b.broker_id, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
                             broker_epoch=b.broker_epoch, endpoints=[_endpoint_to(e) for e in b.endpoints],
                             incarnation_id=b.incarnation_id, metadata_offset=b.metadata_offset)
    if b.rack is not None:
        m.rack = b.rack
    return m


def _broker_from(m: pb.BrokerDescription) -> api.BrokerDescription:
    return api.BrokerDescription(m.broker_id, m.fenced, m.in_controlled_shutdown, m.broker_epoch,
                                 _opt_str(m, "rack"), tuple(_endpoint_from(e) for e in m.endpoints),
                                 m.incarnation_id, m.metadata_offset)


def _topic_description_to(d: api.TopicDescription) -> pb.TopicDescription:
    return pb.TopicDescription(
        name=d.name, topic_id=d.topic_id,
        partitions=[pb.PartitionDescription(partition=p.partition, leader=p.leader, replicas=list(p.replicas),
                                            isr=list(p.isr), leader_epoch=p.leader_epoch,
                                            partition_epoch=p.partition_epoch) for p in d.partitions],
        configs=[pb.ConfigPair(name=k, value=str(v)) for k, v in sorted(d.configs.items())],
        partition_count=d.partition_count if d.partition_count >= 0 else len(d.partitions),
        next_partition=d.next_partition)


def _topic_description_from(m: pb.TopicDescription) -> api.TopicDescription:
    return api.TopicDescription(
        m.name, m.topic_id,
        tuple(api.PartitionDescription(p.partition, p.leader, tuple(p.replicas), tuple(p.isr), p.leader_epoch,
                                       p.partition_epoch) for p in m.partitions),
        {c.name: c.value for c in m.configs}, m.partition_count, m.next_partition)


# -- requests -----------------------------------------------------------------------------------
def _creatable_to(t: api.CreatableTopic) -> pb.CreatableTopic:
    return pb.CreatableTopic(name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                             assignments=_lists_to(t.assignments),
                             configs=[pb.ConfigPair(name=k, value=v) for k, v in t.configs])


def _creatable_from(m: pb.CreatableTopic) -> api.CreatableTopic:
    return api.CreatableTopic(m.name, m.num_partitions, m.replication_factor, _lists_from(m.assignments),
                              tuple((c.name, c.value) for c in m.configs))


def _register_from(m: pb.RegisterBrokerRequest) -> api.RegisterBrokerRequest:
    """ValueError for a registration past registration_bounds: counted on the message, before its
    items become objects, then checked whole (the controller's loop never sees it)."""
    why = registration_bounds.count_refusal(len(m.endpoints), len(m.features))
    if why is None:
        req = api.RegisterBrokerRequest(m.broker_id, m.cluster_id, m.incarnation_id,
                                        tuple(_endpoint_from(e) for e in m.endpoints), _opt_str(m, "rack"),
                                        m.min_metadata_version, m.max_metadata_version,
                                        tuple((f.name, f.min_version, f.max_version) for f in m.features))
        why = registration_bounds.refusal(req)
    if why is not None:
        raise ValueError(why)
    return req


def _register_to(r: api.RegisterBrokerRequest) -> pb.RegisterBrokerRequest:
    m = pb.RegisterBrokerRequest(broker_id=r.broker_id, cluster_id=r.cluster_id, incarnation_id=r.incarnation_id,
                                 endpoints=[_endpoint_to(e) for e in r.endpoints],
                                 min_metadata_version=r.min_metadata_version,
                                 max_metadata_version=r.max_metadata_version,
                                 features=[pb.SupportedFeature(name=n, min_version=lo, max_version=hi)
                                           for n, lo, hi in r.features])
    if r.rack is not None:
        m.rack = r.rack
    return m


def _alter_configs_to(r: api.IncrementalAlterConfigsRequest) -> pb.IncrementalAlterConfigsRequest:
    resources = []
    for key, ops in r.resources:
        configs = []
        for c in ops:
            cm = pb.AlterableConfig(name=c.name, op=c.op)
            if c.value is not None:
                cm.value = c.value
            configs.append(cm)
        resources.append(pb.AlterConfigsResource(resource=_resource_to(key), configs=configs))
    return pb.IncrementalAlterConfigsRequest(resources=resources, validate_only=r.validate_only)


def _quota_alteration_to(a: api.ClientQuotaAlteration) -> pb.ClientQuotaAlteration:
    entity = []
    for kind, name in a.entity:
        e = pb.QuotaEntity(entity_type=kind)
        if name is not None:
            e.name = name
        entity.append(e)
    ops = []
    for key, value in a.ops:
        o = pb.QuotaOp(key=key)
        if value is not None:
            o.value = value
        ops.append(o)
    return pb.ClientQuotaAlteration(entity=entity, ops=ops)


def _quota_alteration_from(m: pb.ClientQuotaAlteration) -> api.ClientQuotaAlteration:
    return api.ClientQuotaAlteration(tuple((e.entity_type, _opt_str(e, "name")) for e in m.entity),
                                     tuple((o.key, o.value if o.HasField("value") else None) for o in m.ops))


def _alter_scram_to(r: api.AlterUserScramCredentialsRequest) -> pb.AlterUserScramCredentialsRequest:
    return pb.AlterUserScramCredentialsRequest(
        deletions=[pb.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism) for d in r.deletions],
        upsertions=[pb.ScramCredentialUpsertion(name=u.name, mechanism=u.mechanism, iterations=u.iterations,
                                                salt=u.salt, salted_password=u.salted_password)
                    for u in r.upsertions])


def _alter_scram_from(m: pb.AlterUserScramCredentialsRequest) -> api.AlterUserScramCredentialsRequest:
    return api.AlterUserScramCredentialsRequest(
        tuple(api.ScramCredentialDeletion(d.name, d.mechanism) for d in m.deletions),
        tuple(api.ScramCredentialUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
              for u in m.upsertions))


# (request dataclass, to-proto, from-proto); its RPC name is its registry row's (quorum/controller/registry.py)
_REQUESTS: list[tuple[type, Callable[[Any], Any], Callable[[Any], Any]]] = [
    (api.RegisterBrokerRequest, _register_to, _register_from),
    (api.BrokerHeartbeatRequest,
     lambda r: pb.BrokerHeartbeatRequest(broker_id=r.broker_id, broker_epoch=r.broker_epoch,
                                         current_metadata_offset=r.current_metadata_offset,
                                         want_fence=r.want_fence, want_shutdown=r.want_shutdown),
     lambda m: api.BrokerHeartbeatRequest(m.broker_id, m.broker_epoch, m.current_metadata_offset, m.want_fence,
                                          m.want_shutdown)),
    (api.UnregisterBrokerRequest,
     lambda r: pb.UnregisterBrokerRequest(broker_id=r.broker_id),
     lambda m: api.UnregisterBrokerRequest(m.broker_id)),
    (api.CreateTopicsRequest,
     lambda r: pb.CreateTopicsRequest(topics=[_creatable_to(t) for t in r.topics], validate_only=r.validate_only),
     lambda m: api.CreateTopicsRequest(tuple(_creatable_from(t) for t in m.topics), m.validate_only)),
    (api.DeleteTopicsRequest,
     lambda r: pb.DeleteTopicsRequest(names=list(r.names), topic_ids=list(r.topic_ids)),
     lambda m: api.DeleteTopicsRequest(tuple(m.names), tuple(m.topic_ids))),
    (api.CreatePartitionsRequest,
     lambda r: pb.CreatePartitionsRequest(
         updates=[pb.PartitionCountUpdate(name=u.name, count=u.count, assignments=_lists_to(u.assignments))
                  for u in r.updates], validate_only=r.validate_only),
     lambda m: api.CreatePartitionsRequest(
         tuple(api.PartitionCountUpdate(u.name, u.count, _lists_from(u.assignments)) for u in m.updates),
         m.validate_only)),
    (api.ElectLeadersRequest,
     lambda r: pb.ElectLeadersRequest(election_type=r.election_type, all_partitions=r.partitions is None,
                                      partitions=[_tp_to(tp) for tp in r.partitions or ()], results_by_topic=True),
     lambda m: api.ElectLeadersRequest(m.election_type or "PREFERRED",
                                       None if m.all_partitions else tuple(_tp_from(tp) for tp in m.partitions))),
    (api.AlterPartitionRequest,
     lambda r: pb.AlterPartitionRequest(
         broker_id=r.broker_id, broker_epoch=r.broker_epoch,
         partitions=[pb.PartitionIsr(topic_id=c.topic_id, partition=c.partition, leader_epoch=c.leader_epoch,
                                     partition_epoch=c.partition_epoch, new_isr=list(c.new_isr))
                     for c in r.partitions]),
     lambda m: api.AlterPartitionRequest(
         m.broker_id, m.broker_epoch,
         tuple(api.PartitionIsr(c.topic_id, c.partition, c.leader_epoch, c.partition_epoch, tuple(c.new_isr))
               for c in m.partitions))),
    (api.AlterPartitionReassignmentsRequest,
     lambda r: pb.AlterPartitionReassignmentsRequest(partitions=[
         pb.ReassignablePartition(partition=_tp_to(p.partition), cancel=p.replicas is None,
                                  replicas=list(p.replicas or ())) for p in r.partitions]),
     lambda m: api.AlterPartitionReassignmentsRequest(tuple(
         api.ReassignablePartition(_tp_from(p.partition), None if p.cancel else tuple(p.replicas))
         for p in m.partitions))),
    (api.ListPartitionReassignmentsRequest,
     lambda r: pb.ListPartitionReassignmentsRequest(all_partitions=r.partitions is None,
                                                    partitions=[_tp_to(tp) for tp in r.partitions or ()]),
     lambda m: api.ListPartitionReassignmentsRequest(
         None if m.all_partitions else tuple(_tp_from(tp) for tp in m.partitions))),
    (api.IncrementalAlterConfigsRequest, _alter_configs_to,
     lambda m: api.IncrementalAlterConfigsRequest(
         tuple((_resource_from(r.resource),
                tuple(api.AlterableConfig(c.name, c.op, _opt_str(c, "value")) for c in r.configs))
               for r in m.resources), m.validate_only)),
    (api.DescribeConfigsRequest,
     lambda r: pb.DescribeConfigsRequest(resources=[_resource_to(k) for k in r.resources]),
     lambda m: api.DescribeConfigsRequest(tuple(_resource_from(k) for k in m.resources))),
    (api.ListTopicsRequest, lambda r: pb.ListTopicsRequest(), lambda m: api.ListTopicsRequest()),
    (api.DescribeTopicsRequest,
     lambda r: pb.DescribeTopicsRequest(names=list(r.names), first_partition=r.first_partition,
                                        partition_limit=r.partition_limit),
     lambda m: api.DescribeTopicsRequest(tuple(m.names), m.first_partition, m.partition_limit)),
    (api.DescribeClusterRequest, lambda r: pb.DescribeClusterRequest(),
     lambda m: api.DescribeClusterRequest()),
    (api.UpdateFeaturesRequest,
     lambda r: pb.UpdateFeaturesRequest(updates=[pb.FeatureUpdate(feature=f, max_level=lvl) for f, lvl in r.updates],
                                        upgrade_type="" if r.upgrade_type == "UPGRADE" else r.upgrade_type,
                                        validate_only=r.validate_only),
     lambda m: api.UpdateFeaturesRequest(tuple((u.feature, u.max_level) for u in m.updates), m.validate_only,
                                         m.upgrade_type or "UPGRADE")),
    (api.DescribeFeaturesRequest, lambda r: pb.DescribeFeaturesRequest(),
     lambda m: api.DescribeFeaturesRequest()),
    (api.AlterClientQuotasRequest,
     lambda r: pb.AlterClientQuotasRequest(alterations=[_quota_alteration_to(a) for a in r.alterations],
                                           validate_only=r.validate_only),
     lambda m: api.AlterClientQuotasRequest(tuple(_quota_alteration_from(a) for a in m.alterations),
                                            m.validate_only)),
    (api.DescribeClientQuotasRequest,
     lambda r: pb.DescribeClientQuotasRequest(
         components=[pb.QuotaFilterComponent(entity_type=t, match_type=kind, **({"match": n} if n is not None else {}))
                     for t, kind, n in r.components], strict=r.strict),
     lambda m: api.DescribeClientQuotasRequest(
         tuple((c.entity_type, c.match_type, _opt_str(c, "match")) for c in m.components), m.strict)),
    (api.AllocateProducerIdsRequest,
     lambda r: pb.AllocateProducerIdsRequest(broker_id=r.broker_id, broker_epoch=r.broker_epoch),
     lambda m: api.AllocateProducerIdsRequest(m.broker_id, m.broker_epoch)),
    (api.CreateAclsRequest,
     lambda r: pb.CreateAclsRequest(bindings=[_acl_to(b) for b in r.bindings]),
     lambda m: api.CreateAclsRequest(tuple(_acl_from(b) for b in m.bindings))),
    (api.DeleteAclsRequest,
     lambda r: pb.DeleteAclsRequest(filters=[_acl_to(b) for b in r.filters]),
     lambda m: api.DeleteAclsRequest(tuple(_acl_from(b) for b in m.filters))),
    (api.DescribeAclsRequest,
     lambda r: pb.DescribeAclsRequest(filter=_acl_to(r.filter)),
     lambda m: api.DescribeAclsRequest(_acl_from(m.filter))),
    (api.AlterUserScramCredentialsRequest, _alter_scram_to, _alter_scram_from),
    (api.DescribeUserScramCredentialsRequest,
     lambda r: pb.DescribeUserScramCredentialsRequest(users=list(r.users)),
     lambda m: api.DescribeUserScramCredentialsRequest(tuple(m.users))),
    (api.DescribeMigrationRequest, lambda r: pb.DescribeMigrationRequest(),
     lambda m: api.DescribeMigrationRequest()),
    (api.FinalizeMigrationRequest, lambda r: pb.FinalizeMigrationRequest(),
     lambda m: api.FinalizeMigrationRequest()),
]
_BY_TYPE = {t: (registry.BY_TYPE[t].method, to, frm) for t, to, frm in _REQUESTS}
_BY_PB = {getattr(pb, f"{name}Request"): frm for name, _, frm in _BY_TYPE.values()}
METHODS: tuple[str, ...] = tuple(name for name, _, _ in _BY_TYPE.values())


def method_of(request) -> str:
    """The RPC name for a request dataclass."""
    try:
        return _BY_TYPE[type(request)][0]
    except KeyError:
        raise TypeError(f"not a controller request: {type(request).__name__}") from None


def request_to_proto(request):
    return _BY_TYPE[type(request)][1](request)


def request_from_proto(m):
    try:
        return _BY_PB[type(m)](m)
    except KeyError:
        raise TypeError(f"not a controller protobuf request: {type(m).__name__}") from None


# -- replies ------------------------------------------------------------------------------------
def _response(method: str, **fields):
    return getattr(pb, f"{method}Response")(error=int(Errors.NONE), leader_id=NONE, **fields)


def _as_tuple(reply) -> tuple:
    if reply is None:
        return ()
    return tuple(reply) if isinstance(reply, (list, tuple, api.PartitionResults)) else (reply,)


def _create_topics_to(reply) -> dict:
    out = []
    for r in _as_tuple(reply):
        m = pb.CreateTopicResult(name=r.name, error=int(r.error), error_message=r.message,
                                 num_partitions=r.num_partitions, replication_factor=r.replication_factor)
        if r.topic_id is not None:
            m.topic_id = r.topic_id
        out.append(m)
    return {"topics": out}


def _topic_results_to(reply) -> dict:
    out = []
    for r in _as_tuple(reply):
        m = pb.TopicResult(name=r.name, error=int(r.error), error_message=r.message)
        if r.topic_id is not None:
            m.topic_id = r.topic_id
        out.append(m)
    return {"topics": out}


def _topic_results_from(m) -> tuple:
    return tuple(api.TopicResult(r.name, error_from_code(r.error), r.error_message, _opt_str(r, "topic_id"))
                 for r in m.topics)


def _describe_topics_to(reply) -> dict:
    out = []
    for d in reply:
        if isinstance(d, SparkraftError):
            out.append(pb.TopicDescription(name=d.details.get("name", ""), error=int(d.error), error_message=d.message))
        else:
            out.append(_topic_description_to(d))
    return {"topics": out}


def _partition_results_from(m) -> api.PartitionResults:
    """A million of them after a roll at 2M: kept as runs (see api.PartitionResults), whether the
    server sent a topic's successes as one result (``more_partitions``) or one by one."""
    out = api.PartitionResults()
    for r in m.results:
        if r.error:
            out.add(api.ElectLeadersResult(_tp_from(r.partition), error_from_code(r.error), r.error_message))
            continue
        run = out.run(r.partition.topic)  # (the run at the end while the topic stays the same)
        run.append(r.partition.partition)
        run.extend(r.more_partitions)
    return out


def _items_to(reply) -> dict:
    return {"results": [_item_to(r) for r in _as_tuple(reply)]}


def _items_from(m) -> tuple:
    return tuple(_item_from(r) for r in m.results)


def _nothing_to(reply) -> dict:
    return {}


def _nothing_from(m) -> None:
    return None


# RPC name -> (the response's fields from the controller's reply, the reply from a response). A
# partition-results reply (ElectLeaders, AlterPartitionReassignments) is written in place instead of
# as fields: see reply_to_proto.
_REPLIES: dict[str, tuple[Callable[[Any], dict], Callable[[Any], Any]]] = {
    "RegisterBroker": (
        lambda r: {"broker_epoch": r.broker_epoch if isinstance(r, api.RegisterBrokerReply) else int(r)},
        lambda m: api.RegisterBrokerReply(m.broker_epoch)),
    "BrokerHeartbeat": (
        lambda r: {"is_caught_up": r.is_caught_up, "is_fenced": r.is_fenced, "should_shutdown": r.should_shutdown},
        lambda m: api.BrokerHeartbeatReply(m.is_caught_up, m.is_fenced, m.should_shutdown)),
    "UnregisterBroker": (_nothing_to, _nothing_from),
    "CreateTopics": (
        _create_topics_to,
        lambda m: tuple(api.CreateTopicResult(r.name, error_from_code(r.error), r.error_message,
                                              _opt_str(r, "topic_id"), r.num_partitions, r.replication_factor)
                        for r in m.topics)),
    "DeleteTopics": (_topic_results_to, _topic_results_from),
    "CreatePartitions": (_topic_results_to, _topic_results_from),
    "ElectLeaders": (None, _partition_results_from),
    "AlterPartitionReassignments": (None, _partition_results_from),
    "DescribeClientQuotas": (
        lambda reply: {"entries": [pb.ClientQuotaEntry(
            entity=_quota_alteration_to(api.ClientQuotaAlteration(e.entity, ())).entity,
            values=[pb.QuotaOp(key=k, value=v) for k, v in e.values]) for e in reply]},
        lambda m: tuple(api.ClientQuotaEntry(tuple((e.entity_type, _opt_str(e, "name")) for e in x.entity),
                                             tuple((v.key, v.value) for v in x.values)) for x in m.entries)),
    "DescribeFeatures": (
        lambda reply: {"finalized": [pb.FinalizedFeature(name=n, level=lvl) for n, lvl in reply.finalized],
                       "supported": [pb.SupportedFeature(name=n, min_version=lo, max_version=hi)
                                     for n, lo, hi in reply.supported], "epoch": reply.epoch},
        lambda m: api.FeaturesDescription(tuple((f.name, f.level) for f in m.finalized),
                                          tuple((f.name, f.min_version, f.max_version) for f in m.supported),
                                          m.epoch)),
    "ListPartitionReassignments": (
        lambda reply: {"reassignments": [pb.OngoingReassignment(
            partition=_tp_to(r.partition), replicas=list(r.replicas), adding_replicas=list(r.adding_replicas),
            removing_replicas=list(r.removing_replicas)) for r in reply]},
        lambda m: tuple(api.OngoingReassignment(_tp_from(r.partition), tuple(r.replicas), tuple(r.adding_replicas),
                                                tuple(r.removing_replicas)) for r in m.reassignments)),
    "AlterPartition": (
        lambda reply: {"results": [pb.AlterPartitionResult(
            topic_id=r.topic_id, partition=r.partition, error=int(r.error), error_message=r.message,
            leader=r.leader, leader_epoch=r.leader_epoch, partition_epoch=r.partition_epoch, isr=list(r.isr))
            for r in reply]},
        lambda m: tuple(api.AlterPartitionResult(r.topic_id, r.partition, error_from_code(r.error), r.error_message,
                                                 r.leader, r.leader_epoch, r.partition_epoch, tuple(r.isr))
                        for r in m.results)),
    "IncrementalAlterConfigs": (
        lambda reply: {"results": [pb.AlterConfigsResult(resource=_resource_to(r.resource), error=int(r.error),
                                                         error_message=r.message) for r in _as_tuple(reply)]},
        lambda m: tuple(api.AlterConfigsResult(_resource_from(r.resource), error_from_code(r.error),
                                               r.error_message) for r in m.results)),
    "DescribeConfigs": (
        lambda reply: {"results": [pb.DescribeConfigsResult(resource=_resource_to(key), error=int(error),
                                                            error_message=message or "",
                                                            entries=[_config_entry_to(e) for e in entries])
                                   for key, error, message, entries in reply]},
        lambda m: tuple((_resource_from(r.resource), error_from_code(r.error), r.error_message,
                         tuple(_config_entry_from(e) for e in r.entries)) for r in m.results)),
    "ListTopics": (lambda reply: {"names": sorted(reply)}, lambda m: tuple(m.names)),
    "DescribeTopics": (
        _describe_topics_to,
        lambda m: tuple(_topic_description_from(d) if d.error == 0
                        else SparkraftError(error_from_code(d.error), d.error_message, name=d.name)
                        for d in m.topics)),
    "DescribeCluster": (
        lambda reply: {"cluster_id": reply.cluster_id, "controller_id": _opt(reply.controller_id),
                       "metadata_offset": reply.metadata_offset, "brokers": [_broker_to(b) for b in reply.brokers]},
        lambda m: api.ClusterDescription(m.cluster_id, _none_if_negative(m.controller_id), m.metadata_offset,
                                         tuple(_broker_from(b) for b in m.brokers))),
    "UpdateFeatures": (_items_to, _items_from),
    "AlterClientQuotas": (_items_to, _items_from),
    "CreateAcls": (_items_to, _items_from),
    "AllocateProducerIds": (
        lambda reply: {"first_producer_id": reply.first_producer_id, "size": reply.size},
        lambda m: api.ProducerIdsBlock(m.first_producer_id, m.size)),
    "DeleteAcls": (
        lambda reply: {"results": [pb.DeleteAclsFilterResult(error=int(r.error), error_message=r.message,
                                                             matching=[_acl_to(b) for b in matching])
                                   for r, matching in reply]},
        lambda m: tuple((api.ItemResult(error_from_code(r.error), r.error_message),
                         tuple(_acl_from(b) for b in r.matching)) for r in m.results)),
    "DescribeAcls": (lambda reply: {"bindings": [_acl_to(b) for b in reply]},
                     lambda m: tuple(_acl_from(b) for b in m.bindings)),
    "AlterUserScramCredentials": (
        lambda reply: {"results": [pb.AlterUserScramCredentialsResult(user=r.user, error=int(r.error),
                                                                      error_message=r.message) for r in reply]},
        lambda m: tuple(api.UserResult(r.user, error_from_code(r.error), r.error_message) for r in m.results)),
    "DescribeUserScramCredentials": (
        lambda reply: {"results": [pb.DescribeUserScramCredentialsResult(
            user=r.user, error=int(r.error), error_message=r.message,
            credential_infos=[pb.ScramCredentialInfo(mechanism=m, iterations=i) for m, i in r.credentials])
            for r in reply]},
        lambda m: tuple(api.UserScramCredentials(r.user, error_from_code(r.error), r.error_message,
                                                 tuple((c.mechanism, c.iterations) for c in r.credential_infos))
                        for r in m.results)),
    "DescribeMigration": (
        lambda reply: {"state": reply.state, "zk_controller_epoch": reply.zk_controller_epoch,
                       "dual_write_lag_records": reply.dual_write_lag_records,
                       "mirrored_offset": reply.mirrored_offset, "migration_error": reply.error},
        lambda m: api.MigrationDescription(m.state, m.zk_controller_epoch, m.dual_write_lag_records,
                                           m.mirrored_offset, m.migration_error)),
    "FinalizeMigration": (_nothing_to, _nothing_from),
}
if set(_REPLIES) != set(METHODS):  # every request's reply converts both ways, and nothing else does
    raise AssertionError(f"reply converters differ from the requests: {sorted(set(_REPLIES) ^ set(METHODS))}")


def _converters(method: str):
    try:
        return _REPLIES[method]
    except KeyError:
        raise TypeError(f"unknown controller RPC {method!r}") from None


def reply_to_proto(method: str, reply, results_by_topic: bool = False):
    """The successful response of RPC ``method`` for the controller's ``reply``; ``results_by_topic``:
    the client reads a run of a topic's successes as one result (see ElectLeadersRequest)."""
    to_fields, _ = _converters(method)
    if to_fields is None and results_by_topic and isinstance(reply, api.PartitionResults):
        response = _response(method)
        add = response.results.add
        for run in reply.runs():
            if type(run) is tuple:
                topic, pids = run
                if pids:  # (a run asked for and left empty answers nothing)
                    add(partition=pb.TopicPartition(topic=topic, partition=pids[0]), more_partitions=pids[1:])
            else:
                add(partition=_tp_to(run.partition), error=int(run.error), error_message=run.message)
        return response
    if to_fields is None:
        # Per-partition outcomes: an election of every partition after a rolling restart at 2M
        # answers a million. Setting three fields of a nested message for each took a quarter of the
        # active controller's time in such a balance; they are encoded as the bytes of the results
        # field instead (each topic's name once) and parsed into the response in one call.
        response = _response(method)
        response.MergeFromString(partition_results_bytes(_as_tuple(reply)))
        return response
    return _response(method, **to_fields(reply))


_RESULTS_TAG = bytes([5 << 3 | 2])  # field 5 (results), length-delimited


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int32 negatives are ten-byte varints
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def partition_results_bytes(reply: tuple) -> bytes:
    """``reply`` (ElectLeadersResults) as the bytes of the ``results`` field (5) of an
    ElectLeadersResponse or AlterPartitionReassignmentsResponse."""
    topics: dict[str, bytes] = {}
    ints: dict[int, bytes] = {}
    parts = []
    for r in reply:
        tp = r.partition
        topic = topics.get(tp.topic)
        if topic is None:
            name = tp.topic.encode()
            topic = topics[tp.topic] = b"\x0a" + _varint(len(name)) + name
        pid = tp.partition
        number = ints.get(pid)
        if number is None:
            number = ints[pid] = b"\x10" + _varint(pid) if pid else b""
        partition = topic + number
        result = b"\x0a" + _varint(len(partition)) + partition
        if r.error is not Errors.NONE:
            message = r.message.encode()
            result += b"\x10" + _varint(int(r.error)) + (b"\x1a" + _varint(len(message)) + message if message else b"")
        parts.append(_RESULTS_TAG + _varint(len(result)) + result)
    return b"".join(parts)


def reply_from_proto(method: str, m):
    """The Python reply in a successful response."""
    return _converters(method)[1](m)


# -- errors -------------------------------------------------------------------------------------
def error_response(method: str, error: Errors, message: str, leader_id: Optional[int] = None,
                   leader_endpoint: str = ""):
    """A failed response of RPC ``method`` (whole-request error: NOT_CONTROLLER, INVALID_REQUEST...)."""
    return getattr(pb, f"{method}Response")(error=int(error), error_message=message, leader_id=_opt(leader_id),
                                            leader_endpoint=leader_endpoint)


def response_error(m) -> Optional[SparkraftError]:
    """The whole-request error of a response, if any, with ``leader_id``/``leader_endpoint`` details."""
    error = error_from_code(m.error)
    if error is Errors.NONE:
        return None
    return SparkraftError(error, m.error_message, leader_id=_none_if_negative(m.leader_id),
                          leader_endpoint=m.leader_endpoint)
