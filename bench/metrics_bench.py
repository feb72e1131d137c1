"""What metrics cost: a scrape of the active controller by cluster size, and Prometheus-style scraping
of every voter once a second beside ``bench writes``' load at 64 writers.

- **a scrape at N partitions**: a 30-broker cluster of N partitions (topics of 100, RF 3) is built by
  the in-memory controller and restored as one controller's snapshot (what ``storage format
  --from-warehouse`` does); ``sparkraft controller start`` loads it and serves ``/metrics``. Each
  scrape is a whole HTTP GET of the text format, ``SCRAPES`` times, back to back (median and p99),
  first with every broker heartbeating (a healthy cluster), then, every 0.5 s, while the controller
  fences the brokers one by one as their sessions expire (its loop busy for seconds per broker at
  2M: a scrape then gets the loop's last answer), then with every broker fenced (every partition
  offline). A 0-partition cluster is the baseline the goal is measured against.
- **writes beside scraping**: the ``bench writes`` quorum (3 ``--raft-only`` voters, fsync on) at 64
  writers, ``ROUNDS`` rounds alternating without and with a scraper that GETs every voter's
  ``/metrics`` each second (what Prometheus does at a 1 s interval); the ratio of the medians.

Goals (issue 46): scraping every process every second costs ≤ 2 % of the writes at 64, and a
scrape at 2,000,000 partitions takes ≤ 5 ms more than at none.
"""
from __future__ import annotations

import statistics
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.procs import ChildProcess, free_ports, python_module_command
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import percentile
from bench.harness.workload import Load
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "metrics"
TITLE = "Metrics: a scrape at 2,000,000 partitions, and scraping every voter each second beside bench writes"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (0, 20_000)
FULL_SIZES = (0, 200_000, 2_000_000)
SCRAPES = 50
WRITERS, RECORD_BYTES = 64, 100
QUICK_ROUNDS, FULL_ROUNDS = 2, 4  # (without, with) pairs
QUICK_SECONDS, FULL_SECONDS = 4.0, 12.0
GOAL_SCRAPE_MS, GOAL_WRITES_COST = 5.0, 0.02


def _get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as resp:
        body = resp.read()
    return time.perf_counter() - started, len(body)


def _values(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=60) as resp:
        text = resp.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def _scrapes(url: str) -> dict:
    times, size = [], 0
    for _ in range(SCRAPES):
        took, size = _get(url)
        times.append(took * 1000)
    return {"median_ms": statistics.median(times), "p99_ms": percentile(times, 99), "bytes": size}


def _wait(url: str, ok, timeout: float, what: str, process: ChildProcess) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            raise RuntimeError(f"the controller exited: {process.log_tail(3)}")
        try:
            values = _values(url)
            if ok(values):
                return values
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} within {timeout:.0f}s")


