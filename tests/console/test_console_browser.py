"""The console in a real browser (Debian's chromium, driven by Playwright) over a live cluster of real
processes: 3 controllers, 3 brokers, the streaming job writing the warehouse, the console.

In one session, as an operator would: the overview shows the quorum and the brokers; a topic created
with the CLI appears without a reload; a SIGKILLed broker shows as fenced, again without a reload;
the time slider moved back before the topic existed shows the cluster without it; a diff of the two
cuts names its creation; a SQL query's result is shown and its CSV downloaded. The screenshots it
takes are the README's (SPARKRAFT_SCREENSHOTS=docs/console writes them there)."""
from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest import BrokerProcesses, sparkraft_cmd, wait_for  # noqa: E402
from test_console_server import Console  # noqa: E402

from delta_tables.cut import latest_cut  # noqa: E402
from quorum.errors import SparkraftError  # noqa: E402
from quorum.rpc.controller_client import ControllerClient  # noqa: E402

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as the machine's notes say: no sandbox as root, and none of the background calls a closed network refuses
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SESSION = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300"}
BROKERS = {101: "rack-a", 102: "rack-b", 103: "rack-c"}
LIVE_S = 60  # a change reaches an open page through the job (micro-batches of 0.2 s) and /events


# the slider's thumb at its right end: a range input whose value is its max and whose min is below
# it (with min equal to max a browser draws the thumb at the left), or disabled with one cut so far
SLIDER_AT_THE_NEWEST_CUT = ("() => { const s = document.querySelector('#slider'); return s.disabled || "
                            "(Number(s.value) === Number(s.max) && Number(s.min) < Number(s.max)); }")


def _unfenced(admin) -> set[int]:
    try:
        return {b.broker_id for b in admin.describe_cluster().brokers if not b.fenced}
    except SparkraftError:
        return set()


def _cut(wh: Path) -> int:
    try:
        return latest_cut(str(wh)).offset
    except Exception:
        return -1


