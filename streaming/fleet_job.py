"""``sparkraft materialize --sources FILE``: a fleet of clusters in one Spark application and one
warehouse (docs/use/fleet.md, delta_tables/fleet.py for the layout).

Each cluster is a streaming query of its own in the one Spark session, run by a thread of its own
(ClusterRunner): its own checkpoint, its own materialiser writing its own tables, so no two
clusters ever share a Delta commit, and each keeps its exactly-once cuts by its own offsets. What
goes wrong with one cluster stays with it: an unreachable quorum, refused credentials, a query that
fails, are retried with backoff (2 s up to a minute) while its state says ``failing`` with the
error, in the log (one line when it starts failing and when it recovers) and in the ``sources``
table, and every other cluster goes on (an available-now run gives a cluster RESTARTS tries, as
the one-cluster job gives its query, so that it ends). The file is read again every few seconds: a
cluster added starts, one removed stops between its micro-batches; the others are not touched.
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Optional

from delta_tables.fleet import cluster_warehouse, status_row, write_sources
from streaming.job import RESTARTS
from streaming.sources_file import ClusterSource, SourcesError, read_sources

log = logging.getLogger("streaming.job")

RELOAD_S = 5.0  # how often the sources file is read again, and the sources table rewritten if changed
BACKOFF_S = (2.0, 60.0)  # a failing cluster's first and longest wait before it is tried again


class _Stop:
    """A stop for one cluster's query (as GracefulStop is for the job's): ``requested``, ``reason``."""

    def __init__(self):
        self.requested = threading.Event()
        self.reason = "its source was removed"

    def request(self, reason: str) -> None:
        self.reason = reason
        self.requested.set()


class ClusterRunner:
    def __init__(self, spark, source: ClusterSource, fleet: str, checkpoints: str, available_now: bool):
        self.spark, self.source, self.available_now = spark, source, available_now
        self.warehouse = source.warehouse or cluster_warehouse(fleet, source.name)
        self.checkpoint = source.checkpoint or f"{checkpoints.rstrip('/')}/{source.name}"
        self.stop = _Stop()
        self.state, self.error, self.cluster_id = "starting", "", ""
        self.materializer = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"cluster-{source.name}", daemon=True)

    def start(self) -> "ClusterRunner":
        self._thread.start()
        return self

    def status(self) -> dict:
        m = self.materializer
        return status_row(self.source.name, self.source, self.warehouse, self.state, self.cluster_id,
                          m.next_offset - 1 if m is not None else -1, None,
                          m.last_cut_at if m is not None else None, self.error)

    def _security(self):
        from quorum.security.client import ClientSecurity

        return ClientSecurity.from_file(self.source.command_config) if self.source.command_config else None

    def _run(self) -> None:
        failures = 0
        while not self.stop.requested.is_set():
            try:
                self._once()
                if self.available_now:
                    self.state = "done"
                    break
                if self.stop.requested.is_set():
                    break
            except Exception as e:  # this cluster's trouble: said, retried; the fleet goes on
                failures += 1
                message = str(e).splitlines()[0][:500] if str(e) else type(e).__name__
                giving_up = self.available_now and failures >= RESTARTS  # an available-now run ends
                if self.state != "failing" or message != self.error or giving_up:
                    log.warning("Cluster %s: %s (%s)", self.source.name, message,
                                f"given up after {failures} tries" if giving_up else "trying again")
                self.state, self.error = "failing", message
                if giving_up:
                    break
                delay = min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** min(failures - 1, 6))
                if self.stop.requested.wait(delay):
                    break
        self.done.set()

    def _once(self) -> None:
        from delta_tables.writer import DeltaRsWriter
        from streaming.job import Source, _run_query, check_checkpoint, holder_name
        from streaming.log_hold import LogHolder
        from streaming.materializer import Materializer
        from streaming.quorum_access import cluster_id_of

        s = self.source
        security = self._security()
        self.cluster_id = cluster_id_of(s.protocol, s.bootstrap, 15.0, security)
        check_checkpoint(self.checkpoint, self.cluster_id)
        self.materializer = Materializer(DeltaRsWriter(self.warehouse))
        self.materializer.label = f"Cluster {s.name}: "
        source = Source(s.bootstrap, s.protocol, security)
        holder = LogHolder(source, holder_name(self.warehouse)) if s.protocol == "sparkraft" else None
        self.materializer.after_batch = holder.committed if holder is not None else None
        if self.state == "failing":
            log.info("Cluster %s: reachable again, materialising from offset %d", s.name,
                     self.materializer.next_offset)
        self.state, self.error = "running", ""
        try:
            _run_query(self.spark, self.materializer, source, self.cluster_id,
                       self.checkpoint, s.max_records_per_trigger, None if self.available_now else s.trigger_s,
                       0.0 if self.available_now else s.idle_flush_s, self.stop)
        finally:
            if holder is not None:
                holder.close()


class Fleet:
    """The running clusters, kept as the sources file says."""

    def __init__(self, spark, fleet: str, checkpoints: str, available_now: bool):
        self.spark, self.fleet, self.checkpoints, self.available_now = spark, fleet, checkpoints, available_now
        self.runners: dict[str, ClusterRunner] = {}
        self.removed: dict[str, ClusterRunner] = {}
        self._written: Optional[list] = None

    def apply(self, sources: list[ClusterSource]) -> None:
        wanted = {s.name: s for s in sources}
        for name in [n for n in self.runners if n not in wanted or wanted[n] != self.runners[n].source]:
            runner = self.runners.pop(name)
            runner.stop.request("its source was removed or changed")
            runner.state = "removed"
            self.removed[name] = runner
            log.info("Cluster %s: stopping (its entry was removed or changed)", name)
        for name, source in wanted.items():
            if name not in self.runners:
                self.removed.pop(name, None)
                self.runners[name] = ClusterRunner(self.spark, source, self.fleet, self.checkpoints,
                                                   self.available_now).start()
                log.info("Cluster %s: materialising %s into %s", name, source.bootstrap,
                         self.runners[name].warehouse)

    def write_status(self) -> None:
        rows = [r.status() for r in [*self.runners.values(), *self.removed.values()]]
        key = [{k: v for k, v in r.items() if k != "updated_at"} for r in rows]
        if key != self._written:
            write_sources(self.fleet, rows)
            self._written = key

    def all_done(self) -> bool:
        return all(r.done.is_set() for r in self.runners.values())

    def stop_all(self, reason: str) -> None:
        for r in self.runners.values():
            r.stop.request(reason)
        for r in [*self.runners.values(), *self.removed.values()]:
            r.done.wait(120)


def fleet_metrics(registry, fleet_: Fleet) -> None:
    """The fleet's metrics, a series per cluster (label ``cluster``), read from its runners when
    Prometheus scrapes: the single-cluster job's names, and whether each cluster is up."""
    def each(read):  # a cluster without a value yet has no sample
        return lambda: {n: v for n, r in list(fleet_.runners.items()) if (v := read(r)) is not None}

    registry.gauge("sparkraft_fleet_cluster_up", "1 while the cluster's query runs (or caught up), 0 while it is "
                   "starting or failing (its error in the sources table and the log).",
                   each(lambda r: 1.0 if r.state in ("running", "done") else 0.0), label="cluster")
    registry.gauge("sparkraft_materializer_applied_offset", "The last log offset the cluster's tables hold.",
                   each(lambda r: r.materializer.next_offset - 1 if r.materializer else None), label="cluster")
    registry.gauge("sparkraft_materializer_last_cut_timestamp_seconds", "When the cluster's tables last had a cut "
                   "(Unix time).", each(lambda r: r.materializer.last_cut_at if r.materializer else None),
                   label="cluster")
    registry.gauge("sparkraft_materializer_last_freshness_seconds", "The freshness of the cluster's latest "
                   "micro-batch.", each(lambda r: r.materializer.last_freshness_s if r.materializer else None),
                   label="cluster")


