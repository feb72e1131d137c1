"""Record framing, type ids, JSON form, and compatibility across record versions."""
from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from metadata_helpers import broker, change, config, partition, topic, uid

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import (
    DecodeError,
    MetadataDelta,
    MetadataImage,
    MetadataRecord,
    RecordType,
    UnknownRecord,
    decode_record,
    encode_record,
    from_json,
    to_json,
)
from quorum.metadata.records import HEADER, as_record, record_type, redacted, sensitive_fields

# Kafka's apiKey of each record, as in apache/kafka metadata/src/main/resources/common/metadata/
# <Name>.json (checked against trunk, commit 1eb76443).
KAFKA_API_KEYS = {
    "RegisterBrokerRecord": 0, "UnregisterBrokerRecord": 1, "TopicRecord": 2, "PartitionRecord": 3,
    "ConfigRecord": 4, "PartitionChangeRecord": 5, "RemoveTopicRecord": 9, "UserScramCredentialRecord": 11,
    "FeatureLevelRecord": 12, "RemoveUserScramCredentialRecord": 22,
    "ClientQuotaRecord": 14, "ProducerIdsRecord": 15, "BrokerRegistrationChangeRecord": 17,
    "AccessControlEntryRecord": 18, "RemoveAccessControlEntryRecord": 19, "NoOpRecord": 20,
    "ZkMigrationStateRecord": 21,
    "BeginTransactionRecord": 23, "EndTransactionRecord": 24, "AbortTransactionRecord": 25,
    "RegisterControllerRecord": 27, "UnregisterControllerRecord": 29,
}
# sparkraft's own record types, outside Kafka's ids (never sent to Kafka's brokers as they are)
SPARKRAFT_TYPES = {"PartitionChangeBlockRecord": 0x7E01, "PartitionChangeBlockContinuationRecord": 0x7E02,
                   "AuditRecord": 0x7E03, "LogHoldRecord": 0x7E04}

SAMPLES = [
    broker(1, epoch=42, rack="rack-a"),
    pb.UnregisterBrokerRecord(broker_id=1, broker_epoch=42),
    topic("orders", 7),
    partition(7, 0, [1, 2, 3], isr=[1, 2], leader=1, leader_epoch=3, partition_epoch=5),
    config(pb.ConfigResourceType.TOPIC, "orders", "retention.ms", "1000"),
    config(pb.ConfigResourceType.TOPIC, "orders", "retention.ms", None),
    change(7, 0, isr=[1], leader=1),
    change(7, 0, isr=[]),
    pb.RemoveTopicRecord(topic_id=uid(7)),
    pb.FeatureLevelRecord(name="metadata.version", feature_level=7),
    pb.ClientQuotaRecord(entity=[pb.ClientQuotaRecord.EntityData(entity_type="user", entity_name="alice"),
                                 pb.ClientQuotaRecord.EntityData(entity_type="client-id")],
                         key="producer_byte_rate", value=1024.0),
    pb.ProducerIdsRecord(broker_id=1, broker_epoch=42, next_producer_id=2**62 + 1),
    pb.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=42, fenced=False),
    pb.AccessControlEntryRecord(id=uid(9), resource_type=pb.AclResourceType.TOPIC, resource_name="orders",
                                pattern_type=pb.PatternType.LITERAL, principal="User:alice", host="*",
                                operation=pb.AclOperation.READ, permission_type=pb.AclPermissionType.ALLOW),
    pb.RemoveAccessControlEntryRecord(id=uid(9)),
    pb.NoOpRecord(),
    pb.ZkMigrationStateRecord(zk_migration_state=pb.ZkMigrationState.MIGRATION),
    pb.BeginTransactionRecord(name="create 1000 topics"),
    pb.EndTransactionRecord(),
    pb.AbortTransactionRecord(reason="controller failover"),
    pb.RemoveUserScramCredentialRecord(name="alice", mechanism=pb.ScramMechanism.SCRAM_SHA_512),
    pb.RegisterControllerRecord(controller_id=3000, incarnation_id=uid(11), endpoints=[
        pb.RegisterBrokerRecord.BrokerEndpoint(name="CONTROLLER", host="127.0.0.1", port=9093)],
        features=[pb.RegisterBrokerRecord.BrokerFeature(name="metadata.version", min_supported_version=14,
                                                        max_supported_version=29)]),
    pb.UnregisterControllerRecord(controller_id=3000),
    pb.PartitionChangeBlockRecord(topic_ids=[uid(7)], topic_rows=[2], partition_ids=[0, 1], leaders=[1, -2],
                                  isr=[0, -1], list_lengths=[2], list_ids=[1, 2]),
    pb.PartitionChangeBlockContinuationRecord(),
    pb.AuditRecord(time_ms=1_700_000_000_000, principal="User:alice", client_host="10.0.0.7",
                   client_software_name="apache-kafka-java", client_software_version="4.4.0", listener="CONTROLLER",
                   request="CreateTopics", resources=["TOPIC:orders"], changes=["retention.ms=86400000"],
                   record_count=4, hash=b"h" * 32),
    pb.LogHoldRecord(holder="materialize:/wh", offset=4711, time_ms=1_700_000_000_000),
]
SCRAM = pb.UserScramCredentialRecord(name="alice", mechanism=pb.ScramMechanism.SCRAM_SHA_256, salt=b"s" * 32,
                                     stored_key=b"k" * 32, server_key=b"v" * 32, iterations=8192)


