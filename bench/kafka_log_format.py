"""What serving Apache Kafka's brokers costs per partition record, both ways (issue 42's choice):

- **encode on the way out** (what sparkraft does): sparkraft's batches of protobuf records, read and
  re-encoded as Kafka's record batches when a Kafka broker fetches them (quorum/kafka_log/export.py);
- **store Kafka's format**: the log kept as Kafka's batches, so a fetch is a copy, but every one of
  sparkraft's own readers (the controllers' and brokers' replay, the Spark job's source) decodes
  Kafka's binary records instead of protobuf.

Measured in this process on N PartitionRecords (and their TopicRecords) in batches of 1,000, as a
controller's log holds a creation of N partitions: the time to export them all, the time sparkraft's
replay takes to decode its own format, the time it would take to decode Kafka's, and the bytes of each.
"""
from __future__ import annotations

import time

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.kafka_log.batches import read_batches
from quorum.kafka_log.export import export_batches
from quorum.kafka_log.gen.records import RECORDS
from quorum.kafka_log.wire import Reader
from quorum.log import batch as sparkraft_batch
from quorum.metadata.records import decode_record, encode_record

BATCH = 1000
PARTITIONS_PER_TOPIC = 100


def _topic_id(n: int) -> str:
    import base64

    return base64.urlsafe_b64encode((n + 1).to_bytes(16, "big")).decode().rstrip("=")


def sparkraft_log(partitions: int) -> list[bytes]:
    """Encoded sparkraft batches of a creation of ``partitions`` partitions (RF 3, 300 brokers)."""
    records: list[bytes] = []
    for p in range(partitions):
        topic, index = divmod(p, PARTITIONS_PER_TOPIC)
        if index == 0:
            records.append(encode_record(pb.TopicRecord(name=f"topic-{topic}", topic_id=_topic_id(topic))))
        replicas = [(p + k) % 300 for k in range(3)]
        records.append(encode_record(pb.PartitionRecord(
            partition_id=index, topic_id=_topic_id(topic), replicas=replicas, isr=replicas, leader=replicas[0],
            leader_epoch=0, partition_epoch=0)))
    return [sparkraft_batch.encode_batch(start, 1, 0, records[start:start + BATCH])
            for start in range(0, len(records), BATCH)]


def measure(partitions: int) -> dict:
    log = sparkraft_log(partitions)
    started = time.perf_counter()
    kafka = [export_batches(b, lambda offset: 29) for b in log]
    encode_s = time.perf_counter() - started

    started = time.perf_counter()
    count = 0
    for b in log:
        for batch in sparkraft_batch.decode(b):
            for r in batch.records:
                decode_record(r)
                count += 1
    decode_sparkraft_s = time.perf_counter() - started

    started = time.perf_counter()
    for b in kafka:
        for batch in read_batches(b):
            for r in batch.records:
                reader = Reader(r.value)
                reader.uvarint()
                key = reader.uvarint()
                version = reader.uvarint()
                RECORDS[key][2](reader, version)
    decode_kafka_s = time.perf_counter() - started
    return {"partitions": partitions, "records": count, "export_s": encode_s,
            "decode_sparkraft_s": decode_sparkraft_s, "decode_kafka_s": decode_kafka_s,
            "sparkraft_bytes": sum(len(b) for b in log), "kafka_bytes": sum(len(b) for b in kafka)}


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000), indent=2))
