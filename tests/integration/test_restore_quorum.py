"""Restore a quorum from the lakehouse, with real processes: three controllers hold a cluster's
metadata (brokers, topics, configs, ACLs, quotas, features, producer ids), the materialiser writes
it to a warehouse, and the whole quorum is SIGKILLed. Three new controllers formatted with
``storage format --from-warehouse --as-of-offset N`` start from that cut: the snapshot their leader
serves equals, field by field, the original log replayed to the cut; their log goes on from the
cut's next offset; they serve and accept writes."""
from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sparkraft_cmd, wait_for

from delta_tables.cut import latest_cut
from delta_tables.writer import DeltaRsWriter
from quorum.controller import api
from quorum.errors import Errors
from quorum.log import control_records
from quorum.metadata.loader import MetadataLoader
from quorum.metadata.records import decode_record
from quorum.rpc.controller_client import ControllerClient
from quorum.rpc.log_reader import MetadataLogReader, SnapshotRequired
from quorum.snapshot.checkpoint import decode_checkpoint
from quorum.uuids import random_uuid
from streaming.materializer import Materializer
from streaming.source import record_row

pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).parent.parent / "streaming"))
from test_materializer import as_batch  # noqa: E402


def original_workload(client: ControllerClient, cluster_id: str) -> int:
    """Something of every kind the image holds; the offset the last write was committed at."""
    for b in (101, 102, 103):
        reply, offset = client.call_committed(api.RegisterBrokerRequest(b, cluster_id, random_uuid(), (
            api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + b),), f"rack-{b % 2}"))
        client.call(api.BrokerHeartbeatRequest(b, reply.broker_epoch, offset))  # caught up: unfenced
    created = client.call(api.CreateTopicsRequest((
        api.CreatableTopic("orders", 6, 3, configs=(("retention.ms", "1000"),)), api.CreatableTopic("payments", 3, 2))))
    assert all(t.error is Errors.NONE for t in created), created
    client.call(api.CreateAclsRequest((api.AclBinding("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ",
                                                      "ALLOW"),)))
    client.call(api.AlterClientQuotasRequest((api.ClientQuotaAlteration((("user", "alice"),),
                                                                        (("producer_byte_rate", 1024.0),)),)))
    return client.call_committed(api.UpdateFeaturesRequest((("eligible.leader.replicas.version", 1),)))[1]


def log_until(reader: MetadataLogReader, end: int) -> list:
    return list(reader.follow(0, until=end, wait_ms=100))


def image_of(records, through: int):
    """The original log replayed to ``through`` (the controllers' own image there)."""
    loader = MetadataLoader()
    for r in records:
        if r.offset > through:
            break
        if not r.control:
            loader.replay(decode_record(r.data), r.offset, r.epoch)
    return loader.flush()


def test_a_quorum_restored_from_a_cut_holds_exactly_its_image_and_goes_on(controller_processes, tmp_path):
    original = controller_processes()
    original.format()
    original.start()
    original.wait_leader(timeout=30)
    with ControllerClient(original.bootstrap(), timeout=30) as client:
        committed = original_workload(client, original.cluster_id)
    warehouse = str(tmp_path / "wh")
    with MetadataLogReader(original.bootstrap()) as reader:
        records = log_until(reader, committed + 1)
    Materializer(DeltaRsWriter(warehouse)).process(
        as_batch([record_row(r.offset, r.epoch, r.append_time_ms, r.data, r.control) for r in records]))
    cut = latest_cut(warehouse)
    for i in original.voters:  # the whole quorum is lost
        original.kill(i)

    restored = controller_processes()
    for i in restored.voters:
        result = subprocess.run(sparkraft_cmd("storage", "format", "--config", str(restored.config(i)),
                                              "--cluster-id", restored.cluster_id, "--from-warehouse", warehouse,
                                              "--as-of-offset", str(cut.offset)),
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert f"restored from the cut at offset {cut.offset}" in result.stdout
    restored.start()
    restored.wait_leader(timeout=30)

    expected = image_of(records, cut.offset)
    with MetadataLogReader(restored.bootstrap()) as reader:
        with pytest.raises(SnapshotRequired) as below:
            reader.read(0)
        assert below.value.snapshot_id.offset == cut.offset + 1
        _header, served = decode_checkpoint(reader.download_snapshot(below.value.snapshot_id), "restored")
        first = next(iter(reader.follow(cut.offset + 1, until=cut.offset + 2, wait_ms=100)))
    for f in dataclasses.fields(expected):
        assert getattr(served, f.name) == getattr(expected, f.name), f.name
    assert served.client_quotas.entities and served.acls.acls and served.features.levels
    assert first.offset == cut.offset + 1 and first.control  # the new leader's LeaderChange, right after the cut
    assert control_records.decode_control(first.data).type == control_records.LEADER_CHANGE

    with ControllerClient(restored.bootstrap(), timeout=30) as client:
        assert set(client.list_topics()) == {"orders", "payments"}
        client.call(api.CreateTopicsRequest((api.CreatableTopic("after-restore", 2, 2),)))
        assert "after-restore" in client.list_topics()
    for i in restored.voters:
        restored.send(i, signal.SIGTERM)
    wait_for(lambda: not any(restored.alive(i) for i in restored.voters), 30, "the restored controllers to stop")
