"""A soak: the whole system running for an hour (``--quick``: ten minutes), watched for growth.

Three controller processes (snapshots every 256 KiB of records, 1 MiB log segments, the log kept
to 2 MiB past its snapshot, so snapshots and log cleanup run all along), 30 simulated brokers
heartbeating (``bench.heartbeat_load``), admin writes at a steady rate (topics created, their
``retention.ms`` set, deleted 100 creations later), the active controller SIGKILLed and restarted
every few minutes, the streaming job (``sparkraft materialize``) and the maintenance job
(``jobs/maintenance.py --every 60``) on a local warehouse.

Every 10 s, per process (the job with the JVM and Python processes under it): resident memory,
open files; per controller, log and snapshot bytes on disk; per table, Delta's live data files
(what the current version reads) and all files on disk; the job's freshness (commit to cut,
its own histogram) per window. The goal: flat after warm-up (no series more than 10 % higher at
the end than in the third quarter), freshness p99 within issue 65's 1 s throughout,
nothing lost (every acknowledged creation and deletion in the controllers' image and the newest
cut, every offset in ``records`` once). Growth compares each series' peak over the third quarter of
the run with its peak over the last quarter (soak_watch.py: most series are saw-teeth). Delta keeps
files a day (``delta.logRetentionDuration``, ``deletedFileRetentionDuration``): files on disk grow
by design for that long; the live files are what compaction must hold flat.
"""
from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path

from bench.harness.procs import REPO, ChildProcess, free_ports, python_module_command
from bench.soak_watch import GROWS_BY_DESIGN, Sampler, growth, window_p99
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "soak"
TITLE = "Soak: three controllers, 30 brokers, writes, leader kills, the streaming and maintenance jobs"
REQUIRES: tuple[str, ...] = ()

FULL_S, QUICK_S = 3600.0, 600.0
KILL_EVERY_S = {"full": 300.0, "quick": 120.0}
WRITES_PER_S = 20
BROKERS = 30
KEEP_TOPICS = 100
FRESHNESS_GOAL_P99_S = 1.0
GROWTH_LIMIT = 0.10
OVERRIDES = {"metadata.log.max.record.bytes.between.snapshots": str(256 * 1024),
             "metadata.log.segment.bytes": str(1024 * 1024), "metadata.max.retention.bytes": str(2 * 1024 * 1024)}


