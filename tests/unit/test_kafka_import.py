"""Kafka's metadata records as sparkraft's (quorum/kafka_import/records.py): every type sparkraft's
image models has a conversion, Kafka's "unchanged" defaults become absent fields, and no credential
crosses. The same conversion is checked on the files a real Kafka node wrote, against Kafka's own
tools, in tests/integration/test_kafka_log_files.py."""
from __future__ import annotations

import struct

from quorum.kafka_import.records import CONVERT, control_record, metadata_record
from quorum.kafka_log.gen.records import RECORDS
from quorum.log import control_records
from quorum.metadata.records import SPARKRAFT_ONLY, MetadataRecord, RecordType, UnknownRecord, to_json

TOPIC_ID = bytes(range(16))
TOPIC_ID_TEXT = "AAECAwQFBgcICQoLDA0ODw"


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def compact_ints(values) -> bytes:
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def tagged(fields: dict[int, bytes]) -> bytes:
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(v)) + v for t, v in sorted(fields.items()))


def frame(api_key: int, version: int, body: bytes) -> bytes:
    return bytes([1, api_key, version]) + body


def test_every_record_type_sparkraft_models_is_converted_from_kafkas():
    kafka_names = {name for name, _, _ in RECORDS.values()}
    assert set(CONVERT) <= kafka_names
    assert {t for t, _ in CONVERT.values()} == set(RecordType) - SPARKRAFT_ONLY


def test_a_partition_change_leaves_out_what_kafka_leaves_unchanged():
    # isr [1, 2] (tag 0); leader, replicas and the rest at their defaults: unchanged
    body = struct.pack(">i", 3) + TOPIC_ID + tagged({0: compact_ints([1, 2])})
    record, kafkas = metadata_record(frame(5, 0, body))
    assert kafkas.type == "PARTITION_CHANGE_RECORD"
    assert isinstance(record, MetadataRecord) and record.type is RecordType.PARTITION_CHANGE_RECORD
    assert to_json(record)["data"] == {"partition_id": 3, "topic_id": TOPIC_ID_TEXT, "isr": [1, 2]}
    # leader -1 (no leader) is a change, not "unchanged"
    body = struct.pack(">i", 3) + TOPIC_ID + tagged({1: struct.pack(">i", -1)})
    assert to_json(metadata_record(frame(5, 0, body))[0])["data"]["leader"] == -1


def test_a_registration_change_says_fence_unfence_or_nothing():
    def change(fenced: int) -> dict:
        body = struct.pack(">iq", 101, 7) + (tagged({0: struct.pack(">b", fenced)}) if fenced else tagged({}))
        return to_json(metadata_record(frame(17, 0, body))[0])["data"]

    assert change(1)["fenced"] is True
    assert change(-1)["fenced"] is False
    assert "fenced" not in change(0)


def test_no_scram_secret_crosses():
    body = (uvarint(6) + b"alice" + struct.pack(">b", 1) + uvarint(4) + b"sal" + uvarint(4) + b"sto"
            + uvarint(4) + b"ser" + struct.pack(">i", 8192) + tagged({}))
    record, kafkas = metadata_record(frame(11, 0, body))
    m = record.message
    assert (m.name, m.mechanism, m.iterations, m.salt, m.stored_key, m.server_key) == ("alice", 1, 8192, b"", b"", b"")
    assert kafkas.data["salt"] == "(redacted)"


def test_a_type_sparkraft_does_not_model_keeps_kafkas_bytes():
    body = uvarint(7) + b"orders" + tagged({})  # ClearElrRecord(topicName="orders")
    record, kafkas = metadata_record(frame(28, 0, body))
    assert isinstance(record, UnknownRecord) and (record.type_id, record.version, record.payload) == (28, 0, body)
    assert (kafkas.type, kafkas.data) == ("CLEAR_ELR_RECORD", {"topicName": "orders"})


def test_kafkas_leader_change_becomes_sparkraft_s():
    key = struct.pack(">hh", 0, 2)
    voters = lambda ids: uvarint(len(ids) + 1) + b"".join(struct.pack(">i", i) + tagged({}) for i in ids)  # noqa
    value = struct.pack(">hi", 0, 2) + voters([1, 2, 3]) + voters([1, 2]) + tagged({})
    raw, kafkas = control_record(key, value)
    assert kafkas.type == "LEADER_CHANGE"
    assert control_records.decode_control(raw).data == {"version": 0, "leader_id": 2, "voters": [1, 2, 3],
                                                        "granting_voters": [1, 2]}


def test_the_kafka_reader_refuses_an_address_that_is_not_one():
    import pytest

    from quorum.kafka_import.reader import KafkaMetadataLogReader

    with pytest.raises(ValueError, match="invalid controller address"):
        KafkaMetadataLogReader("nohost")


def test_a_partial_last_batch_is_left_for_the_next_fetch():
    """Kafka may end a Fetch answer inside a batch: the records before it are kept, nothing fails."""
    import crc32c  # the batches below are built by hand: header, CRC-32C, one record each

    from quorum.kafka_import.reader import _committed

    def batch(base_offset: int, value: bytes) -> bytes:
        record = bytes([0]) + uvarint(0 << 1) + uvarint(0) + uvarint(1) + uvarint(len(value) << 1) + value + uvarint(0)
        records = uvarint(len(record) << 1) + record
        after_crc = (struct.pack(">hiqqqhii", 0, 0, 0, 0, -1, -1, -1, 1) + records)
        crc = crc32c.crc32c(after_crc)
        body = struct.pack(">ibI", 0, 2, crc) + after_crc
        return struct.pack(">qi", base_offset, len(body)) + body

    topic = frame(2, 0, uvarint(7) + b"orders" + TOPIC_ID + tagged({}))
    data = batch(0, topic) + batch(1, topic)
    chunk = _committed(data[:-5], 0, 10, None, 0)
    assert [r.offset for r in chunk.records] == [0] and chunk.next_offset == 1
    chunk = _committed(data, 0, 1, None, 0)  # offset 1 is past the high watermark: not returned
    assert [r.offset for r in chunk.records] == [0] and chunk.next_offset == 1
