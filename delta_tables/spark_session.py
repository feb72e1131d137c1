"""The Spark session every Spark user here shares: local (or the one spark-submit made), on
loopback, UTC, quiet, with the Python workers pointed at this interpreter."""
from __future__ import annotations

import logging
import os
import sys


def local_spark_session(app_name: str):
    """A local Spark session (or the one spark-submit made), with the Python workers pointed at
    this interpreter (else the Python data source cannot connect back)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # loopback only, and no hostname warning
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # under spark-submit, whose default log profile is INFO
        builder = builder.config("spark.log.level", "ERROR")
    spark = (builder.appName(app_name)
             .master(os.environ.get("SPARKRAFT_SPARK_MASTER", "local[2]"))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs every callback at INFO
    return spark