def _scrape_at(partitions: int, ctx: Context) -> dict:
    """One controller restored from an N-partition snapshot; its scrapes healthy, then all fenced."""
    from bench.snapshot_bench import build_image
    from quorum.log.election_state import ElectionState
    from quorum.log.election_store import QUORUM_STATE_FILE, FileElectionStore
    from quorum.log.meta_properties import metadata_partition_dir
    from quorum.snapshot.files import write_restored_snapshot

    directory = ctx.work_dir / f"p{partitions}"
    directory.mkdir()
    with ctx.progress.phase(f"build a {partitions:,}-partition image"):
        c = build_image(partitions, ctx)
    log_dir = directory / "c1"
    port, metrics_port = free_ports(2)
    config = directory / "controller.properties"
    # a session timeout that lets the healthy scrapes finish first, then fences every broker
    config.write_text(f"process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
                      f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
                      f"metadata.log.dir={log_dir}\nmetrics.listener=127.0.0.1:{metrics_port}\n"
                      f"broker.session.timeout.ms={60_000 if partitions else 3_000}\n")
    formatted = subprocess.run(python_module_command("sparkraft", "storage", "format", "--config", str(config),
                                                     "--cluster-id", c.cluster_id), capture_output=True, text=True)
    if formatted.returncode != 0:
        raise RuntimeError(f"storage format: {formatted.stderr.strip()}")
    with ctx.progress.phase("write it as the controller's snapshot"):  # as storage format --from-warehouse does
        partition = metadata_partition_dir(log_dir)
        write_restored_snapshot(partition, c.cluster_id, c.core.image, c.end_offset, None)
        FileElectionStore(partition / QUORUM_STATE_FILE).write(ElectionState.empty())
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    controller = ChildProcess("controller", python_module_command("sparkraft", "controller", "start", "--config",
                                                                  str(config)), directory / "controller.log").start()
    try:
        with ctx.progress.phase("start it (loads the snapshot)"):
            _wait(url, lambda v: v.get("sparkraft_controller_active_controller_count") == 1
                  and v.get("sparkraft_controller_global_partition_count") == partitions, 600, "the controller active",
                  controller)
        with ctx.progress.phase(f"{SCRAPES} scrapes, every broker heartbeating"):
            healthy = _scrapes(url)
        with ctx.progress.phase("scrape every 0.5 s while the controller fences every broker"):
            during: list[float] = []

            def fenced_all(values: dict) -> bool:
                during.append(_get(url)[0] * 1000)
                return values.get("sparkraft_controller_fenced_broker_count") == 30

            values = _wait(url, fenced_all, 1200, "every broker fenced", controller)
        with ctx.progress.phase(f"{SCRAPES} scrapes, every partition offline"):
            fenced = _scrapes(url)
        fenced["offline"] = values["sparkraft_controller_offline_partitions_count"]
        fenced["while_fencing_ms"] = {"median": statistics.median(during), "max": max(during), "scrapes": len(during)}
        fenced["under_min_isr"] = values["sparkraft_controller_under_min_isr_partition_count"]
    finally:
        controller.stop(timeout=30)
    ctx.progress.line(f"  {partitions:,}: healthy {healthy['median_ms']:.2f} ms (p99 {healthy['p99_ms']:.2f}), all "
                      f"fenced {fenced['median_ms']:.2f} ms (p99 {fenced['p99_ms']:.2f}), while fencing max "
                      f"{max(during):.0f} ms, {healthy['bytes']:,} bytes")
    return {"partitions": partitions, "healthy": healthy, "fenced": fenced}


class _Scraper:
    """GET every URL once a second on a thread, as Prometheus at a 1 s interval."""

    def __init__(self, urls: list[str]):
        self.urls, self.scrapes, self.failures = urls, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for url in self.urls:
                try:
                    _get(url)
                    self.scrapes += 1
                except OSError:
                    self.failures += 1

    def __enter__(self) -> "_Scraper":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def _writes_beside_scraping(ctx: Context) -> dict:
    rounds = QUICK_ROUNDS if ctx.quick else FULL_ROUNDS
    seconds = QUICK_SECONDS if ctx.quick else FULL_SECONDS
    without, with_scraping, scrapes = [], [], 0
    with ctx.progress.phase("start the bench writes quorum (3 voters, metrics on)"):
        cluster = SparkraftCluster(ctx.work_dir / "writes", metrics=True).__enter__()
    try:
        urls = [f"http://127.0.0.1:{p}/metrics" for p in cluster.metrics_ports.values()]
        for r in range(rounds):
            for scraping in (False, True):
                label = "with" if scraping else "without"
                with ctx.progress.phase(f"round {r + 1}/{rounds}: {WRITERS} writers, {seconds:g} s, {label} scraping"):
                    if scraping:
                        with _Scraper(urls) as scraper:
                            result = cluster.throughput(Load(WRITERS, 1, RECORD_BYTES), seconds, 1.0)
                        scrapes += scraper.scrapes
                        assert scraper.failures == 0, f"{scraper.failures} scrapes failed"
                    else:
                        result = cluster.throughput(Load(WRITERS, 1, RECORD_BYTES), seconds, 1.0)
                (with_scraping if scraping else without).append(result["records_per_s"])
                ctx.progress.line(f"  {result['records_per_s']:,.0f} writes/s {label} scraping")
    finally:
        cluster.__exit__(None, None, None)
    cost = 1 - statistics.median(with_scraping) / statistics.median(without)
    ctx.progress.line(f"  scraping costs {cost * 100:.1f} % of the writes ({scrapes} scrapes)")
    return {"without": without, "with": with_scraping, "cost": cost, "scrapes": scrapes, "seconds": seconds}


