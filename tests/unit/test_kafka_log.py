"""Apache Kafka's log formats (quorum/kafka_log/): the generated readers are current, and bytes
that are not a record or a batch are refused with a ValueError, never a crash or an over-read.
Records Apache Kafka itself wrote are compared with Kafka's own dump tool in
tests/integration/test_kafka_log_files.py."""
from __future__ import annotations

import gzip
import struct
import subprocess
import sys
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.kafka_log import batches, records
from quorum.kafka_log.gen.records import RECORDS
from quorum.kafka_log.wire import Reader

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_generated_readers_are_current():
    proc = subprocess.run([sys.executable, "scripts/gen_kafka_records.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    return bytes([1, api_key, version]) + body


def test_a_topic_record_reads_as_kafka_prints_it():
    body = bytes([7]) + b"orders" + bytes(range(16)) + bytes([0])  # compact "orders", a UUID, no tagged fields
    d = records.describe(False, None, _frame(2, 0, body))
    assert (d.type, d.version) == ("TOPIC_RECORD", 0)
    assert d.data == {"name": "orders", "topicId": "AAECAwQFBgcICQoLDA0ODw"}


def test_a_newer_version_or_type_is_kept_raw_and_counted_never_a_crash():
    before = dict(records.UNKNOWN.by_type)
    newer = _frame(2, RECORDS[2][1] + 1, b"\x00")
    d = records.describe(False, None, newer)
    assert (d.type, d.data, d.raw) == ("UNKNOWN", None, newer)
    d = records.describe(False, None, _frame(99, 0, b""))
    assert d.type == "UNKNOWN"
    assert records.UNKNOWN.by_type.get("TOPIC_RECORD v1", 0) == before.get("TOPIC_RECORD v1", 0) + 1
    assert records.UNKNOWN.by_type.get("api key 99 v0", 0) == before.get("api key 99 v0", 0) + 1


@settings(max_examples=300, deadline=None)
@given(api_key=st.sampled_from(sorted(RECORDS)), body=st.binary(max_size=64))
def test_garbage_after_a_known_header_is_a_value_error(api_key, body):
    try:
        records.describe(False, None, _frame(api_key, RECORDS[api_key][1], body))
    except (ValueError, UnicodeDecodeError):
        pass


def test_an_array_longer_than_its_bytes_is_refused_before_it_is_allocated():
    with pytest.raises(ValueError):
        Reader(bytes([0xFF, 0xFF, 0xFF, 0x7F])).compact_array(lambda r: r.int32())


def _batch(records_bytes: bytes, count: int, codec: int = 0) -> bytes:
    """A record batch v2 around ``records_bytes`` (as Kafka lays it out), for the codec tests."""
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, 1000, 1000, -1, -1, -1, count) + records_bytes
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), 3, 2, crc)
    return head + after_crc


def _record(offset_delta: int, value: bytes) -> bytes:
    def varint(n: int) -> bytes:
        u = (n << 1) ^ (n >> 63)
        out = bytearray()
        while True:
            out.append((u & 0x7F) | (0x80 if u > 0x7F else 0))
            u >>= 7
            if not out[-1] & 0x80:
                return bytes(out)
    body = b"\x00" + varint(0) + varint(offset_delta) + varint(-1) + varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


def test_every_codec_reads_like_an_uncompressed_batch():
    import cramjam

    value = _frame(20, 0, b"\x00")  # a NoOpRecord
    plain = _record(0, value) + _record(1, value)
    block = bytes(cramjam.snappy.compress_raw(plain))
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block  # snappy-java's
    for codec, data in ((0, plain), (1, gzip.compress(plain)), (2, block), (2, xerial),
                        (3, bytes(cramjam.lz4.compress(plain))), (4, bytes(cramjam.zstd.compress(plain)))):
        (batch,) = batches.read_batches(_batch(data, 2, codec))
        assert [r.offset for r in batch.records] == [0, 1]
        assert batch.compression == batches.CODECS[codec]
        assert records.describe(False, None, batch.records[1].value).type == "NO_OP_RECORD"


def test_a_flipped_bit_fails_the_crc():
    data = bytearray(_batch(_record(0, _frame(20, 0, b"\x00")), 1))
    data[-2] ^= 1
    with pytest.raises(batches.KafkaBatchError, match="CRC"):
        list(batches.read_batches(bytes(data)))
    assert not batches.looks_like_kafka(bytes(data))
