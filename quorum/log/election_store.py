"""Where a node keeps its election state (Kafka's ``quorum-state`` file) between restarts.

A granted vote must survive a crash, or the node could vote twice in one epoch;
so the file store replaces the file atomically and fsyncs before ``write`` returns.
The JSON uses Kafka's field names (``QuorumStateData``, ``data_version`` 0), with
-1 for "none".
"""
from __future__ import annotations

import abc
import json
import os
from pathlib import Path

from quorum.log.durable import write_atomically
from quorum.log.election_state import ElectionState
from quorum.log.errors import StorageError

__all__ = ["ElectionState", "ElectionStore", "FileElectionStore", "MemoryElectionStore",
           "QUORUM_STATE_FILE", "StorageError"]

QUORUM_STATE_FILE = "quorum-state"  # kept in the partition directory, as Kafka does
DATA_VERSION = 0
_NONE = -1


class ElectionStore(abc.ABC):
    @abc.abstractmethod
    def read(self) -> ElectionState:
        """The last state written, or ``ElectionState.empty()`` if none ever was."""

    @abc.abstractmethod
    def write(self, state: ElectionState) -> None:
        """Persist ``state``; when this returns it survives a crash."""


class MemoryElectionStore(ElectionStore):
    """For tests and the simulation: a crash of the node keeps this object, like a disk."""

    def __init__(self, state: ElectionState | None = None) -> None:
        self._state = state or ElectionState.empty()

    def read(self) -> ElectionState:
        return self._state

    def write(self, state: ElectionState) -> None:
        self._state = state


class FileElectionStore(ElectionStore):
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def read(self) -> ElectionState:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return ElectionState.empty()
        try:
            return decode_election_state(text)
        except ValueError as e:
            raise StorageError(f"election state file {self.path} is corrupt: {e}") from e

    def write(self, state: ElectionState) -> None:
        write_atomically(self.path, encode_election_state(state))


def encode_election_state(state: ElectionState) -> bytes:
    obj = {
        "clusterId": "",
        "leaderId": _NONE if state.leader_id is None else state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": _NONE if state.voted_id is None else state.voted_id,
        "appliedOffset": 0,
        "currentVoters": None,
        "data_version": DATA_VERSION,
    }
    if state.rejoining:
        obj["rejoining"] = True  # sparkraft's own field; Kafka's readers ignore unknown fields
    return json.dumps(obj).encode()


def decode_election_state(data: bytes) -> ElectionState:
    """Parse the JSON ``encode_election_state`` writes; ValueError says what is wrong."""
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    if obj.get("data_version") != DATA_VERSION:
        raise ValueError(f"unsupported data_version {obj.get('data_version')!r}")

    def node_id(key: str) -> int | None:
        v = _int_field(obj, key)
        if v < _NONE:
            raise ValueError(f"{key} is {v}")
        return None if v == _NONE else v

    epoch = _int_field(obj, "leaderEpoch")
    if epoch < 0:
        raise ValueError(f"leaderEpoch is {epoch}")
    rejoining = obj.get("rejoining", False)
    if type(rejoining) is not bool:
        raise ValueError(f"rejoining is {rejoining!r}")
    return ElectionState(epoch, node_id("leaderId"), node_id("votedId"), rejoining)


def _int_field(obj: dict, key: str) -> int:
    v = obj.get(key)
    if type(v) is not int:
        raise ValueError(f"{key} is {v!r}, not an integer")
    return v
