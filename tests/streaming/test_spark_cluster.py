"""The job on a real Spark cluster: a standalone master and two workers started here
(``spark-class ...deploy.master.Master`` and ``...deploy.worker.Worker``, from the pyspark wheel),
``spark-submit --master spark://...`` of ``jobs/materialize.py``. The source's ranges are read by
the executors (Spark's event log names the executor of every task), and a worker SIGKILLed while
the job runs loses and doubles nothing: its tasks run again on the other worker."""
from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LiveBrokers, free_ports, wait_for
from test_pipeline import _cuts, assert_exactly_once

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.schemas import TOPICS

pytestmark = [pytest.mark.slow, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]


def spark_bin(name: str) -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


def spark_env() -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}


class StandaloneCluster:
    """A master and two one-core workers, each in a process group of its own (a SIGKILL of the group
    takes the worker's executor with it, as losing the machine would)."""

    def __init__(self, root: Path):
        self.root = root
        self.port, web, *worker_webs = free_ports(4)
        self.master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(web))
        wait_for(lambda: "I have been elected leader" in self.log("master"), 60, "the Spark master")
        self.workers = [self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                                    "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                                    "--webui-port", str(worker_webs[i]), "--work-dir", str(root / f"work{i}"))
                        for i in range(2)]
        wait_for(lambda: self.log("master").count("Registering worker") >= 2, 60, "two Spark workers")

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, main: str, *args: str) -> subprocess.Popen:
        out = open(self.root / f"{name}.log", "ab")
        return subprocess.Popen([spark_bin("spark-class"), main, *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=spark_env(), start_new_session=True)

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def busy_worker(self) -> int | None:
        """A worker whose executor has run a task (its stderr says so), or None yet."""
        for i in range(len(self.workers)):
            for stderr in (self.root / f"work{i}").glob("app-*/*/stderr"):
                if "Running task" in stderr.read_text(errors="replace"):
                    return i
        return None

    def kill(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)

    def close(self) -> None:
        for p in (*self.workers, self.master):
            self.kill(p)


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
