"""``sparkraft brokers list``: the registered brokers as the controller sees them.

``--json`` prints a list of ``{"broker_id", "fenced", "in_controlled_shutdown", "broker_epoch",
"rack", "endpoints"}`` (DESIGN §10), ``endpoints`` being ``[{"name", "host", "port",
"security_protocol"}]`` as in the ``brokers`` Delta table.
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Sequence

from sparkraft.commands import add_bootstrap, add_command, add_group, client

if TYPE_CHECKING:
    from quorum.controller.api import BrokerDescription

COLUMNS = ("BrokerId", "Fenced", "InControlledShutdown", "BrokerEpoch", "Rack", "Endpoints")


def register(subparsers) -> None:
    commands = add_group(subparsers, "brokers", "inspect registered brokers")
    list_ = add_command(commands, "list", "list registered brokers: fenced, epoch, rack, endpoints", run_list)
    list_.add_argument("--json", action="store_true", help="print JSON")
    list_.add_argument("--wait-unfenced", type=int, metavar="N",
                       help="first wait until at least N brokers are registered and unfenced (a broker is "
                            "fenced until it has caught up with the metadata log)")
    list_.add_argument("--wait-timeout", type=float, default=60.0, metavar="SECONDS",
                       help="how long --wait-unfenced waits (default 60)")
    add_bootstrap(list_)


def broker_json(b: "BrokerDescription") -> dict:
    return {"broker_id": b.broker_id, "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown,
            "broker_epoch": b.broker_epoch, "rack": b.rack,
            "endpoints": [{"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
                          for e in b.endpoints]}


def printable(text: str) -> str:
    """``text`` with every control character (a newline that would split a row, a terminal's escape
    sequence) written as its escape: a registration made before its names were checked, or read
    from another Kafka cluster's log, may hold them."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def format_brokers(brokers: Sequence["BrokerDescription"]) -> str:
    rows = [list(COLUMNS)]
    for b in sorted(brokers, key=lambda b: b.broker_id):
        endpoints = ",".join(f"{e.name}://{e.host}:{e.port}" for e in b.endpoints)
        rows.append([str(b.broker_id), str(b.fenced).lower(), str(b.in_controlled_shutdown).lower(),
                     str(b.broker_epoch), printable(b.rack or "-"), printable(endpoints)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def wait_unfenced(c, wanted: int, timeout: float):
    """The cluster description once ``wanted`` brokers are unfenced; REQUEST_TIMED_OUT saying which
    are missing if that takes longer than ``timeout``."""
    import time

    from quorum.errors import Errors, SparkraftError

    deadline = time.monotonic() + timeout
    while True:
        cluster = c.describe_cluster()
        unfenced = [b.broker_id for b in cluster.brokers if not b.fenced]
        if len(unfenced) >= wanted:
            return cluster
        if time.monotonic() >= deadline:
            fenced = sorted(b.broker_id for b in cluster.brokers if b.fenced)
            raise SparkraftError(Errors.REQUEST_TIMED_OUT,
                                 f"{len(unfenced)} of the {wanted} brokers waited for are unfenced after "
                                 f"{timeout:g}s (registered: {len(cluster.brokers)}; fenced: "
                                 f"{', '.join(map(str, fenced)) or 'none'})")
        time.sleep(0.2)


def run_list(args: argparse.Namespace) -> None:
    if args.wait_unfenced is not None and args.wait_unfenced < 0:
        raise ValueError(f"--wait-unfenced must be >= 0, got {args.wait_unfenced}")
    with client(args) as c:
        cluster = c.describe_cluster() if args.wait_unfenced is None else \
            wait_unfenced(c, args.wait_unfenced, args.wait_timeout)
    brokers = sorted(cluster.brokers, key=lambda b: b.broker_id)
    print(json.dumps([broker_json(b) for b in brokers]) if args.json else format_brokers(brokers))
