"""A Spark standalone cluster on 127.0.0.1: a master and workers started from the pyspark wheel
(``spark-class ...deploy.master.Master`` and ``...deploy.worker.Worker``), each in a process group of
its own, so a SIGKILL of the group takes a worker's executor with it, as losing the machine would.
The tests' cluster (a worker killed mid-run) and ``bench cluster`` use it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.harness.procs import free_ports


def spark_bin(name: str) -> str:
    """A script of the pyspark wheel's ``bin`` (spark-submit, spark-class)."""
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


def spark_env() -> dict[str, str]:
    """The environment of the master, the workers and spark-submit: loopback, this Python on both
    sides, processes in the foreground (so they can be killed)."""
    return {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"}


class StandaloneCluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each; logs in ``root``."""

    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.root = root
        self.port, web, *worker_webs = free_ports(2 + workers)
        self.master = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(self.port), "--webui-port", str(web))
        self.workers: list[subprocess.Popen] = []
        try:
            self._wait(lambda: "I have been elected leader" in self.log("master"), "the Spark master")
            self.workers = [self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url,
                                        "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                        "--webui-port", str(worker_webs[i]), "--work-dir", str(root / f"work{i}"))
                            for i in range(workers)]
            self._wait(lambda: self.log("master").count("Registering worker") >= workers, f"{workers} Spark workers")
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, main: str, *args: str) -> subprocess.Popen:
        with open(self.root / f"{name}.log", "ab") as out:
            return subprocess.Popen([spark_bin("spark-class"), main, *args], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=spark_env(), start_new_session=True)

    def _wait(self, ready, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:g}s waiting for {what} (logs in {self.root})")
            time.sleep(0.05)

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
