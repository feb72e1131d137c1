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
from delta_tables.fleet import SOURCES, clusters
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


def register_fleet(spark, fleet: str, database: str = DATABASE) -> list[str]:
    """A fleet's warehouse in ``database``: its ``sources`` table, and for each metadata table a view
    of every cluster's, with ``cluster`` and ``cluster_id`` first (delta_tables/fleet.py), each
    cluster's at its newest version (the columns every cluster's table has). The views are made
    again on each registration, so a cluster the fleet gained since joins them. Returns the names
    registered; CatalogConflict, before anything is written, if one of them is a table (not a view)
    already."""
    if not _NAME.match(database):
        raise ValueError(f"database {database!r}: a catalog database name is letters, digits and _")
    members = {}
    for name, (warehouse, cluster_id) in sorted(clusters(fleet).items()):
        try:
            tables = tables_at(warehouse, None)
        except ValueError:  # no tables yet (CutError): it joins the views at the next registration
            continue
        members[name] = (cluster_id, {t: (spark_location(dt.table_uri), [f.name for f in dt.schema().fields])
                                      for t, dt in tables.items()})
    sources = spark_location(f"{fleet.rstrip('/')}/{SOURCES}")
    exists = spark.catalog.databaseExists(database)
    held = registered_location(spark, database, SOURCES) if exists else None
    if held is not None and not _same_place(held, sources):
        raise CatalogConflict(f"the catalog already holds {database}.{SOURCES} at {held or 'no location'}, not this "
                              f"fleet's {sources}: drop it or register under another database (--database NAME)")
    for name in ALL_TABLES:
        if exists and spark.catalog.tableExists(f"{database}.{name}") and \
                spark.catalog.getTable(f"{database}.{name}").tableType != "VIEW":
            raise CatalogConflict(f"the catalog already holds a table {database}.{name}, where a fleet's view of every "
                                  f"cluster's {name} would go: drop it or register under another database "
                                  f"(--database NAME)")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS `{database}` COMMENT 'sparkraft: a fleet of clusters'")
    added = []
    if held is None:
        spark.sql(f"CREATE TABLE `{database}`.`{SOURCES}` USING delta LOCATION '{_quoted(sources)}'")
        added.append(SOURCES)
    for name in ALL_TABLES:
        held_by = [(c, cid, where[name]) for c, (cid, where) in members.items() if name in where]
        if not held_by:
            continue
        # the columns every cluster's table has (a warehouse written by an older sparkraft may lack a newer one)
        columns = [col for col in held_by[0][2][1] if all(col in cols for _, _, (_, cols) in held_by)]
        listed = ", ".join(f"`{col}`" for col in columns)
        parts = [f"SELECT '{_quoted(c)}' AS cluster, '{_quoted(cid)}' AS cluster_id, {listed} "
                 f"FROM delta.`{location.replace('`', '``')}`" for c, cid, (location, _) in held_by]
        spark.sql(f"CREATE OR REPLACE VIEW `{database}`.`{name}` AS " + " UNION ALL ".join(parts))
        added.append(name)
    return added


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
