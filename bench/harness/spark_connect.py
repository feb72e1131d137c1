"""A Spark Connect server on 127.0.0.1, started from the pyspark wheel (its SparkConnectServer class
under spark-submit, local[2]): what a warm `sparkraft materialize --remote` reuses (``bench
kafka_source``) and what tests/streaming/test_spark_connect.py runs its clients against. Its start
is not part of what a benchmark times; it is ended (its process group) when the block ends."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterator, Optional, Sequence

from bench.harness.procs import free_ports
from bench.harness.spark_standalone import spark_bin, spark_env

STARTED = "Spark Connect server started"


@contextlib.contextmanager
def connect_server(root: Path, submit_args: Sequence[str] = (), port: Optional[int] = None,
                   limit_s: float = 180.0) -> Iterator[str]:
    """A Connect server whose log and metastore live in ``root``, given spark-submit's
    ``submit_args`` beside its own (Delta's jars, a catalog), on ``port`` (None: a free one);
    yields its ``sc://`` address."""
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_ports(1)[0]
    log = root / "server.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([spark_bin("spark-submit"), "--class",
                                 "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]",
                                 *submit_args, "--conf", f"spark.connect.grpc.binding.port={port}",
                                 "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                                 "--conf", "spark.ui.enabled=false", "spark-internal"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=spark_env(),
                                start_new_session=True, cwd=root)
    try:
        deadline = time.monotonic() + limit_s
        while STARTED not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
