"""A cluster left on disk by the sparkraft before metadata.version took Kafka's numbering
(tests/fixtures/legacy_levels: written by commit 57025e2 at its own level 4, ELR on) reads as
Kafka's levels with today's code, losing nothing: the snapshot, a controller started on that log
directory, and the Delta warehouse."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ControllerProcesses, sparkraft_cmd

from delta_tables.bootstrap import image_from_cut
from quorum.snapshot.checkpoint import read_checkpoint

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "legacy_levels"
CLUSTER_ID = "LegacyLevelsFixture0Aw"
LEVELS = {"metadata.version": 23, "eligible.leader.replicas.version": 1, "sparkraft.version": 1}  # 4.0-IV1


def _check(image) -> None:
    assert dict(image.features.levels) == LEVELS
    # its brokers registered sparkraft's own range of before (1-4): read as Kafka's, 3.6-IV2 to 4.0-IV1
    assert {b.broker_id: [(f.min_version, f.max_version) for f in b.features if f.name == "metadata.version"]
            for b in image.cluster.brokers.values()} == {1: [(14, 23)], 2: [(14, 23)], 3: [(14, 23)]}
    assert sorted(image.topics.topic_names()) == ["orders", "payments"]
    assert len(image.topics.topic_by_name("orders").partitions) == 3
    assert sorted(image.cluster.brokers) == [1, 2, 3]


def test_the_snapshot_and_the_warehouse_read_as_kafkas_levels(tmp_path):
    (snapshot,) = (FIXTURE / "controller-1" / "__cluster_metadata-0").glob("*.checkpoint")
    _header, image = read_checkpoint(snapshot)
    _check(image)
    warehouse = tmp_path / "warehouse"
    shutil.copytree(FIXTURE / "warehouse", warehouse)
    from_tables, _next = image_from_cut(str(warehouse))
    _check(from_tables)


@pytest.mark.slow
def test_a_controller_started_on_the_old_log_directory_serves_kafkas_levels(tmp_path):
    (tmp_path / "quorum").mkdir()
    cp = ControllerProcesses(tmp_path / "quorum", voters=(1,))
    cp.cluster_id = CLUSTER_ID
    shutil.copytree(FIXTURE / "controller-1", cp.log_dir(1), dirs_exist_ok=True)
    cp.start()
    try:
        cp.wait_leader(timeout=60)

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(sparkraft_cmd(*args, "--bootstrap-controller", cp.bootstrap()), capture_output=True,
                                  text=True, timeout=60)

        described = cli("features", "describe", "--json")
        assert described.returncode == 0, described.stderr
        finalized = {f["feature"]: f["finalized_version_level"] for f in json.loads(described.stdout)}
        assert {k: finalized[k] for k in LEVELS} == LEVELS
        text = cli("features", "describe").stdout
        assert "FinalizedVersionLevel: 4.0-IV1" in text
        topics = cli("topics", "describe", "--topic", "orders", "--json")
        assert topics.returncode == 0 and len(json.loads(topics.stdout)["partitions"]) == 3, topics.stderr
        # the brokers registered by the sparkraft of before read no further than 4.0-IV1: Kafka's guard rail
        refused = cli("features", "upgrade", "--metadata", "4.2-IV1")
        assert refused.returncode == 1 and "only supports versions 14-23" in refused.stdout, refused.stdout
        for broker in (1, 2, 3):  # gone for good (a broker of today's code registers 3.6-IV2 to 4.4-IV2)
            assert cli("cluster", "unregister", "--id", str(broker)).returncode == 0
        upgraded = cli("features", "upgrade", "--metadata", "4.2-IV1")
        assert upgraded.returncode == 0, upgraded.stdout
        finalized = {f["feature"]: f["finalized_version_level"]
                     for f in json.loads(cli("features", "describe", "--json").stdout)}
        assert finalized["metadata.version"] == 29 and finalized["sparkraft.version"] == 1
    finally:
        cp.close()
