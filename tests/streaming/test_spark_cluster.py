"""The job on a real Spark cluster: a standalone master and two workers started here
(``spark-class ...deploy.master.Master`` and ``...deploy.worker.Worker``, from the pyspark wheel),
``spark-submit --master spark://...`` of ``jobs/materialize.py``. The source's ranges are read by
the executors (Spark's event log names the executor of every task), and a worker SIGKILLed while
the job runs loses and doubles nothing: its tasks run again on the other worker."""
from __future__ import annotations

import collections
import json
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import LiveBrokers, wait_for
from test_pipeline import _cuts, assert_exactly_once

from bench.harness.spark_standalone import StandaloneCluster, spark_bin, spark_env
from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.fleet import cluster_warehouse
from delta_tables.schemas import TOPICS

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


def tasks_by_executor(events: Path) -> collections.Counter:
    """Each executor's finished tasks, from Spark's event log."""
    count: collections.Counter = collections.Counter()
    for path in events.rglob("*"):
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                if '"SparkListenerTaskEnd"' in line:
                    count[json.loads(line)["Task Info"]["Executor ID"]] += 1
    return count


def test_the_job_on_a_standalone_cluster_survives_a_worker_sigkill(controller_processes, tmp_path):
    from quorum.rpc.controller_client import ControllerClient

    cluster = StandaloneCluster(tmp_path)
    cp = controller_processes()
    cp.format()
    cp.start()
    cp.wait_leader()
    events = tmp_path / "events"
    events.mkdir()
    wh, ck = tmp_path / "wh", tmp_path / "ck"
    submit = [spark_bin("spark-submit"), "--master", cluster.url, "--conf", "spark.eventLog.enabled=true",
              "--conf", f"spark.eventLog.dir={events}", "--conf", "spark.eventLog.compress=false",
              "--conf", "spark.eventLog.rolling.enabled=false", "--conf", "spark.task.maxFailures=8",
              str(ROOT / "jobs" / "materialize.py"), "--bootstrap-controller", cp.bootstrap(),
              "--warehouse", str(wh), "--checkpoint", str(ck), "--trigger", "0.5"]
    try:
        with ControllerClient(cp.bootstrap(), timeout=20) as admin:
            brokers = LiveBrokers(admin, admin.describe_cluster().cluster_id, ((101, None), (102, None), (103, None)))
            brokers.wait_unfenced()
            log = open(tmp_path / "job.log", "wb")
            job = subprocess.Popen(submit, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=spark_env(), cwd=ROOT)
            try:
                for i in range(6):
                    admin.create_topic(f"t{i}", 10, 2)
                wait_for(lambda: _cuts(wh) >= 2, 180, "the job on the cluster to write a few cuts")
                wait_for(lambda: cluster.busy_worker() is not None, 60, "a worker's executor to have run a task")
                cluster.kill(cluster.workers[cluster.busy_worker()])  # the worker reading the source, and its executor, gone
                cuts = _cuts(wh)
                for i in range(6, 12):
                    admin.create_topic(f"t{i}", 10, 2)
                wait_for(lambda: _cuts(wh) > cuts + 1, 180, "cuts after the worker was lost")
                assert job.poll() is None, "the job died with the worker"
                wait_for(lambda: topics_in(wh) == 12, 180, "the job to catch up with the last create")
            finally:
                job.send_signal(signal.SIGTERM)
                job.wait(120)
                log.close()
                brokers.close()
        assert job.returncode == 0, (tmp_path / "job.log").read_text()[-3000:]
        assert_exactly_once(wh, cp.bootstrap(), topics=12)
        executors = tasks_by_executor(events)
        assert executors and "driver" not in executors, executors  # the source was read on the workers
        assert len(executors) >= 2, executors  # ... on both, the second after the first was lost
    finally:
        cluster.close()



def topics_in(wh: Path) -> int:
    try:
        return read_table(tables_at(str(wh), latest_cut(str(wh)))[TOPICS]).num_rows
    except Exception:  # no cut yet
        return 0


def test_a_fleet_on_a_standalone_cluster_reads_every_cluster_on_the_executors(controller_processes, tmp_path):
    """``spark-submit jobs/materialize.py --sources FILE`` on the cluster: three quorums in one
    query, their ranges read by the workers' executors, each cluster's tables fresh and every
    offset once; the daemons that only planned the query are ended on the driver's host too."""
    from quorum.rpc.controller_client import ControllerClient

    cluster = StandaloneCluster(tmp_path)
    quorums = {}
    for name in ("east", "west", "north"):
        quorums[name] = controller_processes(voters=(1,))
        quorums[name].format()
        quorums[name].start()
    for cp in quorums.values():
        cp.wait_leader()
    events = tmp_path / "events"
    events.mkdir()
    wh, ck, sources = tmp_path / "fleet", tmp_path / "ck", tmp_path / "sources.yaml"
    sources.write_text("sources:\n" + "".join(f"  - name: {n}\n    bootstrap-controller: {cp.bootstrap()}\n"
                                              f"    trigger: 0.5\n" for n, cp in quorums.items()))
    submit = [spark_bin("spark-submit"), "--master", cluster.url, "--conf", "spark.eventLog.enabled=true",
              "--conf", f"spark.eventLog.dir={events}", "--conf", "spark.eventLog.compress=false",
              "--conf", "spark.eventLog.rolling.enabled=false",
              str(ROOT / "jobs" / "materialize.py"), "--sources", str(sources), "--warehouse", str(wh),
              "--checkpoint", str(ck)]
    clients = {n: ControllerClient(cp.bootstrap(), timeout=20) for n, cp in quorums.items()}
    log = open(tmp_path / "job.log", "wb")
    job = subprocess.Popen(submit, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=spark_env(),
                           cwd=ROOT)
    try:
        for _ in range(3):
            for name, client in clients.items():
                committed = client.call_committed(_no_op())[1]
                where = cluster_warehouse(str(wh), name)
                wait_for(lambda: _newest(where) >= committed, 180, f"{name}'s tables to reach offset {committed}")
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(120)
        log.close()
        for client in clients.values():
            client.close()
        cluster.close()
    text = (tmp_path / "job.log").read_text(errors="replace")
    assert job.returncode == 0, text[-3000:]
    assert "Python processes Spark kept from planning the query" in text  # on the driver's host too
    for name in quorums:
        where = cluster_warehouse(str(wh), name)
        cut = latest_cut(where)
        offsets = read_table(tables_at(where, cut)["records"]).column("offset").to_pylist()
        assert sorted(offsets) == list(range(cut.offset + 1)), name
    executors = tasks_by_executor(events)
    assert executors and "driver" not in executors, executors  # every cluster's ranges read on the workers


def _no_op():
    from quorum.controller import api

    return api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("CLUSTER", ""), (
        api.AlterableConfig("num.partitions", "SET", "1"),)),))


def _newest(where: str) -> int:
    try:
        return latest_cut(where).offset
    except Exception:  # no cut yet
        return -1
