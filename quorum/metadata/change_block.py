"""Many partition changes as one record: how the controller writes a balance or a shutdown.

A preferred-leader balance after a rolling restart at 2M partitions is about a million
PartitionChangeRecords. One protobuf message per change, encoded once and decoded and merged in
Python by every controller, broker and reader, is what made it take 100 s. A
``PartitionChangeBlockRecord`` holds up to :data:`MAX_ROWS` of them in columns (packed ints that
protobuf parses at C speed; the few distinct broker lists stored once) and its replay builds the
new partitions in one pass (:func:`replay`).

Offsets stay what they would be with one record per change: a block of n rows is followed in its
batch by n - 1 ``PartitionChangeBlockContinuationRecord``\\ s (4 bytes each), and row i is the
change at the block's offset + i. So a Kafka broker fetching the log, ``dump-log``, the
lakehouse's tables and anything else that must see Kafka's per-partition records get exactly those,
at the offsets Kafka would give them (:func:`unblocked`). Blocks need ``sparkraft.version`` 1
(quorum/metadata/versions.py): a reader from before would skip them.

The image after a block is the image after its rows one by one as PartitionChangeRecords; the
simulation and tests/unit/metadata/test_change_block.py check it for random blocks.
"""
from __future__ import annotations

from itertools import chain, repeat
from typing import Optional, Sequence

from google.protobuf.message import Message

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.errors import ReplayError
from quorum.metadata.records import HEADER, MetadataRecord, RecordType, decode_record, encode_record
from quorum.metadata.topics import PartitionRegistration, TopicsDelta, broker_list

PACK_MIN_ROWS = 32  # a shorter run of changes stays PartitionChangeRecords (the controller's default)
MAX_ROWS = 1000  # rows of one block: it and its continuations must share a batch
UNCHANGED_LEADER = -2  # Kafka's PartitionChangeRecord default: the leader stays
UNCHANGED = -1  # a list column's "this row leaves the list as it is"

# the broker list columns, each named as the PartitionChangeRecord field it holds, in the order
# PartitionRegistration holds them
LIST_COLUMNS = ("replicas", "isr", "removing_replicas", "adding_replicas", "eligible_leader_replicas",
                "last_known_elr")

CONTINUATION = pb.PartitionChangeBlockContinuationRecord()  # shared: it has no fields
CONTINUATION_BYTES = HEADER.pack(RecordType.PARTITION_CHANGE_BLOCK_CONTINUATION_RECORD, 0)
BLOCK_PREFIX = HEADER.pack(RecordType.PARTITION_CHANGE_BLOCK_RECORD, 0)[:2]  # its type id
_new_registration = tuple.__new__  # PartitionRegistration is a NamedTuple: build it without __new__'s overhead


