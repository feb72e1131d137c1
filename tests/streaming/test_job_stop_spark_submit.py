"""Stopping ``spark-submit jobs/materialize.py`` as people and service managers do (test_job_stop.py
has the ways and the checks; this file runs beside it): each stop exits 0 with one ``Stopped`` line
and no stack trace, also when the stop kills a process Spark itself started, and one catch-up run
then leaves every offset in ``records`` exactly once."""
from __future__ import annotations

import os

import pytest
from conftest import wait_for
from test_job_stop import _quorum_with_brokers, _spark_env, needs_spark_submit, stop_each_way

pytestmark = pytest.mark.slow


@needs_spark_submit
def test_sigterm_to_the_job_or_its_group_and_ctrl_c_stop_spark_submit_cleanly(controller_processes, tmp_path):
    stop_each_way(controller_processes, tmp_path, "spark-submit")


# Hadoop writes each checkpoint file with a `chmod` it starts (no native library in pyspark). Once the
# test creates {hold}, the next chmod (only that one: the first to make {hold}.taken) waits, up to
# 60 s, instead of running, so a stop's signal to the whole process group is sure to find one, and
# kill it: it notes its death in {killed}. (A chmod that merely slept before running sometimes
# finished between being seen and the signal arriving.) Any chmod after it runs at once.
HELD_CHMOD = """#!/bin/sh
if [ -e "{hold}" ] && mkdir "{hold}.taken" 2>/dev/null; then
  trap 'touch "{killed}/$$"; exit 143' TERM
  touch "{running}/$$"
  i=0
  while [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
fi
exec /bin/chmod "$@"
"""


@needs_spark_submit
def test_a_stop_that_also_kills_a_process_spark_started_is_still_a_clean_stop(controller_processes, tmp_path):
    """SIGTERM to spark-submit's group while Hadoop's ``chmod`` of a checkpoint file runs: the chmod
    dies of it, which may fail the query under the job (or the query's own stop may win the race);
    either way the job stops with exit 0, one Stopped line and no stack trace, and the next run
    replays the cut-short micro-batch exactly once."""
    shims, running, killed, hold = tmp_path / "bin", tmp_path / "chmod-running", tmp_path / "chmod-killed", \
        tmp_path / "hold-chmod"
    for d in (shims, running, killed):
        d.mkdir()
    (shims / "chmod").write_text(HELD_CHMOD.format(hold=hold, running=running, killed=killed))
    (shims / "chmod").chmod(0o755)

    def hold_a_chmod() -> None:
        hold.touch()
        wait_for(lambda: any(running.iterdir()), 60, "a chmod held")

    with _quorum_with_brokers(controller_processes, tmp_path) as job:
        job.stop_while_writing("spark-submit", "SIGTERM to the group",
                               _spark_env(PATH=f"{shims}:{os.environ['PATH']}"), before_signal=hold_a_chmod)
    assert any(killed.iterdir()), "the group's SIGTERM killed a chmod Spark had started"
    job.check_caught_up_exactly_once()
