"""A plan's steps through Apache Kafka's Admin API, for a cluster materialised with ``--source
kafka``: Kafka's own requests (kio's types) to one of its brokers, which forwards them to its active
controller as Kafka's AdminClient does, authorized as the operator (``--command-config``). The
cluster's state now is read from Kafka's controllers' log (quorum/kafka_import/reader.py), as the
streaming job reads it. Kafka's errors are shown as Kafka names them."""
from __future__ import annotations

import datetime
from typing import Optional

from kio.schema.alter_client_quotas.v1 import request as quotas
from kio.schema.alter_user_scram_credentials.v0 import request as scram
from kio.schema.create_acls.v3 import request as create_acls
from kio.schema.create_partitions.v3 import request as create_partitions
from kio.schema.create_topics.v7 import request as create_topics
from kio.schema.delete_acls.v3 import request as delete_acls
from kio.schema.delete_topics.v6 import request as delete_topics
from kio.schema.incremental_alter_configs.v1 import request as alter_configs
from kio.schema.types import TopicName
from kio.schema.update_features.v1 import request as features
from kio.static.primitive import i8, i16, i32, i32Timedelta

from delta_tables.revert import Step, binding_codes, entity_of_label, resource_of_label
from quorum.errors import Errors
from quorum.kafka.client import KafkaConnection
from quorum.kafka_import.reader import KafkaMetadataLogReader, parse_bootstrap
from quorum.rpc.log_reader import image_through
from sparkraft.revert.requests import config_resources

TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=30))
_CONFIG_TYPE = {"TOPIC": 2, "BROKER": 4, "CLUSTER": 4, "GROUP": 32}
_MECHANISM = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
_UPGRADE, _SAFE_DOWNGRADE = 1, 2


class KafkaAdmin:
    def __init__(self, bootstrap_server: str, bootstrap_controller: str, security=None, timeout: float = 15.0):
        (host, port), = parse_bootstrap(bootstrap_server)[:1]
        self.name = f"Apache Kafka's controllers at {bootstrap_controller}"
        self.connection = KafkaConnection(host, port, timeout=timeout, security=security)
        self.reader = KafkaMetadataLogReader(bootstrap_controller, timeout=timeout, security=security)
        self.committed = -1

    def __enter__(self) -> "KafkaAdmin":
        return self

    def __exit__(self, *exc) -> None:
        self.connection.close()
        self.reader.close()

    def current_image(self):
        return image_through(self.reader)

    def apply(self, group: list[Step]) -> list[Optional[str]]:
        """Per step, None if Kafka applied it, else its error (Kafka's name and message)."""
        request, items, results_of = _request(group)
        response = self.connection.request(request)
        top = getattr(response, "error_code", 0)
        outcome = {}
        for steps, result in zip(items, results_of(response)):
            code = int(result.error_code) or int(top)
            message = result.error_message or getattr(response, "error_message", None) or ""
            for step in steps:
                outcome[id(step)] = None if code == 0 else _named(code) + (f": {message}" if message else "")
        self.committed = self.reader.high_watermark()
        return [outcome.get(id(step), "no answer for it") for step in group]


def _named(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return f"error {code}"


def _request(group: list[Step]):
    """(Kafka's request, the steps each item of its answer stands for, the answer's items)."""
    kind, one = group[0].kind, [[s] for s in group]
    if kind == "create-topic":
        return create_topics.CreateTopicsRequest(topics=tuple(create_topics.CreatableTopic(
            name=TopicName(s.resource), num_partitions=i32(s.after["partitions"]),
            replication_factor=i16(s.after["replication_factor"]), assignments=(),
            configs=tuple(create_topics.CreatableTopicConfig(name=k, value=v)
                          for k, v in sorted(s.after["configs"].items()))) for s in group),
            timeout=TIMEOUT, validate_only=False), one, lambda r: r.topics
    if kind == "delete-topic":
        return delete_topics.DeleteTopicsRequest(topics=tuple(
            delete_topics.DeleteTopicState(name=TopicName(s.resource), topic_id=None) for s in group),
            timeout=TIMEOUT), one, lambda r: r.responses
    if kind == "create-partitions":
        return create_partitions.CreatePartitionsRequest(topics=tuple(create_partitions.CreatePartitionsTopic(
            name=TopicName(s.resource), count=i32(s.after), assignments=None) for s in group),
            timeout=TIMEOUT, validate_only=False), one, lambda r: r.results
    if kind in ("set-config", "delete-config"):
        by_resource = config_resources(group)
        return alter_configs.IncrementalAlterConfigsRequest(resources=tuple(alter_configs.AlterConfigsResource(
            resource_type=i8(_CONFIG_TYPE[resource_of_label(label)[0]]), resource_name=resource_of_label(label)[1],
            configs=tuple(alter_configs.AlterableConfig(name=s.name, config_operation=i8(0 if s.kind == "set-config"
                                                                                        else 1),
                                                        value=s.after if s.kind == "set-config" else None)
                          for s in steps)) for label, steps in by_resource), validate_only=False), \
            [steps for _, steps in by_resource], lambda r: r.responses
    if kind == "create-acl":
        return create_acls.CreateAclsRequest(creations=tuple(create_acls.AclCreation(**_acl(s.after))
                                                             for s in group)), one, lambda r: r.results
    if kind == "delete-acl":
        return delete_acls.DeleteAclsRequest(filters=tuple(delete_acls.DeleteAclsFilter(**_acl_filter(s.before))
                                                           for s in group)), one, lambda r: r.filter_results
    if kind in ("set-quota", "remove-quota"):
        return quotas.AlterClientQuotasRequest(entries=tuple(quotas.EntryData(
            entity=tuple(quotas.EntityData(entity_type=t, entity_name=n) for t, n in entity_of_label(s.resource)),
            ops=(quotas.OpData(key=s.name, value=float(s.after or 0.0), remove=kind == "remove-quota"),))
            for s in group), validate_only=False), one, lambda r: r.entries
    if kind == "delete-user":
        return scram.AlterUserScramCredentialsRequest(deletions=tuple(scram.ScramCredentialDeletion(
            name=s.resource, mechanism=i8(_MECHANISM[s.name])) for s in group), upsertions=()), one, \
            lambda r: r.results
    if kind in ("upgrade-feature", "downgrade-feature"):
        kind_code = _UPGRADE if kind == "upgrade-feature" else _SAFE_DOWNGRADE
        return features.UpdateFeaturesRequest(timeout=TIMEOUT, feature_updates=tuple(features.FeatureUpdateKey(
            feature=s.resource, max_version_level=i16(s.after), upgrade_type=i8(kind_code)) for s in group),
            validate_only=False), one, lambda r: r.results
    raise ValueError(f"not a step of a plan: {kind}")


def _acl(b: dict) -> dict:
    codes = binding_codes(b)
    return {"resource_type": i8(codes["resource_type"]), "resource_name": b["resource_name"],
            "resource_pattern_type": i8(codes["pattern_type"]), "principal": b["principal"], "host": b["host"],
            "operation": i8(codes["operation"]), "permission_type": i8(codes["permission_type"])}


def _acl_filter(b: dict) -> dict:
    a = _acl(b)
    return {"resource_type_filter": a["resource_type"], "resource_name_filter": a["resource_name"],
            "pattern_type_filter": a["resource_pattern_type"], "principal_filter": a["principal"],
            "host_filter": a["host"], "operation": a["operation"], "permission_type": a["permission_type"]}