def test_type_ids_are_kafkas_and_cover_every_record_message():
    messages = {name for name in pb.DESCRIPTOR.message_types_by_name if name.endswith("Record")}
    every = {**KAFKA_API_KEYS, **SPARKRAFT_TYPES}
    assert messages == set(every)
    assert {t.message_class.DESCRIPTOR.name: int(t) for t in RecordType} == every
    assert {type(s).DESCRIPTOR.name for s in [*SAMPLES, SCRAM]} == set(every)
    assert max(KAFKA_API_KEYS.values()) < min(SPARKRAFT_TYPES.values())


@pytest.mark.parametrize("message", [*SAMPLES, SCRAM], ids=lambda m: type(m).__name__)
def test_encode_decode_round_trip(message):
    frame = encode_record(message)
    assert HEADER.unpack_from(frame) == (record_type(message), 0)  # u16 type, u16 version, big endian
    assert frame[HEADER.size:] == message.SerializeToString()
    record = decode_record(frame)
    assert record == MetadataRecord(record_type(message), 0, message)
    assert (record.type_name, record.type_id) == (record_type(message).name, int(record_type(message)))
    assert encode_record(record) == frame


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_json_round_trip(message):
    obj = to_json(message)
    assert obj["type"] == record_type(message).name and obj["version"] == 0
    assert json.loads(json.dumps(obj)) == obj
    assert from_json(obj) == MetadataRecord(record_type(message), 0, message)


def test_credentials_are_redacted_from_the_json_form_and_from_redacted_copies():
    obj = to_json(SCRAM)
    assert obj["data"] == {"name": "alice", "mechanism": "SCRAM_SHA_256", "salt": "(redacted)",
                           "stored_key": "(redacted)", "server_key": "(redacted)", "iterations": 8192}
    with pytest.raises(ValueError, match="redacted"):
        from_json(obj)
    safe = redacted(decode_record(encode_record(SCRAM)))
    assert not (safe.message.salt or safe.message.stored_key or safe.message.server_key)
    assert (safe.message.name, safe.message.iterations) == ("alice", 8192)
    assert SCRAM.salt == b"s" * 32  # the original is untouched
    other = decode_record(encode_record(topic("orders", 7)))
    assert redacted(other) is other


def test_json_form_is_readable():
    assert to_json(topic("orders", 7)) == {
        "type": "TOPIC_RECORD", "version": 0, "data": {"name": "orders", "topic_id": uid(7)}}
    # 64-bit ints stay numbers, even past 2**53; enums by Kafka's names
    ids = to_json(pb.ProducerIdsRecord(broker_id=1, broker_epoch=42, next_producer_id=2**62 + 1))
    assert ids["data"] == {"broker_id": 1, "broker_epoch": 42, "next_producer_id": 2**62 + 1}
    reg = to_json(broker(3, epoch=5))["data"]
    assert reg["endpoints"] == [{"name": "PLAINTEXT", "host": "b3", "port": 9092,
                                 "security_protocol": "PLAINTEXT"}]
    assert "rack" not in reg and reg["fenced"] is True
    # a sparse change shows only what changed; broker id lists are plain arrays
    assert to_json(change(7, 2, isr=[1, 2]))["data"] == {"partition_id": 2, "topic_id": uid(7), "isr": [1, 2]}
    assert to_json(change(7, 2, leader=-1))["data"] == {"partition_id": 2, "topic_id": uid(7), "leader": -1}
    deleted = to_json(config(pb.ConfigResourceType.TOPIC, "orders", "retention.ms", None))["data"]
    assert deleted == {"resource_type": "TOPIC", "resource_name": "orders", "name": "retention.ms"}


