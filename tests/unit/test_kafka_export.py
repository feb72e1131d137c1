"""sparkraft's log in Apache Kafka's format (quorum/kafka_log/export.py): every record type has a
translation, each reads back as the same fields at the version Kafka writes it at the
metadata.version in force, and Kafka's own log dumper (4.4) reads the batches as Kafka's
controllers would have written them."""
from __future__ import annotations

import json
import subprocess

import pytest
from apache_kafka import java, need_kafka

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.kafka_log import export
from quorum.kafka_log.batches import read_batches
from quorum.kafka_log.records import describe
from quorum.log import batch as sparkraft_batch
from quorum.log import control_records
from quorum.log.voter_set import Endpoint, ReplicaKey, Voter, VoterSet
from quorum.metadata.records import SPARKRAFT_ONLY, RecordType, encode_record

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
V3_6, V4_2 = 14, 29  # 3.6-IV2; 4.2-IV1: log directories (3.7-IV2) and ELR (4.0-IV1) in the records
SAMPLES = [
    pb.RegisterBrokerRecord(broker_id=101, incarnation_id="u8QBabNzQFCIYnas1nSiQA", broker_epoch=7,
                            endpoints=[pb.RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092,
                                                                              security_protocol=3)],
                            features=[pb.RegisterBrokerRecord.BrokerFeature(name="metadata.version",
                                                                            min_supported_version=1,
                                                                            max_supported_version=3)],
                            rack="r1", fenced=True),
    pb.TopicRecord(name="orders", topic_id=TOPIC_ID),
    pb.PartitionRecord(partition_id=2, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2], leader=1, leader_epoch=4,
                       partition_epoch=5),
    pb.PartitionChangeRecord(partition_id=2, topic_id=TOPIC_ID, isr=pb.BrokerIds(ids=[1]), leader=-1),
    pb.BrokerRegistrationChangeRecord(broker_id=101, broker_epoch=7, fenced=False, in_controlled_shutdown=True),
    pb.FeatureLevelRecord(name="metadata.version", feature_level=3),  # sparkraft's own level 3 of before: 4.0-IV1
    pb.ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms"),
]


def test_every_record_type_sparkraft_writes_is_translated_or_sent_as_a_no_op():
    assert set(export.TO_KAFKA) | export.NOT_SENT | SPARKRAFT_ONLY == set(RecordType)
    assert not set(export.TO_KAFKA) & export.NOT_SENT and not set(export.TO_KAFKA) & SPARKRAFT_ONLY


def _kafkas(message, level: int = V4_2) -> dict:
    value = export.record_value(encode_record(message), level)
    return describe(False, None, value)


def test_records_read_back_as_kafka_prints_them():
    broker, topic, partition, change, unfence, mv, delete = (_kafkas(m) for m in SAMPLES)
    assert broker.type == "REGISTER_BROKER_RECORD" and broker.version == 3
    assert "logDirs" not in broker.data  # none (a sparkraft broker): a tagged field left out, as Kafka writes it
    assert broker.data["endPoints"] == [{"name": "PLAINTEXT", "host": "h", "port": 9092, "securityProtocol": 3}]
    assert broker.data["features"] == [{"name": "metadata.version", "minSupportedVersion": 1,
                                        "maxSupportedVersion": 3}]
    assert broker.data["rack"] == "r1" and broker.data["fenced"] is True
    assert topic.data == {"name": "orders", "topicId": TOPIC_ID}
    assert partition.version == 2 and partition.data["isr"] == [1, 2] and partition.data["leaderEpoch"] == 4
    assert partition.data["directories"] == ["AAAAAAAAAAAAAAAAAAAAAA"] * 3  # not known: Kafka's MIGRATING
    assert change.version == 2
    assert change.data == {"partitionId": 2, "topicId": TOPIC_ID, "isr": [1], "leader": -1}  # the rest unchanged
    assert unfence.version == 1 and unfence.data["fenced"] == -1 and unfence.data["inControlledShutdown"] == 1
    assert mv.data == {"name": "metadata.version", "featureLevel": 23}
    assert delete.data["value"] is None  # a deletion stays a null value


