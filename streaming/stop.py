"""Stopping the streaming job on SIGTERM or SIGINT (Ctrl-C): finish the micro-batch in flight, then
stop, with one log line and exit 0.

Who receives the signal depends on how the job was started:

- ``sparkraft materialize`` and ``python jobs/materialize.py``: Python is the parent. PySpark starts
  its JVM ignoring SIGINT, so Ctrl-C reaches Python only; SIGTERM is sent to Python's pid.
- ``spark-submit jobs/materialize.py``: the JVM is the parent and Python its child. Ctrl-C reaches
  the whole process group: the JVM, this driver, and the Python processes Spark starts (the
  streaming source's planner among them, which would die of KeyboardInterrupt mid-call and fail
  the query). SIGTERM to spark-submit reaches the JVM only, whose default is to run its shutdown
  hooks and tear the SparkContext down under the running query (Java stack traces, exit 143 or
  130). So, through py4j, the JVM ignores SIGINT (as it does when PySpark starts it; the processes
  it starts from then on inherit that), and its TERM handler is replaced by one that tells Python.

Either way the signal only sets :attr:`GracefulStop.requested`; the query loop in ``job.py`` does
the stopping.
"""
from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Optional

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _JvmSignalHandler:
    """A ``sun.misc.SignalHandler`` implemented in Python (py4j calls it back)."""

    def __init__(self, stop: "GracefulStop"):
        self.stop = stop

    def handle(self, sig) -> None:
        self.stop.request(f"SIG{sig.getName()}")

    class Java:
        implements = ["sun.misc.SignalHandler"]


class GracefulStop:
    def __init__(self):
        self.requested = threading.Event()
        self.reason: Optional[str] = None
        self._previous: dict = {}

    def request(self, reason: str) -> None:
        if not self.requested.is_set():
            self.reason = reason
            self.requested.set()

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            for s in SIGNALS:
                self._previous[s] = signal.signal(s, lambda signum, _frame: self.request(signal.Signals(signum).name))
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()

    def watch_jvm(self, spark) -> None:
        """Under spark-submit (the JVM is our parent), have the JVM's TERM and INT tell us instead of
        shutting Spark down under the query."""
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            return  # PySpark started the JVM itself: signals come to Python
        from pyspark.java_gateway import ensure_callback_server_started

        gateway = spark.sparkContext._gateway
        ensure_callback_server_started(gateway)
        jvm = spark.sparkContext._jvm
        for name, handler in (("TERM", _JvmSignalHandler(self)), ("INT", jvm.sun.misc.SignalHandler.SIG_IGN)):
            try:
                jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal(name), handler)
            except Exception as e:  # a JVM without sun.misc: Spark's default behaviour stays
                log.warning("Cannot take over the JVM's SIG%s handler (%s); a stop may print Java errors", name, e)
