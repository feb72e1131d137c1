"""Migrating a ZooKeeper-mode cluster (KIP-866): the import, then the dual-write lag under changes.

A real ZooKeeper (Debian's) is populated in Kafka's formats with a ZooKeeper-mode cluster: topics of
100 partitions, RF 3, 30 brokers, one config per topic (200,000 partitions; 20,000 with --quick).
Three ``sparkraft controller start`` processes (fsync on) formatted with its cluster id and
``zookeeper.metadata.migration.enable=true`` then take over:

- **import**: from the quorum's first leader until ``migrate status`` says MIGRATION with nothing
  left to mirror: the claim, reading every znode, the import transaction committed by the quorum,
  and the first mirror round (which writes the new /migration marker and nothing else). The active
  controller's log line splits it into reading ZooKeeper and writing the transaction.
  Goal: <= 30 s at 200,000 partitions (a ZooKeeper-mode controller's own failover loads the same
  znodes; the seeds report minutes at that size).
- **dual writes under load**: clients change topic configs in a closed loop; every change is
  mirrored to ZooKeeper (the config znode and Kafka's change notification). ``migrate status``'s
  lag (committed records ZooKeeper does not hold yet) is sampled throughout; then how long the
  mirror takes to drain once the load stops. Checked at the end: ZooKeeper holds each topic's last
  config.
"""
from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart, line_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import percentile
from bench.suite import Context

NAME = "zk_migration"
TITLE = "Migrating a ZooKeeper-mode cluster: import and dual-write lag"
REQUIRES: tuple[str, ...] = ("kazoo",)

QUICK_SIZES = (20_000,)
FULL_SIZES = (20_000, 200_000)
PARTITIONS_PER_TOPIC = 100
BROKERS = 30
GOAL_IMPORT_S = 30.0
LOAD_THREADS = 4
LOAD_S = 20.0
QUICK_LOAD_S = 8.0
IMPORT_TIMEOUT_S = 600.0
_LOG_LINE = re.compile(r"imported the ZooKeeper-mode cluster: .* \(read ([\d.]+) s, written ([\d.]+) s\)")


def _status(client):
    from quorum.controller import api

    return client.call(api.DescribeMigrationRequest())


def _wait_mirrored(client, timeout: float, state: str = "MIGRATION"):
    deadline = time.monotonic() + timeout
    while True:
        try:
            s = _status(client)
            if s.state == state and s.dual_write_lag_records == 0 and s.zk_controller_epoch > 0:
                return s
            if s.error and "not answering" not in s.error:
                raise RuntimeError(f"the migration stopped: {s.error}")
        except RuntimeError:
            raise
        except Exception:  # no active controller for a moment
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"not {state} with nothing to mirror after {timeout:.0f} s")
        time.sleep(0.05)


class ConfigLoad:
    """Closed-loop topic config changes from ``LOAD_THREADS`` clients; the last value set per topic."""

    def __init__(self, bootstrap: str, topics: int):
        from quorum.rpc.controller_client import ControllerClient

        self.clients = [ControllerClient(bootstrap, timeout=60) for _ in range(LOAD_THREADS)]
        self.topics = topics
        self.last: dict[str, str] = {}
        self.done = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(LOAD_THREADS)]

    def _run(self, i: int) -> None:
        from quorum.controller import api

        n = 0
        while not self._stop.is_set():
            topic = f"t{(n * LOAD_THREADS + i) % self.topics:06d}"
            value = str(1_000_000 + n * LOAD_THREADS + i)
            self.clients[i].alter_configs(api.ConfigResourceKey("TOPIC", topic),
                                          [api.AlterableConfig("retention.ms", "SET", value)])
            with self._lock:
                self.last[topic] = value
                self.done += 1
            n += 1

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        for c in self.clients:
            c.close()


