"""``sparkraft changes --warehouse W --from-offset A --to-offset B [--table T] [--who] [--json]``.

What changed in the state tables after offset A through offset B, one row per change: the table's
columns, ``_change_type`` and ``_commit_offset`` (delta_tables/changes.py); ``--who`` adds
``_changed_by``, the principal who made each change, from the ``audit`` table. Without ``--table``,
every state table that changed; ``--json`` prints a list of rows for one table, or an object of
table name -> rows.
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_cluster_option, add_command, add_storage_options, cluster_warehouse


def register(subparsers) -> None:
    parser = add_command(subparsers, "changes", "rows the metadata tables gained, lost or changed between two offsets",
                         run_changes)
    parser.add_argument("--warehouse", required=True, metavar="URI")
    add_storage_options(parser)
    parser.add_argument("--from-offset", required=True, type=int, metavar="A",
                        help="changes after the newest cut at or below A")
    parser.add_argument("--to-offset", required=True, type=int, metavar="B",
                        help="... through the newest cut at or below B")
    parser.add_argument("--table", metavar="T", help="one state table (default: all of them)")
    parser.add_argument("--who", action="store_true",
                        help="add _changed_by: the principal who made each change (from the audit table)")
    parser.add_argument("--json", action="store_true")
    add_cluster_option(parser)


def run_changes(args: argparse.Namespace) -> int:
    from delta_tables.changes import changes
    from sparkraft.commands.sql import format_rows

    args.warehouse = cluster_warehouse(args)
    found = changes(args.warehouse, args.from_offset, args.to_offset, (args.table,) if args.table else None,
                    who=args.who)
    if args.json:
        rows = {name: t.to_pylist() for name, t in found.items()}
        print(json.dumps(rows[args.table] if args.table else {k: v for k, v in rows.items() if v}, default=str))
        return 0
    shown = [(name, t) for name, t in found.items() if t.num_rows or args.table]
    for i, (name, table) in enumerate(shown):
        print(("\n" if i else "") + f"{name}:")
        print(format_rows(table.column_names, table.to_pylist()))
    if not shown:
        print("(no changes)")
    return 0
