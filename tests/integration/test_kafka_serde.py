"""The records Kafka's brokers fetch are Kafka's, byte for byte, at every metadata.version: each
record sparkraft exports at a level (quorum/kafka_log/export.py) is read by Kafka 4.4's own
MetadataRecordSerde and written back by it to the same bytes, at the version Kafka's own
MetadataVersion gives that record at that level."""
from __future__ import annotations

import pytest
from apache_kafka import jshell

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.kafka_log import export
from quorum.metadata.records import encode_record
from quorum.metadata.versions import RELEASES

pytestmark = pytest.mark.slow

TOPIC = "Uvwkq7q1T9Cb96OVaGex7A"
DIRS = ["CkQ1SrseSvGDApIStVUtIw", "AAAAAAAAAAAAAAAAAAAAAQ", "5FVl8RDQSXWM5R7iCaavmA"]
LEVELS = (14, 15, 17, 21, 22, 23, 29, 30, 33)  # 3.6-IV2 ... 4.4-IV2: where the record versions change, and around
RECORDS = [
    pb.RegisterBrokerRecord(broker_id=101, incarnation_id="u8QBabNzQFCIYnas1nSiQA", broker_epoch=7, endpoints=[
        pb.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        features=[pb.RegisterBrokerRecord.BrokerFeature(name="metadata.version", min_supported_version=7,
                                                        max_supported_version=33)],
        rack="r1", fenced=True, log_dirs=DIRS[:1]),
    pb.TopicRecord(name="orders", topic_id=TOPIC),
    pb.PartitionRecord(partition_id=2, topic_id=TOPIC, replicas=[1, 2, 3], isr=[1, 2], leader=1, leader_epoch=4,
                       partition_epoch=5, directories=DIRS),
    pb.PartitionRecord(partition_id=3, topic_id=TOPIC, replicas=[1, 2], isr=[1], leader=1,
                       eligible_leader_replicas=[2], last_known_elr=[3]),
    pb.PartitionChangeRecord(partition_id=2, topic_id=TOPIC, isr=pb.BrokerIds(ids=[1]), leader=-1),
    pb.PartitionChangeRecord(partition_id=2, topic_id=TOPIC, replicas=pb.BrokerIds(ids=[1, 4]),
                             directories=pb.DirectoryIds(ids=DIRS[:2])),
    pb.PartitionChangeRecord(partition_id=2, topic_id=TOPIC, eligible_leader_replicas=pb.BrokerIds(ids=[3])),
    pb.BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=7, fenced=True),
    pb.BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=7, in_controlled_shutdown=True),
    pb.BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=7, log_dirs=pb.DirectoryIds(ids=DIRS[:1])),
    pb.FeatureLevelRecord(name="metadata.version", feature_level=29),
    pb.ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
    pb.ProducerIdsRecord(broker_id=101, broker_epoch=7, next_producer_id=5000),
    pb.UnregisterBrokerRecord(broker_id=101, broker_epoch=7),
    pb.RemoveTopicRecord(topic_id=TOPIC),
    pb.ConfigRecord(resource_type=32, resource_name="sharing", name="share.auto.offset.reset", value="earliest"),
    pb.RegisterControllerRecord(controller_id=3000, incarnation_id="u8QBabNzQFCIYnas1nSiQA", endpoints=[
        pb.RegisterBrokerRecord.BrokerEndpoint(name="CONTROLLER", host="h", port=9093, security_protocol=1)],
        features=[pb.RegisterBrokerRecord.BrokerFeature(name="metadata.version", min_supported_version=14,
                                                        max_supported_version=29)]),
    pb.UnregisterControllerRecord(controller_id=3000),
    pb.RegisterBrokerRecord(broker_id=102, incarnation_id="u8QBabNzQFCIYnas1nSiQA", broker_epoch=8, endpoints=[
        pb.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)],
        log_dirs=DIRS[:2], cordoned_log_dirs=pb.DirectoryIds(ids=DIRS[1:2])),
    pb.BrokerRegistrationChangeRecord(broker_id=102, broker_epoch=8, cordoned_log_dirs=pb.DirectoryIds(ids=DIRS[:1])),
    pb.BrokerRegistrationChangeRecord(broker_id=102, broker_epoch=8, cordoned_log_dirs=pb.DirectoryIds()),
]

SCRIPT = r"""
import java.nio.*;
import java.nio.file.*;
import org.apache.kafka.common.protocol.*;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.*;
var serde = MetadataRecordSerde.INSTANCE;
for (String line : Files.readAllLines(Path.of("%s"))) {
    String[] f = line.split(" ");
    short level = Short.parseShort(f[0]);
    byte[] bytes = java.util.HexFormat.of().parseHex(f[1]);
    ApiMessageAndVersion read = serde.read(new ByteBufferAccessor(ByteBuffer.wrap(bytes)), bytes.length);
    var cache = new ObjectSerializationCache();
    ByteBuffer out = ByteBuffer.allocate(serde.recordSize(read, cache));
    serde.write(read, cache, new ByteBufferAccessor(out));
    MetadataVersion mv = MetadataVersion.fromFeatureLevel(level);
    short type = read.message().apiKey();
    String expected = type == 0 ? "" + mv.registerBrokerRecordVersion() : type == 3 ? "" + mv.partitionRecordVersion()
        : type == 5 ? "" + mv.partitionChangeRecordVersion() : "-";
    System.out.println("RECORD " + level + " " + type + " " + read.version() + " " + expected + " "
        + java.util.Arrays.equals(out.array(), bytes) + " " + mv.version());
}
"""


def test_every_exported_record_is_kafkas_own_bytes_at_its_level(tmp_path):
    lines = [f"{level} {export.record_value(encode_record(r), level).hex()}" for level in LEVELS for r in RECORDS]
    values = tmp_path / "records.txt"
    values.write_text("\n".join(lines) + "\n")
    out = jshell(SCRIPT % values, tmp_path)
    rows = [line.split() for line in out.splitlines() if line.startswith("RECORD ")]
    assert len(rows) == len(lines), out[-3000:]
    for _, level, kind, version, expected, same, release in rows:
        assert same == "true", f"record type {kind} at {release}: Kafka writes other bytes"
        assert expected in ("-", version), f"record type {kind} at {release}: version {version}, Kafka's {expected}"
        assert RELEASES[int(level)] == release, f"level {level}: Kafka names it {release}"
