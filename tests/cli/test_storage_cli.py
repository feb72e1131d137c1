"""``sparkraft storage`` through the real entry point: output, exit codes, one-line errors."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid

import pytest

from quorum.log.meta_properties import read_meta_properties

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"


def sparkraft(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sparkraft", *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def assert_one_line_error(result: subprocess.CompletedProcess, starts_with: str, code: int = 1) -> str:
    assert result.returncode == code, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith(starts_with), lines[0]
    return lines[0]


@pytest.fixture
def controller_config(tmp_path):
    def write(log_dir=None, **keys: str):
        props = {
            "process.roles": "controller",
            "node.id": "1",
            "controller.quorum.voters": VOTERS,
            "listeners": "CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(log_dir or tmp_path / "c1"),
            **keys,
        }
        path = tmp_path / "controller.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items() if v is not None))
        return path

    return write


def new_cluster_id() -> str:
    result = sparkraft("storage", "random-uuid")
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_random_uuid_prints_a_fresh_valid_cluster_id():
    first, second = new_cluster_id(), new_cluster_id()
    assert first != second
    for cluster_id in (first, second):
        assert len(cluster_id) == 22 and "=" not in cluster_id  # Kafka's base64url UUID form
        padded = cluster_id.replace("-", "+").replace("_", "/") + "=="
        assert uuid.UUID(bytes=base64.b64decode(padded))


def test_format_writes_the_directory_and_says_so(controller_config, tmp_path):
    cluster_id = new_cluster_id()
    result = sparkraft("storage", "format", "--config", str(controller_config()), "--cluster-id", cluster_id)
    assert result.returncode == 0, result.stderr
    directory_id = read_meta_properties(tmp_path / "c1").directory_id
    assert result.stdout.strip() == (f"Formatting {tmp_path / 'c1'} with cluster id {cluster_id}, node id 1 and "
                                     f"directory id {directory_id}")
    assert any((tmp_path / "c1").iterdir())


DYNAMIC = {"controller.quorum.voters": None, "controller.quorum.bootstrap.servers": "127.0.0.1:9093,127.0.0.1:9094"}


def info(config) -> dict:
    result = sparkraft("storage", "info", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_format_standalone_writes_a_bootstrap_snapshot_of_one_voter(controller_config, tmp_path):
    cluster_id = new_cluster_id()
    config = controller_config(**DYNAMIC)
    result = sparkraft("storage", "format", "--config", str(config), "--cluster-id", cluster_id, "--standalone")
    assert result.returncode == 0, result.stderr
    got = info(config)
    assert got["nodeId"] == 1 and got["clusterId"] == cluster_id and got["kraftVersion"] == 1
    assert got["bootstrapVoters"] == [{"id": 1, "directoryId": got["directoryId"],
                                       "endpoints": ["CONTROLLER://127.0.0.1:9093"]}]
    assert (tmp_path / "c1" / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint").exists()


def test_format_initial_controllers_takes_this_nodes_directory_id(controller_config, tmp_path):
    ids = [new_cluster_id() for _ in range(3)]  # directory ids are UUIDs of the same form
    config = controller_config(**DYNAMIC)
    voters = ",".join(f"{i}@127.0.0.1:{9092 + i}:{d}" for i, d in enumerate(ids, 1))
    result = sparkraft("storage", "format", "-c", str(config), "-t", new_cluster_id(), "--initial-controllers", voters)
    assert result.returncode == 0, result.stderr
    got = info(config)
    assert got["directoryId"] == ids[0] and [v["id"] for v in got["bootstrapVoters"]] == [1, 2, 3]


@pytest.mark.parametrize("keys,flags,error", [
    (DYNAMIC, ["--standalone", "--initial-controllers", "1@h:1:AAAAAAAAAAAAAAAAAAAAAQ"],
     "ERROR: sparkraft storage format: argument --initial-controllers: not allowed with argument --standalone"),
    ({}, ["--standalone"], "ERROR: this controller's configuration has controller.quorum.voters"),
    (DYNAMIC, [], "ERROR: a controller of a dynamic quorum (controller.quorum.bootstrap.servers) is formatted with"),
    (DYNAMIC, ["--initial-controllers", "2@127.0.0.1:9094:AAAAAAAAAAAAAAAAAAAAAQ"],
     "ERROR: --initial-controllers does not name this node"),
    (DYNAMIC, ["--initial-controllers", "1@127.0.0.1:9093"], "ERROR: '1@127.0.0.1:9093' is not ID@HOST:PORT:DIRECTORY_ID"),
    (DYNAMIC, ["--initial-controllers", "1@127.0.0.1:9093:not-a-uuid"], "ERROR: invalid directory id of controller 1"),
])
def test_dynamic_format_refusals_are_one_line_and_write_nothing(controller_config, tmp_path, keys, flags, error):
    result = sparkraft("storage", "format", "-c", str(controller_config(**keys)), "-t", new_cluster_id(), *flags)
    assert_one_line_error(result, error)
    assert not (tmp_path / "c1").exists()


def test_format_refuses_a_non_empty_directory(controller_config, tmp_path):
    log_dir = tmp_path / "busy"
    log_dir.mkdir()
    (log_dir / "something").write_text("x")
    result = sparkraft("storage", "format", "-c", str(controller_config(log_dir)), "-t", new_cluster_id())
    line = assert_one_line_error(result, "KAFKA_STORAGE_ERROR: ")
    assert str(log_dir) in line
    assert sorted(p.name for p in log_dir.iterdir()) == ["something"]


def test_format_twice_fails_the_second_time(controller_config):
    config, cluster_id = str(controller_config()), new_cluster_id()
    assert sparkraft("storage", "format", "-c", config, "-t", cluster_id).returncode == 0
    assert_one_line_error(sparkraft("storage", "format", "-c", config, "-t", cluster_id), "KAFKA_STORAGE_ERROR: ")


@pytest.mark.parametrize("bad_id", ["not-a-uuid", "", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"])
def test_format_rejects_a_bad_cluster_id(controller_config, tmp_path, bad_id):
    result = sparkraft("storage", "format", "--config", str(controller_config()), "--cluster-id", bad_id)
    assert_one_line_error(result, "ERROR: ")
    assert not (tmp_path / "c1").exists() or not any((tmp_path / "c1").iterdir())


def test_unknown_flag_is_a_usage_error_without_traceback(controller_config):
    result = sparkraft("storage", "format", "--config", str(controller_config()), "--cluster-id", "x", "--bogus")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "ERROR: sparkraft storage format: unrecognized arguments: --bogus (see sparkraft storage format --help)"]


def test_missing_config_file(tmp_path):
    result = sparkraft("storage", "format", "-c", str(tmp_path / "nope.properties"), "-t", new_cluster_id())
    assert "does not exist" in assert_one_line_error(result, "ERROR: ")


def test_config_without_node_id(controller_config):
    result = sparkraft("storage", "format", "-c", str(controller_config(**{"node.id": None})), "-t", new_cluster_id())
    assert "node.id is required" in assert_one_line_error(result, "ERROR: ")


def test_node_id_not_in_voters(controller_config):
    result = sparkraft("storage", "format", "-c", str(controller_config(**{"node.id": "4"})), "-t", new_cluster_id())
    line = assert_one_line_error(result, "ERROR: ")
    assert line.endswith("node.id 4 is not in controller.quorum.voters (1, 2, 3)")


def test_bad_value_names_key_and_value(controller_config):
    config = controller_config(**{"controller.quorum.fetch.timeout.ms": "soon"})
    line = assert_one_line_error(sparkraft("storage", "format", "-c", str(config), "-t", new_cluster_id()), "ERROR: ")
    assert "invalid value 'soon' for controller.quorum.fetch.timeout.ms" in line


def test_unknown_key_only_warns(controller_config):
    config = controller_config(**{"log.retention.hours": "1"})
    result = sparkraft("storage", "format", "-c", str(config), "-t", new_cluster_id())
    assert result.returncode == 0, result.stderr
    assert "unknown configuration key 'log.retention.hours'" in result.stderr


def test_debug_shows_the_traceback(tmp_path):
    result = sparkraft("--debug", "storage", "format", "-c", str(tmp_path / "nope"), "-t", new_cluster_id())
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("ERROR: ")


def test_help_for_every_level():
    for args in ([], ["storage"], ["storage", "format"], ["storage", "random-uuid"]):
        result = sparkraft(*args, "--help")
        assert result.returncode == 0 and result.stdout.startswith("usage: sparkraft"), result


def test_format_release_version_and_features_are_the_clusters_first_levels(controller_config, tmp_path):
    from quorum.metadata.features import METADATA_VERSION
    from quorum.snapshot.files import read_bootstrap_metadata

    config = controller_config()
    result = sparkraft("storage", "format", "-c", str(config), "-t", new_cluster_id(), "--release-version", "4.0-IV1",
                       "--feature", "eligible.leader.replicas.version=1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(
        "; metadata.version=23, sparkraft.version=1, eligible.leader.replicas.version=1"), result.stdout
    records = read_bootstrap_metadata(tmp_path / "c1")
    assert [(r.name, r.feature_level) for r in records] == [
        (METADATA_VERSION, 23), ("eligible.leader.replicas.version", 1), ("sparkraft.version", 1)]


@pytest.mark.parametrize("flags, error", [
    (["--release-version", "3.9", "--feature", "eligible.leader.replicas.version=1"], "INVALID_UPDATE_VERSION: "),
    (["--release-version", "3.5-IV2"], "INVALID_UPDATE_VERSION: "),
    (["--release-version", "9.9"], "ERROR: "),
    (["--feature", "no.such.feature=1"], "INVALID_UPDATE_VERSION: "),
    (["--feature", "kraft.version=1"], "ERROR: "),
    (["--feature", "eligible.leader.replicas.version"], "ERROR: "),
])
def test_format_refuses_bad_levels_and_writes_nothing(controller_config, tmp_path, flags, error):
    result = sparkraft("storage", "format", "-c", str(controller_config()), "-t", new_cluster_id(), *flags)
    assert_one_line_error(result, error)
    assert not (tmp_path / "c1").exists() or not any((tmp_path / "c1").iterdir())
