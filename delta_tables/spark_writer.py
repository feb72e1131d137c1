"""DeltaSparkWriter: the same writes as DeltaRsWriter, through Spark and Delta's JVM classes.

Where Delta's jars are on Spark's classpath (a local session takes those scripts/fetch_jars.py
resolved; ``spark.jars.packages`` on a cluster, a Databricks runtime): MERGE and appends run as
Spark SQL, and exactly-once uses Delta's own idempotent writes
(``spark.databricks.delta.write.txnAppId`` / ``txnVersion``, the same application transaction
``sparkraft-materializer`` delta-rs writes). Tables are created and read with delta-rs either way;
both produce standard Delta tables.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

import pyarrow as pa
import pyarrow.compute as pc

from delta_tables.schemas import AUDIT, KEYS, PARTITIONS, RECORDS, SCHEMAS, SNAPSHOTS, partition_bucket
from delta_tables.spark_session import DELTA_PACKAGE
from delta_tables.writer import APP_ID, DeltaRsWriter


class DeltaClassesMissing(ValueError):
    """``--writer delta-spark`` without Delta's JVM classes on Spark's classpath."""


def delta_classes_present(spark) -> bool:
    """Whether Spark can load Delta's classes: through Spark's own class loader, which holds the
    ``spark.jars`` a session was given (``Class.forName`` from py4j sees only the JVM's start path)."""
    try:
        spark._jvm.org.apache.spark.util.Utils.classForName("io.delta.tables.DeltaTable", True, False)
        return True
    except Exception:
        return False


class DeltaSparkWriter(DeltaRsWriter):
    def __init__(self, warehouse: str, spark):
        if not delta_classes_present(spark):
            raise DeltaClassesMissing("--writer delta-spark needs Delta's JVM classes on Spark's classpath "
                                      "(python scripts/fetch_jars.py for a local session; "
                                      f"spark.jars.packages={DELTA_PACKAGE} on a cluster); "
                                      "the default writer (delta-rs) needs none")
        super().__init__(warehouse)
        self.spark = spark

    def _with_txn(self, name: str, version: int, write) -> None:
        """``write()`` through Spark as a commit of table ``name`` covering the log through
        ``version``: what this writer knows of the table (its applied offset, and the delta-rs view
        a cut's versions are read from) follows, as it does after delta-rs's own commits. (A cut
        named a table's version from before Spark's commit, and the next batch re-appended records.)"""
        conf = self.spark.conf

        def committed() -> None:
            conf.set("spark.databricks.delta.write.txnAppId", APP_ID)
            conf.set("spark.databricks.delta.write.txnVersion", str(version))
            try:
                write()
            finally:
                conf.unset("spark.databricks.delta.write.txnAppId")
                conf.unset("spark.databricks.delta.write.txnVersion")

        self._commit(name, version, committed)
        self.table(name).update_incremental()

    def _append(self, name: str, rows: pa.Table, version: int) -> None:
        df = self.spark.createDataFrame(rows)
        self._with_txn(name, version, lambda: df.write.format("delta").mode("append").save(self.path(name)))

    def append_audit(self, rows: pa.Table, last_offset: int) -> bool:
        applied = self.applied(AUDIT)
        data = rows.filter(pc.greater(rows.column("offset"), applied))
        if applied >= last_offset or not data.num_rows:
            return False
        self._append(AUDIT, data, last_offset)
        return True

    def append_records(self, records: pa.Table, last_offset: int) -> bool:
        applied = self.applied(RECORDS)
        if applied >= last_offset:
            return False
        self._append(RECORDS, records.filter(pc.greater(records.column("offset"), applied)), last_offset)
        return True

    def merge_state(self, name: str, upserts: list[dict[str, Any]], deletes: Iterable[tuple],
                    last_offset: int, inserts: Optional[pa.Table] = None) -> dict:
        """As DeltaRsWriter.merge_state; ``inserts`` are merged like upserts (Delta's MERGE on Spark
        prunes by the table's own statistics)."""
        if self.applied(name) >= last_offset:
            return {"skipped": True}
        upserts = [*upserts, *(inserts.to_pylist() if inserts is not None else ())]
        keys = KEYS[name]
        delete_rows = [dict(zip(keys, key)) for key in deletes]
        if name == PARTITIONS:
            for r in delete_rows:
                r["bucket"] = partition_bucket(r["topic_id"])
        schema = SCHEMAS[name].append(pa.field("_delete", pa.bool_()))
        source = self.spark.createDataFrame(pa.Table.from_pylist(
            [{**r, "_delete": False} for r in upserts] + [{**r, "_delete": True} for r in delete_rows], schema=schema))
        view = f"sparkraft_{name}_changes"
        source.createOrReplaceTempView(view)
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        columns = ", ".join(f"`{c}`" for c in SCHEMAS[name].names)
        values = ", ".join(f"s.`{c}`" for c in SCHEMAS[name].names)
        sets = ", ".join(f"t.`{c}` = s.`{c}`" for c in SCHEMAS[name].names)
        sql = (f"MERGE INTO delta.`{self.path(name)}` t USING {view} s ON {on} "
               f"WHEN MATCHED AND s._delete THEN DELETE WHEN MATCHED THEN UPDATE SET {sets} "
               f"WHEN NOT MATCHED AND NOT s._delete THEN INSERT ({columns}) VALUES ({values})")
        self._with_txn(name, last_offset, lambda: self.spark.sql(sql))
        return {"rows": len(upserts) + len(delete_rows)}

    def add_snapshot(self, offset: int, epoch: int, versions: dict[str, int]) -> None:
        import time

        if self.applied(SNAPSHOTS) >= offset:
            return
        row = {"offset": offset, "epoch": epoch, "created_at": int(time.time() * 1000),
               **{f"{n}_version": v for n, v in versions.items()}}
        self._append(SNAPSHOTS, pa.Table.from_pylist([row], schema=SCHEMAS[SNAPSHOTS]), offset)
