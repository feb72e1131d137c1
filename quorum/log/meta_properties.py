"""``meta.properties``: which cluster and node a log directory belongs to (Kafka's, version 1).

``sparkraft storage format`` writes it once; every start checks it, so a node never
joins the wrong cluster with its log or serves another node's log as its own.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from quorum.errors import Errors
from quorum.log.durable import fsync_directory, write_atomically
from quorum.log.election_state import ElectionState
from quorum.log.election_store import QUORUM_STATE_FILE, FileElectionStore
from quorum.log.errors import StorageError
from quorum.properties import parse_properties
from quorum.uuids import random_uuid, validate_uuid

META_PROPERTIES_FILE = "meta.properties"
METADATA_PARTITION_DIR = "__cluster_metadata-0"
VERSION = 1
_INT = re.compile(r"-?[0-9]+")


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: Optional[str] = None
    version: int = VERSION


def metadata_partition_dir(log_dir: str | os.PathLike) -> Path:
    """Where the metadata log's segments, snapshots and ``quorum-state`` live."""
    return Path(log_dir) / METADATA_PARTITION_DIR


# -- cluster ids ------------------------------------------------------------------------------
def random_cluster_id() -> str:
    """What ``sparkraft storage random-uuid`` prints."""
    return random_uuid()


def validate_cluster_id(cluster_id: str) -> str:
    """Return ``cluster_id`` if it is a UUID string (22 base64url characters, 16 bytes), else raise ValueError."""
    return validate_uuid(cluster_id, "cluster id")


# -- the file ---------------------------------------------------------------------------------
def write_meta_properties(log_dir: str | os.PathLike, cluster_id: str, node_id: int,
                          directory_id: Optional[str] = None) -> MetaProperties:
    """Write ``meta.properties`` into ``log_dir`` atomically."""
    if directory_id is not None:
        validate_uuid(directory_id, "directory id")
    meta = MetaProperties(validate_cluster_id(cluster_id), _check_node_id(node_id), directory_id)
    lines = ["#sparkraft meta.properties: written by `sparkraft storage format`",
             f"version={meta.version}", f"cluster.id={meta.cluster_id}", f"node.id={meta.node_id}"]
    if directory_id is not None:
        lines.append(f"directory.id={directory_id}")
    write_atomically(Path(log_dir) / META_PROPERTIES_FILE, ("\n".join(lines) + "\n").encode())
    return meta


def read_meta_properties(log_dir: str | os.PathLike) -> MetaProperties:
    path = Path(log_dir) / META_PROPERTIES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StorageError(f"{log_dir} is not formatted: no {META_PROPERTIES_FILE}; "
                           f"run `sparkraft storage format`") from None
    except (OSError, UnicodeDecodeError) as e:
        raise StorageError(f"cannot read {path}: {e}") from e
    try:
        props = parse_properties(text)
        version = _int(props, "version")
        if version != VERSION:
            raise ValueError(f"unsupported version {version}")
        return MetaProperties(validate_cluster_id(_required(props, "cluster.id")),
                              _check_node_id(_int(props, "node.id")),
                              _optional_uuid(props, "directory.id"), version)
    except ValueError as e:
        raise StorageError(f"{path} is corrupt: {e}") from e


def _required(props: dict[str, str], key: str) -> str:
    if key not in props:
        raise ValueError(f"missing {key}")
    return props[key]


def _int(props: dict[str, str], key: str) -> int:
    v = _required(props, key)
    if not _INT.fullmatch(v):
        raise ValueError(f"{key}={v!r} is not an integer")
    return int(v)


def _optional_uuid(props: dict[str, str], key: str) -> Optional[str]:
    return validate_uuid(props[key], key) if key in props else None


def _check_node_id(node_id: int) -> int:
    if type(node_id) is not int or node_id < 0:
        raise ValueError(f"invalid node id {node_id!r}: expected a non-negative integer")
    return node_id


# -- formatting and checking a log directory -------------------------------------------------
def format_storage(log_dir: str | os.PathLike, cluster_id: str, node_id: int,
                   rejoin: bool = False, directory_id: Optional[str] = None) -> MetaProperties:
    """Make ``log_dir`` a formatted, empty log directory for ``node_id`` in ``cluster_id``.

    Refuses a directory that exists and holds anything: formatting over a log would
    throw away what this node promised to the quorum. ``rejoin`` marks a replaced
    disk: the election state starts with ``rejoining`` set, so the node does not
    vote before it has caught up (see ``RaftCore``). ``directory_id`` is this replica's id (random
    unless ``--initial-controllers`` named it).
    """
    validate_cluster_id(cluster_id)
    _check_node_id(node_id)
    log_dir = Path(log_dir)
    if log_dir.exists():
        if not log_dir.is_dir():
            raise StorageError(f"{log_dir} exists and is not a directory")
        if any(log_dir.iterdir()):
            what = "is already formatted" if (log_dir / META_PROPERTIES_FILE).exists() else "is not empty"
            raise StorageError(f"log directory {log_dir} {what}; refusing to format it")
    log_dir.mkdir(parents=True, exist_ok=True)
    fsync_directory(log_dir.parent)
    meta = write_meta_properties(log_dir, cluster_id, node_id, directory_id=directory_id or random_uuid())
    metadata_partition_dir(log_dir).mkdir()
    if rejoin:
        FileElectionStore(metadata_partition_dir(log_dir) / QUORUM_STATE_FILE).write(ElectionState(0, rejoining=True))
    fsync_directory(log_dir)
    return meta


def check_storage(log_dir: str | os.PathLike, expected_node_id: int,
                  expected_cluster_id: Optional[str] = None) -> MetaProperties:
    """The directory's ``meta.properties``, if it says this node (and cluster); else StorageError."""
    meta = read_meta_properties(log_dir)
    if meta.node_id != expected_node_id:
        raise StorageError(f"{Path(log_dir) / META_PROPERTIES_FILE} has node.id={meta.node_id} but this "
                           f"node is configured with node.id={expected_node_id}")
    if expected_cluster_id is not None and meta.cluster_id != expected_cluster_id:
        raise StorageError(f"{Path(log_dir) / META_PROPERTIES_FILE} has cluster.id={meta.cluster_id} "
                           f"but the cluster's id is {expected_cluster_id}",
                           Errors.INCONSISTENT_CLUSTER_ID)
    return meta