@pytest.fixture
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.fail("chromium is missing: apt-get install chromium (.ci/run installs it)")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def test_an_operator_watches_the_cluster_live_travels_back_diffs_and_queries(controller_processes, browser, tmp_path):
    shots = Path(os.environ.get("SPARKRAFT_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    cp = controller_processes(**SESSION)
    cp.format()
    cp.start()
    brokers = BrokerProcesses(tmp_path, cp, BROKERS, SESSION)
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    job = console = None
    try:
        cp.wait_leader()
        for b in BROKERS:
            brokers.start(b)
        with ControllerClient(cp.bootstrap(), timeout=20) as admin:
            wait_for(lambda: _unfenced(admin) == set(BROKERS), 60, "three unfenced brokers")
        create = lambda name, n: subprocess.run(  # noqa: E731
            sparkraft_cmd("topics", "create", "--bootstrap-controller", cp.bootstrap(), "--topic", name,
                          "--partitions", str(n), "--replication-factor", "3"), capture_output=True, text=True, timeout=60)
        made = create("orders", 6)
        assert made.returncode == 0, made.stderr + brokers.dump()
        job_log = open(tmp_path / "job.log", "wb")
        job = subprocess.Popen(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse",
                                             str(wh), "--checkpoint", str(ck), "--trigger", "0.2"),
                               stdout=job_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda: _cut(wh) >= 0, 240, "the job's first cut")
        console = Console(wh, "--bootstrap-controller", cp.bootstrap())

        page = browser.new_page(viewport={"width": 1280, "height": 860}, accept_downloads=True)
        page.goto(console.url + "/")
        page.wait_for_function("() => document.querySelectorAll('#brokers tr[data-broker].active').length === 3",
                               timeout=LIVE_S * 1000)
        assert page.locator("#quorum-leader").inner_text() in {str(i) for i in cp.voters}
        page.evaluate("window.sameDocument = true")  # gone if the page were reloaded
        before = int(page.locator("#cut-offset").inner_text())
        topics_before = int(page.locator("#topic-count").inner_text())
        assert page.evaluate(SLIDER_AT_THE_NEWEST_CUT), "a live page's slider sits at its right end"
        page.screenshot(path=str(shots / "overview.png"), full_page=True)

        # a topic created with the CLI appears on the open page, no reload
        made = create("payments-live", 3)
        assert made.returncode == 0, made.stderr
        page.wait_for_function(f"() => Number(document.querySelector('#topic-count').textContent) === {topics_before + 1}",
                               timeout=LIVE_S * 1000)
        assert page.evaluate("window.sameDocument") is True
        after = int(page.locator("#cut-offset").inner_text())
        assert after > before
        assert page.evaluate(SLIDER_AT_THE_NEWEST_CUT), "and stays there as new cuts arrive"

        # a SIGKILLed broker is fenced after its session timeout, seen on the open page
        brokers.procs[103].send_signal(signal.SIGKILL)
        page.wait_for_function("() => { const r = document.querySelector('#brokers tr[data-broker=\"103\"]');"
                               " return r && r.classList.contains('fenced'); }", timeout=LIVE_S * 1000)
        assert page.evaluate("window.sameDocument") is True
        assert page.locator('#brokers tr[data-broker="103"] td.state').inner_text() == "fenced"
        page.screenshot(path=str(shots / "overview-fenced.png"), full_page=True)

        # the topics page, live; then the slider back before the topic existed: it is gone
        page.click("header nav >> text=Topics")
        page.wait_for_selector('#topics tr[data-topic="payments-live"]')
        page.locator("#slider").fill(str(before))
        page.wait_for_url(f"**/topics?at={before}")
        assert page.locator("#cut-status").inner_text().startswith("past cut")
        assert page.evaluate("() => Number(document.querySelector('#slider').value)") == before
        assert not page.evaluate(SLIDER_AT_THE_NEWEST_CUT), "a past cut's slider shows where the page is"
        names = page.locator("#topics tr[data-topic]").evaluate_all("rows => rows.map(r => r.dataset.topic)")
        assert "orders" in names and "payments-live" not in names
        page.screenshot(path=str(shots / "time-travel.png"), full_page=True)
        page.click("#live-link")
        page.wait_for_selector('#topics tr[data-topic="payments-live"]')

        # what changed between the two cuts: the topic's creation, linked to its record
        page.goto(console.url + "/diff")
        page.fill("#diff-from", str(before))
        page.fill("#diff-to", str(after))
        page.click("#diff-form button")
        page.wait_for_selector("#diff-changes")
        created = page.locator('#diff-changes tr[data-kind="topic created"]')
        assert created.count() == 1 and "payments-live" in created.inner_text()
        page.screenshot(path=str(shots / "diff.png"), full_page=True)
        created.locator("td >> nth=3 >> a").click()
        page.wait_for_selector("#record-json")
        assert '"name": "payments-live"' in page.locator("#record-json").inner_text()
        assert "TOPIC_RECORD" in page.locator("h1").inner_text()

        # SQL: the result on the page and as a CSV download
        page.goto(console.url + "/sql")
        page.fill("#sql-text", "SELECT name, partition_count FROM topics ORDER BY name")
        page.click("#sql-run")
        page.wait_for_selector("#sql-result")
        rows = page.locator("#sql-result tbody tr").evaluate_all(
            "rows => rows.map(r => Array.from(r.cells).map(c => c.textContent))")
        assert rows == [["orders", "6"], ["payments-live", "3"]]
        with page.expect_download() as download:
            page.click("#sql-csv")
        with open(download.value.path(), newline="") as f:
            assert list(csv.reader(f)) == [["name", "partition_count"], ["orders", "6"], ["payments-live", "3"]]
        page.screenshot(path=str(shots / "sql.png"), full_page=True)

        # the timeline draws (Plotly renders an SVG)
        page.goto(console.url + "/timeline")
        page.wait_for_selector("#timeline-chart .main-svg")
        for axis in ("ytick", "y2tick"):  # counts: whole numbers, each once (not 0, 1, 1, 2, 2)
            labels = page.locator(f"#timeline-chart g.{axis} text").evaluate_all("ts => ts.map(t => t.textContent)")
            assert labels and len(labels) == len(set(labels)), (axis, labels)
        noop = "() => document.getElementById('timeline-chart').data.find(t => t.name === 'NO_OP_RECORD').visible"
        assert page.evaluate(noop) == "legendonly", "NoOp records are hidden by default"
        page.check("#show-noops")
        assert page.evaluate(noop) is True, "and shown by the switch"
        page.uncheck("#show-noops")
        page.screenshot(path=str(shots / "timeline.png"), full_page=True)
        page.close()
    finally:
        if console is not None:
            console.close()
        if job is not None:
            job.send_signal(signal.SIGTERM)
            try:
                job.wait(60)
            except subprocess.TimeoutExpired:
                job.kill()
        brokers.close()
