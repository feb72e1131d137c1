"""The builder of the Spark driver's class archive (delta_tables/jvm_archive.py): a short session
that loads what a materialising job loads, whose JVM writes its classes at its exit.
``python -m delta_tables.jvm_archive_builder`` makes the archive unless it is made or being made."""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import pyarrow as pa

from delta_tables import jvm_archive, local_fs
from delta_tables.spark_session import local_spark_session


def build() -> Optional[Path]:
    """Make the archive now (unless it is made, or being made by another process); where it is, or None."""
    path = jvm_archive.archive_path(local_fs.spark_confs().get("spark.driver.extraClassPath", ""))
    if path is None or path.exists():
        return path
    lock = path.with_suffix(".building")
    if not jvm_archive.take_lock(lock):
        return None
    dump = jvm_archive.dumping = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        _run_workload()
        _finish(dump, path)
    finally:
        dump.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
        jvm_archive.dumping = None
    return path if path.exists() else None


def _finish(dump: Path, path: Path, timeout: float = 120.0) -> None:
    """End this process's Spark driver and, once its JVM has written the archive and exited, rename
    the archive into place. The JVM ends when its standard input closes (PySpark's launcher), as it
    would at this interpreter's exit."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    if proc is not None and proc.poll() is None:
        proc.stdin.close()
        proc.wait(timeout=timeout)
    if dump.exists() and dump.stat().st_size > 0:
        os.replace(dump, path)


def _run_workload() -> None:
    """Arrow in and out, SQL, and a streaming query's micro-batches through a Python data source and
    foreachBatch: the classes of a materialising job's session."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Ticks(DataSource):
        @classmethod
        def name(cls):
            return "sparkraft-archive-ticks"

        def schema(self):
            return "offset long"

        def streamReader(self, schema):
            return TickReader()

    class TickReader(DataSourceStreamReader):
        def initialOffset(self):
            return {"offset": 0}

        def latestOffset(self):
            return {"offset": 2}

        def partitions(self, start, end):
            return [InputPartition(None)]

        def read(self, partition):
            yield (1,)

    spark = local_spark_session("sparkraft-jvm-archive", delta=False)
    spark.dataSource.register(Ticks)
    frame = spark.createDataFrame(pa.table({"topic": ["a", "b", "a"], "partition": [0, 1, 2]}))
    frame.createOrReplaceTempView("t")
    spark.sql("SELECT topic, count(*) AS n FROM t GROUP BY topic ORDER BY topic").toArrow()
    with tempfile.TemporaryDirectory() as checkpoint:
        query = (spark.readStream.format("sparkraft-archive-ticks").load().writeStream
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True)
                 .foreachBatch(lambda df, _: df.toArrow()).start())
        query.awaitTermination()


if __name__ == "__main__":  # makes the archive (where it is not made yet) and says where it is
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    started = time.monotonic()
    made = build()
    print(f"{jvm_archive.FOLDER}: {made.name if made else 'not made (no JDK here, or another process is making it)'} "
          f"in {time.monotonic() - started:.0f}s", flush=True)
    sys.exit(0)
