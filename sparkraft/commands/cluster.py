"""``sparkraft cluster unregister --id N``: take a broker out of the cluster's metadata, as
``kafka-cluster.sh unregister`` does for a broker that is gone for good (a decommissioned host):
its leaderships move and it leaves every ISR, as on fencing, and it is no longer listed. A broker
that is still running registers again on its next heartbeat, as in Kafka.
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_bootstrap, add_command, add_group, client


def register(subparsers) -> None:
    commands = add_group(subparsers, "cluster", "cluster-wide operations on brokers")
    unregister = add_command(commands, "unregister", "unregister a broker that is gone for good", run_unregister)
    unregister.add_argument("--id", type=int, required=True, metavar="N", help="the broker's id")
    add_bootstrap(unregister)


def run_unregister(args: argparse.Namespace) -> None:
    with client(args) as c:
        c.unregister_broker(args.id)
    print(f"Broker {args.id} is no longer registered.")
