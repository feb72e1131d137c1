"""``format("sparkraft-fleet")``: the committed logs of many clusters as ONE Spark stream, so a
fleet is one streaming query (one planner, one offset and commit log, one micro-batch loop) rather
than one per cluster (docs/bench/fleet.md measured what a query per cluster costs).

    spark.readStream.format("sparkraft-fleet").option("fleet.plan", "/private/dir/plan.json").load()

Rows are the ``sparkraft`` source's with a ``cluster`` column first. The offset is each cluster's
``{"offset": N, "redo": K}``; which clusters there are, and where each one's tables end, the plan
says (streaming/fleet_plan.py), read again at every trigger: a cluster added to it joins the next
micro-batch, a removed one leaves it.

Each cluster is looked after by the ``sparkraft`` source's own reader (its idle tail, its limits,
Trigger.AvailableNow), asked for its high watermark on a thread of its own once its ``trigger``
has passed; a trigger waits at most POLL_BUDGET_S for them, and a cluster slower than that (a
paused controller, one being reconnected) keeps its end until it answers, while the others move
on. A cluster that does not answer is looked at again with backoff, and said in the reach file.

A micro-batch reads each cluster from where its tables end (the plan's ``applied``), not from the
batch's start: a range whose read failed, or whose rows the driver could not apply, is read again
by the next batch that includes the cluster. Small ranges of many clusters share a task (up to
``recordsPerPartition`` records), so a steady fleet's micro-batch is a task or two, not one per
cluster. A range that cannot be read yields one ``READ_ERROR`` row for its cluster instead of
failing the task, which would fail every cluster's micro-batch: the driver then sets that cluster
aside (streaming/fleet_job.py).
"""
from __future__ import annotations

import concurrent.futures as futures
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from streaming.fleet_plan import PlanEntry, read_plan, write_reach
from streaming.quorum_access import QuorumOptions
from streaming.source import (
    ARROW_SCHEMA,
    RECORDS_PER_PARTITION,
    SCHEMA_DDL,
    LogRange,
    SparkraftStreamReader,
    _leave_stopping_to_the_driver,
    _positive,
    read_range,
    split_range,
)

log = logging.getLogger(__name__)

FLEET_SCHEMA_DDL = "cluster string, " + SCHEMA_DDL
FLEET_ARROW_SCHEMA = pa.schema([pa.field("cluster", pa.string()), *ARROW_SCHEMA])
ERROR_TYPE = "READ_ERROR"  # the row a range that could not be read yields: json is the error
POLL_BUDGET_S = 1.0  # how long a trigger waits for the clusters' high watermarks
PREPARE_BUDGET_S = 15.0  # how long Trigger.AvailableNow waits for each cluster's high watermark
POLL_RETRY_S = 5.0  # how long one look at a cluster waits for its leader before it counts as failed
POLL_BACKOFF_S = (2.0, 60.0)  # a cluster that did not answer: first and longest wait before the next look
READ_TIMEOUT_S = 10.0  # a worker's calls to a cluster, and how long its reads wait for a leader


@dataclass(frozen=True)
class Piece:
    """One cluster's range, read by a worker."""
    cluster: str
    quorum: QuorumOptions
    range: LogRange


@dataclass(frozen=True)
class FleetPartition(InputPartition):
    pieces: tuple[Piece, ...]


def quorum_of(entry: PlanEntry) -> dict:
    """The ``sparkraft`` source's options for a cluster of the plan (credentials from its file)."""
    from quorum.security.client import ClientSecurity

    options = {"bootstrap.controllers": entry.bootstrap, "quorum.protocol": entry.protocol,
               "cluster.id": entry.cluster_id}
    if entry.idle_flush_s is not None:
        options["idleFlushSeconds"] = str(entry.idle_flush_s)
    if entry.max_records:
        options["maxRecordsPerTrigger"] = str(entry.max_records)
    if entry.command_config:
        options.update(ClientSecurity.from_file(entry.command_config).options())
    return options


