"""The Spark session every Spark user here shares: local on loopback (or the one spark-submit
configures: its master, a standalone cluster's included), UTC, quiet, with the Python workers
pointed at this interpreter."""
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

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # under spark-submit: its --master and --conf decide (a standalone cluster, say); only its
        # default log profile, INFO, is turned down
        builder = builder.config("spark.log.level", "ERROR")
    else:
        builder = (builder.master(os.environ.get("SPARKRAFT_SPARK_MASTER", "local[2]"))
                   .config("spark.ui.enabled", "false")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.driver.host", "127.0.0.1"))
    spark = (builder.config("spark.sql.shuffle.partitions", "1")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs every callback at INFO
    return spark
