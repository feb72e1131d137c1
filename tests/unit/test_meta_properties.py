"""``meta.properties``, cluster ids, and formatting and checking a log directory."""
from __future__ import annotations

import base64

import pytest

from quorum.log.errors import StorageError
from quorum.log.meta_properties import (
    META_PROPERTIES_FILE,
    MetaProperties,
    check_storage,
    format_storage,
    metadata_partition_dir,
    parse_properties,
    random_cluster_id,
    read_meta_properties,
    validate_cluster_id,
    write_meta_properties,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"  # the id Kafka's quickstart uses


def test_random_cluster_ids_are_valid_and_distinct():
    ids = {random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for cid in ids:
        assert len(cid) == 22 and not cid.startswith("-")
        assert validate_cluster_id(cid) == cid
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


@pytest.mark.parametrize("bad", ["", "abc", CLUSTER[:-1], CLUSTER + "A", CLUSTER[:-2] + "==",
                                 CLUSTER[:-1] + "+", CLUSTER[:-1] + "/", " " + CLUSTER[1:], CLUSTER + "\n", None, 42])
def test_validate_cluster_id_rejects_what_is_not_a_uuid_string(bad):
    with pytest.raises(ValueError):
        validate_cluster_id(bad)


def test_validate_cluster_id_accepts_kafka_ids():
    assert validate_cluster_id(CLUSTER) == CLUSTER


def test_write_then_read(tmp_path):
    written = write_meta_properties(tmp_path, CLUSTER, 3)
    assert read_meta_properties(tmp_path) == written == MetaProperties(CLUSTER, 3)
    props = parse_properties((tmp_path / META_PROPERTIES_FILE).read_text())
    assert props == {"version": "1", "cluster.id": CLUSTER, "node.id": "3"}
    assert [p.name for p in tmp_path.iterdir()] == [META_PROPERTIES_FILE]  # no temp file left


def test_reads_kafkas_own_file(tmp_path):
    (tmp_path / META_PROPERTIES_FILE).write_text(
        "#\n#Thu Jan 04 10:00:00 UTC 2024\nnode.id=1\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\n"
        f"version = 1\ncluster.id:{CLUSTER}\n")
    assert read_meta_properties(tmp_path) == MetaProperties(CLUSTER, 1, "J8aAPcfLQt2bqs1JT_rMgQ")


def test_an_unformatted_directory_says_how_to_format_it(tmp_path):
    with pytest.raises(StorageError, match="is not formatted: no meta.properties; run `sparkraft storage format`"):
        read_meta_properties(tmp_path)
    with pytest.raises(StorageError, match="is not formatted"):
        check_storage(tmp_path / "missing", 1)


@pytest.mark.parametrize("content", [
    "version=1\nnode.id=1\n", f"version=1\ncluster.id={CLUSTER}\n", f"version=0\ncluster.id={CLUSTER}\nnode.id=1\n",
    "version=1\ncluster.id=nope\nnode.id=1\n", f"version=1\ncluster.id={CLUSTER}\nnode.id=x\n",
    f"version=1\ncluster.id={CLUSTER}\nnode.id=-2\n", f"version=1\ncluster.id={CLUSTER}\nnode.id=1_0\n", f"version=1\ncluster.id={CLUSTER}\nnode.id=1\ndirectory.id=z\n",
])
def test_a_corrupt_file_is_a_clear_error_naming_it(tmp_path, content):
    (tmp_path / META_PROPERTIES_FILE).write_text(content)
    with pytest.raises(StorageError, match="is corrupt") as e:
        read_meta_properties(tmp_path)
    assert str(tmp_path / META_PROPERTIES_FILE) in str(e.value)


def test_format_creates_the_directory_and_the_metadata_partition(tmp_path):
    log_dir = tmp_path / "data" / "c1"
    meta = format_storage(log_dir, CLUSTER, 1)
    assert (meta.cluster_id, meta.node_id) == (CLUSTER, 1)
    assert validate_cluster_id(meta.directory_id)
    assert read_meta_properties(log_dir) == meta
    assert metadata_partition_dir(log_dir).is_dir()
    assert sorted(p.name for p in log_dir.iterdir()) == ["__cluster_metadata-0", META_PROPERTIES_FILE]


def test_format_accepts_an_existing_empty_directory(tmp_path):
    format_storage(tmp_path, CLUSTER, 2)
    assert check_storage(tmp_path, 2, CLUSTER).node_id == 2


def test_format_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "something").write_text("precious")
    with pytest.raises(StorageError, match="is not empty"):
        format_storage(tmp_path, CLUSTER, 1)
    assert not (tmp_path / META_PROPERTIES_FILE).exists()
    formatted = tmp_path / "formatted"
    format_storage(formatted, CLUSTER, 1)
    with pytest.raises(StorageError, match="already formatted"):
        format_storage(formatted, random_cluster_id(), 1)
    assert read_meta_properties(formatted).cluster_id == CLUSTER


def test_format_refuses_bad_ids(tmp_path):
    with pytest.raises(ValueError):
        format_storage(tmp_path / "a", "not-a-uuid", 1)
    with pytest.raises(ValueError):
        format_storage(tmp_path / "b", CLUSTER, -1)
    assert list(tmp_path.iterdir()) == []


def test_check_storage_refuses_another_nodes_or_clusters_directory(tmp_path):
    format_storage(tmp_path, CLUSTER, 1)
    assert check_storage(tmp_path, 1) == read_meta_properties(tmp_path)
    with pytest.raises(StorageError, match="node.id=1 .* node.id=2"):
        check_storage(tmp_path, 2)
    other = random_cluster_id()
    with pytest.raises(StorageError, match=f"^INCONSISTENT_CLUSTER_ID: .*{CLUSTER}.*{other}"):
        check_storage(tmp_path, 1, other)
