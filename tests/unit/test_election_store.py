"""The election state (``quorum-state``) survives restarts, is replaced atomically and never misread."""
from __future__ import annotations

import json

import pytest

from quorum.log.election_store import (
    QUORUM_STATE_FILE,
    ElectionState,
    FileElectionStore,
    MemoryElectionStore,
    StorageError,
)


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path):
    return MemoryElectionStore() if request.param == "memory" else FileElectionStore(tmp_path / QUORUM_STATE_FILE)


def test_a_fresh_store_reads_the_empty_state(store):
    assert store.read() == ElectionState.empty() == ElectionState(0, None, None)


@pytest.mark.parametrize("state", [ElectionState(3, None, 2), ElectionState(4, 1, None),
                                   ElectionState(5, 2, 2), ElectionState(7, 0, 0)])
def test_write_then_read(store, state):
    store.write(ElectionState(1, None, None))
    store.write(state)
    assert store.read() == state


def test_the_file_survives_a_new_store_and_uses_kafkas_fields(tmp_path):
    path = tmp_path / QUORUM_STATE_FILE
    FileElectionStore(path).write(ElectionState(6, 3, 3))
    assert FileElectionStore(path).read() == ElectionState(6, 3, 3)
    obj = json.loads(path.read_text())
    assert obj["leaderEpoch"] == 6 and obj["leaderId"] == 3 and obj["votedId"] == 3
    assert obj["data_version"] == 0
    FileElectionStore(path).write(ElectionState(7, None, None))
    obj = json.loads(path.read_text())
    assert (obj["leaderId"], obj["votedId"]) == (-1, -1)


def test_an_atomic_write_leaves_no_temp_file(tmp_path):
    store = FileElectionStore(tmp_path / QUORUM_STATE_FILE)
    for epoch in range(5):
        store.write(ElectionState(epoch, None, 1))
    assert [p.name for p in tmp_path.iterdir()] == [QUORUM_STATE_FILE]


def test_a_failed_write_leaves_no_temp_file(tmp_path):
    target = tmp_path / QUORUM_STATE_FILE
    target.mkdir()  # a non-empty directory in the way: the rename fails
    (target / "x").touch()
    with pytest.raises(OSError):
        FileElectionStore(target).write(ElectionState(9, None, None))
    assert [p.name for p in tmp_path.iterdir()] == [QUORUM_STATE_FILE]


@pytest.mark.parametrize("content", [
    b"", b"not json", b"\xff\xfe", b"[1, 2]", b'{"leaderEpoch": 1}',
    b'{"leaderEpoch": 1, "leaderId": -1, "votedId": -1, "data_version": 7}',
    b'{"leaderEpoch": -1, "leaderId": -1, "votedId": -1, "data_version": 0}',
    b'{"leaderEpoch": "3", "leaderId": -1, "votedId": -1, "data_version": 0}',
    b'{"leaderEpoch": 3, "leaderId": -5, "votedId": -1, "data_version": 0}',
    b'{"leaderEpoch": 3, "leaderId": true, "votedId": -1, "data_version": 0}',
])
def test_a_corrupt_file_is_a_clear_error_naming_it(tmp_path, content):
    path = tmp_path / QUORUM_STATE_FILE
    path.write_bytes(content)
    with pytest.raises(StorageError, match="KAFKA_STORAGE_ERROR") as e:
        FileElectionStore(path).read()
    assert str(path) in str(e.value)
