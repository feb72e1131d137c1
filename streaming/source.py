"""The ``sparkraft`` streaming data source: the committed metadata log as a Spark stream.

    spark.dataSource.register(SparkraftDataSource)
    spark.readStream.format("sparkraft").option("bootstrap.controllers", "h:9093,h:9094").load()

Offsets are log offsets, ``{"offset": N}`` meaning "everything before N" (N is the next offset to
read). Options: ``bootstrap.controllers`` (required), ``startingOffsets`` (``earliest``, ``latest``
or a number; default ``earliest``), ``maxRecordsPerTrigger`` and ``maxBytesPerTrigger`` (admission
control through Spark's read-limit API; with both, a batch keeps to both), ``idleFlushSeconds``
(below; default 60, 0 = off), ``recordsPerPartition`` (a batch's ranges, read by executors in parallel;
default 100,000), ``quorum.protocol`` (``sparkraft``, the default, or ``kafka``: the controllers
are Apache Kafka's, read with Kafka's own Fetch as an observer). ``Trigger.AvailableNow`` is
supported (SupportsTriggerAvailableNow): one query reads everything committed when it starts, then
ends. The query's progress shows the high watermark last seen (``latestOffset``) beside each
batch's end, which is how far it is behind.

``spark.read.format("sparkraft")`` reads the same rows as a batch: ``startingOffsets`` (``earliest``
or an offset), ``endingOffsets`` (``latest`` or an offset, exclusive), ``recordsPerPartition``.

An idle quorum still writes: the leader appends a NoOp record every ``metadata.max.idle.interval.ms``
(and a LeaderChange on each election). Offering those as soon as they commit would make every
trigger a micro-batch and every micro-batch a Delta commit, an idle cluster costing thousands of
table versions a day. So ``latestOffset`` holds back a tail made only of such records until its
oldest is ``idleFlushSeconds`` old; the first record that changes metadata releases it at once,
with the idle records before it. Nothing is skipped (they are offered later, in order, exactly
once), and freshness for real changes is unchanged.

The driver side (initialOffset, latestOffset, partitions, commit) asks the quorum for its high
watermark, retrying with backoff while there is no leader (a controller failover does not stop
the job). ``read`` runs in Python workers: it is stateless, opens its own MetadataLogReader and
yields pyarrow RecordBatches of the records in its range (control records included: they occupy
offsets, and the ``records`` table holds every offset).

When the quorum's log no longer starts at or before the range asked for (snapshots let those
records go), ``read`` downloads the leader's snapshot (FetchSnapshot) and yields it as ONE row of
type ``SNAPSHOT`` at the snapshot's last offset, ``data`` the whole verified snapshot file; the
rows after it are the log from the snapshot's end. The offsets in between have no rows.
"""
from __future__ import annotations

import json
import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from quorum import failpoints
from streaming.quorum_access import QuorumOptions

log = logging.getLogger(__name__)

SCHEMA_DDL = ("offset long, epoch int, append_time timestamp, type string, version int, json string, "
              "data binary")
ARROW_SCHEMA = pa.schema([("offset", pa.int64()), ("epoch", pa.int32()), ("append_time", pa.timestamp("us", "UTC")),
                          ("type", pa.string()), ("version", pa.int32()), ("json", pa.string()),
                          ("data", pa.binary())])
ROWS_PER_ARROW_BATCH = 10_000
RECORDS_PER_PARTITION = 100_000  # recordsPerPartition: the records one task reads (more: tasks in parallel)
SNAPSHOT_TYPE = "SNAPSHOT"  # the type of the row that carries a snapshot
RETRY_BACKOFF_S = (0.2, 10.0)  # first and largest pause between attempts while the quorum has no leader
RETRY_FOR_S = 120.0  # then the query fails with the last error
IDLE_FLUSH_S = 60.0  # default idleFlushSeconds
IDLE_SCAN_BYTES = 64 * 1024  # what one look at an idle tail fetches (NoOps are a few bytes each)
_NO_OP_RECORD = 20  # metadata record type id (Kafka's NoOpRecord)
_IDLE_TYPES = (_NO_OP_RECORD, 0x7E04)  # and sparkraft's LogHoldRecord
_LEADER_CHANGE = 2  # control record type id


@dataclass(frozen=True)
class LogRange(InputPartition):
    start: int  # first offset
    end: int  # one past the last
    first: bool = True  # the first range of its batch: the one that loads a snapshot, if one is due


