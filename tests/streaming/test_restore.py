"""``storage format --from-warehouse``: a new controller's first snapshot is the image of a cut of a
warehouse, equal field by field to the original controller's image at that cut (through the real
entry point, read back from the snapshot file it wrote); bad input is one line and writes nothing.
The restored quorum serving is tests/integration/test_restore_quorum.py."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from test_materializer import as_batch, busy_controller, log_rows

from delta_tables.writer import DeltaRsWriter
from quorum.controller import api
from quorum.log.meta_properties import metadata_partition_dir
from quorum.security.scram import MECHANISMS
from quorum.snapshot.files import SnapshotId, list_snapshots, load_latest
from sparkraft.commands.scram_specs import upsertion
from streaming.materializer import Materializer

sys.path.insert(0, str(Path(__file__).parent.parent / "cli"))
from test_storage_cli import new_cluster_id, sparkraft  # noqa: E402


@pytest.fixture
def controller_config(tmp_path):
    """Controller 1's properties file, its metadata.log.dir ``log_dir``."""
    def write(log_dir: Path) -> Path:
        path = tmp_path / f"{log_dir.name}.properties"
        path.write_text(f"process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                        f"listeners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n"
                        f"metadata.log.dir={log_dir}\n")
        return path
    return write


def refused(result: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (after its progress line, if it got that far)."""
    assert result.returncode == 1 and "Traceback" not in result.stderr, result
    lines = [line for line in result.stderr.splitlines() if not line.startswith("Reading the newest")]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), result.stderr
    return lines[0]


def assert_equal_field_by_field(restored, original):
    for f in dataclasses.fields(original):
        assert getattr(restored, f.name) == getattr(original, f.name), f.name


@pytest.fixture
def warehouse_of_two_cuts(tmp_path):
    """A warehouse with a cut in the middle of a busy controller's history and one at its end; the
    controller's image at each."""
    c = busy_controller()
    c.request(api.AlterUserScramCredentialsRequest(upsertions=(
        upsertion(MECHANISMS["SCRAM-SHA-256"], "alice", {"password": "alice-secret"}),)))
    first_rows, first_image = log_rows(c), c.core.image
    c.request(api.CreateTopicsRequest((api.CreatableTopic("later", 4, 2),)))
    c.request(api.UpdateFeaturesRequest((("eligible.leader.replicas.version", 1),)))
    m = Materializer(DeltaRsWriter(tmp_path / "wh"))
    m.process(as_batch(first_rows))
    m.process(as_batch(log_rows(c, start=len(first_rows))))
    return tmp_path / "wh", (len(first_rows) - 1, first_image), (c.end_offset - 1, c.core.image)


def test_a_restored_snapshot_equals_the_original_image_at_the_cut(tmp_path, controller_config, warehouse_of_two_cuts):
    warehouse, (first_offset, first_image), (last_offset, last_image) = warehouse_of_two_cuts
    for as_of, (offset, image) in ((None, (last_offset, last_image)), (last_offset - 1, (first_offset, first_image))):
        log_dir = tmp_path / f"restored-{offset}"
        config = controller_config(log_dir=log_dir)
        cluster_id = new_cluster_id()
        result = sparkraft("storage", "format", "--config", str(config), "--cluster-id", cluster_id,
                           "--from-warehouse", str(warehouse), *(["--as-of-offset", str(as_of)] if as_of else []))
        assert result.returncode == 0, result.stderr
        assert f"restored from the cut at offset {offset}" in result.stdout and "verified" in result.stdout
        assert "SCRAM users alice are not restored" in result.stderr  # the warehouse has no keys
        directory = metadata_partition_dir(log_dir)
        assert list_snapshots(directory) == [SnapshotId(offset + 1, 0)]
        snapshot, restored = load_latest(directory, cluster_id)
        assert restored.scram.users() == {}
        original = dataclasses.replace(image, scram=restored.scram)  # everything but the credentials
        assert_equal_field_by_field(restored, original)
        assert restored.acls.acls and restored.client_quotas.entities and restored.producer_ids.next_producer_id > 0
    assert "later" not in {t.name for t in first_image.topics.by_id.values()}


def test_scram_users_given_again_are_restored_with_the_cut(tmp_path, controller_config, warehouse_of_two_cuts):
    warehouse, _first, (offset, image) = warehouse_of_two_cuts
    config = controller_config(log_dir=tmp_path / "c1")
    cluster_id = new_cluster_id()
    result = sparkraft("storage", "format", "--config", str(config), "--cluster-id", cluster_id,
                       "--from-warehouse", str(warehouse), "--add-scram", "SCRAM-SHA-512=[name=alice,password=new]")
    assert result.returncode == 0, result.stderr
    assert "not restored" not in result.stderr and "1 SCRAM users" in result.stdout
    _snapshot, restored = load_latest(metadata_partition_dir(tmp_path / "c1"), cluster_id)
    assert set(restored.scram.users()) == {"alice"}
    assert restored.topics == image.topics and restored.features == image.features
    assert not (tmp_path / "c1" / "bootstrap.checkpoint").exists()  # the cut has its features


def test_bad_restores_are_one_line_and_write_nothing(tmp_path, controller_config, warehouse_of_two_cuts):
    warehouse, (first_offset, _image), _last = warehouse_of_two_cuts
    log_dir = tmp_path / "c1"
    config = controller_config(log_dir=log_dir)
    cluster_id = new_cluster_id()
    cases = [
        (["--from-warehouse", str(tmp_path / "nowhere")], "is not a Delta table"),
        (["--from-warehouse", str(warehouse), "--as-of-offset", str(first_offset - 1)], "no consistent cut at or below"),
        (["--from-warehouse", str(warehouse), "--release-version", "3"], "do not go with it"),
        (["--as-of-offset", "5"], "goes with --from-warehouse"),
    ]
    for flags, why in cases:
        line = refused(sparkraft("storage", "format", "--config", str(config), "--cluster-id", cluster_id, *flags))
        assert why in line and not log_dir.exists(), line
    broker = tmp_path / "broker.properties"
    broker.write_text(f"process.roles=broker\nnode.id=101\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
                      f"listeners=PLAINTEXT://127.0.0.1:9092\ncontroller.listener.names=CONTROLLER\n"
                      f"metadata.log.dir={tmp_path / 'b'}\n")
    assert "for controllers" in refused(sparkraft("storage", "format", "--config", str(broker), "--cluster-id",
                                                  cluster_id, "--from-warehouse", str(warehouse)))
    assert not (tmp_path / "b").exists()