def run(ctx: Context) -> dict:
    results: dict = {"sizes": [], "writes": None, "errors": [], "goals": {"scrape_ms": GOAL_SCRAPE_MS,
                                                                          "writes_cost": GOAL_WRITES_COST}}
    for partitions in ctx.sizes(QUICK_SIZES, FULL_SIZES):
        try:
            results["sizes"].append(_scrape_at(partitions, ctx))
        except Exception as e:
            ctx.progress.line(f"{partitions:,} FAILED: {type(e).__name__}: {e}")
            results["errors"].append(f"{partitions}: {type(e).__name__}: {e}")
    try:
        results["writes"] = _writes_beside_scraping(ctx)
    except Exception as e:
        ctx.progress.line(f"writes FAILED: {type(e).__name__}: {e}")
        results["errors"].append(f"writes: {type(e).__name__}: {e}")
    return results


def _added_ms(sizes: list[dict], s: dict, state: str) -> float | None:
    base = next((b for b in sizes if b["partitions"] == 0), None)
    return None if base is None else s[state]["median_ms"] - base[state]["median_ms"]


def report(document: dict) -> str:
    r = document["results"]
    rows = [[f"{s['partitions']:,}", fmt_number(s["healthy"]["median_ms"], 2), fmt_number(s["healthy"]["p99_ms"], 2),
             fmt_number(s["fenced"]["median_ms"], 2), fmt_number(s["fenced"]["p99_ms"], 2),
             fmt_number(s["fenced"].get("while_fencing_ms", {}).get("max"), 0),
             fmt_number(_added_ms(r["sizes"], s, "healthy"), 2), f"{s['healthy']['bytes']:,}"] for s in r["sizes"]]
    lines = [f"{measured_on(document)}: one controller restored from an N-partition snapshot (30 brokers, topics of "
             f"100, RF 3); {SCRAPES} HTTP scrapes of its /metrics, back to back.", "",
             markdown_table(["partitions", "healthy median ms", "p99 ms", "all fenced median ms", "p99 ms",
                             "while fencing, max ms", "added to a scrape vs 0 partitions, ms", "bytes"], rows), ""]
    w = r.get("writes")
    if w:
        lines += [f"`bench writes` at {WRITERS} writers, {len(w['without'])} rounds of {w['seconds']:g} s each way, "
                  f"every voter scraped each second beside it ({w['scrapes']} scrapes):", "",
                  markdown_table(["", "writes/s (each round)", "median"],
                                 [["without scraping", ", ".join(f"{v:,.0f}" for v in w["without"]),
                                   f"{statistics.median(w['without']):,.0f}"],
                                  ["with scraping", ", ".join(f"{v:,.0f}" for v in w["with"]),
                                   f"{statistics.median(w['with']):,.0f}"]]), "",
                  f"Scraping costs **{w['cost'] * 100:.1f} %** of the writes (goal ≤ {GOAL_WRITES_COST * 100:.0f} %; "
                  "negative: within the noise, faster with it)."]
    big = max(r["sizes"], key=lambda s: s["partitions"], default=None)
    if big is not None and big["partitions"]:
        added = _added_ms(r["sizes"], big, "healthy")
        if added is not None:
            lines.append(f"At {big['partitions']:,} partitions a scrape takes {added:.2f} ms more than at none "
                         f"(goal ≤ {GOAL_SCRAPE_MS:g} ms): **{'met' if added <= GOAL_SCRAPE_MS else 'missed'}**.")
    for e in r.get("errors", []):
        lines.append(f"- not measured: {e}")
    return "\n".join(lines) + "\n"


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    groups = [f"{s['partitions']:,}" for s in sizes]
    series = {"healthy (median)": [s["healthy"]["median_ms"] for s in sizes],
              "healthy (p99)": [s["healthy"]["p99_ms"] for s in sizes],
              "every broker fenced (median)": [s["fenced"]["median_ms"] for s in sizes]}
    return [grouped_bar_chart(plots_dir / "metrics-scrape.png", "A scrape of the active controller by partitions",
                              groups, series, "milliseconds", subtitle=document["machine"]["date"][:10],
                              value_format="{:.2f}")]