def split_range(reader, start: int, end: int, per_partition: int) -> list[LogRange]:
    """``[start, end)`` in ranges of ``per_partition`` records, read by executors in parallel. Where
    the log no longer starts at ``start``, the first range reaches past the snapshot's end: only
    it loads the snapshot (one SNAPSHOT row per batch)."""
    from quorum.rpc.log_reader import SnapshotRequired

    if end <= start:
        return []
    first_end = start + per_partition
    if end > first_end:
        try:
            reader.read(start, max_records=1, wait_ms=0, max_bytes=1)
        except SnapshotRequired as e:
            if e.snapshot_id is not None:
                first_end = max(first_end, e.snapshot_id.offset + per_partition)
        except Exception as e:  # cannot tell now: one range, as before
            log.debug("range split at %d: %s", start, e)
            first_end = end
    ranges = [LogRange(start, min(first_end, end))]
    ranges += [LogRange(s, min(s + per_partition, end), first=False) for s in range(first_end, end, per_partition)]
    return ranges


# A record's JSON form as the ``json`` column holds it: compact, keys sorted (the materialiser cuts
# ``records.data`` out of that layout). One encoder for every row: json.dumps with these arguments
# builds a new one per call, an eighth of record_row's time.
_json_text = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def record_row(offset: int, epoch: int, append_time_ms: int, data: bytes, control: bool,
               form: Optional[dict] = None) -> tuple:
    """One record as the source's columns (type and version from its JSON form, or ``form`` where the
    reader gave one); a SCRAM credential's salt and keys are cleared, in the JSON and in the raw frame."""
    if form is None and control:
        from quorum.log.control_records import decode_control

        c = decode_control(data)
        form = {"type": c.type_name, "version": c.data.get("version", 0), "data": c.data}
    elif form is None:
        from quorum.metadata.records import decode_record, encode_record, redacted, to_json

        record = decode_record(data)
        form = to_json(record)
        safe = redacted(record)
        if safe is not record:  # credentials never reach the lakehouse, not even as raw bytes
            data = encode_record(safe)
    return (offset, epoch, append_time_ms * 1000, form["type"], form["version"],
            _json_text(form), data)


def snapshot_row(snapshot_id, data: bytes) -> tuple:
    """The row that stands for every record below ``snapshot_id.offset`` the log no longer holds (its
    raw column is the snapshot, credentials cleared)."""
    from quorum.snapshot.checkpoint import redact_checkpoint

    data = redact_checkpoint(data)
    form = {"type": SNAPSHOT_TYPE, "version": 0,
            "data": {"end_offset": snapshot_id.offset, "epoch": snapshot_id.epoch, "bytes": len(data)}}
    return (snapshot_id.offset - 1, snapshot_id.epoch, int(time.time() * 1_000_000), SNAPSHOT_TYPE, 0,
            _json_text(form), data)


def _with_retry(what: str, fn, retry_for: float = RETRY_FOR_S):
    """``fn()``, retried with backoff while the quorum cannot answer (no leader, unreachable), for at
    most ``retry_for`` seconds."""
    from quorum.errors import Errors, SparkraftError

    pause, deadline = RETRY_BACKOFF_S[0], time.monotonic() + retry_for
    while True:
        try:
            return fn()
        except SparkraftError as e:
            if e.error in (Errors.INCONSISTENT_CLUSTER_ID, Errors.OFFSET_OUT_OF_RANGE) \
                    or time.monotonic() + pause > deadline:
                raise
            log.warning("%s failed (%s); retrying in %.1fs", what, e, pause)
            time.sleep(pause)
            pause = min(RETRY_BACKOFF_S[1], pause * 2)



def _positive(options: dict, name: str) -> int | None:
    value = options.get(name)
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return number


def _offset_option(options: dict, name: str, default: str, words: tuple[str, ...]) -> str | int:
    """``startingOffsets`` / ``endingOffsets``: one of ``words`` or an offset."""
    value = str(options.get(name, default))
    if value in words:
        return value
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be {' or '.join(words)} or an offset, got {value!r}") from None
    if number < 0:
        raise ValueError(f"{name} must be >= 0, got {number}")
    return number


def read_range(quorum: QuorumOptions, partition: LogRange, timeout: float = 30.0,
               retry_for: float = RETRY_FOR_S) -> Iterator[pa.RecordBatch]:
    """The records of ``partition`` as Arrow batches (a worker's part of either reader): a snapshot
    row first where the log no longer starts at or before its range."""
    from quorum.rpc.log_reader import SnapshotRequired

    rows: list[tuple] = []
    with quorum.reader(timeout=timeout) as reader:
        offset = partition.start
        while offset < partition.end:
            try:
                chunk = _with_retry(f"fetch at {offset}", lambda: reader.read(offset, wait_ms=500), retry_for)
            except SnapshotRequired as e:
                if e.snapshot_id is None:
                    raise
                if not partition.first:
                    raise RuntimeError(f"the log start moved past offset {offset} after this batch was planned; "
                                       f"the query starts again from its checkpoint") from None
                sid = e.snapshot_id
                rows.append(snapshot_row(sid, _with_retry(f"snapshot {sid}", lambda: reader.download_snapshot(sid),
                                                          retry_for)))
                offset = sid.offset
                continue
            for r in chunk.records:
                if r.offset >= partition.end:
                    break
                rows.append(record_row(r.offset, r.epoch, r.append_time_ms, r.data, r.control, r.form))
                if len(rows) >= ROWS_PER_ARROW_BATCH:
                    yield _batch(rows)
                    rows = []
            offset = min(chunk.next_offset, partition.end) if chunk.records else offset
    if rows:
        yield _batch(rows)


class SparkraftStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        self.quorum = QuorumOptions.parse(options)
        self.starting = _offset_option(options, "startingOffsets", "earliest", ("earliest", "latest"))
        self.max_records = _positive(options, "maxRecordsPerTrigger")
        self.max_bytes = _positive(options, "maxBytesPerTrigger")
        self.per_partition = _positive(options, "recordsPerPartition") or RECORDS_PER_PARTITION
        try:
            self.idle_flush_s = float(options.get("idleFlushSeconds", IDLE_FLUSH_S))
        except ValueError:
            raise ValueError(f"idleFlushSeconds must be a number of seconds, got "
                             f"{options.get('idleFlushSeconds')!r}") from None
        if not self.idle_flush_s >= 0:
            raise ValueError(f"idleFlushSeconds must be >= 0, got {self.idle_flush_s}")
        self._reader = None
        # (start, scanned up to, append time of the first record) of a tail seen to be only idle records
        self._idle_tail: tuple[int, int, int] | None = None
        self._target: int | None = None  # Trigger.AvailableNow: nothing past the high watermark seen at its start
        self._last_hw = 0
        self.retry_for = RETRY_FOR_S  # how long a look at the high watermark waits for a leader

    def _high_watermark(self) -> int:
        if self._reader is None:
            self._reader = self.quorum.reader(timeout=10)
        self._last_hw = max(0, _with_retry("high watermark", self._reader.high_watermark, self.retry_for))
        return self._last_hw

    def initialOffset(self) -> dict:
        if self.starting == "earliest":
            return {"offset": 0}
        if self.starting == "latest":
            return {"offset": self._high_watermark()}
        return {"offset": self.starting}

    def getDefaultReadLimit(self):
        """Spark passes one limit: bytes when maxBytesPerTrigger is set (maxRecordsPerTrigger, if
        also set, still caps the batch: latestOffset applies both)."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxBytes, ReadMaxRows

        if self.max_bytes:
            return ReadMaxBytes(self.max_bytes)
        return ReadMaxRows(self.max_records) if self.max_records else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: everything committed now, in as many micro-batches as the limits
        make, and nothing after it, in one query."""
        self._target = self._high_watermark()
        log.info("Available now: reading up to offset %d", self._target - 1)

    def reportLatestOffset(self) -> dict:
        """The high watermark last seen: the query's progress shows it beside the batch's end, so
        how far the job is behind the log is there to read."""
        return {"offset": self._last_hw}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        from pyspark.sql.streaming.datasource import ReadMaxBytes, ReadMaxRows

        failpoints.hit("source-latest-offset")
        hw = self._high_watermark() if self._target is None else self._target
        if start is None:  # Spark before 4.2 calls latestOffset() without arguments
            return {"offset": hw}
        end = max(start["offset"], hw)
        if self.max_records or isinstance(limit, ReadMaxRows):
            end = min(end, start["offset"] + (limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_records))
        if isinstance(limit, ReadMaxBytes) and end > start["offset"]:
            end = self._end_within_bytes(start["offset"], end, limit.max_bytes)
        if end > start["offset"] and self.idle_flush_s > 0 and self._target is None and \
                self._hold_idle_tail(start["offset"], end):
            return {"offset": start["offset"]}
        return {"offset": end}

    def _end_within_bytes(self, start: int, end: int, max_bytes: int) -> int:
        """The end of the records from ``start`` that fit in ``max_bytes`` (at least one record, so
        a batch always moves), not past ``end``. One look at the log's batches, as a worker reads."""
        try:
            chunk = self._reader.read(start, wait_ms=0, max_bytes=max_bytes)
        except Exception as e:  # a snapshot is due, no leader: the batch is not cut by size
            log.debug("size check at %d: %s", start, e)
            return end
        fitted, used = start, 0
        for r in chunk.records:
            used += len(r.data)
            if r.offset >= end or (used > max_bytes and fitted > start):
                break
            fitted = r.offset + 1
        return max(fitted, start + 1) if chunk.records else end

    def _hold_idle_tail(self, start: int, end: int) -> bool:
        """Whether ``[start, end)`` is only NoOp and LeaderChange records, the oldest younger than
        ``idle_flush_s`` (see the module docstring). Each record is looked at once per tail."""
        cached = self._idle_tail
        scanned, first_ms = (cached[1], cached[2]) if cached and cached[0] == start else (start, -1)
        try:
            first = True
            while scanned < end:
                # Under load the first record is a real change: fetch and decode one batch, not the
                # megabytes a lagging job has ahead of it.
                chunk = self._reader.read(scanned, max_records=1 if first else None, wait_ms=0,
                                          max_bytes=1 if first else IDLE_SCAN_BYTES)
                first = False
                if not chunk.records:
                    break
                for r in chunk.records:
                    if r.offset >= end:
                        break
                    if not _is_idle_record(r.data, r.control):
                        self._idle_tail = None
                        return False
                    first_ms = r.append_time_ms if first_ms < 0 else first_ms
                    scanned = r.offset + 1
        except Exception as e:  # cannot tell (a snapshot is due, no leader): offer them, read() decides
            log.debug("idle check at %d: %s", scanned, e)
            self._idle_tail = None
            return False
        self._idle_tail = (start, scanned, first_ms)
        if scanned < end:
            return False
        return _wall_ms() - first_ms < self.idle_flush_s * 1000

    def partitions(self, start: dict, end: dict):
        if self._reader is None:
            self._reader = self.quorum.reader(timeout=10)
        return split_range(self._reader, start["offset"], end["offset"], self.per_partition)

    def read(self, partition: LogRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.quorum, partition)

    def commit(self, end: dict) -> None:
        pass  # the log is the source of truth; nothing to release

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()


