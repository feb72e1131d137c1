"""Apache Kafka's metadata records as sparkraft's: what lets a Kafka cluster's log replay onto
sparkraft's metadata image and land in the same tables.

Both logs use Kafka's record type ids and meanings; they differ in encoding (Kafka's binary
messages, sparkraft's protobuf) and in a few conventions this module translates:

- a PartitionChangeRecord field Kafka leaves at its default (a null list, leader -2) is "unchanged",
  which sparkraft says by leaving the field out;
- a BrokerRegistrationChangeRecord's ``fenced`` is 1 (fence), -1 (unfence) or 0 (no change), and
  ``inControlledShutdown`` 1 or 0 (no change): sparkraft's are optional booleans;
- Kafka's obsolete FenceBrokerRecord and UnfenceBrokerRecord (before 3.3) become the registration
  change they mean;
- a SCRAM credential's salt and keys are dropped here: they never leave Kafka's log for the lakehouse.

Fields sparkraft's image has no place for (log directories, leader recovery state, a broker's
migration flag) are dropped. A record type sparkraft's image does not model (delegation tokens,
controller registrations, ClearElrRecord) becomes an ``UnknownRecord`` carrying Kafka's own bytes,
which the image skips and the ``records`` table keeps. Control records (LeaderChange, KRaftVersion,
KRaftVoters) become sparkraft's control records with the same content.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.kafka_log.records import Described, describe
from quorum.kafka_log.wire import Reader
from quorum.log import control_records
from quorum.metadata.records import AnyRecord, MetadataRecord, RecordType, UnknownRecord

_UNCHANGED_LEADER = -2  # PartitionChangeRecord.leader's default
_FENCE, _UNFENCE = 1, -1  # BrokerRegistrationFencingChange
_IN_CONTROLLED_SHUTDOWN = 1  # BrokerRegistrationInControlledShutdownChange


def _ids(values: Optional[list]) -> Optional[pb.BrokerIds]:
    return None if values is None else pb.BrokerIds(ids=values)


def _set(message, **fields) -> Any:
    """``message`` with each field that is not None set (None: leave it out, "unchanged")."""
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, pb.BrokerIds):
            getattr(message, name).CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


def _register_broker(d: dict) -> pb.RegisterBrokerRecord:
    record = _set(pb.RegisterBrokerRecord(
        broker_id=d["brokerId"], incarnation_id=d["incarnationId"], broker_epoch=d["brokerEpoch"],
        endpoints=[pb.RegisterBrokerRecord.BrokerEndpoint(name=e["name"], host=e["host"], port=e["port"],
                                                          security_protocol=e["securityProtocol"])
                   for e in d["endPoints"]],
        features=[pb.RegisterBrokerRecord.BrokerFeature(name=f["name"], min_supported_version=f["minSupportedVersion"],
                                                        max_supported_version=f["maxSupportedVersion"])
                  for f in d["features"]],
        fenced=d.get("fenced", True), in_controlled_shutdown=d.get("inControlledShutdown", False),
        log_dirs=d.get("logDirs") or []), rack=d.get("rack"))
    if d.get("cordonedLogDirs") is not None:
        record.cordoned_log_dirs.ids.extend(d["cordonedLogDirs"])
        record.cordoned_log_dirs.SetInParent()
    return record


def _register_controller(d: dict) -> pb.RegisterControllerRecord:
    return pb.RegisterControllerRecord(
        controller_id=d["controllerId"], incarnation_id=d["incarnationId"], zk_migration_ready=d["zkMigrationReady"],
        endpoints=[pb.RegisterBrokerRecord.BrokerEndpoint(name=e["name"], host=e["host"], port=e["port"],
                                                          security_protocol=e["securityProtocol"])
                   for e in d["endPoints"]],
        features=[pb.RegisterBrokerRecord.BrokerFeature(name=f["name"], min_supported_version=f["minSupportedVersion"],
                                                        max_supported_version=f["maxSupportedVersion"])
                  for f in d["features"]])


def _partition(d: dict) -> pb.PartitionRecord:
    return pb.PartitionRecord(
        partition_id=d["partitionId"], topic_id=d["topicId"], replicas=d["replicas"], isr=d["isr"],
        removing_replicas=d["removingReplicas"], adding_replicas=d["addingReplicas"], leader=d["leader"],
        leader_epoch=d["leaderEpoch"], partition_epoch=d["partitionEpoch"],
        eligible_leader_replicas=d.get("eligibleLeaderReplicas") or [], last_known_elr=d.get("lastKnownElr") or [])


def _partition_change(d: dict) -> pb.PartitionChangeRecord:
    # a tagged field Kafka left at its default is not in ``d`` (as kafka-dump-log does not print it)
    leader = d.get("leader", _UNCHANGED_LEADER)
    return _set(pb.PartitionChangeRecord(partition_id=d["partitionId"], topic_id=d["topicId"]),
                isr=_ids(d.get("isr")), leader=None if leader == _UNCHANGED_LEADER else leader,
                replicas=_ids(d.get("replicas")), removing_replicas=_ids(d.get("removingReplicas")),
                adding_replicas=_ids(d.get("addingReplicas")),
                eligible_leader_replicas=_ids(d.get("eligibleLeaderReplicas")),
                last_known_elr=_ids(d.get("lastKnownElr")))


def _registration_change(d: dict) -> pb.BrokerRegistrationChangeRecord:
    fenced = {_FENCE: True, _UNFENCE: False}.get(d.get("fenced", 0))
    shutting = True if d.get("inControlledShutdown", 0) == _IN_CONTROLLED_SHUTDOWN else None
    record = _set(pb.BrokerRegistrationChangeRecord(broker_id=d["brokerId"], broker_epoch=d["brokerEpoch"]),
                  fenced=fenced, in_controlled_shutdown=shutting)
    if d.get("logDirs"):
        record.log_dirs.ids.extend(d["logDirs"])
    if d.get("cordonedLogDirs") is not None:
        record.cordoned_log_dirs.ids.extend(d["cordonedLogDirs"])
        record.cordoned_log_dirs.SetInParent()
    return record


def _fence(fenced: bool) -> Callable[[dict], pb.BrokerRegistrationChangeRecord]:
    return lambda d: pb.BrokerRegistrationChangeRecord(broker_id=d["id"], broker_epoch=d["epoch"], fenced=fenced)


def _client_quota(d: dict) -> pb.ClientQuotaRecord:
    return pb.ClientQuotaRecord(
        entity=[_set(pb.ClientQuotaRecord.EntityData(entity_type=e["entityType"]), entity_name=e["entityName"])
                for e in d["entity"]],
        key=d["key"], value=d["value"], remove=d["remove"])


def _acl(d: dict) -> pb.AccessControlEntryRecord:
    return pb.AccessControlEntryRecord(
        id=d["id"], resource_type=d["resourceType"], resource_name=d["resourceName"], pattern_type=d["patternType"],
        principal=d["principal"], host=d["host"], operation=d["operation"], permission_type=d["permissionType"])


# Kafka's record type -> (sparkraft's type, how Kafka's fields become its message). A Kafka type not
# here is one sparkraft's image does not model (kept as an UnknownRecord); a sparkraft type not
# here would be a test failure (tests/unit/test_kafka_import.py).
CONVERT: dict[str, tuple[RecordType, Callable[[dict], Any]]] = {
    "REGISTER_BROKER_RECORD": (RecordType.REGISTER_BROKER_RECORD, _register_broker),
    "UNREGISTER_BROKER_RECORD": (RecordType.UNREGISTER_BROKER_RECORD,
                                 lambda d: pb.UnregisterBrokerRecord(broker_id=d["brokerId"],
                                                                     broker_epoch=d["brokerEpoch"])),
    "TOPIC_RECORD": (RecordType.TOPIC_RECORD, lambda d: pb.TopicRecord(name=d["name"], topic_id=d["topicId"])),
    "PARTITION_RECORD": (RecordType.PARTITION_RECORD, _partition),
    "CONFIG_RECORD": (RecordType.CONFIG_RECORD,
                      lambda d: _set(pb.ConfigRecord(resource_type=d["resourceType"], resource_name=d["resourceName"],
                                                     name=d["name"]), value=d["value"])),
    "PARTITION_CHANGE_RECORD": (RecordType.PARTITION_CHANGE_RECORD, _partition_change),
    "FENCE_BROKER_RECORD": (RecordType.BROKER_REGISTRATION_CHANGE_RECORD, _fence(True)),
    "UNFENCE_BROKER_RECORD": (RecordType.BROKER_REGISTRATION_CHANGE_RECORD, _fence(False)),
    "REMOVE_TOPIC_RECORD": (RecordType.REMOVE_TOPIC_RECORD, lambda d: pb.RemoveTopicRecord(topic_id=d["topicId"])),
    "USER_SCRAM_CREDENTIAL_RECORD": (RecordType.USER_SCRAM_CREDENTIAL_RECORD,  # salt and keys left behind
                                     lambda d: pb.UserScramCredentialRecord(name=d["name"], mechanism=d["mechanism"],
                                                                            iterations=d["iterations"])),
    "FEATURE_LEVEL_RECORD": (RecordType.FEATURE_LEVEL_RECORD,
                             lambda d: pb.FeatureLevelRecord(name=d["name"], feature_level=d["featureLevel"])),
    "CLIENT_QUOTA_RECORD": (RecordType.CLIENT_QUOTA_RECORD, _client_quota),
    "PRODUCER_IDS_RECORD": (RecordType.PRODUCER_IDS_RECORD,
                            lambda d: pb.ProducerIdsRecord(broker_id=d["brokerId"], broker_epoch=d["brokerEpoch"],
                                                           next_producer_id=d["nextProducerId"])),
    "BROKER_REGISTRATION_CHANGE_RECORD": (RecordType.BROKER_REGISTRATION_CHANGE_RECORD, _registration_change),
    "ACCESS_CONTROL_ENTRY_RECORD": (RecordType.ACCESS_CONTROL_ENTRY_RECORD, _acl),
    "REMOVE_ACCESS_CONTROL_ENTRY_RECORD": (RecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD,
                                           lambda d: pb.RemoveAccessControlEntryRecord(id=d["id"])),
    "NO_OP_RECORD": (RecordType.NO_OP_RECORD, lambda d: pb.NoOpRecord()),
    "ZK_MIGRATION_STATE_RECORD": (RecordType.ZK_MIGRATION_STATE_RECORD,
                                  lambda d: pb.ZkMigrationStateRecord(zk_migration_state=d["zkMigrationState"])),
    "REMOVE_USER_SCRAM_CREDENTIAL_RECORD": (RecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD,
                                            lambda d: pb.RemoveUserScramCredentialRecord(name=d["name"],
                                                                                         mechanism=d["mechanism"])),
    "BEGIN_TRANSACTION_RECORD": (RecordType.BEGIN_TRANSACTION_RECORD,
                                 lambda d: _set(pb.BeginTransactionRecord(), name=d.get("name"))),
    "END_TRANSACTION_RECORD": (RecordType.END_TRANSACTION_RECORD, lambda d: pb.EndTransactionRecord()),
    "ABORT_TRANSACTION_RECORD": (RecordType.ABORT_TRANSACTION_RECORD,
                                 lambda d: _set(pb.AbortTransactionRecord(), reason=d.get("reason"))),
    "REGISTER_CONTROLLER_RECORD": (RecordType.REGISTER_CONTROLLER_RECORD, _register_controller),
    "UNREGISTER_CONTROLLER_RECORD": (RecordType.UNREGISTER_CONTROLLER_RECORD,
                                     lambda d: pb.UnregisterControllerRecord(controller_id=d["controllerId"])),
}


def metadata_record(value: bytes) -> tuple[AnyRecord, Described]:
    """A Kafka metadata record's value as sparkraft's record, with Kafka's own reading of it (its
    type name and JSON, credentials redacted). ValueError if the bytes are damaged."""
    kafkas = describe(False, None, value)
    known = CONVERT.get(kafkas.type)
    if known is None:  # a type sparkraft does not model, or newer than this reader: Kafka's bytes
        r = Reader(value)
        r.uvarint(), r.uvarint(), r.uvarint()  # frame version, api key, version
        return UnknownRecord(_api_key(value), kafkas.version, bytes(value[r.pos:])), kafkas
    record_type, convert = known
    return MetadataRecord(record_type, kafkas.version, convert(kafkas.data)), kafkas


def _api_key(value: bytes) -> int:
    r = Reader(value)
    r.uvarint()
    return r.uvarint()


def control_record(key: bytes, value: bytes) -> tuple[Optional[bytes], Described]:
    """A Kafka control record as sparkraft's control record (None for a snapshot's header or
    footer, which only frame a snapshot), with Kafka's own reading of it."""
    kafkas = describe(True, key, value)
    d = kafkas.data or {}
    if kafkas.type == "LEADER_CHANGE":
        return control_records.leader_change(d["leaderId"], [v["voterId"] for v in d["voters"]],
                                             [v["voterId"] for v in d["grantingVoters"]]), kafkas
    if kafkas.type == "KRAFT_VERSION":
        return control_records.kraft_version(d["kRaftVersion"]), kafkas
    if kafkas.type == "KRAFT_VOTERS":
        return control_records.encode_control(control_records.KRAFT_VOTERS, {"version": 0, "voters": [
            {"id": v["voterId"], "directory_id": v["voterDirectoryId"],
             "endpoints": [{"name": e["name"], "host": e["host"], "port": e["port"]} for e in v["endpoints"]]}
            for v in d["voters"]]}), kafkas
    return None, kafkas
