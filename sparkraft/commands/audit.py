"""``sparkraft audit (--warehouse W | --bootstrap-controller B) [--since TIME] [--principal P]
[--resource TYPE:NAME] [--outcome done|denied|refused] [--json] [--verify]``.

Who changed what (docs/use/audit.md): the ``audit`` table's entries, oldest first, filtered; or,
with ``--bootstrap-controller``, the entries the controllers' log still holds (DescribeAudit, which
needs DESCRIBE on the cluster), for a cluster without a job or what the job has not read yet.
``--verify`` checks the hash chain instead: every entry chains on the one before it, so an entry
edited or deleted after the fact is found (exit 1, naming the first offset that breaks).
"""
from __future__ import annotations

import argparse
import datetime
import json

from sparkraft.commands import add_cluster_option, add_command, add_storage_options, cluster_warehouse


def register(subparsers) -> None:
    parser = add_command(subparsers, "audit", "who changed what: the audit trail the controllers wrote", run_audit)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--warehouse", metavar="URI", help="the lakehouse's audit table (the whole history)")
    source.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT...]",
                        help="the controllers' log instead (as far back as it goes)")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to look for a controller (with --bootstrap-controller)")
    add_storage_options(parser)
    parser.add_argument("--since", metavar="TIME", type=_time,
                        help="entries at or after TIME (ISO 8601, e.g. 2026-11-29T08:00:00Z; no zone: UTC)")
    parser.add_argument("--principal", metavar="P", help="one principal's entries (User:alice)")
    parser.add_argument("--resource", metavar="TYPE:NAME", help="entries naming this resource (TOPIC:orders)")
    parser.add_argument("--outcome", choices=("done", "denied", "refused"))
    parser.add_argument("--json", action="store_true", help="the entries as a JSON list")
    parser.add_argument("--verify", action="store_true", help="check the hash chain of every entry instead")
    add_cluster_option(parser)


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

    if args.bootstrap_controller:
        table, log_start = _from_the_log(args)
    else:
        args.warehouse = cluster_warehouse(args)
        tables = tables_at(args.warehouse, None)
        if AUDIT not in tables:
            raise ValueError(f"{args.warehouse} has no audit table: it was written by a job older than the audit "
                             f"trail (run `sparkraft materialize` of this version on it)")
        table, log_start = read_table(tables[AUDIT]), None
    if args.verify:
        entries = list(audit.in_order(table))
        # the log may start past the first entry: its oldest entry is taken as it is, the rest checked
        broken = verify(entries[1:], entries[0][1].hash) if log_start and entries else verify(entries)
        if broken is not None:
            raise ValueError(f"the audit trail does not verify: {broken}")
        since = f" from offset {entries[0][0]} (where the controllers' log starts)" if log_start and entries else ""
        print(f"The audit trail verifies: {table.num_rows} entries{since}, one hash chain.")
        return 0
    found = audit.filtered(table, args.since, args.principal, args.resource, args.outcome)
    if args.json:
        print(json.dumps([{k: v for k, v in row.items() if k != "hash"} for row in found.to_pylist()], default=str))
        return 0
    rows = [{k: row[k] for k in SHOWN} for row in found.to_pylist()]
    print(format_rows(list(SHOWN), rows) if rows else "(no entries)")
    return 0


def _from_the_log(args: argparse.Namespace):
    """Every entry the controllers' log holds (pages of DescribeAudit), and where the log starts."""
    from delta_tables import audit
    from quorum.controller import api
    from sparkraft.commands import client

    pairs, offset, log_start = [], 0, 0
    with client(args) as c:
        while True:
            page = c.call(api.DescribeAuditRequest(offset))
            pairs += page.entries
            log_start = page.log_start
            if page.next_offset <= offset:
                break
            offset = page.next_offset
    return audit.entries_table(pairs), log_start
