"""A running job whose streaming query fails for a reason a new query may not meet (Spark lost one of
its Python workers) starts the query again from its checkpoint, and exactly once still holds; a
refusal is not tried again."""
from __future__ import annotations

import os
import signal
import subprocess
import threading

import pytest
from conftest import LiveBrokers, sparkraft_cmd, wait_for
from test_job_stop import _cut_offset
from test_materializer import assert_tables_equal_image
from test_pipeline import image_at

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import RECORDS
from streaming.watchdog import source_runners

pytestmark = pytest.mark.slow

def test_a_job_whose_source_runner_is_sigkilled_starts_its_query_again_and_loses_nothing(
        controller_processes, tmp_path):
    """The Python process serving the source to Spark is SIGKILLed while changes flow: the query
    fails, the job says why in one warning and starts it again from its checkpoint, the tables keep
    following, and after the job's SIGTERM every offset is in ``records`` once and the tables
    equal the image."""
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    out_path = tmp_path / "job.log"
    with ControllerClient(cp.bootstrap(), timeout=20) as admin, open(out_path, "wb") as out:
        brokers = LiveBrokers(admin, cp.cluster_id)
        job = subprocess.Popen(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse",
                                             str(wh), "--checkpoint", str(ck), "--trigger", "0.2"),
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        stop_writing = threading.Event()
        n = 0

        def write() -> None:
            nonlocal n
            while not stop_writing.wait(0.3):
                admin.create_topic(f"t{n}", 2, 2)
                n += 1

        writer = threading.Thread(target=write, daemon=True)
        try:
            brokers.wait_unfenced()
            writer.start()
            wait_for(lambda: _cut_offset(wh) > 10, 240, "the job to write cuts")
            runners = wait_for(lambda: source_runners(job.pid), 60, "the source's Python runner")
            for pid in runners:
                os.kill(pid, signal.SIGKILL)
            text = lambda: out_path.read_text(errors="replace")  # noqa: E731
            wait_for(lambda: "starting it again from its checkpoint" in text(), 240,
                     f"the job to start its query again ({text()[-3000:]})")
            assert job.poll() is None, text()[-3000:]
            before = _cut_offset(wh)
            wait_for(lambda: _cut_offset(wh) > before + 10, 240, "the restarted query to write cuts")
            stop_writing.set()
            writer.join(30)
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 0, out_path.read_text(errors="replace")[-4000:]
        finally:
            stop_writing.set()
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            brokers.close()
    text = out_path.read_text(errors="replace")
    warnings = [line for line in text.splitlines() if "starting it again from its checkpoint" in line]
    assert len(warnings) == 1 and "Spark lost the Python process serving the sparkraft source" in warnings[0], warnings
    cut = latest_cut(str(wh))
    offsets = read_table(tables_at(str(wh), cut)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(cut.offset + 1)), "every offset exactly once"
    assert_tables_equal_image(str(wh), image_at(cp.bootstrap(), cut.offset), cut)


def test_a_query_whose_source_hangs_is_noticed_ended_and_started_again(controller_processes, tmp_path):
    """The failpoint ``source-latest-offset=pause`` (once): the process serving the source stops itself
    (SIGSTOP) as the query asks where the log ends, which leaves the query waiting on it for good.
    The watchdog (``--stall-timeout 5``) notices no progress while the log moves on, says so, ends
    that process, and the query starts again from its checkpoint; the stall is counted in the
    metrics, and exactly once holds."""
    import urllib.request

    from conftest import free_ports

    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    wh, ck, once = tmp_path / "wh", tmp_path / "ck", tmp_path / "once"
    once.mkdir()
    (port,) = free_ports(1)
    out_path = tmp_path / "job.log"
    env = {**os.environ, "SPARKRAFT_FAILPOINTS": "source-latest-offset=pause", "SPARKRAFT_FAILPOINTS_ONCE": str(once)}
    with ControllerClient(cp.bootstrap(), timeout=20) as admin, open(out_path, "wb") as out:
        brokers = LiveBrokers(admin, cp.cluster_id)
        brokers.wait_unfenced()
        for i in range(5):
            admin.create_topic(f"t{i}", 2, 2)
        job = subprocess.Popen(sparkraft_cmd("materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse",
                                             str(wh), "--checkpoint", str(ck), "--trigger", "0.2", "--stall-timeout",
                                             "5", "--metrics-listener", f"127.0.0.1:{port}"),
                               stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                               env=env)
        text = lambda: out_path.read_text(errors="replace")  # noqa: E731
        try:
            wait_for(lambda: (once / "source-latest-offset").exists(), 240, "the source to stop at the failpoint")
            wait_for(lambda: "made no progress" in text(), 120, f"the watchdog to notice ({text()[-3000:]})")
            wait_for(lambda: _cut_offset(wh) >= 0, 240, f"the query started again to write a cut ({text()[-3000:]})")
            for i in range(5, 10):
                admin.create_topic(f"t{i}", 2, 2)
            before = _cut_offset(wh)
            wait_for(lambda: _cut_offset(wh) > before, 240, "the restarted query to follow the log")
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            job.send_signal(signal.SIGTERM)
            assert job.wait(120) == 0, text()[-4000:]
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            brokers.close()
    stalls = [line for line in metrics.splitlines() if line.startswith("sparkraft_materializer_stalls_total ")]
    assert stalls and float(stalls[0].split()[1]) >= 1, stalls
    assert "sparkraft_materializer_lag_records " in metrics
    warning = next(line for line in text().splitlines() if "made no progress" in line)
    assert "ending its source's processes [" in warning, warning
    cut = latest_cut(str(wh))
    offsets = read_table(tables_at(str(wh), cut)[RECORDS]).column("offset").to_pylist()
    assert sorted(offsets) == list(range(cut.offset + 1)), "every offset exactly once"
    assert_tables_equal_image(str(wh), image_at(cp.bootstrap(), cut.offset), cut)
