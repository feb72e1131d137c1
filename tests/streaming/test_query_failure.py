"""A streaming query that fails is reported by its cause: the job's one error line names the Python
error the source or the materialiser raised, not Spark's multi-kilobyte report (whose middle is
where the cause sits, and what a log tail or a CI excerpt cuts)."""
from __future__ import annotations

import pytest

from streaming.job import QueryFailed, _ended, query_failure_cause


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


def test_a_report_without_a_python_traceback_gives_its_first_line_without_the_query_ids():
    report = ("[STREAM_FAILED] Query [id = 4, runId = b] terminated with exception: Connection reset by peer\n"
              "=== Streaming Query ===\nIdentifier: [id = 4, runId = b]")
    assert query_failure_cause(report) == "Connection reset by peer"
    assert query_failure_cause("something else entirely") == "something else entirely"
