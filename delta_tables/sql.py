"""SQL over the warehouse's tables: DataFusion through ``deltalake.QueryBuilder`` (no JVM), or Spark
through Delta's own Spark connector.

Both register the tables under their own names (``topics``, ``partitions``, ``brokers``,
``configs``, ``acls``, ``users``, ``voters``, ``records``, ``snapshots``), at a consistent cut when one is asked for.

One dialect for both: standard SQL quoting, identifiers in double quotes (``"partition"``, or
backticks) and strings in single quotes. DataFusion reads SQL that way already; Spark is put in
ANSI mode with ``spark.sql.ansi.doubleQuotedIdentifiers`` for the query, where it would otherwise
read ``"partition"`` as the string 'partition' and answer every row with it, silently.

Both also read ``table_changes('T', A, B)`` as a table: state table T's changes after offset A
through offset B (delta_tables/changes.py), e.g. ``SELECT * FROM table_changes('partitions', 10, 99)``:
DataFusion over delta-rs's reading of the change feed, Spark over Delta's own change feed reader.
"""
from __future__ import annotations

import re
import tempfile
from typing import Optional

import pyarrow as pa

from delta_tables.catalog import spark_location
from delta_tables.changes import ChangeRange, change_ranges, empty_changes, feed_error, table_changes
from delta_tables.cut import Cut, latest_cut, tables_at
from delta_tables.spark_session import DELTA_CONFS, DELTA_PACKAGE, configure_s3a, local_spark_session
from delta_tables.storage import is_object_store


class QueryError(ValueError):
    """The SQL was refused (syntax, unknown table or column)."""


def cut_for(warehouse: str, as_of_offset: Optional[int]) -> Optional[Cut]:
    return None if as_of_offset is None else latest_cut(warehouse, as_of_offset)


# table_changes('partitions', A, B): the changes after offset A through B (delta_tables/changes.py)
_TABLE_CHANGES = re.compile(r"\btable_changes\s*\(\s*'(\w+)'\s*,\s*(\d+)\s*,\s*(\d+)\s*\)", re.IGNORECASE)


def _change_offsets(m: re.Match) -> tuple[int, int]:
    """A ``table_changes`` call's two offsets; QueryError past an offset's int64."""
    low, high = int(m[2]), int(m[3])
    if max(low, high) > 2**63 - 1:
        raise QueryError(f"table_changes('{m[1]}', {m[2][:30]}, {m[3][:30]}): offsets are at most {2**63 - 1:,}")
    return low, high


def with_table_changes(warehouse: str, sql: str) -> tuple[str, dict[str, pa.Table]]:
    """``sql`` with each ``table_changes('T', A, B)`` replaced by the name of a table of those changes;
    the tables by name, read with delta-rs (DataFusion registers them beside the warehouse's)."""
    found: dict[str, pa.Table] = {}

    def replace(m: re.Match) -> str:
        name = f"table_changes_{m[1].lower()}_{m[2]}_{m[3]}"
        if name not in found:
            found[name] = table_changes(warehouse, m[1].lower(), *_change_offsets(m))
        return name

    return _TABLE_CHANGES.sub(replace, sql), found


# How each engine says a query names a table that is not there
_NO_SUCH_TABLE = re.compile(r"table '[^']*' not found|TABLE_OR_VIEW_NOT_FOUND", re.IGNORECASE)


def _refusal(message: str, names) -> QueryError:
    """The engine's refusal in one line; where it is about a table that is not there, with the
    names of those that are."""
    message = " ".join(message.split())
    if _NO_SUCH_TABLE.search(message):
        message += f" (the tables here: {', '.join(sorted(names))}; and table_changes('T', A, B))"
    return QueryError(message)


def query_datafusion(warehouse: str, sql: str, as_of_offset: Optional[int] = None) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder, write_deltalake

    builder = QueryBuilder()
    tables = tables_at(warehouse, cut_for(warehouse, as_of_offset))
    for name, table in tables.items():
        builder.register(name, table)
    sql, changed = with_table_changes(warehouse, sql)
    with tempfile.TemporaryDirectory(prefix="sparkraft-changes-") as scratch:
        for name, rows in changed.items():  # DataFusion here reads Delta tables: a scratch one each
            write_deltalake(f"{scratch}/{name}", rows)
            builder.register(name, DeltaTable(f"{scratch}/{name}"))
        try:
            return pa.table(builder.execute(sql).read_all())
        except Exception as e:  # DataFusion reports every refusal as one exception type
            raise _refusal(str(e), tables) from None