def test_record_versions_follow_the_metadata_version_in_force():
    at_3_6 = [_kafkas(m, V3_6) for m in SAMPLES]
    assert [r.version for r in at_3_6[:5]] == [2, 0, 0, 0, 1]
    assert "directories" not in at_3_6[2].data
    with_dirs = pb.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1,
                                   directories=["Uvwkq7q1T9Cb96OVaGex7A", "AAAAAAAAAAAAAAAAAAAAAQ"])
    assert _kafkas(with_dirs, 17).version == 1  # 3.7-IV2: directories, no ELR yet
    assert _kafkas(with_dirs).data["directories"] == ["Uvwkq7q1T9Cb96OVaGex7A", "AAAAAAAAAAAAAAAAAAAAAQ"]
    moved = pb.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, replicas=pb.BrokerIds(ids=[3, 4]))
    assert _kafkas(moved).data["directories"] == ["AAAAAAAAAAAAAAAAAAAAAA"] * 2  # new replicas: not known
    fence = pb.BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=7, fenced=True)
    assert _kafkas(fence).version == 0  # Kafka writes a fencing at version 0
    ours = pb.FeatureLevelRecord(name="sparkraft.version", feature_level=1)
    assert _kafkas(ours).type == "NO_OP_RECORD"  # sparkraft's own feature: Kafka's brokers never see it


def test_a_record_kafkas_brokers_are_not_told_keeps_its_offset_as_a_no_op():
    value = export.record_value(encode_record(pb.ZkMigrationStateRecord(zk_migration_state=1)), V4_2)
    assert describe(False, None, value).type == "NO_OP_RECORD"


def _at_4_2(offset: int) -> int:
    return V4_2


def _log() -> bytes:
    voters = VoterSet([Voter(ReplicaKey(1, "Uvwkq7q1T9Cb96OVaGex7A"), (Endpoint("CONTROLLER", "h", 9093),))])
    return b"".join([
        sparkraft_batch.encode_batch(0, 1, 1000, [control_records.leader_change(1, [1], [1])], control=True),
        sparkraft_batch.encode_batch(1, 1, 1001, [control_records.kraft_version(1), voters.encode()], control=True),
        sparkraft_batch.encode_batch(3, 1, 1002, [encode_record(m) for m in SAMPLES]),
    ])


def test_batches_keep_sparkraft_offsets_epochs_and_times():
    batches = list(read_batches(export.export_batches(_log(), _at_4_2)))
    assert [(b.base_offset, b.last_offset, b.partition_leader_epoch, b.base_timestamp, b.control) for b in batches] == [
        (0, 0, 1, 1000, True), (1, 2, 1, 1001, True), (3, 3 + len(SAMPLES) - 1, 1, 1002, False)]
    voters = describe(True, batches[1].records[1].key, batches[1].records[1].value)
    assert voters.type == "KRAFT_VOTERS"
    assert voters.data["voters"][0]["endpoints"] == [{"name": "CONTROLLER", "host": "h", "port": 9093}]