class Writer:
    """Admin writes at WRITES_PER_S from one client: create ``soak-N``, set a random live topic's
    ``retention.ms``, delete ``soak-(N-KEEP_TOPICS)``; what was acknowledged, what is uncertain."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.created: set[str] = set()  # acknowledged created and not acknowledged deleted
        self.deleted: set[str] = set()
        self.uncertain: set[str] = set()  # an outcome not known (a timeout across a kill)
        self.counts = {"ok": 0, "failed": 0, "unknown": 0}
        self.latencies: list[tuple[float, float]] = []  # (time, seconds) of acknowledged writes
        self._thread = threading.Thread(target=self._run, name="soak-writer", daemon=True)

    def start(self) -> "Writer":
        self._thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        from quorum.rpc.controller_client import ControllerClient

        rng, n, period = random.Random(7), 0, 1.0 / WRITES_PER_S
        with ControllerClient(self.bootstrap, timeout=30) as admin:
            next_at = time.monotonic()
            while not self.stop.is_set():
                step = n % 3
                if step == 0:
                    name = f"soak-{n // 3}"
                    self._do(admin.create_topic, name, (name, 1, 3), add=name)
                elif step == 1 and self.created:
                    name = rng.choice(sorted(self.created))
                    self._do(admin.alter_configs, name, (_topic(name), (_retention(rng),)))
                elif step == 2 and n // 3 >= KEEP_TOPICS:
                    name = f"soak-{n // 3 - KEEP_TOPICS}"
                    self._do(admin.delete_topic, name, (name,), remove=name)
                n += 1
                next_at += period
                self.stop.wait(max(0.0, next_at - time.monotonic()))

    def _do(self, fn, name: str, args: tuple, add: str = "", remove: str = "") -> None:
        from quorum.errors import SparkraftError

        started = time.monotonic()
        try:
            fn(*args)
        except SparkraftError as e:
            self.counts["failed" if e.error.name not in ("REQUEST_TIMED_OUT", "NETWORK_EXCEPTION") else "unknown"] += 1
            self.uncertain.add(name)
            return
        except Exception:  # noqa: BLE001 - a timeout or a lost connection: the outcome is not known
            self.counts["unknown"] += 1
            self.uncertain.add(name)
            return
        now = time.monotonic()
        self.counts["ok"] += 1
        self.latencies.append((now, now - started))
        if add:
            self.created.add(add)
        if remove:
            self.created.discard(remove)
            self.deleted.add(remove)


def _topic(name: str):
    from quorum.controller import api

    return api.ConfigResourceKey("TOPIC", name)


def _retention(rng: random.Random):
    from quorum.controller import api

    return api.AlterableConfig("retention.ms", "SET", str(rng.randrange(60_000, 10_000_000)))


def run(ctx: Context) -> dict:
    seconds = QUICK_S if ctx.quick else FULL_S
    kill_every = KILL_EVERY_S[ctx.mode]
    work = ctx.work_dir / "soak"
    wh, ck = work / "wh", work / "ck"
    (job_port,) = free_ports(1)
    with SparkraftCluster(work / "quorum", raft_only=False, overrides=OVERRIDES) as cluster:
        cluster_id = _cluster_id(cluster)  # (once a controller is active)
        endpoints = {str(i): cluster.wire_endpoint(i) for i in cluster.ports}
        brokers = ChildProcess("brokers", python_module_command(
            "bench.heartbeat_load", "--controllers", json.dumps(endpoints), "--cluster-id", cluster_id,
            "--first-id", "1", "--count", str(BROKERS), "--interval-ms", "2000"), work / "brokers.log",
            json_control=True).start()
        with ctx.progress.phase(f"{BROKERS} brokers registering"):
            brokers.receive(300, "registering its brokers")
            brokers.send({"cmd": "run", "end": time.monotonic() + seconds + 600, "kill_at": float("inf")})
        job = ChildProcess("job", python_module_command(
            "sparkraft", "materialize", "--bootstrap-controller", cluster.bootstrap, "--warehouse", str(wh),
            "--checkpoint", str(ck), "--trigger", "1", "--metrics-listener", f"127.0.0.1:{job_port}"),
            work / "job.log").start()
        maintenance = ChildProcess("maintenance", [sys.executable, str(REPO / "jobs" / "maintenance.py"),
                                                   "--warehouse", str(wh), "--every", "60"], work / "maintenance.log")
        writer = Writer(cluster.bootstrap).start()
        processes = {**{f"controller-{i}": (lambda i=i: cluster.voter(i).pid) for i in cluster.ports},
                     **{p.name: (lambda p=p: p.pid if p.popen is not None else None)
                        for p in (brokers, job, maintenance)}}
        sampler = Sampler(processes, {f"controller-{i}": cluster.data_dir(i) for i in cluster.ports}, wh,
                          f"http://127.0.0.1:{job_port}/metrics").start()
        kills = []
        started = time.monotonic()
        try:
            what = f"soak for {seconds / 60:.0f} min, the leader killed every {kill_every / 60:.0f} min"
            with ctx.progress.phase(what):
                next_kill, next_line = started + kill_every, started + 60
                while time.monotonic() - started < seconds:
                    time.sleep(1.0)
                    if maintenance.popen is None and time.monotonic() - started > 60:
                        maintenance.start()  # once the tables exist
                    if time.monotonic() >= next_kill:
                        kills.append(_kill_the_leader(cluster))
                        next_kill += kill_every
                    if time.monotonic() >= next_line:
                        next_line += 60
                        ctx.progress.line(f"{(time.monotonic() - started) / 60:.0f} min: {writer.counts}, "
                                          f"{len(kills)} leaders killed, {sampler.latest()}")
            writer.close()
            job_alive = job.alive()
            caught_up = _wait_caught_up(cluster, sampler, 300)
            verdict = _verify(cluster, writer, str(wh))
        finally:
            writer.close()
            sampler.close()
            for p in (maintenance, job, brokers):
                if p.popen is not None:
                    p.stop(timeout=30)
    return {"seconds": seconds, "kill_every_s": kill_every, "job_alive_at_end": job_alive,
            "writes_per_s": WRITES_PER_S, "brokers": BROKERS,
            "kills": kills, "writes": writer.counts, "caught_up_s": caught_up, **verdict,
            "samples": sampler.samples, "freshness": sampler.freshness}


def _cluster_id(cluster) -> str:
    from quorum.rpc.controller_client import ControllerClient

    with ControllerClient(cluster.bootstrap, timeout=30) as admin:
        return admin.describe_cluster().cluster_id


def _kill_the_leader(cluster) -> dict:
    """SIGKILL the active controller, restart it; how long until another led, and until it was back."""
    leader = cluster.leader_id()
    killed = time.monotonic()
    cluster.voter(leader).kill()
    while True:
        try:
            if cluster.leader_id() not in (leader, -1, None):
                break
        except Exception:  # noqa: BLE001 - no leader yet
            pass
        time.sleep(0.05)
    elected = time.monotonic() - killed
    cluster.restart(leader)
    return {"at": killed, "node": leader, "new_leader_s": elected}


def _wait_caught_up(cluster, sampler, timeout: float) -> float:
    """Until the job's tables hold the log's end (its lag metric 0 twice); how long it took."""
    started = time.monotonic()
    zero = 0
    while time.monotonic() - started < timeout:
        lag = sampler.scrape().get("sparkraft_materializer_lag_records")
        zero = zero + 1 if lag == 0 else 0
        if zero >= 2:
            return time.monotonic() - started
        time.sleep(2)
    return float("nan")


def _verify(cluster, writer: Writer, wh: str) -> dict:
    """Nothing lost: the acknowledged topics in the controllers' image and the newest cut, the deleted
    ones in neither, every offset of ``records`` once."""
    from delta_tables.cut import latest_cut, read_table, tables_at
    from delta_tables.schemas import RECORDS, TOPICS
    from quorum.rpc.controller_client import ControllerClient

    with ControllerClient(cluster.bootstrap, timeout=30) as admin:
        live = {t for t in admin.list_topics() if t.startswith("soak-")}
    cut = latest_cut(wh)
    tables = tables_at(wh, cut)
    in_cut = {t for t in read_table(tables[TOPICS]).column("name").to_pylist() if t.startswith("soak-")}
    offsets = sorted(read_table(tables[RECORDS]).column("offset").to_pylist())
    certain_created, certain_deleted = writer.created - writer.uncertain, writer.deleted - writer.uncertain
    return {"lost": sorted(certain_created - live) + sorted(certain_created - in_cut),
            "resurrected": sorted(certain_deleted & live) + sorted(certain_deleted & in_cut),
            "cut_equals_image": live == in_cut, "cut_offset": cut.offset,
            "records_exactly_once": offsets == list(range(cut.offset + 1)), "uncertain": len(writer.uncertain)}


def report(document: dict) -> str:
    r = document["results"]
    elections = ", ".join(f"{k['new_leader_s']:.1f}" for k in r["kills"])
    lines = [f"{r['seconds'] / 60:.0f} min; {r['writes_per_s']} admin writes/s ({r['writes']}); {r['brokers']} "
             f"brokers heartbeating; {len(r['kills'])} leaders SIGKILLed (a new one in "
             f"{elections} s).", "",
             f"Nothing lost: {not r['lost'] and not r['resurrected']} (lost {r['lost'][:5]}, came back "
             f"{r['resurrected'][:5]}); the newest cut equals the image: {r['cut_equals_image']}; every offset of "
             f"`records` once: {r['records_exactly_once']}; caught up {r['caught_up_s']:.1f} s after the writes "
             f"stopped.", "",
             "| series | peak, 3rd quarter | peak, last quarter | growth | flat (≤ 10 %) |", "|---|---:|---:|---:|---|"]
    for name, (first, last, g) in sorted(growth(r["samples"]).items()):
        flat = "yes" if g <= GROWTH_LIMIT else (
            "grows by design (kept a day)" if name.startswith(GROWS_BY_DESIGN) else "NO")
        lines.append(f"| {name} | {first:,.0f} | {last:,.0f} | {g * 100:+.1f} % | {flat} |")
    windows = window_p99(r["freshness"], 300.0)
    lines += ["", "Freshness p99 (the job's histogram, commit to cut; each figure is the bound of the histogram "
              "bucket it falls in) per 5 minutes: " + ", ".join(f"≤ {p:.2f} s" for p in windows)
              + f"; goal ≤ {FRESHNESS_GOAL_P99_S:g} s: "
              + ("met" if windows and max(windows) <= FRESHNESS_GOAL_P99_S else "MISSED")]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    from bench.soak_watch import plot_series

    return plot_series(document["results"]["samples"], plots_dir, NAME)
