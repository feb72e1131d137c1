"""The streaming job as a service runs it: a ``sparkraft materialize`` process rides out a
controller failover, is SIGKILLed, and a catch-up run leaves every offset exactly once and every cut
equal to the committed log at its offset (tests/read_checks.py), on a local
warehouse, on an s3:// one (a real S3 API server) and written by Delta's own Spark writer. (Apart
from test_pipeline.py so that xdist runs the two files side by side.)"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LiveBrokers, sparkraft_cmd, wait_for
from test_pipeline import _cuts, assert_exactly_once

sys.path.insert(0, str(Path(__file__).parent.parent))  # s3_server, read_checks
from read_checks import CutWatcher, check_cuts  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(params=["local", "s3", "local-delta-spark"])
def job_warehouse(request, tmp_path):
    """(warehouse URI, extra `materialize` flags): a local directory, an s3:// warehouse on a real
    S3 API server (moto's, on 127.0.0.1) with this process's storage options pointing at it, or a
    local directory written by Delta's own Spark writer (its jars from scripts/fetch_jars.py)."""
    if request.param == "local":
        yield str(tmp_path / "wh"), []
        return
    if request.param == "local-delta-spark":
        from delta_tables.spark_session import delta_jars

        if not delta_jars():
            pytest.fail("Delta's Spark jars are missing: python scripts/fetch_jars.py")
        yield str(tmp_path / "wh"), ["--writer", "delta-spark"]
        return
    from s3_server import S3Server

    from delta_tables import storage

    server = S3Server()
    try:
        server.create_bucket("job-warehouse")
        storage.set_options(server.options())
        yield "s3://job-warehouse/wh", [a for k, v in server.options().items()
                                        for a in ("--storage-option", f"{k}={v}")]
    finally:
        storage.set_options({})
        server.close()


def test_a_controller_failover_is_ridden_out_and_a_sigkill_of_the_job_loses_and_duplicates_nothing(
        controller_processes, tmp_path, job_warehouse):
    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    from quorum.rpc.controller_client import ControllerClient

    with ControllerClient(cp.bootstrap(), timeout=20) as admin:
        brokers = LiveBrokers(admin, admin.describe_cluster().cluster_id, ((101, None), (102, None), (103, None)))
        brokers.wait_unfenced()
        (wh, store_flags), ck = job_warehouse, tmp_path / "ck"
        args = ["materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse", wh, *store_flags,
                "--checkpoint", str(ck), "--trigger", "0.2", "--max-records-per-trigger", "40"]
        log = open(tmp_path / "job.log", "wb")
        job = subprocess.Popen(sparkraft_cmd(*args), stdout=log, stderr=subprocess.STDOUT)
        watcher = CutWatcher(wh).__enter__()
        try:
            for i in range(8):
                admin.create_topic(f"t{i}", 10, 2)
            wait_for(lambda: _cuts(wh) >= 2, 240, "the job to write a few cuts")
            # a controller failover while it runs: the job retries and goes on
            leader = cp.wait_leader().leader_id
            cp.kill(leader)
            cp.wait_leader(exclude=(leader,))
            cuts = _cuts(wh)
            for i in range(8, 12):
                admin.create_topic(f"t{i}", 10, 2)
            wait_for(lambda: _cuts(wh) > cuts + 1, 240, "cuts after the failover")
            assert job.poll() is None, "the job died on the controller failover"
            job.send_signal(signal.SIGKILL)
            job.wait(10)
            for i in range(12, 16):
                admin.create_topic(f"t{i}", 10, 2)
        finally:
            watcher.__exit__()
            if job.poll() is None:
                job.kill()
            log.close()
            brokers.close()
        again = subprocess.run(sparkraft_cmd(*args[:-4], "--available-now"), capture_output=True, text=True,
                               timeout=300)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert_exactly_once(wh, cp.bootstrap(), topics=16)
    kind = store_flags[-1] if store_flags else wh[:2]
    check_cuts(wh, cp.bootstrap(), cp.cluster_id, watcher.seen, f"cuts-failover-{kind}")
    if "delta-spark" in store_flags:  # the writes were Spark's: its commits name Delta's Spark engine
        commits = [json.loads(line) for f in sorted(Path(wh, "partitions", "_delta_log").glob("*.json"))
                   for line in f.read_text().splitlines()]
        engines = {c["commitInfo"].get("engineInfo", "") for c in commits if "commitInfo" in c}
        assert any(e.startswith("Apache-Spark/") and "Delta-Lake/" in e for e in engines), engines


def test_a_crash_between_the_state_tables_and_their_cut_shows_readers_nothing_and_is_repaired(
        controller_processes, tmp_path):
    """The failpoint ``delta-before-cut`` (quorum/failpoints.py): the job dies (SIGKILL) right after
    committing the state tables of a batch, before the cut that names their versions. Readers of
    cuts see only the cut before; the next run repairs the tables and cuts that offset once."""
    import os

    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    wh, ck = str(tmp_path / "wh"), str(tmp_path / "ck")
    args = ["materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse", wh, "--checkpoint", str(ck),
            "--available-now"]
    with ControllerClient(cp.bootstrap(), timeout=20) as admin:
        brokers = LiveBrokers(admin, cp.cluster_id, ((101, None), (102, None)))
        try:
            brokers.wait_unfenced()
            for i in range(3):
                admin.create_topic(f"t{i}", 4, 2)
            first = subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=300)
            assert first.returncode == 0, first.stderr[-2000:]
            for i in range(3, 6):
                admin.create_topic(f"t{i}", 4, 2)
            admin.alter_configs(api.ConfigResourceKey("TOPIC", "t0"),
                                (api.AlterableConfig("retention.ms", "SET", "5000"),))
            crashed = subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=300,
                                     env={**os.environ, "SPARKRAFT_FAILPOINTS": "delta-before-cut=crash"})
            assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
            assert "Failpoints armed" in crashed.stderr
            check_cuts(wh, cp.bootstrap(), cp.cluster_id, (), "cuts-delta-before-cut-crashed")
            again = subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=300)
            assert again.returncode == 0, again.stderr[-2000:]
        finally:
            brokers.close()
    assert_exactly_once(wh, cp.bootstrap(), topics=6)
    check_cuts(wh, cp.bootstrap(), cp.cluster_id, (), "cuts-delta-before-cut")

