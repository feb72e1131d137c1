"""The warehouse's tables in Spark's catalog: ``spark.table("sparkraft.partitions")`` with no paths.

Each table is registered as an external Delta table (``CREATE TABLE ... USING delta LOCATION``) in
one database of the session catalog, which Delta's catalog extension wraps. The catalog persists in
whatever metastore the session's Spark configuration names: the embedded Derby one in
``./metastore_db`` by default (one JVM at a time may open it), a Hive metastore service on a cluster
(``hive.metastore.uris``), or Unity Catalog OSS through its own catalog plugin. Registration reads
only the Delta logs, so it is cheap, and it is idempotent: a table already registered at the same
place is left as it is, and one registered elsewhere is refused before anything is written.
"""
from __future__ import annotations

import fcntl
import re
from pathlib import Path
from typing import Optional

from delta_tables.cut import tables_at
from delta_tables.schemas import ALL_TABLES

DATABASE = "sparkraft"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class CatalogConflict(ValueError):
    """The catalog already holds a table of that name that points somewhere else."""


def derby_in_use(folder: str) -> bool:
    """Whether another process has the embedded Derby metastore in ``folder``/metastore_db open.
    Derby holds an exclusive lock on its ``dbex.lck`` while a JVM has the database booted (a lock
    the OS drops when that JVM dies, however it dies); a second JVM would fail deep in Hive's
    client with thousands of lines of stack traces, so this is asked before one starts."""
    try:
        with open(Path(folder) / "metastore_db" / "dbex.lck", "rb+") as f:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def spark_location(uri: str) -> str:
    """Where Spark reads a table the warehouse names ``uri``: object-store paths through Hadoop's
    ``s3a`` file system (delta-rs says ``s3://``)."""
    uri = uri.rstrip("/")
    return "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri


def _same_place(registered: str, ours: str) -> bool:
    """Whether a metastore's location (``file:/x``, ``file:///x``, ``s3a://b/x``) is ``ours``."""
    def plain(uri: str) -> str:
        uri = uri.rstrip("/")
        if uri.startswith("file:"):
            uri = "/" + uri[len("file:"):].lstrip("/")
        return uri
    return plain(registered) == plain(ours)


def registered_location(spark, database: str, table: str) -> Optional[str]:
    """The location the catalog holds for ``database.table``, or None if it has no such table."""
    if not spark.catalog.tableExists(f"{database}.{table}"):
        return None
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED `{database}`.`{table}`").collect():
        if row[0] == "Location":
            return row[1]
    return ""  # a view or a table without a location: never ours


def register(spark, warehouse: str, database: str = DATABASE) -> list[str]:
    """Register the warehouse's nine tables in ``database`` (created if missing) of the session's
    catalog; returns the names newly registered. Every name is checked before any is created:
    CatalogConflict if one is already registered at another place."""
    if not _NAME.match(database):
        raise ValueError(f"database {database!r}: a catalog database name is letters, digits and _")
    locations = {name: spark_location(t.table_uri) for name, t in tables_at(warehouse, None).items()}
    exists = spark.catalog.databaseExists(database)
    held = {name: registered_location(spark, database, name) if exists else None for name in ALL_TABLES}
    for name, place in held.items():
        if place is not None and not _same_place(place, locations[name]):
            raise CatalogConflict(
                f"the catalog already holds {database}.{name} at {place or 'no location'}, not this warehouse's "
                f"{locations[name]}: drop it (DROP TABLE {database}.{name}) or register under another "
                f"database (--database NAME)")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}` COMMENT 'sparkraft: the cluster metadata tables'")
    added = []
    for name in ALL_TABLES:
        if held[name] is None:
            location = locations[name].replace("'", "\\'")
            spark.sql(f"CREATE TABLE `{database}`.`{name}` USING delta LOCATION '{location}'")
            added.append(name)
    return added
