"""``sparkraft materialize --sources FILE``: a fleet of clusters in one Spark application, one
streaming query and one warehouse (docs/use/fleet.md; delta_tables/fleet.py for the layout).

The query reads every cluster's log through the ``sparkraft-fleet`` source (streaming/
fleet_source.py): one planner, one offset and commit log, one micro-batch loop for the whole fleet,
its ranges read by the executors. Each micro-batch's rows are split by cluster on the driver and
applied by each cluster's own materialiser (streaming/fleet_member.py) to that cluster's own
tables, several clusters at once, so no two clusters ever share a Delta commit and each keeps its
exactly-once cuts by its own offsets. After each micro-batch the plan tells the source where each
cluster's tables now end, which is where its next range starts: a cluster whose part failed is
read again later, while the batch is committed for everyone else.

The sources file is read again every RELOAD_S: a cluster added connects and joins the stream, one
removed (or whose entry changed) leaves it between micro-batches; the others are not touched. A
failure of the query itself (not of one cluster) starts it again with backoff.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import pyarrow.compute as pc

from delta_tables.fleet import write_sources
from quorum.metrics.processes import descendants
from streaming.batch_gate import BatchGate
from streaming.fleet_member import Member
from streaming.fleet_plan import read_reach, write_plan
from streaming.job import RESTARTS
from streaming.query_failure import QueryFailed
from streaming.sources_file import ClusterSource, SourcesError, read_sources

log = logging.getLogger("streaming.job")

RELOAD_S = 5.0  # how often the sources file is read again
TICK_S = 0.5  # how often the driver looks at its clusters between micro-batches
APPLY_THREADS = 4  # clusters applied at once within a micro-batch (their Delta writes overlap)
# The Python processes Spark starts to find, create and plan a Python data source: a PySpark daemon
# for each, with a forked worker, kept for the application's life though a query needs them only
# when it starts (380 MB together, a sixth of a 40-cluster fleet's memory). Once the fleet's query
# has run a micro-batch they are ended; Spark starts one again if it is needed again (a new query).
PLANNING_MODULES = (b"pyspark.sql.worker.lookup_data_sources", b"pyspark.sql.worker.create_data_source",
                    b"pyspark.sql.worker.plan_data_source_read")
QUERY_TRIGGER_S = 0.25  # the query's own trigger: each cluster is looked at once its own trigger has passed


class Fleet:
    """The clusters as the sources file says, and the one query's micro-batches split among them."""

    def __init__(self, fleet: str, checkpoints: str, available_now: bool):
        self.fleet, self.checkpoints, self.available_now = fleet, checkpoints, available_now
        self.members: dict[str, Member] = {}
        self.removed: dict[str, Member] = {}
        self.plan_dir = Path(tempfile.mkdtemp(prefix="sparkraft-fleet-"))
        self.plan = self.plan_dir / "plan.json"
        self._planned: Optional[list] = None
        self._publishing = threading.Lock()
        self._written: Optional[list] = None
        self.gate = BatchGate()  # a micro-batch at a time; none once the job is stopping
        self.batches = 0  # micro-batches applied
        self.pool = ThreadPoolExecutor(APPLY_THREADS, thread_name_prefix="fleet-apply")
        self.publish()

    def apply(self, sources: list[ClusterSource]) -> None:
        wanted = {s.name: s for s in sources}
        with self.gate.lock:
            for name in [n for n in self.members if n not in wanted or wanted[n] != self.members[n].source]:
                member = self.members.pop(name)
                member.state = "removed"
                self.removed[name] = member
                threading.Thread(target=member.stop, daemon=True).start()
                log.info("Cluster %s: stopping (its entry was removed or changed)", name)
            for name, source in wanted.items():
                if name not in self.members:
                    self.removed.pop(name, None)
                    self.members[name] = Member(source, self.fleet, self.checkpoints, self.available_now).start()
                    log.info("Cluster %s: materialising %s into %s", name, source.bootstrap,
                             self.members[name].warehouse)
            self.publish()

    def publish(self) -> None:
        """The plan, where it changed: the clusters to read and where each one's tables end. From
        the micro-batch, the tick and a change of the sources file, so one at a time."""
        with self._publishing:
            entries = [m.plan_entry() for m in self.members.values() if m.ready]
            if entries != self._planned:
                write_plan(self.plan, entries)
                self._planned = entries

    def tick(self) -> None:
        reach, now = read_reach(self.plan), time.monotonic()
        for name, m in list(self.members.items()):
            m.tick(now, reach.get(name))
        self.publish()

    def foreach_batch(self, df, batch_id: int) -> None:
        """``writeStream.foreachBatch`` target: each cluster's rows to its own materialiser."""
        with self.gate.batch(batch_id):
            started = time.monotonic()
            table = df.toArrow()
            fetched = time.monotonic()
            work = []
            for name in pc.unique(table.column("cluster")).to_pylist():
                member = self.members.get(name)
                if member is not None and member.ready:
                    work.append((member, table.filter(pc.equal(table.column("cluster"), name)).drop_columns("cluster")))
            results = list(self.pool.map(lambda w: (w[0].name, w[0].apply(w[1])), work))
            self.publish()
            self.batches += 1
        cut = {n: r["cut"] for n, r in results if r is not None and "cut" in r}
        failed = [n for n, r in results if r is None]
        log.info("Micro-batch %d: %d records of %d clusters, %d cut%s (source %.2fs, Delta %.2fs)", batch_id,
                 table.num_rows, len(results), len(cut), f"; failed: {', '.join(failed)}" if failed else "",
                 fetched - started, time.monotonic() - fetched)
        log.debug("Micro-batch %d cuts: %s", batch_id, cut)

    def refuse_batches(self, timeout: float) -> bool:
        """From now on refuse every micro-batch, once the one running (if any) has finished."""
        return self.gate.refuse(timeout)

    def write_status(self) -> None:
        rows = [m.status() for m in [*self.members.values(), *self.removed.values()]]
        key = [{k: v for k, v in r.items() if k != "updated_at"} for r in rows]
        if key != self._written:
            write_sources(self.fleet, rows)
            self._written = key

    def close(self) -> None:
        for m in [*self.members.values(), *self.removed.values()]:
            m.stop()
        self.pool.shutdown(wait=True)
        shutil.rmtree(self.plan_dir, ignore_errors=True)


