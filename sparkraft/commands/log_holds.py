"""``sparkraft log-holds list | release HOLDER``: the readers holding the metadata log from retention
(quorum/controller/log_holds.py; the streaming job's is ``materialize:<warehouse>``).

- ``list`` prints each hold: its holder, the offset the log is kept from, when it was last renewed
  and whether it still holds (one not renewed for ``metadata.log.hold.max.ms`` has lapsed);
  ``--json``: one object per line.
- ``release`` lets go of a hold at once (a job removed for good), so retention may delete the log
  it kept. A running job renews its hold at its next micro-batch.
"""
from __future__ import annotations

import argparse
import json
import time

from sparkraft.commands import add_bootstrap, add_command, add_group, client


def register(subparsers) -> None:
    commands = add_group(subparsers, "log-holds", "readers holding the metadata log from retention (list, release)")
    listing = add_command(commands, "list", "every hold on the log", run_list)
    listing.add_argument("--json", action="store_true", help="one JSON object per hold")
    add_bootstrap(listing)
    release = add_command(commands, "release", "let go of a reader's hold on the log", run_release)
    release.add_argument("holder", help="the hold's name, as list prints it")
    add_bootstrap(release)


def run_list(args: argparse.Namespace) -> int:
    from quorum.controller import api

    with client(args) as c:
        described = c.call(api.DescribeLogHoldsRequest())
    now_ms = time.time() * 1000
    for h in described.holds:
        live = described.max_age_ms < 0 or now_ms - h.time_ms <= described.max_age_ms
        renewed = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(h.time_ms / 1000))
        if args.json:
            print(json.dumps({"holder": h.holder, "offset": h.offset, "renewed": renewed, "live": live}))
        else:
            print(f"{h.holder}\tfrom offset {h.offset}\trenewed {renewed}\t{'holds' if live else 'lapsed'}")
    if not described.holds and not args.json:
        print("No reader holds the log.")
    return 0


def run_release(args: argparse.Namespace) -> int:
    from quorum.controller import api

    with client(args) as c:
        c.call(api.HoldLogRequest(args.holder, release=True))
    print(f"Released {args.holder}'s hold on the log.")
    return 0
