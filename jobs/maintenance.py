"""Keep the Delta tables healthy: compact small files, checkpoint the logs, vacuum old files.

    python jobs/maintenance.py --warehouse URI [--every SECONDS] [--retention-hours H] [--storage-option KEY=VALUE]...

Each micro-batch commits small files (a MERGE rewrites only the files it touches); this folds them
into larger ones per table (per bucket for ``partitions``), writes a Delta checkpoint so readers
replay a short log, removes log entries older than the table's ``delta.logRetentionDuration`` (the
materialiser's commits leave them, see delta_tables/writer.py) and data files no version within
its ``delta.deletedFileRetentionDuration`` still needs (a day each, as the writer creates the
tables; ``--retention-hours`` vacuums with another window). Safe next
to a running materialiser: compaction commits are plain Delta transactions. When they meet (a
MERGE rewrote a file being compacted), the compaction of that table is skipped until the next
round, and a refused MERGE is tried again by the writer (delta_tables/writer.py).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional


def maintain(warehouse: str, retention_hours: Optional[float] = None) -> dict:
    """One round over every table; ``retention_hours``: vacuum with this window instead of the
    table's own (``delta.deletedFileRetentionDuration``)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    from delta_tables import storage
    from delta_tables.schemas import ALL_TABLES

    storage.check_conditional_writes(warehouse)  # it commits beside the materialiser

    report = {}
    for name in ALL_TABLES:
        dt = DeltaTable(f"{warehouse.rstrip('/')}/{name}", storage_options=storage.options())
        try:
            compacted = dt.optimize.compact()
            dt.create_checkpoint()
            dt.cleanup_metadata()  # log entries past delta.logRetentionDuration (the writer leaves them)
            if retention_hours is None:
                removed = dt.vacuum(dry_run=False)
            else:
                removed = dt.vacuum(retention_hours=int(retention_hours), enforce_retention_duration=False,
                                    dry_run=False)
        except CommitFailedError:  # the materialiser committed what this read: this table waits for next round
            report[name] = {"skipped": "a concurrent commit", "version": dt.version()}
            continue
        report[name] = {"files_added": compacted.get("numFilesAdded"),
                        "files_removed": compacted.get("numFilesRemoved"), "vacuumed": len(removed),
                        "version": dt.version()}
    return report


def summary(result: dict) -> str:
    """One table's round in words: what was compacted and vacuumed, or that nothing needed it."""
    if "skipped" in result:
        return f"skipped this round ({result['skipped']}), at version {result['version']}"
    done = []
    if result["files_removed"]:
        done.append(f"compacted {result['files_removed']} files into {result['files_added']}")
    if result["vacuumed"]:
        done.append(f"vacuumed {result['vacuumed']} files no version needs")
    what = ", ".join(done) if done else "nothing to compact or vacuum"
    return f"{what}; checkpoint at version {result['version']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True, metavar="URI")
    parser.add_argument("--every", type=float, metavar="SECONDS", help="repeat on this schedule (default: once)")
    parser.add_argument("--retention-hours", type=float,
                        help="keep files needed by versions newer than this (default: each table's "
                             "delta.deletedFileRetentionDuration, a day as sparkraft creates the tables)")
    parser.add_argument("--storage-option", action="append", default=[], metavar="KEY=VALUE",
                        help="an object store option for delta-rs (e.g. AWS_ENDPOINT_URL=...), beside the AWS_* "
                             "environment variables (repeatable)")
    args = parser.parse_args(argv)
    from delta_tables import storage
    storage.set_options(storage.parse_options(args.storage_option))
    while True:
        try:
            report = maintain(args.warehouse, args.retention_hours)
        except (ValueError, OSError) as e:  # a store refused, no warehouse there: one line
            from sparkraft.cli import error_line
            print(error_line(e), file=sys.stderr)
            return 1
        for table, result in report.items():
            print(f"{table}: {summary(result)}", flush=True)
        if not args.every:
            return 0
        time.sleep(args.every)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from sparkraft.cli import exit_now

    exit_now(main())