class _Cluster:
    """The planner's side of one cluster: its own stream reader (polled on a thread, one look at a
    time), a second reader to plan its ranges with, when it was last looked at and what was seen."""

    def __init__(self, entry: PlanEntry):
        self.entry = entry
        options = quorum_of(entry)
        self.stream = SparkraftStreamReader(options)
        self.stream.retry_for = POLL_RETRY_S
        self.quorum = self.stream.quorum
        self.planning = None  # the reader split_range asks where a snapshot ends
        self.pending: Optional[futures.Future] = None
        self.looked_at = float("-inf")
        self.next_look = float("-inf")
        self.failures = 0
        self.end: Optional[int] = None  # the end the last answered look gave
        self.error: Optional[str] = None

    def due(self, now: float, available_now: bool) -> bool:
        """Whether to look at the cluster now (an available-now run looks at once: its target is set)."""
        return (self.pending is None and not self.entry.paused and now >= self.next_look
                and (available_now or now - self.looked_at >= self.entry.trigger_s))

    def look(self, start: int, limit) -> int:
        return self.stream.latestOffset({"offset": start}, limit)["offset"]

    def answered(self, now: float) -> None:
        """Take the finished look's answer, or its error (then the next look waits)."""
        future, self.pending = self.pending, None
        try:
            self.end, self.error, self.failures = future.result(), None, 0
        except Exception as e:
            self.failures += 1
            self.error = str(e).splitlines()[0][:500] if str(e) else type(e).__name__
            self.next_look = now + min(POLL_BACKOFF_S[1], POLL_BACKOFF_S[0] * 2 ** min(self.failures - 1, 6))
            self.close()  # a broken connection is opened again at the next look

    def close(self) -> None:
        for reader in (self.stream._reader, self.planning):
            if reader is not None:
                try:
                    reader.close()
                except Exception as e:  # closing a broken connection: nothing left to do
                    log.debug("closing a reader of %s: %s", self.entry.name, e)
        self.stream._reader = self.planning = None


class FleetStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict):
        if not options.get("fleet.plan"):
            raise ValueError("the sparkraft-fleet source needs option fleet.plan=PATH (streaming/fleet_plan.py)")
        self.plan = Path(options["fleet.plan"])
        self.per_partition = _positive(options, "recordsPerPartition") or RECORDS_PER_PARTITION
        self.clusters: dict[str, _Cluster] = {}
        self.pool = futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="fleet-look")
        self._reach: dict[str, dict] = {}
        self.available_now = False

    def __getstate__(self) -> dict:
        """What a worker needs to ``read`` (Spark pickles the reader for them): not the planner's
        threads and connections."""
        return {"plan": self.plan, "per_partition": self.per_partition}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _refresh(self) -> dict[str, _Cluster]:
        """The clusters as the plan now says: new ones added, removed ones closed, the rest updated."""
        entries = read_plan(self.plan)
        for name in [n for n in self.clusters if n not in entries]:
            self.clusters.pop(name).close()
        for name, entry in entries.items():
            c = self.clusters.get(name)
            if c is None or (c.entry.bootstrap, c.entry.protocol, c.entry.command_config) != \
                    (entry.bootstrap, entry.protocol, entry.command_config):
                if c is not None:
                    c.close()
                self.clusters[name] = _Cluster(entry)
            else:
                c.entry = entry
        return self.clusters

    def initialOffset(self) -> dict:
        return {"clusters": {n: {"offset": c.entry.applied, "redo": c.entry.redo}
                             for n, c in self._refresh().items()}}

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: each cluster up to its high watermark now; one that does not
        answer within PREPARE_BUDGET_S has nothing to read in this run (the driver says so)."""
        clusters = self._refresh()
        self.available_now = True
        looks = {n: self.pool.submit(c.stream.prepareForTriggerAvailableNow) for n, c in clusters.items()}
        futures.wait(looks.values(), timeout=PREPARE_BUDGET_S)
        for name, look in looks.items():
            c = clusters[name]
            error = look.exception() if look.done() else TimeoutError("no answer")
            if error is not None:
                c.stream._target = c.entry.applied
                c.error = str(error).splitlines()[0][:500] or type(error).__name__
            c.end = c.stream._target
        self._say_reach()

    def latestOffset(self, start: Optional[dict] = None, limit=None) -> dict:
        clusters = self._refresh()
        starts = (start or {}).get("clusters", {})
        now = time.monotonic()
        for name, c in clusters.items():
            if c.due(now, self.available_now):
                begin = max(starts.get(name, {}).get("offset", c.entry.applied), c.entry.applied)
                c.pending, c.looked_at = self.pool.submit(c.look, begin, None), now
        pending = [c.pending for c in clusters.values() if c.pending is not None]
        if pending:
            futures.wait(pending, timeout=POLL_BUDGET_S)
        out = {}
        for name, c in clusters.items():
            if c.pending is not None and c.pending.done():
                c.answered(time.monotonic())
            begin = starts.get(name, {}).get("offset", c.entry.applied)
            end = begin if c.entry.paused or c.end is None else max(begin, c.end)
            out[name] = {"offset": end, "redo": c.entry.redo}
        self._say_reach()
        return {"clusters": out}

    def reportLatestOffset(self) -> dict:
        return {"clusters": {n: {"offset": c.stream._last_hw} for n, c in self.clusters.items()}}

    def _say_reach(self) -> None:
        reach = {n: {"hw": c.stream._last_hw if c.end is not None else None, "error": c.error}
                 for n, c in self.clusters.items()}
        if reach != self._reach:
            write_reach(self.plan, reach)
            self._reach = reach

    def partitions(self, start: dict, end: dict) -> list[FleetPartition]:
        """Each cluster's range from where its tables end to the batch's end, packed into tasks."""
        clusters = self._refresh()
        pieces = []
        for name, position in sorted(end.get("clusters", {}).items()):
            c = clusters.get(name)
            if c is None or c.entry.paused or position["offset"] <= c.entry.applied:
                continue
            if c.planning is None:
                c.planning = c.quorum.reader(timeout=READ_TIMEOUT_S)
            for r in split_range(c.planning, c.entry.applied, position["offset"], self.per_partition):
                pieces.append(Piece(name, c.quorum, r))
        return pack(pieces, self.per_partition)

    def read(self, partition: FleetPartition) -> Iterator[pa.RecordBatch]:
        return read_pieces(partition.pieces)

    def commit(self, end: dict) -> None:
        pass  # each cluster's log is its own source of truth; nothing to release

    def stop(self) -> None:
        for c in self.clusters.values():
            c.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def pack(pieces: list[Piece], per_partition: int) -> list[FleetPartition]:
    """Pieces in tasks of at most ``per_partition`` records (a piece that loads a snapshot, whose
    size is not known, gets a task of its own)."""
    out, task, size = [], [], 0
    for p in pieces:
        n = p.range.end - p.range.start
        if task and (size + n > per_partition or p.range.first and n >= per_partition):
            out.append(FleetPartition(tuple(task)))
            task, size = [], 0
        task.append(p)
        size += n
    if task:
        out.append(FleetPartition(tuple(task)))
    return out


def read_pieces(pieces: tuple[Piece, ...]) -> Iterator[pa.RecordBatch]:
    """Each piece's records with its cluster's name; a piece that cannot be read, one READ_ERROR row."""
    for p in pieces:
        name = pa.array([p.cluster], pa.string())
        try:
            for batch in read_range(p.quorum, p.range, timeout=READ_TIMEOUT_S, retry_for=READ_TIMEOUT_S):
                yield pa.RecordBatch.from_arrays([pa.repeat(name[0], batch.num_rows), *batch.columns],
                                                 schema=FLEET_ARROW_SCHEMA)
        except Exception as e:  # this cluster's trouble: the others' ranges in this task are still read
            message = str(e).splitlines()[0][:500] if str(e) else type(e).__name__
            yield pa.RecordBatch.from_pylist([{"cluster": p.cluster, "offset": p.range.start, "type": ERROR_TYPE,
                                               "json": message}], schema=FLEET_ARROW_SCHEMA)


class FleetDataSource(DataSource):
    """``format("sparkraft-fleet")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "sparkraft-fleet"

    def schema(self) -> str:
        return FLEET_SCHEMA_DDL

    def streamReader(self, schema) -> FleetStreamReader:
        _leave_stopping_to_the_driver()
        return FleetStreamReader(self.options)
