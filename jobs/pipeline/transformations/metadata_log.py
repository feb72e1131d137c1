"""The committed metadata log as a streaming table: one row per record (offset, epoch, append_time,
type, version, data as JSON), followed with Delta's streaming source from the warehouse's
``records`` table, which `sparkraft materialize` writes exactly once in offset order. (The
``sparkraft`` source itself runs in a pipeline too, but Spark 4.2.0's pipeline client then fails
the run at its end on the Python workers' accumulator message: UNKNOWN_RESPONSE.)"""
from pyspark import pipelines as dp


@dp.table(format="delta", comment="The committed metadata log, one row per record")
def metadata_log():
    warehouse = spark.conf.get("sparkraft.warehouse")  # noqa: F821 (spark-pipelines gives each file `spark`)
    return spark.readStream.format("delta").load(f"{warehouse}/records").drop("raw")  # noqa: F821
