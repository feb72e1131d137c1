"""``sparkraft audit --warehouse W [--since TIME] [--principal P] [--resource TYPE:NAME]
[--outcome done|denied|refused] [--json] [--verify]``.

Who changed what (docs/use/audit.md): the ``audit`` table's entries, oldest first, filtered.
``--verify`` checks the table's hash chain instead: every entry chains on the one before it, so an
entry edited or deleted after the fact is found (exit 1, naming the first offset that breaks).
"""
from __future__ import annotations

import argparse
import datetime
import json

from sparkraft.commands import add_command, add_storage_options


def register(subparsers) -> None:
    parser = add_command(subparsers, "audit", "who changed what: the audit trail the controllers wrote", run_audit)
    parser.add_argument("--warehouse", required=True, metavar="URI")
    add_storage_options(parser)
    parser.add_argument("--since", metavar="TIME", type=_time,
                        help="entries at or after TIME (ISO 8601, e.g. 2026-11-29T08:00:00Z; no zone: UTC)")
    parser.add_argument("--principal", metavar="P", help="one principal's entries (User:alice)")
    parser.add_argument("--resource", metavar="TYPE:NAME", help="entries naming this resource (TOPIC:orders)")
    parser.add_argument("--outcome", choices=("done", "denied", "refused"))
    parser.add_argument("--json", action="store_true", help="the entries as a JSON list")
    parser.add_argument("--verify", action="store_true", help="check the hash chain of every entry instead")


def _time(text: str) -> datetime.datetime:
    from delta_tables.cut import parse_time

    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


SHOWN = ("offset", "time", "principal", "client_host", "client_software_name", "request", "resources", "changes",
         "outcome", "error_message", "occurrences")


def run_audit(args: argparse.Namespace) -> int:
    from delta_tables import audit
    from delta_tables.cut import read_table, tables_at
    from delta_tables.schemas import AUDIT
    from quorum.controller.audit import verify
    from sparkraft.commands.sql import format_rows

    tables = tables_at(args.warehouse, None)
    if AUDIT not in tables:
        raise ValueError(f"{args.warehouse} has no audit table: it was written by a job older than the audit trail "
                         f"(run `sparkraft materialize` of this version on it)")
    table = read_table(tables[AUDIT])
    if args.verify:
        broken = verify(audit.in_order(table))
        if broken is not None:
            raise ValueError(f"the audit trail does not verify: {broken}")
        print(f"The audit trail verifies: {table.num_rows} entries, one hash chain.")
        return 0
    found = audit.filtered(table, args.since, args.principal, args.resource, args.outcome)
    if args.json:
        print(json.dumps([{k: v for k, v in row.items() if k != "hash"} for row in found.to_pylist()], default=str))
        return 0
    rows = [{k: row[k] for k in SHOWN} for row in found.to_pylist()]
    print(format_rows(list(SHOWN), rows) if rows else "(no entries)")
    return 0