# -- writing ----------------------------------------------------------------------------------
class ChangeColumns:
    """Partition changes that set only a new leader and/or a new ISR, gathered by topic as columns:
    what nearly every change of a balance (the preferred replica leads) and of a controlled shutdown
    or a fencing (the broker leaves the ISR, its leaderships move) is. Among the records a handler
    returns it stands for its changes, in order: :func:`pack` writes it as blocks straight from the
    columns (no PartitionChangeRecord per change to build and take apart again), :func:`expanded`
    as the PartitionChangeRecords where blocks are not written. A row's leader is
    :data:`UNCHANGED_LEADER` and its ISR None where the change leaves them as they are."""

    __slots__ = ("_topics",)

    def __init__(self) -> None:
        # (topic id, partition ids, leaders, ISRs as broker tuples or None)
        self._topics: list[tuple[str, list[int], list[int], list[Optional[tuple[int, ...]]]]] = []

    def topic(self, topic_id: str) -> tuple[list[int], list[int], list[Optional[tuple[int, ...]]]]:
        """The partition ids, leaders and ISRs lists of ``topic_id``'s run at the end, to append to
        (one entry each per change)."""
        topics = self._topics
        if topics and topics[-1][0] == topic_id:
            return topics[-1][1:]
        run: tuple = (topic_id, [], [], [])
        topics.append(run)
        return run[1:]

    def __len__(self) -> int:
        return sum(len(pids) for _, pids, _, _ in self._topics)

    def leader_masks(self) -> dict[str, int]:
        """Topic id -> the mask of its partition ids whose change sets a leader."""
        out: dict[str, int] = {}
        for tid, pids, leaders, _ in self._topics:
            mask = out.get(tid, 0)
            for pid, leader in zip(pids, leaders):
                if leader != UNCHANGED_LEADER:
                    mask |= 1 << pid
            if mask:
                out[tid] = mask
        return out

    def changes(self) -> list[pb.PartitionChangeRecord]:
        new = pb.PartitionChangeRecord
        out = []
        for tid, pids, leaders, isrs in self._topics:
            for pid, leader, isr in zip(pids, leaders, isrs):
                c = new(partition_id=pid, topic_id=tid)
                if leader != UNCHANGED_LEADER:
                    c.leader = leader
                if isr is not None:
                    c.isr.SetInParent()  # present even when empty: "now empty"
                    c.isr.ids.extend(isr)
                out.append(c)
        return out

    def blocks(self, max_rows: int = MAX_ROWS) -> list[Message]:
        """The blocks of at most ``max_rows`` rows (each followed by its continuations) that
        :func:`pack` makes of :meth:`changes`."""
        max_rows = max(1, max_rows)
        runs = [(tid, len(pids)) for tid, pids, _, _ in self._topics if pids]
        pids = list(chain.from_iterable(t[1] for t in self._topics))
        leaders = list(chain.from_iterable(t[2] for t in self._topics))
        isrs = list(chain.from_iterable(t[3] for t in self._topics))
        out: list[Message] = []
        run, used = 0, 0  # the topic run the next row is in, and its rows already in earlier blocks
        for start in range(0, len(pids), max_rows):
            end = min(len(pids), start + max_rows)
            topic_ids, topic_rows, row = [], [], start
            while row < end:
                tid, n = runs[run]
                take = min(n - used, end - row)
                topic_ids.append(tid)
                topic_rows.append(take)
                row, used = row + take, used + take
                if used == n:
                    run, used = run + 1, 0
            block = pb.PartitionChangeBlockRecord(topic_ids=topic_ids, topic_rows=topic_rows,
                                                  partition_ids=pids[start:end])
            block_leaders = leaders[start:end]
            if block_leaders.count(UNCHANGED_LEADER) != len(block_leaders):
                block.leaders.extend(block_leaders)
            block_isrs = isrs[start:end]
            if block_isrs.count(None) != len(block_isrs):
                lists: dict[tuple[int, ...], int] = {}  # each distinct ISR once, in order of first use
                column = [UNCHANGED if isr is None else lists.setdefault(isr, len(lists)) for isr in block_isrs]
                block.list_lengths.extend([len(ids) for ids in lists])
                block.list_ids.extend([b for ids in lists for b in ids])
                block.isr.extend(column)
            out.append(block)
            out.extend([CONTINUATION] * (end - start - 1))
        return out


def rows(records: Sequence[Message]) -> int:
    """The records ``records`` stands for (a ChangeColumns counts its changes)."""
    return len(records) + sum(len(r) - 1 for r in records if type(r) is ChangeColumns)


def expanded(records: Sequence[Message]) -> Sequence[Message]:
    """``records`` with each ChangeColumns as its PartitionChangeRecords (``records`` itself if none)."""
    if not any(type(r) is ChangeColumns for r in records):
        return records
    out: list[Message] = []
    for r in records:
        if type(r) is ChangeColumns:
            out.extend(r.changes())
        else:
            out.append(r)
    return out


def pack(records: Sequence[Message], min_rows: int = PACK_MIN_ROWS, max_rows: int = MAX_ROWS) -> list[Message]:
    """``records`` with every run of at least ``min_rows`` PartitionChangeRecords, and every
    ChangeColumns of at least ``min_rows`` changes, as blocks of at most ``max_rows`` rows, each
    followed by its continuations (same offsets)."""
    out: list[Message] = []
    run: list[pb.PartitionChangeRecord] = []
    for r in records:
        if type(r) is pb.PartitionChangeRecord:
            run.append(r)
            continue
        _pack_run(run, out, min_rows, max_rows)
        run = []
        if type(r) is ChangeColumns:
            out.extend(r.blocks(max_rows) if len(r) >= max(1, min_rows) else r.changes())
        else:
            out.append(r)
    _pack_run(run, out, min_rows, max_rows)
    return out


