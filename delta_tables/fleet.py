"""A fleet warehouse: many clusters' metadata in one lakehouse (docs/use/fleet.md).

Each cluster keeps a whole single-cluster warehouse of its own, by default under
``<fleet>/clusters/<name>`` (or where its source entry says: a warehouse that existed before
joins as it is): its tables, its cuts by its own offsets, its exactly-once writes, so clusters
never share a Delta commit and every tool that takes a warehouse works on one cluster's. The
fleet's own table, ``sources``, says which clusters there are, where their tables live and how
each is doing (the fleet job rewrites it as that changes). Queries across the fleet read each
cluster's tables at its newest cut with two more columns, ``cluster`` and ``cluster_id``.
"""
from __future__ import annotations

import datetime
from typing import Optional

import pyarrow as pa

from delta_tables import storage
from delta_tables.cut import CutError, _open, latest_cut, read_table, tables_at

SOURCES = "sources"
SOURCES_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("cluster_id", pa.string()), ("source", pa.string()), ("bootstrap", pa.string()),
    ("warehouse", pa.string()), ("state", pa.string()),  # starting, running, failing, done, removed
    ("applied_offset", pa.int64()), ("lag_records", pa.int64()), ("last_cut_at", pa.timestamp("ms", "UTC")),
    ("last_error", pa.string()), ("updated_at", pa.timestamp("ms", "UTC"))])
FLEET_COLUMNS = ("cluster", "cluster_id")


def cluster_warehouse(fleet: str, name: str) -> str:
    """Where cluster ``name``'s tables live by default."""
    return f"{fleet.rstrip('/')}/clusters/{name}"


def write_sources(fleet: str, rows: list[dict]) -> None:
    """The ``sources`` table, rewritten whole (one row per cluster: a few rows)."""
    from deltalake import write_deltalake

    table = pa.Table.from_pylist(rows, schema=SOURCES_SCHEMA)
    write_deltalake(f"{fleet.rstrip('/')}/{SOURCES}", table, mode="overwrite", storage_options=storage.options())


def read_sources_table(fleet: str) -> Optional[pa.Table]:
    """The ``sources`` table, or None where ``fleet`` is not a fleet's warehouse."""
    try:
        return read_table(_open(fleet, SOURCES))
    except CutError:
        return None


def is_fleet(warehouse: str) -> bool:
    """Whether ``warehouse`` is a fleet's (it has a ``sources`` table) rather than one cluster's."""
    return read_sources_table(warehouse) is not None


def clusters(fleet: str) -> dict[str, tuple[str, str]]:
    """Each cluster the fleet lists (not removed): name -> (its warehouse, its cluster id)."""
    table = read_sources_table(fleet)
    if table is None:
        raise CutError(f"{fleet} is not a fleet's warehouse: it has no {SOURCES} table (materialize --sources "
                       f"writes it)")
    return {r["cluster"]: (r["warehouse"], r["cluster_id"] or "") for r in table.to_pylist() if r["state"] != "removed"}


def cluster_of(fleet: str, name: str) -> str:
    """Cluster ``name``'s warehouse; CutError naming the fleet's clusters if it has no such cluster."""
    known = clusters(fleet)
    if name not in known:
        raise CutError(f"the fleet at {fleet} has no cluster {name!r} (it has: {', '.join(sorted(known)) or 'none'})")
    return known[name][0]


def fleet_tables(fleet: str, names: Optional[tuple[str, ...]] = None) -> dict[str, pa.Table]:
    """Every table of every cluster at its newest cut, one table per name with ``cluster`` and
    ``cluster_id`` first (a cluster with no cut yet adds nothing)."""
    parts: dict[str, list[pa.Table]] = {}
    for cluster, (warehouse, cluster_id) in sorted(clusters(fleet).items()):
        try:
            tables = tables_at(warehouse, latest_cut(warehouse))
        except CutError:
            continue
        for name, dt in tables.items():
            if names is not None and name not in names:
                continue
            t = read_table(dt)
            t = t.add_column(0, "cluster_id", pa.array([cluster_id] * t.num_rows, pa.string()))
            parts.setdefault(name, []).append(t.add_column(0, "cluster", pa.array([cluster] * t.num_rows,
                                                                                  pa.string())))
    return {name: pa.concat_tables(ts, promote_options="default") for name, ts in parts.items()}


def status_row(name: str, source, warehouse: str, state: str, cluster_id: str = "", applied: int = -1,
               lag: Optional[int] = None, last_cut_at: Optional[float] = None, error: str = "") -> dict:
    """One row of ``sources`` (``source``: the cluster's entry, streaming/sources_file.py)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return {"cluster": name, "cluster_id": cluster_id, "source": source.protocol, "bootstrap": source.bootstrap,
            "warehouse": warehouse, "state": state, "applied_offset": applied, "lag_records": lag,
            "last_cut_at": None if last_cut_at is None else datetime.datetime.fromtimestamp(
                last_cut_at, datetime.timezone.utc), "last_error": error or None, "updated_at": now}