def _every_field_set(message_class):
    """A message of ``message_class`` with every field set to a value that is not its default (an
    unnamed enum number and a 64-bit int past 2**53 among them)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    message = message_class()
    for n, field in enumerate(message_class.DESCRIPTOR.fields, start=1):
        if field.message_type is not None:
            values = [_every_field_set(message_class=message_factory.GetMessageClass(field.message_type))]
        elif field.enum_type is not None:
            values = [99, field.enum_type.values[-1].number]  # a number without a name (SAMPLES name theirs)
        elif field.type == F.TYPE_STRING:
            values = [uid(n) if field.name.endswith("id") else f"v{n}"]
        elif field.type == F.TYPE_BYTES:
            values = [bytes([n]) * 3]
        elif field.type == F.TYPE_BOOL:
            values = [True]
        elif field.type == F.TYPE_DOUBLE:
            values = [float("inf")]  # SAMPLES have a finite one
        else:
            values = [2**62 + n if field.type in (F.TYPE_INT64, F.TYPE_UINT64) else n]
        if field.is_repeated:
            getattr(message, field.name).extend(values) if field.message_type is None \
                else [getattr(message, field.name).add().CopyFrom(v) for v in values]
        elif field.message_type is not None:
            getattr(message, field.name).CopyFrom(values[0])
        else:
            setattr(message, field.name, values[0])
    return message


def _protobuf_json(message) -> dict:
    """Protobuf's own JSON mapping (json_format), with to_json's two changes applied: the oracle."""
    from google.protobuf import json_format
    from google.protobuf.descriptor import FieldDescriptor as F

    def plain(data, descriptor):
        out = {}
        for field in descriptor.fields:
            if field.name in data:
                value = data[field.name]
                if field.message_type is pb.BrokerIds.DESCRIPTOR:
                    value = value.get("ids", [])
                elif field.message_type is not None:
                    value = [plain(v, field.message_type) for v in value] if field.is_repeated \
                        else plain(value, field.message_type)
                elif field.type in (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64):
                    value = [int(v) for v in value] if field.is_repeated else int(value)
                out[field.name] = value
        return out

    return plain(json_format.MessageToDict(message, preserving_proto_field_name=True,
                                           always_print_fields_with_no_presence=True), message.DESCRIPTOR)


@pytest.mark.parametrize("message", [*SAMPLES, *(_every_field_set(t.message_class) for t in RecordType)],
                         ids=lambda m: type(m).__name__)
def test_json_form_is_protobufs_json_mapping_with_plain_ints_and_broker_lists(message):
    data = to_json(message)["data"]
    if sensitive_fields(as_record(message)):
        expected = {**_protobuf_json(message), **{k: "(redacted)" for k in sensitive_fields(as_record(message))}}
    else:
        expected = _protobuf_json(message)
    assert data == expected
    assert list(data) == list(expected)  # the .proto's order


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x00\x02\x00"])
def test_a_frame_shorter_than_the_header_is_a_decode_error(frame):
    with pytest.raises(DecodeError, match="at least 4 bytes"):
        decode_record(frame)


def test_an_unparsable_payload_is_a_decode_error():
    with pytest.raises(DecodeError, match="TOPIC_RECORD"):
        decode_record(HEADER.pack(2, 0) + b"\x0a\xff\xff\xff\xff\x0f")  # a length past the end


def test_an_unknown_type_is_kept_and_ignored_by_replay():
    frame = HEADER.pack(999, 3) + b"\x08\x01"
    record = decode_record(frame)
    assert record == UnknownRecord(999, 3, b"\x08\x01")
    assert encode_record(record) == frame
    assert to_json(record) == {"type": "UNKNOWN_RECORD_999", "version": 3, "data": {"payload": "CAE="}}
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(record, 0)
    image = delta.apply()
    assert image.offset == 0 and image.topics is MetadataImage.EMPTY.topics


def test_encode_refuses_an_id_that_is_not_a_uuid():
    with pytest.raises(ValueError, match="TOPIC_RECORD topic_id"):
        encode_record(pb.TopicRecord(name="orders", topic_id="not-a-uuid"))


def test_from_json_refuses_an_unknown_type():
    with pytest.raises(ValueError, match="BOGUS_RECORD"):
        from_json({"type": "BOGUS_RECORD", "version": 0, "data": {}})


def _newer_topic_record_class():
    """A 'version 1' TopicRecord as a newer writer would have it: one more field, number 3."""
    file = descriptor_pb2.FileDescriptorProto(name="newer_metadata.proto", package="newer", syntax="proto3")
    pb.TopicRecord.DESCRIPTOR.CopyToProto(file.message_type.add())
    file.message_type[0].field.add(name="description", number=3,
                                   type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                                   label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("newer.TopicRecord"))


def test_an_old_reader_accepts_a_newer_record_and_keeps_what_it_does_not_know():
    newer = _newer_topic_record_class()(name="orders", topic_id=uid(7), description="from a newer node")
    frame = HEADER.pack(RecordType.TOPIC_RECORD, 1) + newer.SerializeToString()

    record = decode_record(frame)
    assert record.version == 1
    assert (record.message.name, record.message.topic_id) == ("orders", uid(7))
    image = MetadataDelta(MetadataImage.EMPTY)
    image.replay(record, 0)
    assert image.apply().topics.topic_by_name("orders").topic_id == uid(7)

    # Re-encoding (e.g. a JSON dump tool, or a proxy) loses neither the version nor the new field.
    again = encode_record(record)
    assert again == frame
    assert _newer_topic_record_class().FromString(again[HEADER.size:]).description == "from a newer node"


def test_a_password_type_configs_value_is_redacted_and_no_other():
    """Kafka's PASSWORD configs (by name, under a listener's prefix too): their value is
    "(redacted)" in the JSON form and in ``redacted``'s copy (never unset: that would read as the
    config deleted); other configs, and a password config being deleted, are as they are."""
    secret = pb.ConfigRecord(resource_type=4, resource_name="0", name="listener.name.internal.ssl.key.password",
                             value="s3cret")
    plain = pb.ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1000")
    deleted = pb.ConfigRecord(resource_type=4, resource_name="0", name="ssl.keystore.password")
    assert to_json(secret)["data"]["value"] == "(redacted)"
    assert redacted(as_record(secret)).message.value == "(redacted)"
    assert to_json(plain)["data"]["value"] == "1000" and redacted(as_record(plain)).message is plain
    assert not sensitive_fields(as_record(deleted)) and "value" not in to_json(deleted)["data"]


def test_a_checkpoint_leaves_the_log_with_passwords_cleared_and_otherwise_byte_for_byte():
    """redact_checkpoint (what the lakehouse and a SNAPSHOT row get): a checkpoint whose configs hold
    no password-type value is returned as the very same bytes; one that holds one loses the value."""
    from quorum.metadata.delta import MetadataDelta
    from quorum.metadata.image import MetadataImage
    from quorum.snapshot.checkpoint import checkpoint_bytes, decode_checkpoint, redact_checkpoint

    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(pb.ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1000"))
    plain = checkpoint_bytes(delta.apply(), {})
    assert redact_checkpoint(plain) is plain
    delta.replay(pb.ConfigRecord(resource_type=4, resource_name="0", name="listener.name.x.ssl.key.password",
                                 value="s3cret-4711"))
    secret = checkpoint_bytes(delta.apply(), {})
    cleared = redact_checkpoint(secret)
    assert b"s3cret-4711" in secret and b"s3cret-4711" not in cleared
    configs = decode_checkpoint(cleared)[1].configs
    assert {r.name: r.value for r in configs.records()} == {"retention.ms": "1000",
                                                            "listener.name.x.ssl.key.password": "(redacted)"}
