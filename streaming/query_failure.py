"""What a failed streaming query says: :class:`QueryFailed`, with the one line the job ends with
(the cause, not Spark's whole report), whether a new query may not meet it (``transient``: the job
starts the query again) and whether a stop's own signal caused it (``caused_by_a_stop``: a clean
stop all the same); :class:`FailedAsItStopped` for one that failed of another cause during a stop."""
from __future__ import annotations

import logging
import re

log = logging.getLogger("streaming.job")


class QueryFailed(RuntimeError):
    """The streaming query ended with an error. Its message is the cause (a Python error raised in
    the source or the materialiser, or Spark's own first line), not Spark's whole report, which
    ``--debug`` still prints as the chained exception."""

    one_line = True  # the CLI's error line is its message (sparkraft/cli.py error_line)

    def __init__(self, message: str, report: str = ""):
        super().__init__(message)
        self.report = report  # Spark's whole report of the failure

    @classmethod
    def of(cls, error: BaseException) -> "QueryFailed":
        causes = jvm_causes(error)
        report = "\n".join([str(error), *causes])
        cause = query_failure_cause(str(error))
        # Spark (or py4j: "An error occurred while calling ...") said nothing of its own: name the JVM's cause
        lost = next((sentence for pattern, sentence in SPARK_LOSSES if pattern in report), None)
        if lost is not None:  # Spark's own words for it are the socket's ("Connection reset SQLSTATE: XXKST")
            cause = lost
        elif cause.startswith(("SQLSTATE", "An error occurred while calling")) or not cause:
            cause = causes[-1] if causes else cause
        return cls(f"the streaming query failed: {cause}", report)

    @property
    def caused_by_a_stop(self) -> bool:
        """Whether the failure is what a stop's signal does: a process Spark started (Hadoop's
        ``chmod``, a Python worker) died of SIGTERM or SIGINT, which reach the job's whole process
        group, or Spark's own context was shut down. Any other failure during a stop is a failure."""
        text = f"{self}\n{self.report}"
        return any(p in self.report for p in STOP_SIGNS) or any(
            line.rstrip().endswith(STOP_LINE_ENDINGS) for line in self.report.splitlines()) or \
            str(self).endswith(STOP_CAUSES) or STOP_SPAWN_HELPER.search(text) is not None

    @property
    def transient(self) -> bool:
        """Whether starting the query again may well succeed: Spark lost one of its Python workers
        (one that did not connect back in time on a loaded machine, one killed), or the quorum
        could not be reached or moved on under a batch. A refusal (another cluster, a right
        missing, a gap) fails the same way every time and is not tried again."""
        return any(p in self.report for p in TRANSIENT_FAILURES)


# Failures of Spark's own machinery that its report names only by a JVM cause: the sentence to say
_RUNNER_LOST = "Spark lost the Python process serving the sparkraft source (it exited or was killed)"
SPARK_LOSSES = (
    ("java.io.EOFException at org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner",
     _RUNNER_LOST),
    # the same loss where the process died with bytes unread (the kernel resets the connection) or
    # the JVM writes to it after it died: "Connection reset", "Broken pipe" (seen once the driver
    # started faster, from its class archive)
    ("java.net.SocketException at org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner",
     _RUNNER_LOST),
)
# What Spark and the source say of a failure that a new query may not meet (QueryFailed.transient)
TRANSIENT_FAILURES = (
    *(pattern for pattern, _ in SPARK_LOSSES),
    "Python worker failed to connect back", "waiting for the Python worker to connect back",
    "Python worker exited unexpectedly", "the log start moved past offset", "NETWORK_EXCEPTION",
    "no Kafka controller reachable", "answered in time", "StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED",
)
# What a failure caused by the stop itself says (QueryFailed.caused_by_a_stop): a micro-batch refused
# because the job is stopping; a process's exit status 128 + SIGTERM or SIGINT, a Python worker of
# Spark's gone, Spark's context shut down (the signal reaches the processes Spark started).
STOP_SIGNS = (
    "StoppingError",  # the materialiser refusing a micro-batch once the stop began: how Spark is told not to commit it
    "exit code 143", "exit code 130", "exitCode=143", "exitCode=130",
    *(pattern for pattern, _ in SPARK_LOSSES), "Python worker exited unexpectedly",
    "SparkContext was shut down", "SparkContext has been shutdown",
)
# A line of the report ending so is the stop's too: "Terminated" is what a shell prints when the
# process it runs dies of SIGTERM (Hadoop's chmod), Spark's whole report when the JVM's causes, with
# their exit code, can no longer be read as the stop tears the gateway down (seen beside a CPU burner)
STOP_LINE_ENDINGS = ("terminated with exception: Terminated",)
# ... and a failure whose whole cause is that word (the report's first line read as the cause; seen
# once in a full run beside other tests, the report's own lines ending otherwise)
STOP_CAUSES = ("failed: Terminated",)


# ... and the JDK's own helper process for starting one (jspawnhelper, as for Hadoop's chmod) killed by
# SIGTERM (15) or SIGINT (2) before it could exec: "Cannot run program "chmod": error=0, Failed to
# exec spawn helper: pid: N, signal: 15" (seen once in CI's full run)
STOP_SPAWN_HELPER = re.compile(r"Failed to exec spawn helper: pid: \d+, signal: (?:15|2)\b")


_PYTHON_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)\b:? ?.*$")


def query_failure_cause(report: str) -> str:
    """The line of Spark's report of a failed query that says what went wrong: the last Python
    exception line of a traceback in it (Spark wraps the source's and the materialiser's errors),
    else the report's first line without Spark's query identifiers."""
    lines = report.splitlines()
    tracebacks = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")
                  or line.endswith("Traceback (most recent call last):")]
    if tracebacks:
        after = lines[tracebacks[-1] + 1:]
        errors = [line.strip() for line in after if _PYTHON_ERROR_LINE.match(line)]
        if errors:
            return errors[-1]
    first = lines[0] if lines else report
    return re.sub(r"^\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ?", "", first).strip() or first


def jvm_causes(error: BaseException) -> list[str]:
    """The JVM causes under a PySpark error, outermost first, each as ``class at where: message``
    (``where``: the class of its top frame outside the JDK and Scala): Spark's own report of a
    failed query may say no more than an SQLSTATE."""
    out: list[str] = []
    try:
        cause = getattr(error, "_origin", None) or getattr(error, "java_exception", None)  # PySpark's, py4j's
        cause = cause.getCause() if cause is not None else None
        while cause is not None and len(out) < 8:
            where = next((f.getClassName() for f in cause.getStackTrace()
                          if not f.getClassName().startswith(("java.", "javax.", "jdk.", "scala.", "sun."))), None)
            message = cause.getMessage()
            out.append(f"{cause.getClass().getName()}{f' at {where}' if where else ''}"
                       f"{f': {message}' if message else ''}{_exit_code(cause)}")
            cause = cause.getCause()
    except Exception as e:  # the JVM is gone (a stop), or py4j cannot reach it: Spark's report only
        log.debug("no JVM cause of %s: %s", type(error).__name__, e)
    return out


def _exit_code(cause) -> str:
    """`` (exit code N)`` of a JVM cause that is a process's exit (Hadoop's Shell.ExitCodeException),
    else ""."""
    try:
        return f" (exit code {int(cause.getExitCode())})"
    except Exception:  # not a process's exit: py4j finds no such method
        return ""


class FailedAsItStopped(QueryFailed):
    """A query that failed during a stop, of a cause other than the stop itself: the job's end."""
