"""Materializer: committed metadata records in (one micro-batch at a time), Delta tables out.

It keeps the metadata image in memory, built by the same MetadataLoader the controllers and
brokers use, and for each micro-batch:

1. replays the records it has not applied yet (a replayed micro-batch is skipped record by record,
   by offset) and notes the keys they touch (delta_tables/rows.py);
2. appends them to ``records``;
3. unless the log is inside a transaction (then the state tables wait for its end, so a cut never
   shows half an operation), merges the touched keys' rows, as the image has them, into
   ``topics``, ``partitions``, ``brokers`` and ``configs`` (deletes included), and the voter set's
   into ``voters``; a table no record touched is left alone (its current version already holds
   the cut);
4. writes the ``snapshots`` row naming the cut: the offset and each table's version.

The voter set comes from control records: a dynamic quorum's KRAFT_VOTERS (and a snapshot's first
batch); until one is seen, the voter ids of each LeaderChange (a static quorum).

A ``SNAPSHOT`` row (the source's stand-in for records the quorum's log no longer holds) replaces
the image (and the voter set, if the snapshot carries one) with the snapshot's and notes every key
of both, so the next write makes the tables equal the snapshot; ``records`` keeps the row (its
``raw`` is the snapshot file), so a restart rebuilds through it.

Exactly once: each commit carries the writer's application transaction (see writer.py), and on
start the image is rebuilt from ``records`` (its ``raw`` column) with the keys touched since the
state tables' last commit, so a crash anywhere between two commits is repaired by the next batch.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.audit import rows as audit_rows
from delta_tables.rows import TouchedKeys, holds, row, rows_of
from delta_tables.schemas import RECORDS, SCHEMAS, SNAPSHOTS, STATE_TABLES, VOTERS
from delta_tables.writer import DeltaRsWriter
from quorum import failpoints
from quorum.log import control_records
from quorum.log.control_records import NAMES as CONTROL_NAMES
from quorum.log.raft_state import raft_state_of
from quorum.log.voter_set import VoterSet
from quorum.metadata.image import MetadataImage
from quorum.metadata.loader import MetadataLoader
from quorum.metadata.records import MetadataRecord, decode_record
from quorum.metrics.registry import histogram
from quorum.snapshot.checkpoint import decode_checkpoint
from streaming.batch_gate import BatchGate
from streaming.source import SNAPSHOT_TYPE

log = logging.getLogger(__name__)

_CONTROL_TYPES = frozenset(CONTROL_NAMES.values())


class GapError(Exception):
    """A micro-batch starts after the next offset to apply: records would be missing."""


FRESHNESS_BUCKETS_S = (0.1, 0.25, 0.5, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


BATCH_TIMINGS_KEPT = 1000



def freshness_histogram():
    return histogram("sparkraft_materializer_freshness_seconds", "From a micro-batch's newest record's commit (its "
                     "append time) to its cut being visible in the Delta tables.", FRESHNESS_BUCKETS_S)


def batch_histograms() -> dict:
    """The job's per-micro-batch histograms: how long one took, how many records it applied, and
    each Delta commit's time by table (``snapshots``: the cut's commit)."""
    return {
        "duration": histogram("sparkraft_materializer_batch_duration_seconds", "A micro-batch, from Spark handing it "
                              "over to its cut committed.", FRESHNESS_BUCKETS_S),
        "records": histogram("sparkraft_materializer_batch_records", "Records a micro-batch applied.",
                             (0, 1, 10, 100, 1_000, 10_000, 100_000, 1_000_000)),
        "commit": histogram("sparkraft_materializer_delta_commit_seconds", "One Delta commit of a micro-batch, by "
                            "table.", labels=("table",)),
    }


class Materializer:
    def __init__(self, writer: DeltaRsWriter, label: str = ""):
        self.writer = writer
        self.label = label  # what its log lines start with: "Cluster east: " in a fleet (streaming/fleet_member.py)
        writer.ensure_tables()
        self.gate = BatchGate()  # a micro-batch at a time; none once the job is stopping
        # the error the last micro-batch raised (None once one succeeds): a stop that waited for the
        # batch in flight learns from it that the batch failed, even where Spark, stopped at once
        # after, records no failure of its own (streaming/job.py)
        self.batch_failure: Optional[BaseException] = None
        # commit -> Delta visible: from the append time of a batch's newest record to its cut
        self.freshness = freshness_histogram()
        self.last_freshness_s: Optional[float] = None
        self.histograms = batch_histograms()
        self.last_cut_at: Optional[float] = None  # when this process last committed a cut (Unix time; metrics)
        self.rows_written: dict[str, int] = {}  # state table -> rows merged into it since the start (metrics)
        # where the last micro-batches' time went, by batch id: {"source read": s, "replay": s,
        # "records": s, "<state table>": s..., "cut commit": s} (benchmarks pair it with Spark's
        # own progress of the same batch); the newest BATCH_TIMINGS_KEPT only
        self.timings: dict[int, dict[str, float]] = {}
        self._timing: Optional[dict[str, float]] = None
        # told the offset the tables now hold everything before, after each micro-batch (the job's
        # hold on the log: streaming/log_hold.py)
        self.after_batch: Optional[Callable[[int], None]] = None
        self.reload()

    def reload(self) -> None:
        """Forget what this process applied and take it again from the tables (at the start, and
        when the job starts a failed query again: a micro-batch cut short may have applied records
        to the image that never reached the tables, and Spark replays it)."""
        with self.gate.lock:
            self.loader = MetadataLoader()
            self.touched = TouchedKeys()
            self.voters: Optional[VoterSet] = None
            self.voters_in_log = False  # a KRAFT_VOTERS record was seen: LeaderChange voters no longer count
            self.next_offset = 0
            self.last_epoch = -1
            # The image every state table holds (all of them were last written at it), or None when
            # not known (after a restart, tables may have stopped at different offsets): keys it
            # lacks are added to a table without looking for them in it.
            self._state_image: Optional[MetadataImage] = self.loader.image
            self._rebuild()

    # -- restart -------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        """The image as of the last offset ``records`` holds, and the keys the state tables have
        not caught up with."""
        applied = self.writer.applied(RECORDS)
        if applied < 0:
            return
        self._state_image = None
        tables_applied = {t: self.writer.applied(t) for t in STATE_TABLES}
        state_applied = min(tables_applied.values())
        dataset = self.writer.table(RECORDS).to_pyarrow_dataset()
        table = dataset.to_table(columns=["offset", "epoch", "type", "raw"],
                                 filter=pc.field("offset") <= applied, use_threads=False)
        table = table.sort_by("offset")
        for offset, epoch, kind, raw in zip(*(table.column(c).to_pylist() for c in ("offset", "epoch", "type", "raw"))):
            self._apply(offset, epoch, kind, raw, note=offset > state_applied)
        self.loader.flush()
        self.touched.drop_written(tables_applied)  # a table added since (voters) need not redo the rest
        self.next_offset = applied + 1
        behind = [f"{t} {'is empty' if at < 0 else f'is at {at}'}" for t, at in sorted(tables_applied.items())
                  if at < applied]
        log.info("%sMaterializer resumes after offset %d (%s)", self.label, applied,
                 "every table holds it" if not behind else
                 f"{', '.join(behind)}: {sum(len(k) for k in self.touched.keys.values())} keys to write")

    def _apply(self, offset: int, epoch: int, kind: str, raw: bytes, note: bool = True) -> None:
        self.last_epoch = epoch
        if kind == SNAPSHOT_TYPE:
            self._load_snapshot(offset, raw, note)
            return
        if kind in _CONTROL_TYPES:
            self._apply_control(offset, raw, note)
            return
        record = decode_record(raw)
        if note and isinstance(record, MetadataRecord):
            self.touched.note(record, offset, self.loader.image)
        self.loader.replay(record, offset, epoch)

    def _apply_control(self, offset: int, raw: bytes, note: bool) -> None:
        """Follow the voter set (see the module docstring); other control records change no table."""
        record = control_records.decode_control(raw)
        if record.type == control_records.KRAFT_VOTERS:
            voters = VoterSet.from_control(record.data)
            self.voters_in_log = True
        elif record.type == control_records.LEADER_CHANGE and not self.voters_in_log:
            voters = VoterSet.static(record.data.get("voters", ()))
        else:
            return
        if note:
            self.touched.note_voters(self.voters, voters, offset)
        self.voters = voters

    def _load_snapshot(self, offset: int, raw: bytes, note: bool) -> None:
        image = decode_checkpoint(raw, f"the snapshot at offset {offset}")[1]
        voters = raft_state_of(raw)[0]
        if voters is None:  # a static quorum's snapshot: the voters stay as LeaderChange records said
            voters = self.voters
        else:
            self.voters_in_log = True
        if note:
            self.touched.note_all(self.loader.flush(), self.voters, offset)  # rows of the old image that are gone
            self.touched.note_all(image, voters, offset)
        self.loader.reset(image)
        self.voters = voters
        log.info("%sMaterializer loaded a snapshot ending at offset %d (the quorum's log starts after it)", self.label,
                 offset)

    # -- a micro-batch -------------------------------------------------------------------------
    def process(self, batch: pa.Table) -> dict[str, Any]:
        """Apply one micro-batch (the streaming source's columns); what it wrote."""
        batch = batch.sort_by("offset") if batch.num_rows else batch
        offsets = batch.column("offset")
        # the records not applied yet: the batch is sorted, so they are its tail
        start = batch.num_rows - pc.sum(pc.greater_equal(offsets, self.next_offset)).as_py() if batch.num_rows else 0
        fresh = batch.slice(start)
        if fresh.num_rows and offsets[start].as_py() != self.next_offset \
                and fresh.column("type")[0].as_py() != SNAPSHOT_TYPE:
            raise GapError(f"the micro-batch starts at offset {offsets[start].as_py()} but the tables end at "
                           f"{self.next_offset - 1}")
        clock = time.monotonic()
        if fresh.num_rows:
            columns = (fresh.column(c).to_pylist() for c in ("offset", "epoch", "type", "data"))
            for offset, epoch, kind, raw in zip(*columns):
                self._apply(offset, epoch, kind, raw)
            self.loader.flush()
            self.next_offset = fresh.column("offset")[-1].as_py() + 1
        clock = self._took("replay", clock)
        last = self.next_offset - 1
        out: dict[str, Any] = {"records": fresh.num_rows, "last_offset": last}
        if last < 0:
            return out
        if fresh.num_rows:
            self.writer.append_records(records_table(fresh), last)
            self._committed(RECORDS, clock)
            self.writer.append_audit(audit_rows(fresh), last)
        clock = self._took(RECORDS, clock)
        if self.loader.in_transaction:
            out["waiting_for_transaction"] = True
            return out
        changed = bool(self.touched)
        if changed:
            out["rows"] = self._write_state(last)
        clock = time.monotonic()
        if fresh.num_rows or changed:
            failpoints.hit("delta-before-cut")
            self.writer.add_snapshot(last, self.last_epoch, self.writer.versions())
            self.last_cut_at = time.time()
            self._committed(SNAPSHOTS, clock)
            self._took("cut commit", clock)
            out["cut"] = last
            if fresh.num_rows:
                self._note_freshness(fresh.column("append_time")[-1].as_py())
        return out

    def _took(self, phase: str, since: float) -> float:
        """Note ``phase`` of the batch being timed as ending now; now (the next phase's start)."""
        now = time.monotonic()
        if self._timing is not None:
            self._timing[phase] = self._timing.get(phase, 0.0) + now - since
        return now

    def _committed(self, table: str, since: float) -> None:
        self.histograms["commit"].labels(table).observe(time.monotonic() - since)

    def _note_freshness(self, appended) -> None:
        """The newest record of the batch is visible now, at its cut: how long after its commit.
        (The controllers' clock stamps the record, this process's reads the time: keep them in sync.)"""
        if appended is None:
            return
        seconds = max(0.0, time.time() - appended.timestamp())
        self.last_freshness_s = seconds
        self.freshness.observe(seconds)

    def _write_state(self, last: int) -> dict[str, int]:
        image = self.loader.image
        written = {}
        for table in STATE_TABLES:
            upserts, new, deletes = [], [], []
            # rows the table cannot hold yet (new topics, partitions...) are added without a lookup
            held = holds(table, self._state_image) if self._state_image is not None and table != VOTERS else None
            for key, offset in self.touched.keys.get(table, {}).items():
                if held is not None and not held(key):
                    new.append((key, offset))
                elif (r := row(table, key, image, offset, self.voters)) is None:
                    deletes.append(key)
                else:
                    upserts.append(r)
            inserts = rows_of(table, new, image, self.voters)  # those of them that exist now
            # a table nothing touched keeps its version: it holds the cut already
            if upserts or inserts.num_rows or deletes:
                clock = time.monotonic()
                self.writer.merge_state(table, upserts, deletes, last, inserts)
                self._committed(table, clock)
                self._took(table, clock)
            written[table] = len(upserts) + inserts.num_rows + len(deletes)
            self.rows_written[table] = self.rows_written.get(table, 0) + written[table]
        self.touched.clear()
        self._state_image = image
        return written

    def refuse_batches(self, timeout: float) -> bool:
        """From now on refuse every micro-batch, once the one running (if any) has finished; False
        if it did not finish within ``timeout`` seconds (later batches are refused all the same)."""
        return self.gate.refuse(timeout)

    @property
    def in_batch(self) -> bool:
        """Whether a micro-batch is being applied now (the job's watchdog: work, not a stall)."""
        return self.gate.busy

    def foreach_batch(self, df, batch_id: int) -> None:
        """``writeStream.foreachBatch`` target."""
        with self.gate.batch(batch_id):
            started = time.monotonic()
            table = df.toArrow()
            fetched = time.monotonic()
            self._timing = {"source read": fetched - started}
            try:
                result = self.process(table)
                self.histograms["duration"].observe(time.monotonic() - started)
                self.histograms["records"].observe(result["records"])
                self.batch_failure = None
            except BaseException as e:
                self.batch_failure = e
                raise
            finally:
                self.timings[batch_id] = self._timing
                self._timing = None
                while len(self.timings) > BATCH_TIMINGS_KEPT:
                    del self.timings[min(self.timings)]
        log.info("%sMicro-batch %d: %s (source %.2fs, Delta %.2fs)", self.label, batch_id, result, fetched - started,
                 time.monotonic() - fetched)
        if self.after_batch is not None:
            self.after_batch(self.next_offset)


# The source writes a record's JSON form compactly with sorted keys (streaming/source.py: ``data``,
# ``type``, ``version``), so the ``records.data`` column is the text between the first key and the last
# two, already in the same form: cut out in Arrow, neither parsed and dumped again (a tenth of a first
# materialisation's time) nor sliced a record at a time in Python. Any other text is parsed.
_DATA_PREFIX = '{"data":'
_TYPE_VERSION_TAIL = r',"type":"[^"\\]*","version":-?[0-9]+\}$'


def records_table(fresh: pa.Table) -> pa.Table:
    """The ``records`` rows of the source's rows ``fresh``: its columns, the JSON form's ``data`` part
    for ``json``, and the frame as ``raw``."""
    forms = fresh.column("json")
    data = pc.utf8_slice_codeunits(pc.replace_substring_regex(
        forms, pattern=_TYPE_VERSION_TAIL, replacement="", max_replacements=1), len(_DATA_PREFIX))
    odd = pc.invert(pc.and_(pc.starts_with(forms, _DATA_PREFIX),
                            pc.match_substring_regex(forms, pattern=_TYPE_VERSION_TAIL))).fill_null(False)
    if pc.any(odd).as_py():
        data = pa.chunked_array([pa.array([_data_of(f) if o else d for f, d, o in zip(
            forms.to_pylist(), data.to_pylist(), odd.to_pylist())], pa.string())])
    schema = SCHEMAS[RECORDS]
    appended = fresh.column("append_time").cast(schema.field("append_time").type, safe=False)  # µs -> ms
    return pa.Table.from_arrays([fresh.column("offset"), fresh.column("epoch"), appended, fresh.column("type"),
                                 fresh.column("version"), data, fresh.column("data")], schema=schema)


def _data_of(json_text: Optional[str]) -> Optional[str]:
    """The ``data`` part of a JSON form not in the source's layout, parsed and written compactly."""
    import json

    if json_text is None:
        return None
    return json.dumps(json.loads(json_text).get("data"), separators=(",", ":"), sort_keys=True)