def query_spark(warehouse: str, sql: str, as_of_offset: Optional[int] = None, spark=None) -> pa.Table:
    """Spark temporary views over the tables, each read by Delta's own Spark data source at the cut's
    version (``versionAsOf``): the scan runs on Spark's executors. The warehouse is opened (with
    delta-rs) before Spark starts, so a wrong path is said in a second, not after a JVM; a session
    without Delta's connector is refused in one line naming the fix."""
    tables = tables_at(warehouse, cut_for(warehouse, as_of_offset))
    spark = spark or local_spark_session("sparkraft-sql", delta=True)
    if is_object_store(warehouse):
        configure_s3a(spark)
    for name, table in tables.items():
        _delta_view(spark, name, table)
    sql = _spark_table_changes(spark, warehouse, tables, sql)
    return run_standard_sql(spark, sql, tables)


def run_standard_sql(spark, sql: str, tables) -> pa.Table:
    """``sql`` in Spark read as DataFusion reads it (STANDARD_QUOTING, for this query only); a
    refusal names ``tables``."""
    saved = {key: spark.conf.get(key, None) for key in STANDARD_QUOTING}
    for key, value in STANDARD_QUOTING.items():
        spark.conf.set(key, value)
    try:
        return spark.sql(sql).toArrow()
    except Exception as e:
        raise _refusal(_first_line(e), tables) from None
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


NO_DELTA = ("Spark has no Delta data source: give the session Delta's connector (python scripts/fetch_jars.py, "
            f"then local sessions take it; spark-submit or a Spark Connect server: --packages {DELTA_PACKAGE} "
            f"with spark.sql.extensions={DELTA_CONFS['spark.sql.extensions']})")


def _delta_view(spark, name: str, table) -> None:
    """Table ``name`` at delta-rs's ``table`` version, read by Delta's Spark data source, as a
    temporary view. Object-store paths go to Hadoop's ``s3a`` file system."""
    uri = spark_location(table.table_uri)
    version = table.version()
    try:
        frame = spark.read.format("delta").option("versionAsOf", version).load(uri)
        frame.createOrReplaceTempView(name)
    except Exception as e:
        text = str(e)
        if "DATA_SOURCE_NOT_FOUND" in text or "Failed to find data source: delta" in text:
            raise QueryError(NO_DELTA) from None
        if "DELTA_UNSUPPORTED_FEATURES_FOR_READ" in text:
            raise QueryError(f"Delta's Spark connector ({DELTA_PACKAGE}) cannot read {name}: its table needs a "
                             f"feature this connector lacks; use a newer connector, or the DataFusion engine "
                             f"({_first_line(e)})") from None
        raise QueryError(f"Delta's Spark reader cannot read {name} at version {version}: {_first_line(e)}") from None


def _spark_table_changes(spark, warehouse: str, tables: dict, sql: str) -> str:
    """``sql`` with each ``table_changes('T', A, B)`` replaced by a temporary view of Delta's own
    change data feed reader over table T's commits between the two cuts, each change given the
    ``_commit_offset`` of the cut it became visible at (a join with a small version -> offset
    table): the feed is scanned by Spark's executors, as the tables are. ``tables``: the warehouse's,
    as opened for the query (a table's location is the same at every version)."""
    made: set[str] = set()

    def replace(m: re.Match) -> str:
        table, (low, high) = m[1].lower(), _change_offsets(m)
        name = f"table_changes_{table}_{low}_{high}"
        if name not in made:
            r = change_ranges(warehouse, low, high, (table,))[table]
            if r.last < r.first:
                _view(spark, name, empty_changes(table, r.columns))
            else:
                _change_feed_view(spark, name, tables[table].table_uri, r)
            made.add(name)
        return name

    return _TABLE_CHANGES.sub(replace, sql)


def _change_feed_view(spark, name: str, uri: str, r: ChangeRange) -> None:
    from pyspark.sql import functions as F

    offsets = spark.createDataFrame(sorted(r.commit_offsets.items()), "_commit_version long, _commit_offset long")
    try:
        feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", r.first)
                .option("endingVersion", r.last).load(spark_location(uri)))
        feed.join(F.broadcast(offsets), "_commit_version").select(*r.columns).createOrReplaceTempView(name)
    except Exception as e:
        raise QueryError(str(feed_error(r.table, r.first, r.last, _first_line(e)))) from None


def _first_line(error: Exception) -> str:
    """A Spark error's first line (its report runs to pages), or its type where it says nothing."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _view(spark, name: str, table: pa.Table) -> None:
    """``table`` as Spark's temporary view ``name``; an empty one with its schema given (Spark
    Connect cannot infer a schema from no rows)."""
    if table.num_rows:
        frame = spark.createDataFrame(table)
    else:
        from pyspark.sql.pandas.types import from_arrow_schema

        frame = spark.createDataFrame([], schema=from_arrow_schema(table.schema))
    frame.createOrReplaceTempView(name)


# Spark settings that make it read SQL as DataFusion does (see the module docstring).
STANDARD_QUOTING = {"spark.sql.ansi.enabled": "true", "spark.sql.ansi.doubleQuotedIdentifiers": "true"}
