"""Each controller request's protobuf codec, by its method name (the name its registry row gives:
quorum/controller/registry.py): the request to and from its ``<Method>Request`` message, and the
controller's reply to and from its ``<Method>Response``, with what that reply is in Python.
controller_convert.py is the one way in; a test checks every method of the registry has a codec."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from quorum.controller import api
from quorum.errors import SparkraftError
from quorum.gen.sparkraft.v1 import controller_pb2 as pb
from quorum.metadata.audit import LogHold
from quorum.rpc.controller_parts import (
    acl_from,
    acl_to,
    alter_configs_to,
    alter_scram_from,
    alter_scram_to,
    as_tuple,
    broker_from,
    broker_to,
    config_entry_from,
    config_entry_to,
    creatable_from,
    creatable_to,
    create_topics_to,
    describe_topics_to,
    endpoint_to,
    items_from,
    items_to,
    lists_from,
    lists_to,
    none_if_negative,
    nothing_from,
    nothing_to,
    opt,
    opt_str,
    partition_results_from,
    quota_alteration_from,
    quota_alteration_to,
    register_controller_from,
    register_from,
    register_to,
    resource_from,
    resource_to,
    topic_description_from,
    topic_results_from,
    topic_results_to,
    tp_from,
    tp_to,
)
from quorum.rpc.convert import error_from_code


def _hold_to(h: LogHold) -> pb.LogHold:
    return pb.LogHold(holder=h.holder, offset=h.offset, time_ms=h.time_ms)


def _hold_from(m: pb.LogHold) -> LogHold:
    return LogHold(m.holder, m.offset, m.time_ms)


@dataclass(frozen=True, slots=True)
class Codec:
    request_to: Callable[[Any], Any]  # the api.py request -> its protobuf message
    request_from: Callable[[Any], Any]
    # the controller's reply -> the response's fields; None: per-partition results, written in place
    # (controller_convert.reply_to_proto)
    reply_to: Optional[Callable[[Any], dict]]
    reply_from: Callable[[Any], Any]  # a successful response -> the reply
    reply: str  # what the reply is in Python


CODECS: dict[str, Codec] = {
    "RegisterBroker": Codec(
        request_to=register_to,
        request_from=register_from,
        reply_to=lambda r: {"broker_epoch": r.broker_epoch if isinstance(r, api.RegisterBrokerReply) else int(r)},
        reply_from=lambda m: api.RegisterBrokerReply(m.broker_epoch),
        reply='api.RegisterBrokerReply'),
    "BrokerHeartbeat": Codec(
        request_to=lambda r: pb.BrokerHeartbeatRequest(broker_id=r.broker_id, broker_epoch=r.broker_epoch,
                                                       current_metadata_offset=r.current_metadata_offset,
                                                       want_fence=r.want_fence, want_shutdown=r.want_shutdown,
                                                       offline_log_dirs=r.offline_log_dirs,
                                                       says_cordoned=r.cordoned_log_dirs is not None,
                                                       cordoned_log_dirs=r.cordoned_log_dirs or ()),
        request_from=lambda m: api.BrokerHeartbeatRequest(m.broker_id, m.broker_epoch, m.current_metadata_offset,
                                                          m.want_fence, m.want_shutdown, tuple(m.offline_log_dirs),
                                                          tuple(m.cordoned_log_dirs) if m.says_cordoned else None),
        reply_to=lambda r: {"is_caught_up": r.is_caught_up, "is_fenced": r.is_fenced,
                            "should_shutdown": r.should_shutdown},
        reply_from=lambda m: api.BrokerHeartbeatReply(m.is_caught_up, m.is_fenced, m.should_shutdown),
        reply='api.BrokerHeartbeatReply'),
    "RegisterController": Codec(
        request_to=lambda r: pb.RegisterControllerRequest(
            controller_id=r.controller_id, incarnation_id=r.incarnation_id,
            endpoints=[endpoint_to(e) for e in r.endpoints],
            features=[pb.SupportedFeature(name=n, min_version=lo, max_version=hi) for n, lo, hi in r.features]),
        request_from=register_controller_from,
        reply_to=nothing_to,
        reply_from=nothing_from,
        reply='None'),
    "UnregisterController": Codec(
        request_to=lambda r: pb.UnregisterControllerRequest(controller_id=r.controller_id),
        request_from=lambda m: api.UnregisterControllerRequest(m.controller_id),
        reply_to=nothing_to,
        reply_from=nothing_from,
        reply='None'),
    "UnregisterBroker": Codec(
        request_to=lambda r: pb.UnregisterBrokerRequest(broker_id=r.broker_id),
        request_from=lambda m: api.UnregisterBrokerRequest(m.broker_id),
        reply_to=nothing_to,
        reply_from=nothing_from,
        reply='None'),
    "CreateTopics": Codec(
        request_to=lambda r: pb.CreateTopicsRequest(topics=[creatable_to(t) for t in r.topics],
                                                    validate_only=r.validate_only),
        request_from=lambda m: api.CreateTopicsRequest(tuple(creatable_from(t) for t in m.topics), m.validate_only),
        reply_to=create_topics_to,
        reply_from=lambda m: tuple(api.CreateTopicResult(r.name, error_from_code(r.error), r.error_message,
                                                         opt_str(r, "topic_id"), r.num_partitions, r.replication_factor)
                                   for r in m.topics),
        reply='tuple[api.CreateTopicResult, ...]'),
    "DeleteTopics": Codec(
        request_to=lambda r: pb.DeleteTopicsRequest(names=list(r.names), topic_ids=list(r.topic_ids)),
        request_from=lambda m: api.DeleteTopicsRequest(tuple(m.names), tuple(m.topic_ids)),
        reply_to=topic_results_to,
        reply_from=topic_results_from,
        reply='tuple[api.TopicResult, ...]'),
    "CreatePartitions": Codec(
        request_to=lambda r: pb.CreatePartitionsRequest(
                       updates=[pb.PartitionCountUpdate(name=u.name, count=u.count, assignments=lists_to(u.assignments))
                                for u in r.updates], validate_only=r.validate_only),
        request_from=lambda m: api.CreatePartitionsRequest(
                         tuple(api.PartitionCountUpdate(u.name, u.count, lists_from(u.assignments)) for u in m.updates),
                         m.validate_only),
        reply_to=topic_results_to,
        reply_from=topic_results_from,
        reply='tuple[api.TopicResult, ...]'),
    "ElectLeaders": Codec(
        request_to=lambda r: pb.ElectLeadersRequest(
            election_type=r.election_type, all_partitions=r.partitions is None,
            partitions=[tp_to(tp) for tp in r.partitions or ()], results_by_topic=True),
        request_from=lambda m: api.ElectLeadersRequest(
            m.election_type or "PREFERRED", None if m.all_partitions else tuple(tp_from(tp) for tp in m.partitions)),
        reply_to=None,
        reply_from=partition_results_from,
        reply='tuple[api.ElectLeadersResult, ...]'),
    "AlterPartition": Codec(
        request_to=lambda r: pb.AlterPartitionRequest(
                       broker_id=r.broker_id, broker_epoch=r.broker_epoch,
                       partitions=[pb.PartitionIsr(topic_id=c.topic_id, partition=c.partition,
                                                   leader_epoch=c.leader_epoch,
                                                   partition_epoch=c.partition_epoch, new_isr=list(c.new_isr))
                                   for c in r.partitions]),
        request_from=lambda m: api.AlterPartitionRequest(
                         m.broker_id, m.broker_epoch,
                         tuple(api.PartitionIsr(c.topic_id, c.partition, c.leader_epoch, c.partition_epoch,
                                                tuple(c.new_isr))
                               for c in m.partitions)),
        reply_to=lambda reply: {"results": [pb.AlterPartitionResult(
                     topic_id=r.topic_id, partition=r.partition, error=int(r.error), error_message=r.message,
                     leader=r.leader, leader_epoch=r.leader_epoch, partition_epoch=r.partition_epoch, isr=list(r.isr))
                     for r in reply]},
        reply_from=lambda m: tuple(api.AlterPartitionResult(r.topic_id, r.partition, error_from_code(r.error),
                                                            r.error_message,
                                                            r.leader, r.leader_epoch, r.partition_epoch, tuple(r.isr))
                                   for r in m.results),
        reply='tuple[api.AlterPartitionResult, ...]'),
    "AlterPartitionReassignments": Codec(
        request_to=lambda r: pb.AlterPartitionReassignmentsRequest(partitions=[
                       pb.ReassignablePartition(partition=tp_to(p.partition), cancel=p.replicas is None,
                                                replicas=list(p.replicas or ())) for p in r.partitions]),
        request_from=lambda m: api.AlterPartitionReassignmentsRequest(tuple(
                         api.ReassignablePartition(tp_from(p.partition), None if p.cancel else tuple(p.replicas))
                         for p in m.partitions)),
        reply_to=None,
        reply_from=partition_results_from,
        reply='tuple[api.ElectLeadersResult, ...] (a partition and its outcome)'),
    "ListPartitionReassignments": Codec(
        request_to=lambda r: pb.ListPartitionReassignmentsRequest(all_partitions=r.partitions is None,
                                                                  partitions=[tp_to(tp) for tp in r.partitions or ()]),
        request_from=lambda m: api.ListPartitionReassignmentsRequest(
                         None if m.all_partitions else tuple(tp_from(tp) for tp in m.partitions)),
        reply_to=lambda reply: {"reassignments": [pb.OngoingReassignment(
                     partition=tp_to(r.partition), replicas=list(r.replicas), adding_replicas=list(r.adding_replicas),
                     removing_replicas=list(r.removing_replicas)) for r in reply]},
        reply_from=lambda m: tuple(api.OngoingReassignment(tp_from(r.partition), tuple(r.replicas),
                                                           tuple(r.adding_replicas),
                                                           tuple(r.removing_replicas)) for r in m.reassignments),
        reply='tuple[api.OngoingReassignment, ...]'),
    "IncrementalAlterConfigs": Codec(
        request_to=alter_configs_to,
        request_from=lambda m: api.IncrementalAlterConfigsRequest(
                         tuple((resource_from(r.resource),
                                tuple(api.AlterableConfig(c.name, c.op, opt_str(c, "value")) for c in r.configs))
                               for r in m.resources), m.validate_only),
        reply_to=lambda reply: {"results": [pb.AlterConfigsResult(resource=resource_to(r.resource), error=int(r.error),
                                                                  error_message=r.message) for r in as_tuple(reply)]},
        reply_from=lambda m: tuple(api.AlterConfigsResult(resource_from(r.resource), error_from_code(r.error),
                                                          r.error_message) for r in m.results),
        reply='tuple[api.AlterConfigsResult, ...]'),
    "DescribeConfigs": Codec(
        request_to=lambda r: pb.DescribeConfigsRequest(resources=[resource_to(k) for k in r.resources]),
        request_from=lambda m: api.DescribeConfigsRequest(tuple(resource_from(k) for k in m.resources)),
        reply_to=lambda reply: {"results": [pb.DescribeConfigsResult(resource=resource_to(key), error=int(error),
                                                                     error_message=message or "",
                                                                     entries=[config_entry_to(e) for e in entries])
                                            for key, error, message, entries in reply]},
        reply_from=lambda m: tuple((resource_from(r.resource), error_from_code(r.error), r.error_message,
                                    tuple(config_entry_from(e) for e in r.entries)) for r in m.results),
        reply='tuple[(ConfigResourceKey, Errors, message, tuple[ConfigEntry, ...]), ...]'),
    "ListTopics": Codec(
        request_to=lambda r: pb.ListTopicsRequest(),
        request_from=lambda m: api.ListTopicsRequest(),
        reply_to=lambda reply: {"names": sorted(reply)},
        reply_from=lambda m: tuple(m.names),
        reply='tuple[str, ...] (sorted names)'),
    "DescribeTopics": Codec(
        request_to=lambda r: pb.DescribeTopicsRequest(names=list(r.names), first_partition=r.first_partition,
                                                      partition_limit=r.partition_limit),
        request_from=lambda m: api.DescribeTopicsRequest(tuple(m.names), m.first_partition, m.partition_limit),
        reply_to=describe_topics_to,
        reply_from=lambda m: tuple(topic_description_from(d) if d.error == 0
                                   else SparkraftError(error_from_code(d.error), d.error_message, name=d.name)
                                   for d in m.topics),
        reply='tuple[api.TopicDescription | SparkraftError, ...] (one per name)'),
    "DescribeCluster": Codec(
        request_to=lambda r: pb.DescribeClusterRequest(),
        request_from=lambda m: api.DescribeClusterRequest(),
        reply_to=lambda reply: {"cluster_id": reply.cluster_id, "controller_id": opt(reply.controller_id),
                                "metadata_offset": reply.metadata_offset,
                                "brokers": [broker_to(b) for b in reply.brokers]},
        reply_from=lambda m: api.ClusterDescription(m.cluster_id, none_if_negative(m.controller_id), m.metadata_offset,
                                                    tuple(broker_from(b) for b in m.brokers)),
        reply='api.ClusterDescription'),
    "UpdateFeatures": Codec(
        request_to=lambda r: pb.UpdateFeaturesRequest(
            updates=[pb.FeatureUpdate(feature=f, max_level=lvl) for f, lvl in r.updates],
            upgrade_type="" if r.upgrade_type == "UPGRADE" else r.upgrade_type, validate_only=r.validate_only),
        request_from=lambda m: api.UpdateFeaturesRequest(tuple((u.feature, u.max_level) for u in m.updates),
                                                         m.validate_only,
                                                         m.upgrade_type or "UPGRADE"),
        reply_to=items_to,
        reply_from=items_from,
        reply='tuple[api.ItemResult, ...]'),
    "DescribeFeatures": Codec(
        request_to=lambda r: pb.DescribeFeaturesRequest(),
        request_from=lambda m: api.DescribeFeaturesRequest(),
        reply_to=lambda reply: {"finalized": [pb.FinalizedFeature(name=n, level=lvl) for n, lvl in reply.finalized],
                                "supported": [pb.SupportedFeature(name=n, min_version=lo, max_version=hi)
                                              for n, lo, hi in reply.supported], "epoch": reply.epoch},
        reply_from=lambda m: api.FeaturesDescription(tuple((f.name, f.level) for f in m.finalized),
                                                     tuple((f.name, f.min_version, f.max_version) for f in m.supported),
                                                     m.epoch),
        reply='api.FeaturesDescription'),
    "AlterClientQuotas": Codec(
        request_to=lambda r: pb.AlterClientQuotasRequest(alterations=[quota_alteration_to(a) for a in r.alterations],
                                                         validate_only=r.validate_only),
        request_from=lambda m: api.AlterClientQuotasRequest(tuple(quota_alteration_from(a) for a in m.alterations),
                                                            m.validate_only),
        reply_to=items_to,
        reply_from=items_from,
        reply='tuple[api.ItemResult, ...]'),
    "DescribeClientQuotas": Codec(
        request_to=lambda r: pb.DescribeClientQuotasRequest(
                       components=[pb.QuotaFilterComponent(entity_type=t, match_type=kind,
                                                           **({"match": n} if n is not None else {}))
                                   for t, kind, n in r.components], strict=r.strict),
        request_from=lambda m: api.DescribeClientQuotasRequest(
                         tuple((c.entity_type, c.match_type, opt_str(c, "match")) for c in m.components), m.strict),
        reply_to=lambda reply: {"entries": [pb.ClientQuotaEntry(
                     entity=quota_alteration_to(api.ClientQuotaAlteration(e.entity, ())).entity,
                     values=[pb.QuotaOp(key=k, value=v) for k, v in e.values]) for e in reply]},
        reply_from=lambda m: tuple(api.ClientQuotaEntry(tuple((e.entity_type, opt_str(e, "name")) for e in x.entity),
                                                        tuple((v.key, v.value) for v in x.values)) for x in m.entries),
        reply='tuple[api.ClientQuotaEntry, ...]'),
    "AllocateProducerIds": Codec(
        request_to=lambda r: pb.AllocateProducerIdsRequest(broker_id=r.broker_id, broker_epoch=r.broker_epoch),
        request_from=lambda m: api.AllocateProducerIdsRequest(m.broker_id, m.broker_epoch),
        reply_to=lambda reply: {"first_producer_id": reply.first_producer_id, "size": reply.size},
        reply_from=lambda m: api.ProducerIdsBlock(m.first_producer_id, m.size),
        reply='api.ProducerIdsBlock'),
    "AssignReplicasToDirs": Codec(
        request_to=lambda r: pb.AssignReplicasToDirsRequest(
            broker_id=r.broker_id, broker_epoch=r.broker_epoch,
            assignments=[pb.DirectoryAssignment(topic_id=a.topic_id, partition=a.partition, directory=a.directory)
                         for a in r.assignments]),
        request_from=lambda m: api.AssignReplicasToDirsRequest(m.broker_id, m.broker_epoch, tuple(
            api.DirectoryAssignment(a.topic_id, a.partition, a.directory) for a in m.assignments)),
        reply_to=lambda reply: {"results": [pb.AssignmentResult(topic_id=r.topic_id, partition=r.partition,
                                                                error=int(r.error)) for r in reply]},
        reply_from=lambda m: tuple(api.AssignmentResult(r.topic_id, r.partition, error_from_code(r.error))
                                   for r in m.results),
        reply='tuple[api.AssignmentResult, ...]'),
    "CreateAcls": Codec(
        request_to=lambda r: pb.CreateAclsRequest(bindings=[acl_to(b) for b in r.bindings]),
        request_from=lambda m: api.CreateAclsRequest(tuple(acl_from(b) for b in m.bindings)),
        reply_to=items_to,
        reply_from=items_from,
        reply='tuple[api.ItemResult, ...]'),
    "DeleteAcls": Codec(
        request_to=lambda r: pb.DeleteAclsRequest(filters=[acl_to(b) for b in r.filters]),
        request_from=lambda m: api.DeleteAclsRequest(tuple(acl_from(b) for b in m.filters)),
        reply_to=lambda reply: {"results": [pb.DeleteAclsFilterResult(error=int(r.error), error_message=r.message,
                                                                      matching=[acl_to(b) for b in matching])
                                            for r, matching in reply]},
        reply_from=lambda m: tuple((api.ItemResult(error_from_code(r.error), r.error_message),
                                    tuple(acl_from(b) for b in r.matching)) for r in m.results),
        reply='tuple[(api.ItemResult, tuple[api.AclBinding, ...]), ...]'),
    "DescribeAcls": Codec(
        request_to=lambda r: pb.DescribeAclsRequest(filter=acl_to(r.filter)),
        request_from=lambda m: api.DescribeAclsRequest(acl_from(m.filter)),
        reply_to=lambda reply: {"bindings": [acl_to(b) for b in reply]},
        reply_from=lambda m: tuple(acl_from(b) for b in m.bindings),
        reply='tuple[api.AclBinding, ...]'),
    "AlterUserScramCredentials": Codec(
        request_to=alter_scram_to,
        request_from=alter_scram_from,
        reply_to=lambda reply: {"results": [
            pb.AlterUserScramCredentialsResult(user=r.user, error=int(r.error), error_message=r.message)
            for r in reply]},
        reply_from=lambda m: tuple(api.UserResult(r.user, error_from_code(r.error),
                                                  r.error_message) for r in m.results),
        reply='tuple[api.UserResult, ...]'),
    "DescribeUserScramCredentials": Codec(
        request_to=lambda r: pb.DescribeUserScramCredentialsRequest(users=list(r.users)),
        request_from=lambda m: api.DescribeUserScramCredentialsRequest(tuple(m.users)),
        reply_to=lambda reply: {"results": [pb.DescribeUserScramCredentialsResult(
                     user=r.user, error=int(r.error), error_message=r.message,
                     credential_infos=[pb.ScramCredentialInfo(mechanism=m, iterations=i) for m, i in r.credentials])
                     for r in reply]},
        reply_from=lambda m: tuple(api.UserScramCredentials(r.user, error_from_code(r.error), r.error_message,
                                                            tuple((c.mechanism,
                                                                   c.iterations) for c in r.credential_infos))
                                   for r in m.results),
        reply='tuple[api.UserScramCredentials, ...]'),
    "DescribeMigration": Codec(
        request_to=lambda r: pb.DescribeMigrationRequest(),
        request_from=lambda m: api.DescribeMigrationRequest(),
        reply_to=lambda reply: {"state": reply.state, "zk_controller_epoch": reply.zk_controller_epoch,
                                "dual_write_lag_records": reply.dual_write_lag_records,
                                "mirrored_offset": reply.mirrored_offset, "migration_error": reply.error},
        reply_from=lambda m: api.MigrationDescription(m.state, m.zk_controller_epoch, m.dual_write_lag_records,
                                                      m.mirrored_offset, m.migration_error),
        reply='api.MigrationDescription'),
    "FinalizeMigration": Codec(
        request_to=lambda r: pb.FinalizeMigrationRequest(),
        request_from=lambda m: api.FinalizeMigrationRequest(),
        reply_to=nothing_to,
        reply_from=nothing_from,
        reply='None'),
    "HoldLog": Codec(
        request_to=lambda r: pb.HoldLogRequest(holder=r.holder, offset=r.offset, release=r.release),
        request_from=lambda m: api.HoldLogRequest(m.holder, m.offset, m.release),
        reply_to=lambda h: {"hold": _hold_to(h)},
        reply_from=lambda m: _hold_from(m.hold),
        reply='LogHold'),
    "DescribeLogHolds": Codec(
        request_to=lambda r: pb.DescribeLogHoldsRequest(),
        request_from=lambda m: api.DescribeLogHoldsRequest(),
        reply_to=lambda r: {"holds": [_hold_to(h) for h in r.holds], "max_age_ms": r.max_age_ms},
        reply_from=lambda m: api.LogHolds(tuple(_hold_from(h) for h in m.holds), m.max_age_ms),
        reply='api.LogHolds'),
    "DescribeAudit": Codec(
        request_to=lambda r: pb.DescribeAuditRequest(from_offset=r.from_offset, max_entries=r.max_entries),
        request_from=lambda m: api.DescribeAuditRequest(m.from_offset, m.max_entries),
        reply_to=lambda r: {"entries": [pb.AuditEntry(offset=o, record=b) for o, b in r.entries],
                            "next_offset": r.next_offset, "log_start": r.log_start},
        reply_from=lambda m: api.AuditEntries(tuple((e.offset, e.record) for e in m.entries), m.next_offset,
                                              m.log_start),
        reply='api.AuditEntries'),
    "RecordRefusal": Codec(
        request_to=lambda r: pb.RecordRefusalRequest(
            controller_id=r.controller_id, principal=r.principal, host=r.host, listener=r.listener,
            software_name=r.software[0], software_version=r.software[1], forwarded_by=r.forwarded_by,
            request=r.request, resources=list(r.resources), changes=list(r.changes), error_code=r.error_code,
            error_message=r.error_message),
        request_from=lambda m: api.RecordRefusalRequest(
            m.controller_id, m.principal, m.host, m.listener, (m.software_name, m.software_version), m.forwarded_by,
            m.request, tuple(m.resources), tuple(m.changes), m.error_code, m.error_message),
        reply_to=nothing_to,
        reply_from=nothing_from,
        reply='None'),
}