def _kafka_dump_log(tmp_path, log: bytes) -> tuple[list[dict], str]:
    """Kafka's own DumpLogSegments over ``log`` as an exported segment: the payloads, and its output."""
    folder = need_kafka()
    segment = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(export.export_batches(log, _at_4_2))
    out = subprocess.run(java("-Xmx256m", "-cp", f"{folder}/*", "org.apache.kafka.tools.DumpLogSegments",
                          "--cluster-metadata-decoder", "--files", str(segment)), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return ([json.loads(line.split("payload: ", 1)[1]) for line in out.stdout.splitlines() if "payload: " in line],
            out.stdout)


@pytest.mark.slow
def test_kafkas_own_dump_log_reads_the_exported_log(tmp_path):
    payloads, stdout = _kafka_dump_log(tmp_path, _log())
    assert [p["type"] for p in payloads] == ["REGISTER_BROKER_RECORD", "TOPIC_RECORD", "PARTITION_RECORD",
                                             "PARTITION_CHANGE_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD",
                                             "FEATURE_LEVEL_RECORD", "CONFIG_RECORD"]
    assert payloads[2]["data"]["isr"] == [1, 2]
    assert payloads[5]["data"]["featureLevel"] == 23  # sparkraft's own level 3 of before, as Kafka's
    assert '"leaderId":1,"voters":[{"voterId":1}]' in stdout  # LeaderChange
    assert 'KRaftVersion {"version":0,"kRaftVersion":1}' in stdout
    assert '"voterDirectoryId":"Uvwkq7q1T9Cb96OVaGex7A","endpoints":[{"name":"CONTROLLER","host":"h","port":9093}]' \
        in stdout  # KRaftVoters
    assert stdout.count("isvalid: true") == 3 and "isvalid: false" not in stdout  # every CRC-32C holds


def test_the_export_cache_gives_the_same_bytes_and_exports_each_batch_once():
    log = _log()
    cache = export.ExportCache()
    first = export.export_batches(log, _at_4_2, cache)
    assert first == export.export_batches(log, _at_4_2)
    assert (cache.hits, cache.misses) == (0, 3)
    assert export.export_batches(log, _at_4_2, cache) == first
    assert (cache.hits, cache.misses) == (3, 3)
    # another epoch's batch at the same offset (a deposed leader's tail, replaced) is exported anew
    other = sparkraft_batch.encode_batch(3, 2, 1002, [encode_record(SAMPLES[1])])
    replaced = export.export_batches(other, _at_4_2, cache)
    assert list(read_batches(replaced))[0].partition_leader_epoch == 2 and cache.misses == 4


def test_the_export_cache_keeps_only_its_newest_bytes():
    cache = export.ExportCache(max_bytes=1)
    export.export_batches(_log(), _at_4_2, cache)
    assert len(cache._batches) == 1  # the newest batch, however large


def _blocked_log() -> bytes:
    """A batch holding a NoOp, 40 leader changes as one block (+ 39 continuations), and a NoOp."""
    from quorum.metadata import change_block

    changes = [pb.PartitionChangeRecord(partition_id=p, topic_id=TOPIC_ID, leader=p % 3) for p in range(40)]
    records = [pb.NoOpRecord(), *change_block.pack(changes), pb.NoOpRecord()]
    assert type(records[1]) is pb.PartitionChangeBlockRecord and len(records) == 42
    raws = [change_block.CONTINUATION_BYTES if r is change_block.CONTINUATION else encode_record(r) for r in records]
    return sparkraft_batch.encode_batch(10, 2, 5000, raws)


def test_a_change_block_goes_to_kafka_as_one_partition_change_per_offset():
    (batch,) = read_batches(export.export_batches(_blocked_log(), _at_4_2))
    assert (batch.base_offset, batch.last_offset) == (10, 51)
    read = [describe(False, r.key, r.value) for r in batch.records]
    assert [r.type for r in read] == ["NO_OP_RECORD"] + ["PARTITION_CHANGE_RECORD"] * 40 + ["NO_OP_RECORD"]
    assert [(r.data["partitionId"], r.data["leader"]) for r in read[1:41]] == [(p, p % 3) for p in range(40)]
    assert "isr" not in read[5].data  # unchanged, as Kafka leaves it out


@pytest.mark.slow
def test_kafkas_own_dump_log_reads_a_change_block_as_partition_changes(tmp_path):
    payloads, stdout = _kafka_dump_log(tmp_path, _blocked_log())
    changes = [p["data"] for p in payloads if p["type"] == "PARTITION_CHANGE_RECORD"]
    assert [(c["partitionId"], c["leader"]) for c in changes] == [(p, p % 3) for p in range(40)]
    assert "offset: 50 " in stdout and "isvalid: true" in stdout
