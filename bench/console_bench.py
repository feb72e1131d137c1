"""The console at scale: how long its pages take at 200,000 (and 2,000,000) partitions, a jump to
an older cut, and a new cut reaching an open page.

A cluster of N partitions (topics of 100, RF 3, 30 brokers in 3 racks) is built in this process by
the in-memory controller and materialised by the materialiser (the Spark job's foreachBatch code,
fed straight from the log) in micro-batches of 10,000 partitions, then 10 more changes, one
micro-batch each (a topic of 100 partitions created, a topic config set), so the warehouse holds
many cuts. ``sparkraft console`` serves it from its own process.

- **pages**: each page fetched over HTTP (the console's own time for it is in its ``Server-Timing``
  header): the overview and a topic page, first at a cut not yet read (cold) and then again (warm),
  the median of ``REPEAT``; and the same pages loaded in Debian's chromium by Playwright, from
  navigation to the load event (the overview draws nothing heavy; the timeline page draws Plotly);
- **a jump to any cut**: the overview at each older cut in turn, none read before (the tables at
  that cut's versions are read then);
- **live**: an overview open in the browser; one more change materialised by this process; the time
  from the micro-batch's commit returning to the open page showing the new topic count, ``LIVE``
  times.

Goals (issue 45): at 200,000 partitions the overview ≤ 1 s and a topic page ≤ 0.5 s; at 2,000,000 a
jump to any cut ≤ 2 s; a new cut on an open page ≤ 1 s after the job commits it.
"""
from __future__ import annotations

import random
import shutil
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "console"
TITLE = "The console: page times at 200,000 and 2,000,000 partitions, a jump to a past cut, live updates"
REQUIRES: tuple[str, ...] = ("starlette", "uvicorn")

QUICK_SIZES = (200_000,)
FULL_SIZES = (200_000, 2_000_000)
TOPIC_PARTITIONS, BROKERS, RACKS = 100, 30, 3
BATCH_PARTITIONS = 10_000  # partitions created per micro-batch while building
HISTORY = 10  # changes after the build, one micro-batch (one cut) each
REPEAT = 5
LIVE = 5
JUMPS = 6
GOALS_S = {"overview": 1.0, "topic": 0.5, "jump": 2.0, "live": 1.0}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


class _Cluster:
    """An in-memory controller and the materialiser writing its log, micro-batch by micro-batch."""

    def __init__(self, warehouse: Path):
        from quorum.controller import api
        from quorum.controller.local import LocalController
        from quorum.controller.settings import ControllerSettings

        from delta_tables.writer import DeltaRsWriter
        from streaming.materializer import Materializer

        self.api = api
        self.c = LocalController(ControllerSettings(seed=7))
        self.materializer = Materializer(DeltaRsWriter(warehouse))
        self.next_batch = 0
        self.topics = 0
        for b in range(BROKERS):
            reply = self.c.request(api.RegisterBrokerRequest(
                b, self.c.cluster_id, f"Inc000xxxxxxxxxxxxx{b:03d}", (api.BrokerEndpoint("PLAINTEXT", "localhost", 9092 + b),),
                rack=f"rack-{b % RACKS}"))
            self.c.request(api.BrokerHeartbeatRequest(b, reply.broker_epoch, self.c.core.last_committed_offset))

    def commit(self) -> float:
        """Materialise the log since the last call as one micro-batch; the seconds it took."""
        from streaming.source import record_row, rows_table

        rows = []
        for b in self.c.log[self.next_batch:]:
            rows += [record_row(b.base_offset + i, b.epoch, b.append_time_ms, raw, b.control)
                     for i, raw in enumerate(b.records)]
        self.next_batch = len(self.c.log)
        started = time.monotonic()
        self.materializer.process(rows_table(rows))
        return time.monotonic() - started

    def create_topics(self, count: int) -> None:
        api = self.api
        self.c.request(api.CreateTopicsRequest(tuple(api.CreatableTopic(f"t{self.topics + i:07d}", TOPIC_PARTITIONS, 3)
                                                     for i in range(count))))
        self.topics += count

    def change(self, k: int) -> None:
        """The k-th change of the history: a topic created, or a topic's config set."""
        api = self.api
        if k % 2 == 0:
            self.create_topics(1)
        else:
            key = api.ConfigResourceKey("TOPIC", f"t{k:07d}")
            self.c.request(api.IncrementalAlterConfigsRequest(((key, (api.AlterableConfig("retention.ms", "SET",
                                                                                          str(60_000 + k)),)),)))