def _wall_ms() -> float:
    """Now, on the clock the controllers stamp records with (a test moves it)."""
    return time.time() * 1000


def _is_idle_record(frame: bytes, control: bool) -> bool:
    """A NoOp, LeaderChange or LogHold record: it occupies an offset but changes no table except
    ``records`` (a hold is the job's own bookkeeping: offered at once, each would be a micro-batch)."""
    kind = int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1
    return kind == _LEADER_CHANGE if control else kind in _IDLE_TYPES


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = list(zip(*rows)) or [[] for _ in ARROW_SCHEMA]
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, ARROW_SCHEMA)],
                                      schema=ARROW_SCHEMA)


def rows_table(rows: list[tuple]) -> pa.Table:
    """``record_row`` rows as a table of the source's columns: a micro-batch as the materialiser
    takes it (benchmarks and tests that feed it straight from a log)."""
    return pa.Table.from_batches([_batch(rows)], schema=ARROW_SCHEMA)


def _leave_stopping_to_the_driver() -> None:
    """In the Python process Spark starts to run the stream reader (not in the driver), ignore SIGTERM.

    A service manager stops the job by sending SIGTERM to its whole process group at once. Under
    ``spark-submit`` the JVM is the user's, so the Python processes it starts keep SIGTERM's default,
    and this one (Spark's streaming source runner, in the JVM's group) died mid-call and failed the
    query while the driver was still finishing its micro-batch. The driver alone stops the job
    (streaming/stop.py); this process ends when the JVM closes its socket. Spark's worker daemon,
    which runs ``read``, already puts itself in a process group of its own."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class SparkraftDataSource(DataSource):
    """``format("sparkraft")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "sparkraft"

    def schema(self) -> str:
        return SCHEMA_DDL

    def streamReader(self, schema) -> SparkraftStreamReader:
        _leave_stopping_to_the_driver()
        return SparkraftStreamReader(self.options)

    def reader(self, schema) -> "SparkraftBatchReader":
        return SparkraftBatchReader(self.options)


class SparkraftBatchReader(DataSourceReader):
    """``spark.read.format("sparkraft")``: the committed log from ``startingOffsets`` (``earliest``
    or an offset) to before ``endingOffsets`` (``latest``: the high watermark when the query is
    planned, or an offset), in ranges of ``recordsPerPartition`` (default 100,000) that executors
    read in parallel."""

    def __init__(self, options: dict):
        self.quorum = QuorumOptions.parse(options)
        self.starting = _offset_option(options, "startingOffsets", "earliest", ("earliest",))
        self.ending = _offset_option(options, "endingOffsets", "latest", ("latest",))
        self.per_partition = _positive(options, "recordsPerPartition") or RECORDS_PER_PARTITION

    def partitions(self) -> list[LogRange]:
        start = 0 if self.starting == "earliest" else self.starting
        with self.quorum.reader(timeout=10) as reader:
            end = max(0, _with_retry("high watermark", reader.high_watermark)) if self.ending == "latest" \
                else self.ending
            if end < start:
                raise ValueError(f"endingOffsets {end} is before startingOffsets {start}")
            return split_range(reader, start, end, self.per_partition)

    def read(self, partition: LogRange) -> Iterator[pa.RecordBatch]:
        return read_range(self.quorum, partition)