def _pack_run(run: list[pb.PartitionChangeRecord], out: list[Message], min_rows: int, max_rows: int) -> None:
    if len(run) < max(1, min_rows):
        out.extend(run)
        return
    for start in range(0, len(run), max(1, max_rows)):
        rows = run[start:start + max(1, max_rows)]
        out.append(block_of(rows))
        out.extend([CONTINUATION] * (len(rows) - 1))


def block_of(changes: Sequence[pb.PartitionChangeRecord]) -> pb.PartitionChangeBlockRecord:
    """One block holding ``changes`` in order (row i is ``changes[i]``)."""
    rows = len(changes)
    lists: dict[tuple[int, ...], int] = {}
    topic_ids: list[str] = []
    topic_rows: list[int] = []
    pids = [0] * rows
    leaders = [UNCHANGED_LEADER] * rows
    columns: dict[str, list[int]] = {}  # only the columns some row sets
    for r, c in enumerate(changes):
        # ListFields: the fields present, in one call (a change sets few: an election only its leader)
        for field, value in c.ListFields():
            name = field.name
            if name == "topic_id":
                if topic_ids and topic_ids[-1] == value:
                    topic_rows[-1] += 1
                else:
                    topic_ids.append(value)
                    topic_rows.append(1)
            elif name == "partition_id":
                pids[r] = value
            elif name == "leader":
                leaders[r] = value
            else:
                ids = tuple(value.ids)
                index = lists.get(ids)
                if index is None:
                    index = lists[ids] = len(lists)
                column = columns.get(name)
                if column is None:
                    column = columns[name] = [UNCHANGED] * rows
                column[r] = index
    if sum(topic_rows) != rows:  # a change without a topic id (never written by the controller)
        raise ValueError("every partition change of a block needs its topic id")
    block = pb.PartitionChangeBlockRecord(topic_ids=topic_ids, topic_rows=topic_rows, partition_ids=pids,
                                          list_lengths=[len(ids) for ids in lists],
                                          list_ids=[b for ids in lists for b in ids])
    if any(leader != UNCHANGED_LEADER for leader in leaders):
        block.leaders.extend(leaders)
    for name, column in columns.items():
        getattr(block, name).extend(column)
    return block


# -- reading ----------------------------------------------------------------------------------
class Columns:
    """A block's columns as Python lists, checked: a column is one entry per row, or None when no
    row changes its field; list columns hold broker lists (tuples) or None for "unchanged"."""

    __slots__ = ("segments", "partition_ids", "leaders", "lists")

    def __init__(self, block: pb.PartitionChangeBlockRecord) -> None:
        rows = len(block.partition_ids)
        if len(block.topic_ids) != len(block.topic_rows) or sum(block.topic_rows) != rows or \
                any(n <= 0 for n in block.topic_rows):
            raise ReplayError(f"a partition change block of {rows} rows has topic runs "
                              f"{list(block.topic_rows)} for {len(block.topic_ids)} topics")
        known: list[tuple[int, ...]] = []
        ids, pos = list(block.list_ids), 0
        for n in block.list_lengths:
            if n < 0 or pos + n > len(ids):
                raise ReplayError(f"a partition change block's broker lists run past its {len(ids)} ids")
            known.append(broker_list(ids[pos:pos + n]))
            pos += n
        if pos != len(ids):
            raise ReplayError(f"a partition change block has {len(ids) - pos} broker ids in no list")
        self.segments = list(zip(block.topic_ids, block.topic_rows))
        self.partition_ids = list(block.partition_ids)
        self.leaders = _column(block.leaders, rows, "leaders")
        if self.leaders is not None and any(leader < UNCHANGED_LEADER for leader in self.leaders):
            raise ReplayError("a partition change block names a leader below -2")
        self.lists: list[Optional[list]] = []
        for name in LIST_COLUMNS:
            column = _column(getattr(block, name), rows, name)
            if column is not None:
                bad = [i for i in column if not UNCHANGED <= i < len(known)]
                if bad:
                    raise ReplayError(f"a partition change block's {name} names list {bad[0]}, which it does "
                                      f"not have (it has {len(known)})")
                column = [None if i == UNCHANGED else known[i] for i in column]
            self.lists.append(column)

    def changes(self) -> list[pb.PartitionChangeRecord]:
        """The rows as the PartitionChangeRecords they stand for, in order."""
        out = []
        row = 0
        for topic_id, n in self.segments:
            for r in range(row, row + n):
                c = pb.PartitionChangeRecord(partition_id=self.partition_ids[r], topic_id=topic_id)
                if self.leaders is not None and self.leaders[r] != UNCHANGED_LEADER:
                    c.leader = self.leaders[r]
                for field, column in zip(LIST_COLUMNS, self.lists):
                    if column is not None and column[r] is not None:
                        target = getattr(c, field)
                        target.SetInParent()  # present even when empty: "now empty"
                        target.ids.extend(column[r])
                out.append(c)
            row += n
        return out


