"""The quorum's own state as control records carry it: the voter set (KRAFT_VOTERS) and kraft.version
(KRAFT_VERSION), in a batch of the log or in a snapshot's first batch.

A snapshot starts with a control batch (quorum/log/batch.py) whose records may include the
KRAFT_VERSION and KRAFT_VOTERS in force at its end, as Kafka's snapshots do; the rest of it is the
state machine's business. The Raft core reads it when the log starts from a snapshot
(quorum/raft/voter_history.py), and the materialiser when a snapshot stands for records the log no
longer holds (streaming/materializer.py).
"""
from __future__ import annotations

from typing import Iterator, Optional

from quorum.log import control_records
from quorum.log.batch import ATTR_CONTROL, HEADER, HEADER_SIZE, MAGIC, CorruptBatchError, decode
from quorum.log.voter_set import VoterSet

FIRST_BATCH_LIMIT = 1 << 20  # at most this many bytes of a snapshot's first batch are read


def raft_state_of(snapshot_data: bytes) -> tuple[Optional[VoterSet], int]:
    """(voters, kraft.version) that a snapshot's bytes (its first batch at least) carry; (None, 0)
    if they carry none (a static quorum's snapshot)."""
    size = first_batch_size(snapshot_data)
    if size is None or len(snapshot_data) < size:
        return None, 0
    try:
        first = decode(snapshot_data[:size])[0]
    except (CorruptBatchError, IndexError, TypeError):
        return None, 0
    voters, level = None, 0
    try:
        for _i, found_voters, found_level in raft_state_in(first.records):
            voters = found_voters if found_voters is not None else voters
            level = found_level if found_level is not None else level
    except (ValueError, TypeError, AttributeError):
        return None, 0  # not ours: a snapshot whose first batch is something else
    return voters, level


def first_batch_size(head: bytes) -> Optional[int]:
    """The size of the control batch ``head`` starts with, None if it does not start with one (or
    one larger than FIRST_BATCH_LIMIT)."""
    if len(head) < HEADER_SIZE:
        return None
    _crc, length, magic, attrs, *_ = HEADER.unpack_from(head)
    if magic != MAGIC or not attrs & ATTR_CONTROL or not 0 < length + 8 <= FIRST_BATCH_LIMIT:
        return None
    return length + 8


def raft_state_in(records) -> Iterator[tuple[int, Optional[VoterSet], Optional[int]]]:
    """(index, voter set, None) of each KRAFT_VOTERS and (index, None, level) of each KRAFT_VERSION
    record among control ``records``; ValueError if one does not decode."""
    for i, raw in enumerate(records):
        rec = control_records.decode_control(raw)
        if rec.type == control_records.KRAFT_VOTERS:
            yield i, VoterSet.from_control(rec.data), None
        elif rec.type == control_records.KRAFT_VERSION:
            yield i, None, int(rec.data.get("kraft_version", 0))
