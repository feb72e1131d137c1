"""A finished command exits with its own code, even while native worker threads wind down.

Before ``sparkraft.cli.run`` exited straight after flushing, a few percent of ``sparkraft sql``
errors on a busy machine ended in SIGABRT ("terminate called without an active exception") after
printing their message: interpreter finalization raced native thread pools. The race needs a busy
CPU, so this runs the command many times, four at a time, beside two processes that keep both cores
busy; against the old exit it failed in about two runs of three.
"""
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "streaming"))

from conftest import sparkraft_cmd  # noqa: E402
from test_materializer import as_batch, busy_controller, log_rows  # noqa: E402

from delta_tables.writer import DeltaRsWriter  # noqa: E402
from streaming.materializer import Materializer  # noqa: E402

RUNS = 48
BURN = "import time\nend = time.time() + 60\nwhile time.time() < end: sum(range(10000))"


@pytest.mark.slow
def test_a_refused_query_exits_1_every_time_on_a_busy_machine(tmp_path):
    Materializer(DeltaRsWriter(tmp_path / "wh")).process(as_batch(log_rows(busy_controller())))
    cmd = sparkraft_cmd("sql", "SELECT * FROM topics", "--warehouse", str(tmp_path / "wh"), "--as-of-offset", "-1")
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(2)]
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: subprocess.run(cmd, capture_output=True, text=True, timeout=120),
                                    range(RUNS)))
    finally:
        for b in burners:
            b.kill()
            b.wait()
    codes = [r.returncode for r in results]
    assert codes == [1] * RUNS, [(r.returncode, r.stderr[-200:]) for r in results if r.returncode != 1][:3]
    assert all(r.stderr.strip().count("\n") == 0 and "no consistent cut at or below offset -1" in r.stderr
               for r in results)
