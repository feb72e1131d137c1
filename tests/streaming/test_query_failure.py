"""A streaming query that fails is reported by its cause: the job's one error line names the Python
error the source or the materialiser raised, not Spark's multi-kilobyte report (whose middle is
where the cause sits, and what a log tail or a CI excerpt cuts)."""
from __future__ import annotations

import pytest

from streaming.job import _ended
from streaming.query_failure import QueryFailed, jvm_causes, query_failure_cause


class GapError(Exception):
    pass


def test_a_query_failed_by_its_micro_batch_function_is_reported_by_that_error(spark, tmp_path):
    def fail(df, batch_id):
        raise GapError(f"the micro-batch starts at offset 5 but the tables end at 3 (batch {batch_id})")

    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream.foreachBatch(fail)
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        with pytest.raises(QueryFailed) as failed:
            while not _ended(query, 0.2):
                pass
    finally:
        query.stop()
    assert str(failed.value) == ("the streaming query failed: test_query_failure.GapError: the micro-batch starts "
                                 "at offset 5 but the tables end at 3 (batch 0)")
    assert "STREAM_FAILED" in str(failed.value.__cause__), "Spark's whole report stays chained for --debug"
    assert not failed.value.transient, "a refusal of the micro-batch function is not tried again"
    assert any("PythonException" in c or "GapError" in c for c in jvm_causes(failed.value.__cause__)), \
        "the JVM's causes are read from the PySpark error"


def test_a_source_runner_lost_with_its_connection_reset_is_said_so_and_tried_again(spark):
    """A source runner SIGKILLed with bytes unread: the kernel resets its connection and the JVM's
    read says "Connection reset" (a real JVM exception here, with the runner's frame on top)."""
    from pyspark.errors.exceptions.captured import StreamingQueryException

    jvm = spark.sparkContext._jvm
    reset = jvm.java.net.SocketException("Connection reset")
    frames = spark.sparkContext._gateway.new_array(jvm.java.lang.StackTraceElement, 2)
    frames[0] = jvm.java.lang.StackTraceElement("sun.nio.ch.NioSocketImpl", "implRead", "NioSocketImpl.java", 320)
    frames[1] = jvm.java.lang.StackTraceElement(
        "org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner", "latestOffset",
        "PythonStreamingSourceRunner.scala", 130)
    reset.setStackTrace(frames)
    failed = QueryFailed.of(StreamingQueryException(origin=jvm.java.lang.RuntimeException(
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Connection reset SQLSTATE: XXKST",
        reset)))
    assert str(failed) == ("the streaming query failed: Spark lost the Python process serving the sparkraft "
                           "source (it exited or was killed)")
    assert failed.transient


def test_a_report_without_a_python_traceback_gives_its_first_line_without_the_query_ids():
    report = ("[STREAM_FAILED] Query [id = 4, runId = b] terminated with exception: Connection reset by peer\n"
              "=== Streaming Query ===\nIdentifier: [id = 4, runId = b]")
    assert query_failure_cause(report) == "Connection reset by peer"
    assert query_failure_cause("something else entirely") == "something else entirely"


@pytest.mark.parametrize("report, transient", [
    ("org.apache.spark.SparkException: Python worker failed to connect back.", True),
    ("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back", True),
    ("java.io.EOFException at org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner", True),
    ("java.net.SocketException at org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner: "
     "Connection reset", True),
    ("RuntimeError: the log start moved past offset 7 after this batch was planned", True),
    ("SparkraftError: INCONSISTENT_CLUSTER_ID: the controllers are of another cluster", False),
    ("GapError: the micro-batch starts at offset 5 but the tables end at 3", False),
])
def test_only_failures_a_new_query_may_not_meet_are_tried_again(report, transient):
    assert QueryFailed("the streaming query failed", report).transient is transient


