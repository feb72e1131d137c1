"""SQL over the six tables: DataFusion through ``deltalake.QueryBuilder`` (no JVM), or Spark.

Both register the tables under their own names (``topics``, ``partitions``, ``brokers``,
``configs``, ``records``, ``snapshots``), at a consistent cut when one is asked for.
"""
from __future__ import annotations

from typing import Optional

import pyarrow as pa

from delta_tables.cut import Cut, latest_cut, read_table, tables_at


class QueryError(ValueError):
    """The SQL was refused (syntax, unknown table or column)."""


def cut_for(warehouse: str, as_of_offset: Optional[int]) -> Optional[Cut]:
    return None if as_of_offset is None else latest_cut(warehouse, as_of_offset)


def query_datafusion(warehouse: str, sql: str, as_of_offset: Optional[int] = None) -> pa.Table:
    from deltalake import QueryBuilder

    builder = QueryBuilder()
    for name, table in tables_at(warehouse, cut_for(warehouse, as_of_offset)).items():
        builder.register(name, table)
    try:
        return pa.table(builder.execute(sql).read_all())
    except Exception as e:  # DataFusion reports every refusal as one exception type
        raise QueryError(" ".join(str(e).split())) from None


def query_spark(warehouse: str, sql: str, as_of_offset: Optional[int] = None, spark=None) -> pa.Table:
    """Spark temp views over the tables (read with delta-rs, so no Delta jars are needed)."""
    from streaming.job import spark_session

    spark = spark or spark_session("sparkraft-sql")
    for name, table in tables_at(warehouse, cut_for(warehouse, as_of_offset)).items():
        spark.createDataFrame(read_table(table)).createOrReplaceTempView(name)
    try:
        return spark.sql(sql).toArrow()
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise QueryError(first) from None