def _column(values, rows: int, name: str) -> Optional[list[int]]:
    if not values:
        return None
    if len(values) != rows:
        raise ReplayError(f"a partition change block of {rows} rows has {len(values)} {name}")
    return list(values)


# topic id -> (partition ids, their registrations before, after): parallel lists, not a tuple per
# change (a 200,000-change shutdown would leave 200,000 more objects for the cyclic collector)
Moves = dict[str, tuple[list[int], list[PartitionRegistration], list[PartitionRegistration]]]


def moved_keys(moves: Moves) -> list[tuple[str, int]]:
    """(topic id, partition id) of everything ``moves`` holds."""
    return [(topic_id, pid) for topic_id, (pids, _, _) in moves.items() for pid in pids]


def replay(topics: TopicsDelta, block: pb.PartitionChangeBlockRecord, moves: Optional[Moves] = None,
           revisited: Optional[set[tuple[str, int]]] = None) -> None:
    """Apply every row of ``block`` to ``topics`` (as its rows would one by one, but in one pass).
    ReplayError, with nothing changed, if the block is malformed or a row names no partition.

    With ``moves`` (and ``revisited``): what each row did, for an index to follow without looking
    the partitions up again. A partition the delta had not changed before goes to ``moves`` by
    topic with its registration in the delta's base and its new one; one it had (or that is new in
    the delta) goes to ``revisited`` as (topic id, partition id)."""
    cols = Columns(block)
    pids, leaders, (replicas, isr, removing, adding, elr, last_known) = cols.partition_ids, cols.leaders, cols.lists
    cls = PartitionRegistration
    leaders_only = (leaders is not None and all(column is None for column in cols.lists)
                    and UNCHANGED_LEADER not in leaders)
    updates: dict[str, tuple[dict, dict]] = {}  # topic id -> (its delta's partitions, the new ones)
    found: list[tuple[str, list, list]] = []  # per topic run: (topic id, registrations before, after)
    row = 0
    for topic_id, n in cols.segments:
        delta = topics._topic(topic_id, lambda: f"cannot change partitions {pids[row:row + n]}")
        current = delta.partitions
        base_get = delta.base.partitions.getter() if delta.base is not None else _nothing
        new = updates.setdefault(topic_id, (current, {}))[1]  # a topic may have several runs
        if moves is not None:
            before: list = []
            after: list = []
            found.append((topic_id, before, after))
            was, now = before.append, after.append
        else:
            was = now = None
        if leaders_only:  # an election block: every row moves the leader, nothing else (one lean loop)
            for r in range(row, row + n):
                pid = pids[r]
                p = new.get(pid) or current.get(pid) or base_get(pid)
                if p is None:
                    raise ReplayError(f"cannot change partition {pid} of topic {delta.name!r}: no such partition")
                q = new[pid] = _new_registration(cls, (p[0], p[1], p[2], p[3], leaders[r], p[5] + 1, p[6] + 1,
                                                       p[7], p[8], p[9]))
                if was:
                    was(p)
                    now(q)
            row += n
            continue
        for r in range(row, row + n):
            pid = pids[r]
            p = new.get(pid) or current.get(pid) or base_get(pid)
            if p is None:
                raise ReplayError(f"cannot change partition {pid} of topic {delta.name!r}: no such partition")
            leader = UNCHANGED_LEADER if leaders is None else leaders[r]
            q = new[pid] = _new_registration(cls, (
                p[0] if replicas is None or replicas[r] is None else replicas[r],
                p[1] if isr is None or isr[r] is None else isr[r],
                p[2] if removing is None or removing[r] is None else removing[r],
                p[3] if adding is None or adding[r] is None else adding[r],
                p[4] if leader == UNCHANGED_LEADER else leader,
                p[5] if leader == UNCHANGED_LEADER else p[5] + 1,
                p[6] + 1,
                p[7] if elr is None or elr[r] is None else elr[r],
                p[8] if last_known is None or last_known[r] is None else last_known[r],
                # a block carries no directories: new replicas leave them not known (PartitionRegistration.merge)
                p[9] if replicas is None or replicas[r] is None or replicas[r] == p[0] else ()))
            if was:
                was(p)
                now(q)
        row += n
    if moves is not None:
        # (after every row: a row may find its partition changed by an earlier row of this block)
        _sort_moves(topics, found, pids, moves, revisited)
    for current, new in updates.values():
        current.update(new)


