"""A streaming query that fails is reported by its cause: the job's one error line names the Python
error the source or the materialiser raised, not Spark's multi-kilobyte report (whose middle is
where the cause sits, and what a log tail or a CI excerpt cuts)."""
from __future__ import annotations

import pytest

from streaming.job import QueryFailed, _ended, jvm_causes, query_failure_cause


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


def test_a_report_without_a_python_traceback_gives_its_first_line_without_the_query_ids():
    report = ("[STREAM_FAILED] Query [id = 4, runId = b] terminated with exception: Connection reset by peer\n"
              "=== Streaming Query ===\nIdentifier: [id = 4, runId = b]")
    assert query_failure_cause(report) == "Connection reset by peer"
    assert query_failure_cause("something else entirely") == "something else entirely"


@pytest.mark.parametrize("report, transient", [
    ("org.apache.spark.SparkException: Python worker failed to connect back.", True),
    ("java.net.SocketTimeoutException: Timed out while waiting for the Python worker to connect back", True),
    ("java.io.EOFException at org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner", True),
    ("RuntimeError: the log start moved past offset 7 after this batch was planned", True),
    ("SparkraftError: INCONSISTENT_CLUSTER_ID: the controllers are of another cluster", False),
    ("GapError: the micro-batch starts at offset 5 but the tables end at 3", False),
])
def test_only_failures_a_new_query_may_not_meet_are_tried_again(report, transient):
    assert QueryFailed("the streaming query failed", report).transient is transient