@pytest.mark.parametrize("report, by_the_stop", [
    ("streaming.batch_gate.StoppingError: micro-batch 9 refused: the job is stopping", True),
    ("org.apache.hadoop.util.Shell$ExitCodeException at org.apache.hadoop.util.Shell: (exit code 143)", True),
    ("org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)", True),
    ("java.lang.IllegalStateException: SparkContext has been shutdown", True),
    ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Terminated", True),
    ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Terminated tasks left", False),
    ('java.io.IOException: Cannot run program "chmod": error=0, Failed to exec spawn helper: pid: 10044, '
     'signal: 15', True),  # the JDK's spawn helper, killed by the group's SIGTERM before it could exec
    ('java.io.IOException: Cannot run program "chmod": error=0, Failed to exec spawn helper: pid: 10044, '
     'signal: 11', False),  # ... by a crash: not the stop's doing
    ("org.apache.hadoop.util.Shell$ExitCodeException: chmod: Input/output error (exit code 1)", False),
    ("GapError: the micro-batch starts at offset 5 but the tables end at 3", False),
    ("OSError: Generic LocalFileSystem error: No space left on device", False),
])
def test_a_failure_during_a_stop_is_the_stops_only_where_the_stops_signal_caused_it(report, by_the_stop):
    assert QueryFailed("the streaming query failed", report).caused_by_a_stop is by_the_stop


def test_a_failure_whose_whole_cause_is_terminated_is_the_stops():
    """What a shell prints when the process it runs dies of SIGTERM, read as the failure's cause
    (a full run showed a report whose own lines ended otherwise)."""
    assert QueryFailed("the streaming query failed: Terminated", "no line of it says so").caused_by_a_stop
    assert not QueryFailed("the streaming query failed: Terminated early by a bug", "").caused_by_a_stop


@pytest.mark.parametrize("error, clean", [
    (OSError("Generic LocalFileSystem error: No space left on device"), False),
    (OSError("chmod of a checkpoint file died of the job's own signal (exit code 143)"), True),
    ("refused", True),
], ids=["another cause: exit 1", "the stop's own signal: a clean stop", "a batch refused as the job stops: clean"])
def test_a_micro_batch_that_fails_while_the_job_stops(spark, tmp_path, caplog, error, clean):
    """The stop waits for the micro-batch in flight; when that batch then fails, the job exits 1 with
    its cause unless the stop's own signal caused it (then a clean stop with its Stopped line)."""
    import threading

    from delta_tables.writer import DeltaRsWriter
    from streaming.batch_gate import StoppingError
    from streaming.job import _stop_query
    from streaming.materializer import Materializer
    from streaming.stop import GracefulStop

    materializer = Materializer(DeltaRsWriter(str(tmp_path / "wh")))
    in_flight, release = threading.Event(), threading.Event()

    def process(table):  # the batch's write, held until the stop waits for it, then failing
        in_flight.set()
        release.wait(60)
        if error == "refused":  # as foreach_batch refuses a batch that begins once the stop has
            raise StoppingError("micro-batch 9 refused: the job is stopping (it runs again at the next start)")
        raise error

    materializer.process = process
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load().writeStream
             .foreachBatch(materializer.foreach_batch).option("checkpointLocation", str(tmp_path / "ck")).start())
    stop = GracefulStop()
    try:
        assert in_flight.wait(120), "a micro-batch in flight"
        stop.request("SIGTERM")
        threading.Timer(0.5, release.set).start()
        caplog.set_level("INFO", logger="streaming.job")
        if clean:
            _stop_query(spark, query, materializer, stop)
            assert "Stopped (SIGTERM)" in caplog.text and "ended with an error as it stopped" in caplog.text
        else:
            with pytest.raises(QueryFailed) as failed:
                _stop_query(spark, query, materializer, stop)
            assert str(failed.value) == ("the streaming query failed: OSError: Generic LocalFileSystem error: No "
                                         "space left on device (as the job stopped on SIGTERM)"), str(failed.value)
            assert "Stopped (SIGTERM)" not in caplog.text
    finally:
        release.set()
        if query.isActive:
            query.stop()
        spark.sparkContext.setLogLevel("WARN")  # _stop_query turned the shared session's log off


def test_the_cli_says_a_failed_query_as_its_one_line():
    """A query that failed (during a stop or not) ends the command with its cause, as an expected
    error: no "unexpected QueryFailed" (the CLI does not import the job's classes to know them)."""
    from sparkraft.cli import error_line
    from streaming.query_failure import FailedAsItStopped

    assert error_line(FailedAsItStopped("the streaming query failed: OSError: disk full (as the job stopped on "
                                        "SIGTERM)")) == \
        "ERROR: the streaming query failed: OSError: disk full (as the job stopped on SIGTERM)"
