"""The pieces the controller's protobuf codecs are made of (controller_codecs.py): the
conversions of the values requests and replies share (endpoints, resources, partitions, ACLs,
results), both ways. Conventions: an error is an ``int32`` Kafka code on the wire and an
:class:`~quorum.errors.Errors` member in Python; "none" ids are ``-1`` on the wire and ``None`` in
Python."""
from __future__ import annotations

from typing import Optional

from quorum.controller import api, registration_bounds
from quorum.errors import SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.rpc.convert import error_from_code

NONE = -1


def opt(value: Optional[int]) -> int:
    return NONE if value is None else value


def none_if_negative(value: int) -> Optional[int]:
    return None if value < 0 else value


def opt_str(m, name: str) -> Optional[str]:
    return getattr(m, name) if m.HasField(name) else None


def endpoint_to(e: api.BrokerEndpoint) -> pb.BrokerEndpoint:
    return pb.BrokerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)


def endpoint_from(m: pb.BrokerEndpoint) -> api.BrokerEndpoint:
    return api.BrokerEndpoint(m.name, m.host, m.port, m.security_protocol or "PLAINTEXT")


def lists_to(lists) -> list[pb.ReplicaList]:
    return [pb.ReplicaList(replicas=list(r)) for r in lists]


def lists_from(ms) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(m.replicas) for m in ms)


def resource_to(r: api.ConfigResourceKey) -> pb.ConfigResource:
    return pb.ConfigResource(type=r.type, name=r.name)


def resource_from(m: pb.ConfigResource) -> api.ConfigResourceKey:
    return api.ConfigResourceKey(m.type, m.name)


def tp_to(tp: api.TopicPartition) -> pb.TopicPartition:
    return pb.TopicPartition(topic=tp.topic, partition=tp.partition)


def tp_from(m: pb.TopicPartition) -> api.TopicPartition:
    return api.TopicPartition(m.topic, m.partition)


def acl_to(b: api.AclBinding) -> pb.AclBinding:
    return pb.AclBinding(resource_type=b.resource_type, resource_name=b.resource_name,
                         pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                         operation=b.operation, permission_type=b.permission_type)


def acl_from(m: pb.AclBinding) -> api.AclBinding:
    return api.AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                          m.operation, m.permission_type)


def item_to(r: api.ItemResult) -> pb.ItemResult:
    return pb.ItemResult(error=int(r.error), error_message=r.message)


def item_from(m: pb.ItemResult) -> api.ItemResult:
    return api.ItemResult(error_from_code(m.error), m.error_message)


def config_entry_to(e: api.ConfigEntry) -> pb.ConfigEntry:
    m = pb.ConfigEntry(name=e.name, source=e.source, sensitive=e.sensitive)
    if e.value is not None:
        m.value = e.value
    return m


def config_entry_from(m: pb.ConfigEntry) -> api.ConfigEntry:
    return api.ConfigEntry(m.name, opt_str(m, "value"), m.source, m.sensitive)


def broker_to(b: api.BrokerDescription) -> pb.BrokerDescription:
    m = pb.BrokerDescription(broker_id=b.broker_id, fenced=b.fenced, in_controlled_shutdown=b.in_controlled_shutdown,
                             broker_epoch=b.broker_epoch, endpoints=[endpoint_to(e) for e in b.endpoints],
                             incarnation_id=b.incarnation_id, metadata_offset=b.metadata_offset)
    if b.rack is not None:
        m.rack = b.rack
    return m


def broker_from(m: pb.BrokerDescription) -> api.BrokerDescription:
    return api.BrokerDescription(m.broker_id, m.fenced, m.in_controlled_shutdown, m.broker_epoch,
                                 opt_str(m, "rack"), tuple(endpoint_from(e) for e in m.endpoints),
                                 m.incarnation_id, m.metadata_offset)


def topic_description_to(d: api.TopicDescription) -> pb.TopicDescription:
    return pb.TopicDescription(
        name=d.name, topic_id=d.topic_id,
        partitions=[pb.PartitionDescription(partition=p.partition, leader=p.leader, replicas=list(p.replicas),
                                            isr=list(p.isr), leader_epoch=p.leader_epoch,
                                            partition_epoch=p.partition_epoch) for p in d.partitions],
        configs=[pb.ConfigPair(name=k, value=str(v)) for k, v in sorted(d.configs.items())],
        partition_count=d.partition_count if d.partition_count >= 0 else len(d.partitions),
        next_partition=d.next_partition)


def topic_description_from(m: pb.TopicDescription) -> api.TopicDescription:
    return api.TopicDescription(
        m.name, m.topic_id,
        tuple(api.PartitionDescription(p.partition, p.leader, tuple(p.replicas), tuple(p.isr), p.leader_epoch,
                                       p.partition_epoch) for p in m.partitions),
        {c.name: c.value for c in m.configs}, m.partition_count, m.next_partition)


def creatable_to(t: api.CreatableTopic) -> pb.CreatableTopic:
    return pb.CreatableTopic(name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                             assignments=lists_to(t.assignments),
                             configs=[pb.ConfigPair(name=k, value=v) for k, v in t.configs])


def creatable_from(m: pb.CreatableTopic) -> api.CreatableTopic:
    return api.CreatableTopic(m.name, m.num_partitions, m.replication_factor, lists_from(m.assignments),
                              tuple((c.name, c.value) for c in m.configs))


