"""One cluster of a fleet on the driver (streaming/fleet_job.py): it connects (the cluster's id,
its tables), then applies its rows of each micro-batch with a materialiser of its own, writing its
own tables; what goes wrong with it stays with it.

A cluster is ``starting`` until it is connected, then ``running``; ``failing`` while it cannot be
reached (its controllers do not answer, refuse the job's credentials) or its rows could not be read
or applied. A failed micro-batch part sets the cluster aside for a backoff (2 s doubling up to a
minute: ``paused`` in the plan, so its ranges are not planned), then raises its ``redo`` so the next
micro-batch reads it again from where its tables end. Said once in the log when it starts failing
(a loaded machine words the same trouble several ways: the latest is in the sources table) and once
when it recovers. In an available-now run a cluster gets the
one-cluster job's RESTARTS tries, then is given up (still ``failing``, with its error), so that
the run ends.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.fleet import cluster_warehouse, status_row
from streaming.fleet_plan import PlanEntry
from streaming.fleet_source import ERROR_TYPE
from streaming.job import RESTARTS
from streaming.sources_file import ClusterSource

log = logging.getLogger("streaming.job")

BACKOFF_S = (2.0, 60.0)  # a failing cluster's first and longest wait before it is tried again


def one_line(error: BaseException) -> str:
    return str(error).splitlines()[0][:500] if str(error) else type(error).__name__


class Member:
    def __init__(self, source: ClusterSource, fleet: str, checkpoints: str, available_now: bool):
        self.source, self.available_now = source, available_now
        self.name = source.name
        self.warehouse = source.warehouse or cluster_warehouse(fleet, source.name)
        self.marker = f"{checkpoints.rstrip('/')}/clusters/{source.name}"  # binds the name to a cluster id
        self.state, self.error, self.cluster_id = "starting", "", ""
        self.materializer = None  # set once connected: from then on the plan lists the cluster
        self.holder = None
        self.hw: Optional[int] = None  # the high watermark the source last saw
        self.failures = 0
        self.redo = 0
        self.retry_at: Optional[float] = None  # while set, the cluster waits out a failure (paused)
        self.given_up = False
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._connect, name=f"cluster-{source.name}", daemon=True)

    def start(self) -> "Member":
        self._thread.start()
        return self

    @property
    def ready(self) -> bool:
        return self.materializer is not None

    @property
    def settled(self) -> bool:
        """Connected, or given up on."""
        return self.ready or self.given_up

    def _connect(self) -> None:
        while not self.stopped.is_set():
            try:
                self._open()
                return
            except Exception as e:  # this cluster's trouble: said, retried; the fleet goes on
                self.failed(one_line(e))
                if self.given_up or self.stopped.wait(max(0.0, self.retry_at - time.monotonic())):
                    return

    def _open(self) -> None:
        from delta_tables.writer import DeltaRsWriter
        from quorum.security.client import ClientSecurity
        from streaming.job import Source, check_checkpoint, holder_name
        from streaming.log_hold import LogHolder
        from streaming.materializer import Materializer
        from streaming.quorum_access import cluster_id_of

        s = self.source
        security = ClientSecurity.from_file(s.command_config) if s.command_config else None
        self.cluster_id = cluster_id_of(s.protocol, s.bootstrap, 15.0, security)
        check_checkpoint(self.marker, self.cluster_id)
        materializer = Materializer(DeltaRsWriter(self.warehouse), label=f"Cluster {s.name}: ")
        if s.protocol == "sparkraft":
            self.holder = LogHolder(Source(s.bootstrap, s.protocol, security), holder_name(self.warehouse))
        self.recovered(materializer.next_offset)
        self.materializer = materializer

    def failed(self, message: str) -> None:
        """Set the cluster aside for a backoff (for good, once an available-now run gives up on it)."""
        self.failures += 1
        self.given_up = self.available_now and self.failures >= RESTARTS
        if self.state != "failing" or self.given_up:  # once a streak (its latest error is in the sources table)
            log.warning("Cluster %s: %s (%s)", self.name, message,
                        f"given up after {self.failures} tries" if self.given_up else "trying again")
        self.state, self.error = "failing", message
        self.retry_at = time.monotonic() + min(BACKOFF_S[1], BACKOFF_S[0] * 2 ** min(self.failures - 1, 6))

    def unreachable(self, message: str) -> None:
        """The source could not see the cluster's log: said, nothing paused (the source looks again)."""
        if self.state == "running":
            log.warning("Cluster %s: %s (trying again)", self.name, message)
            self.state, self.error = "failing", message

    def recovered(self, offset: int) -> None:
        if self.state == "failing":
            log.info("Cluster %s: recovered, materialising from offset %d", self.name, offset)
        self.state, self.error, self.failures, self.retry_at = "running", "", 0, None

    def tick(self, now: float, reach: Optional[dict]) -> None:
        """Between micro-batches: what the source saw of the cluster; a backoff over, try it again."""
        if reach is not None:
            self.hw = reach.get("hw")
            if reach.get("error") and self.ready:
                self.unreachable(reach["error"])
            elif self.state == "failing" and self.retry_at is None and self.ready:
                self.recovered(self.materializer.next_offset)
        if self.ready and self.retry_at is not None and not self.given_up and now >= self.retry_at:
            self.retry_at = None
            self.redo += 1

    def apply(self, rows: pa.Table) -> Optional[dict]:
        """This cluster's rows of a micro-batch into its tables; None if they could not be."""
        errors = rows.filter(pc.equal(rows.column("type"), ERROR_TYPE))
        if errors.num_rows:
            self.failed(errors.column("json")[0].as_py())
            return None
        try:
            result = self.materializer.process(rows)
        except Exception as e:  # what it applied but did not write is read again from its tables
            self.failed(one_line(e))
            self.materializer.reload()
            return None
        if self.state == "failing":
            self.recovered(self.materializer.next_offset)
        if self.holder is not None:
            self.holder.committed(self.materializer.next_offset)
        return result

    def plan_entry(self) -> PlanEntry:
        s = self.source
        return PlanEntry(s.name, s.bootstrap, s.protocol, self.cluster_id, self.materializer.next_offset,
                         s.command_config, s.trigger_s, s.idle_flush_s, s.max_records_per_trigger, self.redo,
                         self.retry_at is not None)

    def status(self) -> dict:
        m = self.materializer
        applied = m.next_offset - 1 if m is not None else -1
        lag = max(0, self.hw - applied - 1) if self.hw is not None and m is not None else None
        return status_row(self.name, self.source, self.warehouse, self.state, self.cluster_id, applied, lag,
                          m.last_cut_at if m is not None else None, self.error)

    def stop(self) -> None:
        self.stopped.set()
        self._thread.join(30)
        if self.holder is not None:
            self.holder.close()
