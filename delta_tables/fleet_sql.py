"""SQL over a fleet's clusters at once (delta_tables/fleet.py): each table is every cluster's at its
newest cut, with ``cluster`` and ``cluster_id`` first, so ``SELECT cluster, name FROM topics WHERE
...`` asks the whole fleet. DataFusion reads the union from scratch Delta tables (as it reads
``table_changes``); Spark reads each cluster's tables with Delta's own Spark connector at their
cuts' versions and unions them, on its executors. One cluster alone: ``--cluster NAME`` reads that
cluster's warehouse as any single-cluster one (delta_tables/sql.py)."""
from __future__ import annotations

import tempfile

import pyarrow as pa

from delta_tables.cut import CutError, latest_cut, tables_at
from delta_tables.fleet import clusters, fleet_tables
from delta_tables.spark_session import local_spark_session
from delta_tables.sql import _delta_view, _refusal, run_standard_sql


def query_fleet_datafusion(fleet: str, sql: str) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder, write_deltalake

    tables = fleet_tables(fleet)
    if not tables:
        raise CutError(f"no cluster of the fleet at {fleet} has a cut yet")
    builder = QueryBuilder()
    with tempfile.TemporaryDirectory(prefix="sparkraft-fleet-") as scratch:
        for name, rows in tables.items():
            write_deltalake(f"{scratch}/{name}", rows)
            builder.register(name, DeltaTable(f"{scratch}/{name}"))
        try:
            return pa.table(builder.execute(sql).read_all())
        except Exception as e:  # DataFusion reports every refusal as one exception type
            raise _refusal(str(e), tables) from None


def query_fleet_spark(fleet: str, sql: str, spark=None) -> pa.Table:
    from pyspark.sql import functions as F

    spark = spark or local_spark_session("sparkraft-sql", delta=True)
    frames: dict[str, list] = {}
    for cluster, (warehouse, cluster_id) in sorted(clusters(fleet).items()):
        try:
            tables = tables_at(warehouse, latest_cut(warehouse))
        except CutError:
            continue
        for name, table in tables.items():
            view = f"_fleet_{len(frames.get(name, []))}_{name}"
            _delta_view(spark, view, table)
            frames.setdefault(name, []).append(spark.table(view).select(
                F.lit(cluster).alias("cluster"), F.lit(cluster_id).alias("cluster_id"), "*"))
    if not frames:
        raise CutError(f"no cluster of the fleet at {fleet} has a cut yet")
    for name, parts in frames.items():
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part, allowMissingColumns=True)
        union.createOrReplaceTempView(name)
    return run_standard_sql(spark, sql, frames)
