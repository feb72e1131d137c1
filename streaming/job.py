"""The materialisation job: the ``sparkraft`` stream into the Delta tables, one micro-batch at a time.

Used by ``jobs/materialize.py`` (spark-submit or plain python), ``sparkraft materialize`` and the
demo. Spark owns the stream's progress (its checkpoint holds the offsets of each micro-batch); the
Delta tables own what has been applied (writer.py): the two together give exactly-once.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import NamedTuple, Optional

from delta_tables.schemas import RECORDS
from delta_tables.spark_session import local_spark_session
from quorum.security.client import ClientSecurity
from streaming.query_failure import FailedAsItStopped, QueryFailed
from streaming.stop import GracefulStop
from streaming.watchdog import STALL_AFTER_S, QueryStalled, Watchdog

log = logging.getLogger(__name__)

CLUSTER_MARKER = "sparkraft-cluster-id"


RESTARTS = 5  # failed queries in a row, none of which applied a record, before the job gives up


class CheckpointError(ValueError):
    """The checkpoint belongs to another cluster."""


def spark_session(app_name: str = "sparkraft-materializer", delta: Optional[bool] = None):
    """The shared Spark session (delta_tables/spark_session.py: ``delta`` says whether with Delta's
    connector) with the ``sparkraft`` data source registered, so the Python data source can
    connect back."""
    from streaming.source import SparkraftDataSource

    spark = local_spark_session(app_name, delta=delta)
    spark.dataSource.register(SparkraftDataSource)
    return spark


def check_checkpoint(checkpoint: str, cluster_id: str) -> None:
    """Bind a local checkpoint directory to a cluster: a checkpoint of another cluster's log would
    resume at offsets that mean nothing here."""
    if "://" in checkpoint and not checkpoint.startswith("file://"):
        return  # object stores: Spark's own checkpoint checks only
    root = Path(checkpoint.removeprefix("file://"))
    marker = root / CLUSTER_MARKER
    if marker.exists():
        found = marker.read_text().strip()
        if found != cluster_id:
            raise CheckpointError(f"checkpoint {checkpoint} belongs to cluster {found}, not {cluster_id}")
        return
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text(cluster_id + "\n")


class RemoteBatchSink:
    """The foreachBatch function of a query run through Spark Connect: it runs on the Connect
    server, in a Python process of its own, so it is sent as what it needs to make the materialiser
    there (the warehouse and its storage options), and makes it at its first batch; the
    materialiser rebuilds what it knows from the tables, as at any start."""

    def __init__(self, warehouse: str, storage_options: Optional[dict]):
        self.warehouse = warehouse
        self.storage_options = storage_options
        self._materializer = None

    def __call__(self, df, batch_id: int) -> None:
        if self._materializer is None:
            from delta_tables import storage
            from delta_tables.writer import DeltaRsWriter
            from streaming.materializer import Materializer

            storage.set_options(self.storage_options or {})
            self._materializer = Materializer(DeltaRsWriter(self.warehouse))
        self._materializer.process(df.toArrow())


def remote_spark_session(remote: str):
    """A Spark Connect session (``sc://HOST:PORT``) with the ``sparkraft`` source registered: its
    driver-side half then runs on the Connect server."""
    from pyspark.sql import SparkSession

    from streaming.source import SparkraftDataSource

    spark = SparkSession.builder.remote(remote).getOrCreate()
    spark.dataSource.register(SparkraftDataSource)
    return spark


def run(bootstrap: str, warehouse: str, checkpoint: str, trigger_s: Optional[float] = 1.0,
        available_now: bool = False, spark=None, max_records_per_trigger: Optional[int] = None,
        timeout: float = 15.0, writer: str = "deltalake", idle_flush_s: Optional[float] = None,
        security: Optional[ClientSecurity] = None, remote: Optional[str] = None,
        metrics_listener: Optional[tuple[str, int]] = None, protocol: str = "sparkraft",
        stall_after_s: float = STALL_AFTER_S) -> None:
    """Run the job until stopped (or, with ``available_now``, until it has caught up).

    ``idle_flush_s``: a tail of only NoOp/LeaderChange records waits this long before it is
    materialised (the source's ``idleFlushSeconds``; None: its default); available-now takes
    everything at once. ``protocol``: whose quorum it reads, sparkraft's or Apache Kafka's ("kafka").
    ``stall_after_s``: how long a query may make no progress while the log moves on before the
    watchdog acts (streaming/watchdog.py; 0: no watchdog). On sparkraft's controllers, the job holds
    the log from where its tables end (streaming/log_hold.py), so retention keeps what they lack."""
    from delta_tables.writer import DeltaRsWriter
    from streaming.log_hold import LogHolder
    from streaming.materializer import Materializer
    from streaming.quorum_access import cluster_id_of, log_reader

    source = Source(bootstrap, protocol, security)
    cluster_id = cluster_id_of(protocol, bootstrap, timeout, security)
    if remote is not None:
        _run_remote(remote_spark_session(remote), source, cluster_id, warehouse, checkpoint, trigger_s,
                    available_now, max_records_per_trigger, idle_flush_s, timeout)
        return
    check_checkpoint(checkpoint, cluster_id)
    # Delta's connector only for its writer: delta-rs writes otherwise, and its jars cost the JVM's start
    spark = spark or spark_session(delta=writer == "delta-spark")
    if writer == "delta-spark":
        from delta_tables.spark_writer import DeltaSparkWriter

        materializer = Materializer(DeltaSparkWriter(warehouse, spark))
    else:
        materializer = Materializer(DeltaRsWriter(warehouse))
    reader = log_reader(source.protocol, source.bootstrap, cluster_id, min(timeout, 5.0), source.security) \
        if stall_after_s else None  # the watchdog's own, for the log's end
    watchdog = Watchdog(materializer, reader.high_watermark, stall_after_s).start() if reader else None
    metrics = serve_metrics(materializer, metrics_listener, watchdog) if metrics_listener else None
    # the controllers keep the log until the tables hold it (Apache Kafka's keep no holds)
    holder = LogHolder(source, holder_name(warehouse)) if protocol == "sparkraft" else None
    materializer.after_batch = holder.committed if holder is not None else None
    try:
        _run(spark, materializer, source, cluster_id, checkpoint, trigger_s, available_now,
             max_records_per_trigger, idle_flush_s, timeout, watchdog)
    finally:
        if holder is not None:
            holder.close()
        if watchdog is not None:
            watchdog.close()
            reader.close()
        if metrics is not None:
            metrics.stop()


def serve_metrics(materializer, listener: tuple[str, int], watchdog: Optional[Watchdog] = None):
    """``/metrics`` of the job (Prometheus text): how fresh the tables are and how far they reach."""
    from quorum.metrics.registry import Registry
    from quorum.metrics.server import MetricsServer

    registry = Registry()
    materializer_metrics(registry, materializer)
    if watchdog is not None:
        watchdog_metrics(registry, watchdog)
    return MetricsServer(listener[0], listener[1], registry).start()


def watchdog_metrics(registry, watchdog) -> None:
    """The watchdog's metrics (streaming/watchdog.py): how far the tables are behind the log, and stalls."""
    registry.gauge("sparkraft_materializer_lag_records", "Records committed in the log that the tables do not "
                   "hold yet (the quorum's high watermark read every few seconds; none: not reachable).",
                   lambda: watchdog.lag)
    registry.counter("sparkraft_materializer_stalls_total", "Times the job found its streaming query making no "
                     "progress while the log moved on, and ended it to start it again.", lambda: watchdog.stalls)


def materializer_metrics(registry, materializer) -> None:
    """The job's metrics, read from its materialiser when Prometheus scrapes."""
    registry.histogram(materializer.freshness)
    registry.gauge("sparkraft_materializer_last_freshness_seconds", "The freshness of the latest micro-batch.",
                   lambda: materializer.last_freshness_s)
    registry.gauge("sparkraft_materializer_applied_offset", "The last log offset the tables hold.",
                   lambda: materializer.next_offset - 1)
    registry.gauge("sparkraft_materializer_last_cut_timestamp_seconds", "When this job last committed a cut (Unix "
                   "time; none yet: no sample). A job keeping up commits one at least every --idle-flush.",
                   lambda: materializer.last_cut_at)
    for h in materializer.histograms.values():
        registry.histogram(h)
    registry.counter("sparkraft_materializer_rows_merged_total", "Rows merged into (or deleted from) each state "
                     "table.", lambda: dict(materializer.rows_written), label="table")


class Source(NamedTuple):
    """Which quorum the job reads: its controllers, whose they are (sparkraft's, or Apache Kafka's:
    "kafka") and how to reach them."""

    bootstrap: str
    protocol: str = "sparkraft"
    security: Optional[ClientSecurity] = None


def _run(spark, materializer, source: Source, cluster_id: str, checkpoint: str, trigger_s: Optional[float],
         available_now: bool, max_records_per_trigger: Optional[int], idle_flush_s: Optional[float],
         timeout: float, watchdog: Optional[Watchdog] = None) -> None:
    # Available-now: one query (the source implements Trigger.AvailableNow: it reads up to the high
    # watermark it sees when the query starts, in as many micro-batches as the limits make)
    target = _high_watermark(source, cluster_id, timeout) if available_now else None
    _quiet_spark_failure_report(spark)
    with GracefulStop() as stop:
        stop.watch_jvm(spark)
        failures = 0
        while True:
            before = materializer.next_offset
            try:
                _run_query(spark, materializer, source, cluster_id, checkpoint, max_records_per_trigger,
                           None if available_now else trigger_s, 0.0 if available_now else idle_flush_s, stop,
                           watchdog)
                break
            except FailedAsItStopped:
                raise  # already judged: not the stop's doing
            except QueryFailed as e:
                if stop.requested.is_set():
                    _stopped_by_a_failure(stop, materializer, e)
                    return
                failures = 1 if materializer.next_offset > before else failures + 1
                if not e.transient or failures > RESTARTS:
                    raise
                delay = min(30.0, 2.0 ** failures)  # 2, 4, 8, 16, 30 s: a loaded machine's load may pass
                log.warning("%s; starting it again from its checkpoint in %.0fs (%d of %d tries in a row)",
                            e, delay, failures, RESTARTS)
                if stop.requested.wait(delay):
                    _say_stopped(stop, materializer)
                    return
                materializer.reload()  # what the failed query applied but did not write, Spark replays
    if target is not None:
        _check_reached(target, materializer.next_offset - 1)


def _stopped_by_a_failure(stop: GracefulStop, materializer, error: "QueryFailed") -> None:
    """The query failed after a stop was asked for. Where the stop's signal caused it, a stop all the
    same: a service manager's SIGTERM reaches the job's whole process group, and with it any process
    Spark has just started (Hadoop runs ``chmod`` for each checkpoint file it writes), which dies of
    it and fails the query. Each micro-batch's tables commit atomically and Spark replays the one it
    had not marked done, so the tables are whole either way; the failure is said in one line and
    the job exits 0. A failure of any other cause is raised: one line, exit 1 (the report under
    ``--debug``)."""
    if not error.caused_by_a_stop:
        raise FailedAsItStopped(f"{error} (as the job stopped on {stop.reason})", error.report) from error
    log.info("The query ended with an error as it stopped (the signal also reaches the processes Spark starts); "
             "the next start replays the micro-batch it had in flight")
    log.debug("The query's error as it stopped: %s", error.report or error)
    _say_stopped(stop, materializer)


def _say_stopped(stop: GracefulStop, materializer) -> None:
    """The one Stopped line, with the offset the tables hold by their own commits (a query that
    failed mid-batch may have applied more in memory than it wrote)."""
    log.info("%sStopped (%s): the tables hold the log up to offset %d", materializer.label, stop.reason,
             materializer.writer.applied(RECORDS))


def _quiet_spark_failure_report(spark) -> None:
    """Spark logs a failed query's whole report (a Java stack trace) at ERROR from its stream
    thread. The job says every failure itself, in one line naming the cause (the whole report with
    ``--debug``), so that log is silenced: otherwise a failure is said twice, and a failure as the
    job stops (see _stopped_by_a_failure) prints a stack trace for a clean stop."""
    jvm = spark.sparkContext._jvm
    configurator, off = jvm.org.apache.logging.log4j.core.config.Configurator, jvm.org.apache.logging.log4j.Level.OFF
    for name in SPARK_QUERY_LOGGERS:
        configurator.setLevel(name, off)


# The loggers of Spark's stream thread, which report a failed query (Spark 4.0's package, and 4.1's on)
SPARK_QUERY_LOGGERS = tuple(f"org.apache.spark.sql.execution.streaming{package}.{cls}"
                            for package in ("", ".runtime") for cls in ("MicroBatchExecution", "StreamExecution"))


def _high_watermark(source: Source, cluster_id: str, timeout: float) -> int:
    """The quorum's high watermark now: what an available-now run must reach."""
    from streaming.quorum_access import log_reader

    with log_reader(source.protocol, source.bootstrap, cluster_id, timeout, source.security) as reader:
        return reader.high_watermark()


def _check_reached(target: int, applied: Optional[int]) -> None:
    """An available-now run must leave the tables holding everything before ``target``."""
    if applied is None or applied < target - 1:
        raise RuntimeError(f"the tables did not reach offset {target - 1} (at {applied})")


def _stream(spark, source: Source, cluster_id: str, max_records_per_trigger: Optional[int],
            idle_flush_s: Optional[float]):
    """The ``sparkraft`` source's DataFrame with the job's options."""
    reader = (spark.readStream.format("sparkraft").option("bootstrap.controllers", source.bootstrap)
              .option("quorum.protocol", source.protocol)
              .option("cluster.id", cluster_id).option("startingOffsets", "earliest"))
    if idle_flush_s is not None:
        reader = reader.option("idleFlushSeconds", str(idle_flush_s))
    for key, value in (source.security.options() if source.security is not None else {}).items():
        reader = reader.option(key, value)
    if max_records_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", str(max_records_per_trigger))
    return reader.load()


def holder_name(warehouse: str) -> str:
    """The job's hold on the log: ``materialize:`` and its warehouse (any user:password@ in a URI
    left out), at most the 256 characters a holder's name takes."""
    scheme, sep, rest = warehouse.partition("://")
    if sep:
        authority, slash, path = rest.partition("/")
        warehouse = f"{scheme}://{authority.rpartition('@')[2]}{slash}{path.partition('?')[0]}"
    return ("materialize:" + warehouse)[:256]


def _run_remote(spark, source: Source, cluster_id: str, warehouse: str, checkpoint: str,
                trigger_s: Optional[float], available_now: bool, max_records_per_trigger: Optional[int],
                idle_flush_s: Optional[float], timeout: float) -> None:
    """The query through Spark Connect: the source's driver side and the materialiser run on the
    Connect server (its checkpoint path is the server's); this process only starts and stops it."""
    from delta_tables import storage
    from delta_tables.writer import DeltaRsWriter, latest_applied

    DeltaRsWriter(warehouse).ensure_tables()  # a bad warehouse or store: one line here, not in a server log
    target = _high_watermark(source, cluster_id, timeout)
    writer = (_stream(spark, source, cluster_id, max_records_per_trigger, 0.0 if available_now else idle_flush_s)
              .writeStream.foreachBatch(RemoteBatchSink(warehouse, storage.options()))
              .option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(
        processingTime=f"{trigger_s} seconds")
    with GracefulStop() as stop:
        query = writer.start()
        log.info("Materializing %s into %s through Spark Connect (checkpoint %s on the server)", source.bootstrap,
                 warehouse, checkpoint)
        try:
            while not stop.requested.is_set() and not _ended(query, 0.5):
                pass
        finally:
            if query.isActive:
                query.stop()  # a batch cut short is replayed at the next start: exactly once either way
    if query.exception() is not None:
        raise QueryFailed.of(query.exception())
    applied = latest_applied(DeltaRsWriter(warehouse))
    if available_now:
        _check_reached(target, applied)
    log.info("Stopped: the tables hold the log up to offset %s", applied)


def _run_query(spark, materializer, source: Source, cluster_id: str, checkpoint: str,
               max_records_per_trigger: Optional[int], trigger_s: Optional[float],
               idle_flush_s: Optional[float], stop: GracefulStop, watchdog: Optional[Watchdog] = None) -> None:
    """One streaming query: until stopped, or (``trigger_s`` None) until what is available now;
    ``watchdog`` looks at it between waits (a stalled query that will not end is left running:
    the job then exits)."""
    writer = (_stream(spark, source, cluster_id, max_records_per_trigger, idle_flush_s)
              .writeStream.foreachBatch(materializer.foreach_batch).option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if trigger_s is None else writer.trigger(
        processingTime=f"{trigger_s} seconds")
    query = writer.start()
    log.info("Materializing %s%s into %s (checkpoint %s)", source.bootstrap,
             " (Apache Kafka's controllers)" if source.protocol == "kafka" else "",
             materializer.writer.warehouse, checkpoint)
    if watchdog is not None:
        watchdog.watch(query)
    stalled = False
    try:
        while not stop.requested.is_set() and not _ended(query, 0.2):
            if watchdog is not None:
                watchdog.check(query)
        if stop.requested.is_set():
            _stop_query(spark, query, materializer, stop)
            return
    except QueryStalled:
        stalled = True
        raise
    finally:
        if query.isActive and not stalled:
            query.stop()
    if query.exception() is not None:
        raise QueryFailed.of(query.exception())


def _stop_query(spark, query, materializer, stop: GracefulStop) -> None:
    """A stop asked for while the query runs: stop between micro-batches, then say how it ended. The
    micro-batch in flight, or its checkpoint, may have failed meanwhile: Spark, stopped at once
    after the batch, may not record a batch's failure, so the materialiser's is asked too."""
    _stop_between_batches(spark, query, materializer)
    failure = query.exception() or materializer.batch_failure
    if failure is not None:
        _stopped_by_a_failure(stop, materializer, QueryFailed.of(failure))
        return
    _say_stopped(stop, materializer)


def _ended(query, seconds: float) -> bool:
    """``query.awaitTermination(seconds)``, with a failed query's error said by its cause."""
    try:
        return query.awaitTermination(seconds)
    except Exception as e:
        if type(e).__name__ != "StreamingQueryException":
            raise
        raise QueryFailed.of(e) from e


class _NotARefusal(logging.Filter):
    """Drops py4j's report of a micro-batch the materialiser refused (StoppingError): raising is
    how Spark is told not to commit that batch, which is the point, not an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        from streaming.batch_gate import StoppingError

        return not (record.exc_info and isinstance(record.exc_info[1], StoppingError))


def _quiet_shutdown_noise(spark) -> None:
    """What PySpark reports while a job stops on purpose, and only then: py4j logs the StoppingError
    of a refused micro-batch, and the accumulator server prints the EOF of the connection the JVM
    closes as it exits (its handler reads updates until then). Anything else still shows."""
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(name).addFilter(_NotARefusal())
    server = getattr(spark.sparkContext, "_accumulatorServer", None)  # PySpark's, private
    if server is not None:
        report = server.handle_error

        def handle_error(request, client_address) -> None:
            if not isinstance(sys.exc_info()[1], EOFError):
                report(request, client_address)

        server.handle_error = handle_error


def _stop_between_batches(spark, query, materializer, patience_s: float = 300.0) -> None:
    """Stop ``query`` after the micro-batch in flight, if any, has finished writing.

    The materialiser is told to refuse batches from now on (one that starts is failed before it
    writes anything, so Spark never records it as done and replays it at the next start), then
    the query is stopped. Nothing is half written, and every offset lands exactly once either way.
    Errors the JVM logs for a query stopped on purpose are silenced, and so is PySpark's own noise
    about it (see _quiet_shutdown_noise)."""
    spark.sparkContext.setLogLevel("OFF")
    _quiet_shutdown_noise(spark)
    if not materializer.refuse_batches(timeout=patience_s):
        log.warning("The micro-batch in flight did not finish in %.0fs; stopping anyway (it is replayed at the "
                    "next start)", patience_s)
    query.stop()