def _one_size(partitions: int, ctx: Context) -> dict:
    from kazoo.client import KazooClient

    from bench.peers.zookeeper_server import ZooKeeper, populate
    from bench.sparkraft_cluster import SparkraftCluster
    from quorum.log.meta_properties import random_cluster_id
    from quorum.rpc.controller_client import ControllerClient

    work = ctx.work_dir / f"p{partitions}"
    topics = partitions // PARTITIONS_PER_TOPIC
    cluster_id = random_cluster_id()
    zookeeper = ZooKeeper(work / "zookeeper")
    zk = KazooClient(hosts=zookeeper.connect, timeout=30)
    zk.start(30)
    try:
        with ctx.progress.phase(f"write a {partitions:,}-partition ZooKeeper-mode cluster into ZooKeeper"):
            started = time.monotonic()
            znodes = populate(zk, cluster_id, topics, PARTITIONS_PER_TOPIC, BROKERS, ctx.progress)
            populate_s = time.monotonic() - started
        overrides = {"zookeeper.metadata.migration.enable": "true", "zookeeper.connect": zookeeper.connect}
        with ctx.progress.phase("three migrating controllers take over"):
            cluster = SparkraftCluster(work / "controllers", raft_only=False, overrides=overrides,
                                       cluster_id=cluster_id).__enter__()
        try:
            client = ControllerClient(cluster.bootstrap, timeout=60)
            with ctx.progress.phase("import: until MIGRATION with nothing left to mirror"):
                started = time.monotonic()
                first = _wait_mirrored(client, IMPORT_TIMEOUT_S)
                import_s = time.monotonic() - started
            read_s = written_s = None
            for node_id in cluster.ports:
                found = _LOG_LINE.search((work / "controllers" / f"controller-{node_id}.log").read_text())
                if found:
                    read_s, written_s = float(found.group(1)), float(found.group(2))
            ctx.progress.line(f"  imported {partitions:,} partitions in {import_s:.1f} s "
                              f"(read {read_s} s, written {written_s} s)")
            load = ConfigLoad(cluster.bootstrap, topics)
            samples: list[tuple[float, int]] = []
            load_s = QUICK_LOAD_S if ctx.quick else LOAD_S
            with ctx.progress.phase(f"dual writes under {LOAD_THREADS} closed-loop config writers for {load_s:.0f} s"):
                load.start()
                started = time.monotonic()
                while time.monotonic() - started < load_s:
                    samples.append((time.monotonic() - started, _status(client).dual_write_lag_records))
                    time.sleep(0.1)
                load.stop()
                changes = load.done
                rate = changes / (time.monotonic() - started)
                stopped = time.monotonic()
                _wait_mirrored(client, 120)
                drain_s = time.monotonic() - stopped
            wrong = [t for t, v in load.last.items()
                     if json.loads(zk.get(f"/config/topics/{t}")[0])["config"].get("retention.ms") != v]
            if wrong:
                raise AssertionError(f"ZooKeeper does not hold the last config of {len(wrong)} topics, e.g. {wrong[0]}")
            client.close()
        finally:
            cluster.__exit__()
    finally:
        zk.stop()
        zk.close()
        zookeeper.stop()
    lags = [lag for _, lag in samples if lag >= 0]
    return {"partitions": partitions, "topics": topics, "znodes": znodes, "populate_s": populate_s,
            "import_s": import_s, "read_s": read_s, "written_s": written_s,
            "zk_controller_epoch": first.zk_controller_epoch, "changes": changes, "changes_per_s": rate,
            "lag_p50": percentile(lags, 50), "lag_p99": percentile(lags, 99), "lag_max": max(lags, default=None),
            "drain_s": drain_s, "lag_samples": samples}


def run(ctx: Context) -> dict:
    from bench.controller_bench import run_sizes

    return run_sizes(ctx, ctx.sizes(QUICK_SIZES, FULL_SIZES), _one_size, {})


def report(document: dict) -> str:
    sizes = document["results"]["sizes"]
    rows = [[f"{s['partitions']:,}", f"{s['znodes']:,}", fmt_number(s["import_s"], 1), fmt_number(s["read_s"], 1),
             fmt_number(s["written_s"], 1), f"{GOAL_IMPORT_S / s['import_s']:.1f}×",
             fmt_number(s["changes_per_s"]), fmt_number(s["lag_p50"]), fmt_number(s["lag_p99"]),
             fmt_number(s["lag_max"]), fmt_number(s["drain_s"], 2)] for s in sizes]
    lines = [f"{measured_on(document)}: a real ZooKeeper (Debian's 3.8) holding a ZooKeeper-mode cluster in "
             f"Kafka's formats (topics of {PARTITIONS_PER_TOPIC} partitions, RF 3, {BROKERS} brokers, a config per "
             f"topic); three controller processes, fsync on.", "",
             markdown_table(["partitions", "znodes", "import s", "of it: read ZooKeeper s", "write the transaction s",
                             "goal ÷ import", "config changes/s (4 writers)", "lag p50 records", "lag p99",
                             "lag max", "drain after the load s"], rows), "",
             f"Import: from the quorum's first leader until `migrate status` says MIGRATION with nothing left "
             f"to mirror. Goal ≤ {GOAL_IMPORT_S:g} s at 200,000 partitions. The lag is `migrate status`'s "
             f"dual_write_lag_records (committed records ZooKeeper does not hold yet), sampled every 0.1 s "
             f"while the writers run; at the end ZooKeeper held every topic's last config."]
    lines += [f"Errors: {e}" for e in document["results"].get("systems", {}).get("sparkraft", {}).get("errors", [])]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    where = measured_on(document)
    out = [grouped_bar_chart(plots_dir / "zk-migration-import.png", "Importing a ZooKeeper-mode cluster",
                             [f"{s['partitions']:,}" for s in sizes],
                             {"read ZooKeeper": [s["read_s"] for s in sizes],
                              "write the transaction": [s["written_s"] for s in sizes],
                              "import, to nothing left to mirror": [s["import_s"] for s in sizes]},
                             "seconds", subtitle=where, goal=GOAL_IMPORT_S)]
    series = {f"{s['partitions']:,} partitions": [(t, max(lag, 0) + 1) for t, lag in s["lag_samples"]]
              for s in sizes if s["lag_samples"]}
    if series:
        out.append(line_chart(plots_dir / "zk-migration-lag.png", "Dual-write lag under config changes (records + 1)",
                              series, "seconds into the load", "records ZooKeeper does not hold yet + 1",
                              subtitle=where, log_x=False, log_y=True))
    return out
