"""The Spark session every Spark user here shares: local on loopback (or the one spark-submit
configures: its master, a standalone cluster's included), UTC, quiet, with the Python workers
pointed at this interpreter."""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from typing import Optional

from delta_tables import jvm_archive, local_fs, storage

DELTA_JARS = "delta-spark-4.4.0"  # Delta's Spark connector: scripts/maven/delta-spark-4.4.0.xml
DELTA_PACKAGE = "io.delta:delta-spark_2.13:4.4.0"  # the same, as spark-submit's --packages names it
# what a session needs beside the jars: Delta's SQL extension, and its catalog over the session's
DELTA_CONFS = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
               "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"}


class ConnectorMissing(ValueError):
    """A Spark session needs Delta's connector and its jars are not resolved here."""


def delta_jars() -> Optional[list[str]]:
    """Delta's Spark connector jars as scripts/fetch_jars.py resolved them ($SPARKRAFT_JARS, else
    ~/.cache/sparkraft/jars), or None where they are not: never downloaded by a Spark session."""
    folder = local_fs.jars_root() / DELTA_JARS
    if not (folder / ".resolved").exists():
        return None
    return sorted(str(p) for p in folder.glob("*.jar"))


def _starts_jvm() -> bool:
    """Whether this process's next session launches the JVM (not under spark-submit, none yet)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return False
    from pyspark import SparkContext

    return SparkContext._gateway is None  # PySpark's own: None until it has launched the JVM


@contextlib.contextmanager
def _jvm_ignoring_sigterm():
    """Start PySpark's JVM with SIGTERM ignored, as PySpark already starts it with SIGINT ignored.

    A service manager stops a job by sending SIGTERM to every process it started at once (systemd's
    default): the JVM would run its shutdown hooks and stop the SparkContext under the running query,
    and the Python workers it starts would die mid-call, while this process was still finishing the
    micro-batch in flight (exit 1, "Answer from Java side is empty"). The JVM keeps an ignored
    SIGTERM ignored (it installs no shutdown handler for it), and the Python workers it starts
    inherit it; this process alone stops the job (streaming/stop.py). Only where this process
    starts the JVM (not under spark-submit) and only while it does."""
    starts_jvm = threading.current_thread() is threading.main_thread() and _starts_jvm()
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN) if starts_jvm else None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def configure_s3a(spark) -> None:
    """Point a classic session's ``s3a`` file system at the store the storage options and the
    environment name (delta_tables/storage.py), as delta-rs is. Hadoop's configuration holds the
    keys in memory; Spark redacts them wherever it shows its configuration. A Spark Connect
    session is its server's to configure."""
    context = getattr(spark, "sparkContext", None)
    try:
        hadoop = context._jsc.hadoopConfiguration() if context is not None else None
    except Exception:  # a Connect session has no JVM here
        return
    if hadoop is None:
        return
    for key, value in storage.s3a_settings().items():
        hadoop.set(key, value)


def local_spark_session(app_name: str, delta: Optional[bool] = None, hive: bool = False):
    """A local Spark session (or the one spark-submit made), with the Python workers pointed at
    this interpreter (else the Python data source cannot connect back). ``delta``: with Delta's
    Spark connector (its jars from ``delta_jars``, its SQL extension and catalog), True: or
    ConnectorMissing naming the fix where they are not resolved; None: where they are resolved.
    (Under spark-submit, its --packages or --jars decide.) ``hive``: the session catalog kept in a
    Hive metastore (delta_tables/catalog.py), as Spark's configuration names it (hive-site.xml,
    spark.hadoop.javax.jdo.*), else the embedded Derby one in ./metastore_db."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, and no hostname warning
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    confs: dict[str, str] = {}
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ
    if under_submit:
        # under spark-submit: its --master and --conf decide (a standalone cluster, say); only its
        # default log profile, INFO, is turned down
        builder = builder.config("spark.log.level", "ERROR")
    else:
        # local[2, 4]: two threads, and a task tried up to 4 times (local mode's default is once), so
        # a Python worker that dies under a task (a service manager's SIGTERM reaches PySpark's
        # worker daemon, which handles it itself) costs a retry, not the micro-batch
        master = os.environ.get("SPARKRAFT_SPARK_MASTER", "local[2,4]")
        builder = (builder.master(master)
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1"))
        confs = local_fs.spark_confs() if master.startswith("local") else {}  # the driver is every executor
        for key, value in confs.items():
            builder = builder.config(key, value)
    if hive:
        builder = builder.enableHiveSupport()
    builder = builder.config("spark.sql.shuffle.partitions", "1").config("spark.sql.session.timeZone", "UTC")
    jars = delta_jars() if delta is not False and not under_submit else None
    if delta and not under_submit and jars is None:
        raise ConnectorMissing(f"Delta's Spark connector is not resolved ({DELTA_JARS}): run python "
                               f"scripts/fetch_jars.py, or give spark-submit --jars")
    if jars is not None:
        builder = builder.config("spark.jars", ",".join(jars))
        for key, value in DELTA_CONFS.items():
            builder = builder.config(key, value)
        # a table's log state in 2 partitions, not Delta's 50 (tasks of a few rows each on a local
        # session: most of a small MERGE's time)
        builder = builder.config("spark.databricks.delta.snapshotPartitions", "2")
    if not under_submit and _starts_jvm():  # the driver's classes from an archive (delta_tables/jvm_archive.py)
        options = jvm_archive.java_options(confs.get("spark.driver.extraClassPath", ""))
        if options:
            builder = builder.config("spark.driver.extraJavaOptions", options)
    with _jvm_ignoring_sigterm():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs every callback at INFO
    return spark