def fleet_metrics(registry, fleet_: Fleet) -> None:
    """The fleet's metrics, a series per cluster (label ``cluster``), read from its members when
    Prometheus scrapes: the single-cluster job's names, and whether each cluster is up."""
    def each(read):  # a cluster without a value yet has no sample
        return lambda: {n: v for n, m in list(fleet_.members.items()) if (v := read(m)) is not None}

    registry.gauge("sparkraft_fleet_cluster_up", "1 while the cluster is followed (or caught up), 0 while it is "
                   "starting or failing (its error in the sources table and the log).",
                   each(lambda m: 1.0 if m.state in ("running", "done") else 0.0), label="cluster")
    registry.gauge("sparkraft_materializer_applied_offset", "The last log offset the cluster's tables hold.",
                   each(lambda m: m.materializer.next_offset - 1 if m.materializer else None), label="cluster")
    registry.gauge("sparkraft_materializer_last_cut_timestamp_seconds", "When the cluster's tables last had a cut "
                   "(Unix time).", each(lambda m: m.materializer.last_cut_at if m.materializer else None),
                   label="cluster")
    registry.gauge("sparkraft_materializer_last_freshness_seconds", "The freshness of the cluster's latest "
                   "micro-batch.", each(lambda m: m.materializer.last_freshness_s if m.materializer else None),
                   label="cluster")


def run_fleet(sources_path: str, fleet: str, checkpoints: str, available_now: bool = False, spark=None,
              metrics_listener: Optional[tuple[str, int]] = None) -> None:
    """Run every cluster of ``sources_path`` until stopped (or, ``available_now``, until each has
    caught up or been given up on); ``metrics_listener``: serve fleet_metrics there."""
    from streaming.fleet_source import FleetDataSource
    from streaming.job import spark_session
    from streaming.stop import GracefulStop

    sources = read_sources(sources_path)  # a bad file: one line, before Spark starts
    spark = spark or spark_session("sparkraft-fleet", delta=False)
    spark.dataSource.register(FleetDataSource)
    seen = Path(sources_path).stat().st_mtime
    fleet_ = Fleet(fleet, checkpoints, available_now)
    metrics = None
    with GracefulStop() as stop:
        stop.watch_jvm(spark)
        fleet_.apply(sources)
        if metrics_listener is not None:
            from quorum.metrics.registry import Registry
            from quorum.metrics.server import MetricsServer

            registry = Registry()
            fleet_metrics(registry, fleet_)
            metrics = MetricsServer(metrics_listener[0], metrics_listener[1], registry).start()
        try:
            if available_now:  # each cluster connected or given up on, so the one run reads them all
                while not stop.requested.is_set() and not all(m.settled for m in fleet_.members.values()):
                    stop.requested.wait(TICK_S)
            failures = 0
            while not stop.requested.is_set():
                try:
                    seen = _run_query(spark, fleet_, stop, sources_path, seen)
                    failures = 0
                except QueryFailed as e:
                    failures += 1
                    if stop.requested.is_set() or (available_now and failures > RESTARTS):
                        raise
                    delay = min(30.0, 2.0 ** failures)
                    log.warning("%s; starting the fleet's query again in %.0fs", e, delay)
                    stop.requested.wait(delay)
                    continue
                if not available_now or not _try_again(fleet_, stop):
                    break
        finally:
            fleet_.close()
            fleet_.write_status()  # each cluster's last state (closing changes none of it)
            if metrics is not None:
                metrics.stop()
    failed = [m for m in fleet_.members.values() if m.state == "failing" or not m.ready]
    if available_now and failed:
        raise RuntimeError(f"{len(failed)} cluster(s) could not be materialised: "
                           + "; ".join(f"{m.name}: {m.error}" for m in failed))