def register_from(m: pb.RegisterBrokerRequest) -> api.RegisterBrokerRequest:
    """ValueError for a registration past registration_bounds: counted on the message, before its
    items become objects, then checked whole (the controller's loop never sees it)."""
    why = registration_bounds.count_refusal(len(m.endpoints), len(m.features))
    if why is None:
        req = api.RegisterBrokerRequest(m.broker_id, m.cluster_id, m.incarnation_id,
                                        tuple(endpoint_from(e) for e in m.endpoints), opt_str(m, "rack"),
                                        m.min_metadata_version, m.max_metadata_version,
                                        tuple((f.name, f.min_version, f.max_version) for f in m.features))
        why = registration_bounds.refusal(req)
    if why is not None:
        raise ValueError(why)
    return req


def register_controller_from(m: pb.RegisterControllerRequest) -> api.RegisterControllerRequest:
    """ValueError for a registration past registration_bounds (counted first, as a broker's)."""
    why = registration_bounds.count_refusal(len(m.endpoints), len(m.features))
    if why is None:
        req = api.RegisterControllerRequest(m.controller_id, m.incarnation_id,
                                            tuple(endpoint_from(e) for e in m.endpoints),
                                            tuple((f.name, f.min_version, f.max_version) for f in m.features))
        why = registration_bounds.controller_refusal(req)
    if why is not None:
        raise ValueError(why)
    return req


def register_to(r: api.RegisterBrokerRequest) -> pb.RegisterBrokerRequest:
    m = pb.RegisterBrokerRequest(broker_id=r.broker_id, cluster_id=r.cluster_id, incarnation_id=r.incarnation_id,
                                 endpoints=[endpoint_to(e) for e in r.endpoints],
                                 min_metadata_version=r.min_metadata_version,
                                 max_metadata_version=r.max_metadata_version,
                                 features=[pb.SupportedFeature(name=n, min_version=lo, max_version=hi)
                                           for n, lo, hi in r.features])
    if r.rack is not None:
        m.rack = r.rack
    return m


def alter_configs_to(r: api.IncrementalAlterConfigsRequest) -> pb.IncrementalAlterConfigsRequest:
    resources = []
    for key, ops in r.resources:
        configs = []
        for c in ops:
            cm = pb.AlterableConfig(name=c.name, op=c.op)
            if c.value is not None:
                cm.value = c.value
            configs.append(cm)
        resources.append(pb.AlterConfigsResource(resource=resource_to(key), configs=configs))
    return pb.IncrementalAlterConfigsRequest(resources=resources, validate_only=r.validate_only)


def quota_alteration_to(a: api.ClientQuotaAlteration) -> pb.ClientQuotaAlteration:
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


def quota_alteration_from(m: pb.ClientQuotaAlteration) -> api.ClientQuotaAlteration:
    return api.ClientQuotaAlteration(tuple((e.entity_type, opt_str(e, "name")) for e in m.entity),
                                     tuple((o.key, o.value if o.HasField("value") else None) for o in m.ops))


def alter_scram_to(r: api.AlterUserScramCredentialsRequest) -> pb.AlterUserScramCredentialsRequest:
    return pb.AlterUserScramCredentialsRequest(
        deletions=[pb.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism) for d in r.deletions],
        upsertions=[pb.ScramCredentialUpsertion(name=u.name, mechanism=u.mechanism, iterations=u.iterations,
                                                salt=u.salt, salted_password=u.salted_password)
                    for u in r.upsertions])


def alter_scram_from(m: pb.AlterUserScramCredentialsRequest) -> api.AlterUserScramCredentialsRequest:
    return api.AlterUserScramCredentialsRequest(
        tuple(api.ScramCredentialDeletion(d.name, d.mechanism) for d in m.deletions),
        tuple(api.ScramCredentialUpsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
              for u in m.upsertions))


def as_tuple(reply) -> tuple:
    if reply is None:
        return ()
    return tuple(reply) if isinstance(reply, (list, tuple, api.PartitionResults)) else (reply,)


def create_topics_to(reply) -> dict:
    out = []
    for r in as_tuple(reply):
        m = pb.CreateTopicResult(name=r.name, error=int(r.error), error_message=r.message,
                                 num_partitions=r.num_partitions, replication_factor=r.replication_factor)
        if r.topic_id is not None:
            m.topic_id = r.topic_id
        out.append(m)
    return {"topics": out}


def topic_results_to(reply) -> dict:
    out = []
    for r in as_tuple(reply):
        m = pb.TopicResult(name=r.name, error=int(r.error), error_message=r.message)
        if r.topic_id is not None:
            m.topic_id = r.topic_id
        out.append(m)
    return {"topics": out}


def topic_results_from(m) -> tuple:
    return tuple(api.TopicResult(r.name, error_from_code(r.error), r.error_message, opt_str(r, "topic_id"))
                 for r in m.topics)


def describe_topics_to(reply) -> dict:
    out = []
    for d in reply:
        if isinstance(d, SparkraftError):
            out.append(pb.TopicDescription(name=d.details.get("name", ""), error=int(d.error), error_message=d.message))
        else:
            out.append(topic_description_to(d))
    return {"topics": out}


def partition_results_from(m) -> api.PartitionResults:
    """A million of them after a roll at 2M: kept as runs (see api.PartitionResults), whether the
    server sent a topic's successes as one result (``more_partitions``) or one by one."""
    out = api.PartitionResults()
    for r in m.results:
        if r.error:
            out.add(api.ElectLeadersResult(tp_from(r.partition), error_from_code(r.error), r.error_message))
            continue
        run = out.run(r.partition.topic)  # (the run at the end while the topic stays the same)
        run.append(r.partition.partition)
        run.extend(r.more_partitions)
    return out


def items_to(reply) -> dict:
    return {"results": [item_to(r) for r in as_tuple(reply)]}


def items_from(m) -> tuple:
    return tuple(item_from(r) for r in m.results)


def nothing_to(reply) -> dict:
    return {}


def nothing_from(m) -> None:
    return None
