"""``sparkraft migrate status | finalize``: a migration from ZooKeeper mode (KIP-866).

- ``status`` prints the migration state the log holds (NONE, PRE_MIGRATION, MIGRATION,
  POST_MIGRATION) and, from the active controller, the ZooKeeper controller epoch it claimed and how
  many committed records ZooKeeper does not hold yet (``--json``: one object with ``state``,
  ``zk_controller_epoch``, ``dual_write_lag_records``, ``mirrored_offset`` and ``error``).
- ``finalize`` ends the migration: the active controller writes POST_MIGRATION, mirrors what came
  before it and stops writing ZooKeeper. Only from MIGRATION; anything else is refused with one line.
"""
from __future__ import annotations

import argparse
import json

from sparkraft.commands import add_bootstrap, add_command, add_group, client


def register(subparsers) -> None:
    commands = add_group(subparsers, "migrate", "a migration from a ZooKeeper-mode cluster (status, finalize)")
    status = add_command(commands, "status", "the migration's state, ZooKeeper claim and dual-write lag", run_status)
    status.add_argument("--json", action="store_true", help="one JSON object")
    add_bootstrap(status)
    finalize = add_command(commands, "finalize", "end dual writes: ZooKeeper is no longer written", run_finalize)
    add_bootstrap(finalize)


def run_status(args: argparse.Namespace) -> int:
    from quorum.controller import api

    with client(args) as c:
        d = c.call(api.DescribeMigrationRequest())
    row = {"state": d.state, "zk_controller_epoch": d.zk_controller_epoch,
           "dual_write_lag_records": d.dual_write_lag_records, "mirrored_offset": d.mirrored_offset,
           "error": d.error}
    if args.json:
        print(json.dumps(row))
        return 0
    print(f"State: {d.state}\tZkControllerEpoch: {d.zk_controller_epoch}\t"
          f"DualWriteLagRecords: {d.dual_write_lag_records}\tMirroredOffset: {d.mirrored_offset}")
    if d.error:
        print(f"Error: {d.error}")
    return 0


def run_finalize(args: argparse.Namespace) -> int:
    from quorum.controller import api

    with client(args) as c:
        c.call(api.FinalizeMigrationRequest())
    print("The migration is finalized: the controllers no longer write ZooKeeper.")
    return 0
