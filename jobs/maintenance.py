"""Keep the Delta tables healthy: compact small files, checkpoint the logs, vacuum old files.

    python jobs/maintenance.py --warehouse URI [--every SECONDS] [--retention-hours H]

Each micro-batch commits small files (a MERGE rewrites only the files it touches); this folds them
into larger ones per table (per bucket for ``partitions``), writes a Delta checkpoint so readers
replay a short log, and removes files no version newer than the retention still needs. Safe next
to a running materialiser: compaction commits are plain Delta transactions, and delta-rs retries
or fails them without touching the materialiser's data.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def maintain(warehouse: str, retention_hours: float) -> dict:
    from deltalake import DeltaTable

    from delta_tables.schemas import ALL_TABLES

    report = {}
    for name in ALL_TABLES:
        dt = DeltaTable(f"{warehouse.rstrip('/')}/{name}")
        compacted = dt.optimize.compact()
        dt.create_checkpoint()
        removed = dt.vacuum(retention_hours=int(retention_hours), enforce_retention_duration=False,
                            dry_run=False)
        report[name] = {"files_added": compacted.get("numFilesAdded"),
                        "files_removed": compacted.get("numFilesRemoved"), "vacuumed": len(removed),
                        "version": dt.version()}
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warehouse", required=True, metavar="URI")
    parser.add_argument("--every", type=float, metavar="SECONDS", help="repeat on this schedule (default: once)")
    parser.add_argument("--retention-hours", type=float, default=168.0,
                        help="keep files needed by versions newer than this (default 168 = 7 days)")
    args = parser.parse_args(argv)
    while True:
        for table, result in maintain(args.warehouse, args.retention_hours).items():
            print(f"{table}: {result}", flush=True)
        if not args.every:
            return 0
        time.sleep(args.every)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from sparkraft.cli import exit_now

    exit_now(main())
