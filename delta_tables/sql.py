"""SQL over the warehouse's tables: DataFusion through ``deltalake.QueryBuilder`` (no JVM), or Spark.

Both register the tables under their own names (``topics``, ``partitions``, ``brokers``,
``configs``, ``acls``, ``users``, ``voters``, ``records``, ``snapshots``), at a consistent cut when one is asked for.

One dialect for both: standard SQL quoting, identifiers in double quotes (``"partition"``, or
backticks) and strings in single quotes. DataFusion reads SQL that way already; Spark is put in
ANSI mode with ``spark.sql.ansi.doubleQuotedIdentifiers`` for the query, where it would otherwise
read ``"partition"`` as the string 'partition' and answer every row with it, silently.
"""
from __future__ import annotations

from typing import Optional

import pyarrow as pa

from delta_tables.cut import Cut, latest_cut, read_table, tables_at
from delta_tables.spark_session import local_spark_session


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
    spark = spark or local_spark_session("sparkraft-sql")
    for name, table in tables_at(warehouse, cut_for(warehouse, as_of_offset)).items():
        spark.createDataFrame(read_table(table)).createOrReplaceTempView(name)
    saved = {key: spark.conf.get(key, None) for key in STANDARD_QUOTING}
    for key, value in STANDARD_QUOTING.items():
        spark.conf.set(key, value)
    try:
        return spark.sql(sql).toArrow()
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise QueryError(first) from None
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# Spark settings that make it read SQL as DataFusion does (see the module docstring).
STANDARD_QUOTING = {"spark.sql.ansi.enabled": "true", "spark.sql.ansi.doubleQuotedIdentifiers": "true"}
