"""``sparkraft sql "SELECT ..." --warehouse URI [--as-of-offset N] [--cluster NAME] [--engine datafusion|spark]
[--json]``.

On a fleet's warehouse (materialize --sources) every table is the whole fleet's, with ``cluster``
and ``cluster_id`` columns (delta_tables/fleet_sql.py); ``--cluster NAME`` reads one cluster's.

The seven tables are registered under their names; ``--as-of-offset N`` reads them at the newest
consistent cut at or below N. DataFusion (through deltalake, no JVM) is the default engine. Both
engines read one dialect: identifiers in double quotes (``"partition"``), strings in single quotes.
``--json`` prints a list of row objects (DESIGN §10).
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_command, add_storage_options, cluster_warehouse


def register(subparsers) -> None:
    parser = add_command(subparsers, "sql", "query the cluster's metadata tables with SQL", run_sql)
    parser.add_argument("query", metavar="SQL",
                        help='e.g. "SELECT name, partition_count FROM topics"; both engines read standard SQL '
                             "quoting: identifiers in double quotes (\"partition\"), strings in single quotes")
    parser.add_argument("--warehouse", required=True, metavar="URI")
    add_storage_options(parser)
    parser.add_argument("--as-of-offset", type=int, metavar="N", help="read the tables at the newest cut <= N")
    parser.add_argument("--cluster", metavar="NAME", help="a fleet's warehouse: one cluster's tables (default: every "
                        "cluster's, with cluster and cluster_id columns)")
    parser.add_argument("--engine", choices=("datafusion", "spark"), default="datafusion")
    parser.add_argument("--remote", metavar="sc://HOST:PORT", help="with --engine spark: a Spark Connect server's session")
    parser.add_argument("--json", action="store_true", help="print a JSON list of rows")


def run_sql(args: argparse.Namespace) -> int:
    from delta_tables import fleet_sql, sql
    from delta_tables.fleet import is_fleet

    if args.remote and args.engine != "spark":
        raise ValueError("--remote is a Spark Connect server: it goes with --engine spark")
    if args.cluster:  # one cluster of a fleet: its warehouse, as any other
        args.warehouse = cluster_warehouse(args)
    fleet = not args.cluster and is_fleet(args.warehouse)
    if fleet and args.as_of_offset is not None:
        raise ValueError("--as-of-offset is one cluster's offset: give --cluster NAME with it")
    if args.engine == "spark":
        spark = None
        if args.remote:
            from streaming.job import remote_spark_session

            spark = remote_spark_session(args.remote)
        table = (fleet_sql.query_fleet_spark(args.warehouse, args.query, spark) if fleet
                 else sql.query_spark(args.warehouse, args.query, args.as_of_offset, spark=spark))
    else:
        table = (fleet_sql.query_fleet_datafusion(args.warehouse, args.query) if fleet
                 else sql.query_datafusion(args.warehouse, args.query, args.as_of_offset))
    rows = table.to_pylist()
    if args.json:
        print(json.dumps(rows, default=str))
    else:
        print(format_rows(table.column_names, rows))
    return 0


def format_rows(columns: list[str], rows: list[dict]) -> str:
    """A plain text table, columns padded to their widest value."""
    cells = [[str(c) for c in columns]] + [["" if r[c] is None else str(r[c]) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines + [f"({len(rows)} row{'s' if len(rows) != 1 else ''})"])