class _Console:
    def __init__(self, warehouse: Path, log_path: Path):
        from bench.harness.procs import free_ports, python_module_command

        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(python_module_command("sparkraft", "console", "--warehouse", str(warehouse), "--listen",
                                                       f"127.0.0.1:{self.port}"),
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(self.url + "/static/console.css", timeout=5).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the console did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.2)

    def get(self, path: str) -> dict:
        """Wall seconds for the whole answer, and the console's own compute time (Server-Timing)."""
        started = time.monotonic()
        with urllib.request.urlopen(self.url + path, timeout=300) as r:
            body = r.read()
            timing = r.headers.get("Server-Timing", "")
        wall = time.monotonic() - started
        compute = float(timing.split("dur=")[1]) / 1000 if "dur=" in timing else None
        return {"wall_s": wall, "compute_s": compute, "bytes": len(body)}

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _browser():
    """Playwright's chromium (Debian's), or None where either is missing."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, None
    if chromium is None:
        return None, None
    pw = sync_playwright().start()
    return pw, pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)


def _load_s(page, url: str) -> float:
    """Seconds from navigation to the load event, as the browser's own navigation timing has them."""
    page.goto(url, wait_until="load")
    return page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                         " return (n.loadEventEnd - n.startTime) / 1000; }")


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _cold_reads(path: str) -> dict[str, float]:
    """What a cold console pays for the biggest table, before (pyarrow's dataset, one chunk as the
    console kept it) and after (delta_tables.cut.scan), in the same run: seconds."""
    from deltalake import DeltaTable

    from delta_tables.cut import scan

    out = {}
    for label, read in (("pyarrow dataset", lambda dt: dt.to_pyarrow_dataset().to_table(use_threads=False)
                         .combine_chunks()), ("delta-rs scan", scan)):
        started = time.perf_counter()
        read(DeltaTable(path))
        out[label] = time.perf_counter() - started
    return out