def _nothing(pid: int) -> None:
    return None


def _sort_moves(topics: TopicsDelta, found: list[tuple[str, list, list]], pids: list[int],
                moves: Moves, revisited: set[tuple[str, int]]) -> None:
    """``replay``'s rows into ``moves`` (first changes, from the base) and ``revisited`` (the rest)."""
    seen: dict[str, set] = {}  # topic id -> partitions an earlier row of this block changed
    row = 0
    for topic_id, before, after in found:
        n = len(after)
        run_pids = pids[row:row + n]
        row += n
        delta = topics.changed[topic_id]
        current = delta.partitions  # (not yet updated with this block's rows)
        earlier = seen.setdefault(topic_id, set())
        if delta.base is None:
            revisited.update((topic_id, pid) for pid in run_pids)
            continue
        first = moves.get(topic_id)
        if first is None:
            first = moves[topic_id] = ([], [], [])
        if not earlier and not current and len(set(run_pids)) == n:  # the usual case: all first changes
            first[0].extend(run_pids)
            first[1].extend(before)
            first[2].extend(after)
            earlier.update(run_pids)
            continue
        for pid, p, q in zip(run_pids, before, after):
            if pid in current or pid in earlier:
                revisited.add((topic_id, pid))
            else:
                first[0].append(pid)
                first[1].append(p)
                first[2].append(q)
            earlier.add(pid)


def touched(block: pb.PartitionChangeBlockRecord) -> list[tuple[str, int]]:
    """(topic id, partition id) of every row."""
    out: list[tuple[str, int]] = []
    pids = list(block.partition_ids)
    row = 0
    for topic_id, n in zip(block.topic_ids, block.topic_rows):
        out.extend(zip(repeat(topic_id, n), pids[row:row + n]))
        row += n
    return out


def unblocked(frames: Sequence[bytes]) -> Sequence[bytes]:
    """A batch's record frames (all of them, in order) with each block and its continuations as the
    frames of the PartitionChangeRecords they stand for, one per offset: what a reader that shows or
    sends Kafka's records reads. Every other frame is left as it is (``frames`` itself if no block)."""
    if not any(frame[:2] == BLOCK_PREFIX for frame in frames):
        return frames
    out = list(frames)
    i = 0
    while i < len(out):
        if out[i][:2] != BLOCK_PREFIX:
            i += 1
            continue
        record = decode_record(out[i])
        changes = Columns(record.message).changes() if isinstance(record, MetadataRecord) else []
        for k, c in enumerate(changes):  # a continuation missing (a broken batch): the rest stays
            if i + k >= len(out) or (k and out[i + k] != CONTINUATION_BYTES):
                break
            out[i + k] = encode_record(c)
        i += max(1, len(changes))
    return out
