"""The Spark driver's class archive made for real (delta_tables/jvm_archive.py): built by its
command into a jars cache of its own, then a new driver loads thousands of Spark's classes from it
(the JVM's own class-loading log says where each came from), and a driver started while none exists
starts a builder that leaves a whole archive behind."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

SESSION = """
from delta_tables.spark_session import local_spark_session
local_spark_session("archive-check", delta=False).range(3).count()
"""


def _env(tmp_path, **extra):
    env = {**os.environ, "SPARKRAFT_JARS": str(tmp_path / "jars"), **extra}
    env.pop("SPARKRAFT_JVM_ARCHIVE", None)
    return env


def _archives(tmp_path):
    return sorted((tmp_path / "jars" / "sparkraft-jvm-archive").glob("*.jsa"))


def test_a_driver_loads_sparks_classes_from_the_archive_its_command_made(tmp_path):
    made = subprocess.run([sys.executable, "-m", "delta_tables.jvm_archive_builder"], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    assert len(_archives(tmp_path)) == 1 and _archives(tmp_path)[0].name in made.stdout
    assert not list((tmp_path / "jars" / "sparkraft-jvm-archive").glob(".*part"))  # nothing half made

    loads = tmp_path / "class-load.log"
    flags = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} -Xlog:class+load=info:file={loads}"
    run = subprocess.run([sys.executable, "-c", SESSION], env=_env(tmp_path, SPARK_SUBMIT_OPTS=flags),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = loads.read_text().splitlines()
    from_archive = [line for line in lines if "shared objects file (top)" in line]
    assert len(from_archive) > 3000, f"{len(from_archive)} of {len(lines)} classes from the archive"
    assert any("org.apache.spark.SparkContext " in line for line in from_archive)
    assert "cds" not in run.stdout  # the JDK's CDS messages stay off


def test_a_driver_without_an_archive_starts_as_before_and_one_builder_makes_it(tmp_path):
    run = subprocess.run([sys.executable, "-c", SESSION], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    deadline = time.monotonic() + 240
    while not _archives(tmp_path) and time.monotonic() < deadline:
        time.sleep(1)
    assert len(_archives(tmp_path)) == 1
    folder = tmp_path / "jars" / "sparkraft-jvm-archive"
    while list(folder.glob("*.building")) and time.monotonic() < deadline:
        time.sleep(0.5)  # the builder removes its lock last
    assert not list(folder.glob("*.building")) and not list(folder.glob(".*part"))