def _one_size(size: int, ctx: Context) -> dict:
    from delta_tables.cut import latest_cut, read_table, tables_at
    from delta_tables.schemas import SNAPSHOTS

    work = ctx.work_dir / f"p{size}"
    work.mkdir()
    wh = work / "wh"
    out: dict = {"partitions": size}
    with ctx.progress.phase(f"{size:,} partitions built and materialised in micro-batches of {BATCH_PARTITIONS:,}"):
        cluster = _Cluster(wh)
        started = time.monotonic()
        cluster.commit()
        per_batch = BATCH_PARTITIONS // TOPIC_PARTITIONS
        while cluster.topics * TOPIC_PARTITIONS < size:
            cluster.create_topics(min(per_batch, (size - cluster.topics * TOPIC_PARTITIONS) // TOPIC_PARTITIONS))
            cluster.commit()
            done = cluster.topics * TOPIC_PARTITIONS
            if done % (size // 5) < BATCH_PARTITIONS:
                ctx.progress.line(f"  {done:,} of {size:,} partitions materialised")
        for k in range(HISTORY):
            cluster.change(k)
            cluster.commit()
        out["build_s"] = time.monotonic() - started
        out["records"] = latest_cut(str(wh)).offset + 1
    cuts = sorted(read_table(tables_at(str(wh), None)[SNAPSHOTS]).column("offset").to_pylist())
    out["cuts"] = len(cuts)
    with ctx.progress.phase("the newest partitions table read whole: pyarrow's dataset, then delta-rs's engine"):
        out["cold_read_s"] = _cold_reads(str(wh / "partitions"))
        ctx.progress.line("  " + ", ".join(f"{k} {v:.2f} s" for k, v in out["cold_read_s"].items()))
    console = _Console(wh, work / "console.log")
    pw, browser = _browser()
    try:
        topic = "/topics/t0000042"
        with ctx.progress.phase("pages over HTTP: cold, then warm"):
            out["overview_cold"] = console.get("/")
            out["overview_warm"] = [console.get("/") for _ in range(REPEAT)]
            out["topic_cold"] = console.get(topic + f"?at={cuts[-2]}")
            out["topic_warm"] = [console.get(topic) for _ in range(REPEAT)]
            out["topics_search"] = [console.get("/topics?q=t00001") for _ in range(REPEAT)]
            out["partitions_page"] = [console.get("/partitions?start=1000") for _ in range(REPEAT)]
            out["partitions_search"] = [console.get("/partitions?q=t00001&leader=7") for _ in range(REPEAT)]
            out["timeline"] = [console.get("/timeline") for _ in range(2)]
        with ctx.progress.phase(f"a jump to each of {JUMPS} older cuts, none read before"):
            older = random.Random(7).sample(cuts[:-2], min(JUMPS, len(cuts) - 2))
            out["jumps"] = [{"offset": o, **console.get(f"/?at={o}")} for o in older]
        if browser is not None:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            with ctx.progress.phase("the same pages in chromium (navigation to load event)"):
                _load_s(page, console.url + "/")  # Plotly's script into the browser's cache
                out["browser"] = {"overview": [_load_s(page, console.url + "/") for _ in range(REPEAT)],
                                  "topic": [_load_s(page, console.url + topic) for _ in range(REPEAT)],
                                  "timeline": [_load_s(page, console.url + "/timeline") for _ in range(2)]}
            with ctx.progress.phase(f"a new cut reaching an open overview, {LIVE} times"):
                page.goto(console.url + "/", wait_until="load")
                live = []
                for k in range(LIVE):
                    count = int(page.locator("#topic-count").inner_text().replace(",", ""))
                    cluster.change(2 * k + HISTORY)  # even: a topic created
                    cluster.commit()
                    committed = time.monotonic()
                    page.wait_for_function(f"() => Number(document.querySelector('#topic-count').textContent"
                                           f".replace(/,/g, '')) === {count + 1}", timeout=120_000)
                    live.append(time.monotonic() - committed)
                out["live_s"] = live
            page.close()
        else:
            ctx.progress.line("  (no chromium or playwright here: browser timings and live updates not measured)")
    finally:
        if browser is not None:
            browser.close()
            pw.stop()
        console.close()
    ctx.progress.line(f"  partitions page {_median([g['wall_s'] for g in out['partitions_page']]):.3f} s, searched "
                      f"{_median([g['wall_s'] for g in out['partitions_search']]):.3f} s")
    ctx.progress.line(f"  overview {out['overview_cold']['wall_s']:.2f} s cold, "
                      f"{_median([g['wall_s'] for g in out['overview_warm']]):.3f} s warm; topic "
                      f"{_median([g['wall_s'] for g in out['topic_warm']]):.3f} s; jumps "
                      f"{_median([j['wall_s'] for j in out['jumps']]):.2f} s median")
    return out


def run(ctx: Context) -> dict:
    sizes = ctx.sizes(QUICK_SIZES, FULL_SIZES)
    return {"sizes": [_one_size(size, ctx) for size in sizes], "goals_s": GOALS_S,
            "systems": {"sparkraft": {"errors": []}}}


def _verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "missed"


def report(document: dict) -> str:
    r = document["results"]
    rows = []
    for s in r["sizes"]:
        warm = _median([g["wall_s"] for g in s["overview_warm"]])
        topic = _median([g["wall_s"] for g in s["topic_warm"]])
        jumps = [j["wall_s"] for j in s["jumps"]]
        browser = s.get("browser", {})
        live = s.get("live_s", [])
        rows.append([f"{s['partitions']:,}", f"{s['cuts']:,}", fmt_number(s["overview_cold"]["wall_s"], 2),
                     fmt_number(warm, 3), fmt_number(_median(browser.get("overview", [])), 3),
                     fmt_number(topic, 3), fmt_number(_median(browser.get("topic", [])), 3),
                     f"{fmt_number(_median([g['wall_s'] for g in s['partitions_page']]), 3)} / "
                     f"{fmt_number(_median([g['wall_s'] for g in s['partitions_search']]), 3)}"
                     if "partitions_page" in s else "–",
                     f"{fmt_number(_median(jumps), 2)} / {fmt_number(max(jumps), 2)}" if jumps else "–",
                     f"{fmt_number(_median(live), 2)} / {fmt_number(max(live), 2)}" if live else "–"])
    goals = r["goals_s"]
    lines = [f"{measured_on(document)}: topics of {TOPIC_PARTITIONS} partitions, RF 3, {BROKERS} brokers; "
             f"`sparkraft console` in its own process; HTTP seconds are the whole answer's.", "",
             markdown_table(["partitions", "cuts", "overview cold s", "overview warm s", "in chromium s",
                             "topic page s", "in chromium s", "partitions page / searched s",
                             "jump to a cut s (median / max)",
                             "new cut on an open page s (median / max)"], rows), ""]
    for s in r["sizes"]:
        if s.get("cold_read_s"):
            lines.append(f"A cold start's biggest read at {s['partitions']:,}, the newest `partitions` read whole: "
                         + ", ".join(f"{k} {fmt_number(v, 2)} s" for k, v in s["cold_read_s"].items()) + ".")
    verdicts = []
    for s in r["sizes"]:
        if s["partitions"] == 200_000:
            verdicts.append(f"overview ≤ {goals['overview']:g} s at 200,000: "
                            f"{_verdict(_median([g['wall_s'] for g in s['overview_warm']]), goals['overview'])}")
            verdicts.append(f"topic page ≤ {goals['topic']:g} s at 200,000: "
                            f"{_verdict(_median([g['wall_s'] for g in s['topic_warm']]), goals['topic'])}")
        if s["partitions"] == 2_000_000 and s["jumps"]:
            verdicts.append(f"jump to any cut ≤ {goals['jump']:g} s at 2,000,000: "
                            f"{_verdict(max(j['wall_s'] for j in s['jumps']), goals['jump'])}")
        if s.get("live_s"):
            verdicts.append(f"new cut on an open page ≤ {goals['live']:g} s at {s['partitions']:,}: "
                            f"{_verdict(max(s['live_s']), goals['live'])}")
    return "\n".join(lines + ["Goals: " + "; ".join(verdicts) + "."])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    groups = [f"{s['partitions']:,}" for s in sizes]
    series = {
        "overview (warm)": [_median([g["wall_s"] for g in s["overview_warm"]]) for s in sizes],
        "topic page": [_median([g["wall_s"] for g in s["topic_warm"]]) for s in sizes],
        "jump to a past cut (max)": [max(j["wall_s"] for j in s["jumps"]) if s["jumps"] else 0 for s in sizes],
        "new cut on an open page (max)": [max(s.get("live_s") or [0]) for s in sizes],
    }
    return [grouped_bar_chart(plots_dir / "console.png", "The console's pages by cluster size", groups, series,
                              "seconds", subtitle=document["machine"]["date"][:10])]