def run_fleet(sources_path: str, fleet: str, checkpoints: str, available_now: bool = False, spark=None,
              metrics_listener: Optional[tuple[str, int]] = None) -> None:
    """Run every cluster of ``sources_path`` until stopped (or, ``available_now``, until each has
    caught up or failed); ``metrics_listener``: serve fleet_metrics there."""
    from streaming.job import spark_session
    from streaming.stop import GracefulStop

    sources = read_sources(sources_path)  # a bad file: one line, before Spark starts
    spark = spark or spark_session()
    seen = Path(sources_path).stat().st_mtime
    with GracefulStop() as stop:
        stop.watch_jvm(spark)
        fleet_ = Fleet(spark, fleet, checkpoints, available_now)
        fleet_.apply(sources)
        metrics = None
        if metrics_listener is not None:
            from quorum.metrics.registry import Registry
            from quorum.metrics.server import MetricsServer

            registry = Registry()
            fleet_metrics(registry, fleet_)
            metrics = MetricsServer(metrics_listener[0], metrics_listener[1], registry).start()
        try:
            while not stop.requested.wait(0.5 if available_now else RELOAD_S):
                seen = _reload(sources_path, seen, fleet_)
                fleet_.write_status()
                if available_now and fleet_.all_done():
                    break
        finally:
            fleet_.stop_all(stop.reason if stop.requested.is_set() else "the job ended")
            fleet_.write_status()
            if metrics is not None:
                metrics.stop()
    failed = [n for n, r in fleet_.runners.items() if r.state == "failing"]
    if available_now and failed:
        raise RuntimeError(f"{len(failed)} cluster(s) could not be materialised: "
                           + "; ".join(f"{n}: {fleet_.runners[n].error}" for n in failed))


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