def _run_query(spark, fleet_: Fleet, stop, sources_path: str, seen: float) -> float:
    """The fleet's query, until stopped or (available now) caught up; the sources file's time seen."""
    from streaming.job import _ended, _stop_between_batches

    writer = (spark.readStream.format("sparkraft-fleet").option("fleet.plan", str(fleet_.plan)).load()
              .writeStream.foreachBatch(fleet_.foreach_batch)
              .option("checkpointLocation", f"{fleet_.checkpoints.rstrip('/')}/query"))
    writer = writer.trigger(availableNow=True) if fleet_.available_now else writer.trigger(
        processingTime=f"{QUERY_TRIGGER_S} seconds")
    query = writer.start()
    reloaded, batches = time.monotonic(), fleet_.batches
    try:
        while not _ended(query, TICK_S):
            if batches is not None and fleet_.batches > batches:
                end_planning_daemons()
                batches = None
            if stop.requested.is_set():
                _stop_between_batches(spark, query, fleet_)
                log.info("Stopped (%s)", stop.reason)
                return seen
            fleet_.tick()
            if time.monotonic() - reloaded >= RELOAD_S:
                seen, reloaded = _reload(sources_path, seen, fleet_), time.monotonic()
            fleet_.write_status()
    finally:
        if query.isActive:
            query.stop()
    fleet_.tick()
    if fleet_.available_now:
        for m in fleet_.members.values():
            if m.ready and m.state == "running":
                m.state = "done"
    return seen


def end_planning_daemons() -> int:
    """End the PySpark daemons (and their workers) that only plan a query (PLANNING_MODULES): the
    JVM's children, which are this process's descendants where PySpark started the JVM, and its
    parent's under spark-submit (the JVM started this process); how many were found."""
    found = 0
    jvm_side = os.getppid() if "PYSPARK_GATEWAY_PORT" in os.environ else os.getpid()
    for pid in descendants(jvm_side):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"pyspark.daemon" in argv and any(m in argv for m in PLANNING_MODULES):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                found += 1
    if found:
        log.info("Ended %d Python processes Spark kept from planning the query (they are started again if needed)",
                 found)
    return found


def _try_again(fleet_: Fleet, stop) -> bool:
    """After an available-now run: whether the clusters still failing get another (each has RESTARTS
    tries); waits out their backoff first."""
    failing = [m for m in fleet_.members.values() if m.ready and m.state == "failing" and not m.given_up]
    for m in failing:
        if m.retry_at is None:  # unreachable when the run began: that was a try
            m.failed(m.error)
    failing = [m for m in failing if not m.given_up]
    if not failing:
        return False
    wait = max(0.0, min(m.retry_at for m in failing) - time.monotonic())
    if stop.requested.wait(wait):
        return False
    fleet_.tick()
    return True


def _reload(path: str, seen: float, fleet: Fleet) -> float:
    """The sources file again if it changed; a file that no longer reads keeps the clusters as they are."""
    try:
        mtime = Path(path).stat().st_mtime
    except OSError as e:
        log.warning("Sources file %s: %s (the clusters go on as they were)", path, e.strerror or e)
        return seen
    if mtime == seen:
        return seen
    try:
        fleet.apply(read_sources(path))
    except SourcesError as e:
        log.warning("%s (the clusters go on as they were)", e)
    return mtime
