"""``sparkraft storage``: make a cluster id and format a node's metadata log directory."""
from __future__ import annotations

import argparse

from sparkraft.commands import add_command, add_group


def register(subparsers) -> None:
    commands = add_group(subparsers, "storage", "format a node's storage before its first start")
    add_command(commands, "random-uuid", "print a new random cluster id", run_random_uuid)
    fmt = add_command(commands, "format", "write meta.properties into an empty metadata.log.dir",
                      run_format)
    fmt.add_argument("-c", "--config", required=True, metavar="FILE", help="the node's properties file")
    fmt.add_argument("-t", "--cluster-id", required=True, metavar="ID",
                     help="the cluster id (from 'sparkraft storage random-uuid'), the same on every node")
    fmt.add_argument("--rejoin", action="store_true",
                     help="this voter's disk was lost and replaced: it will not vote until it has caught "
                          "up with the quorum again (without this, a replaced voter could help elect a "
                          "stale leader and lose committed records)")


def run_random_uuid(args: argparse.Namespace) -> None:
    from quorum.log.meta_properties import random_cluster_id

    print(random_cluster_id())


def run_format(args: argparse.Namespace) -> None:
    from quorum.config import load_config
    from quorum.log.meta_properties import format_storage, validate_cluster_id

    validate_cluster_id(args.cluster_id)
    config = load_config(args.config)
    format_storage(config.log_dir, args.cluster_id, config.node_id, rejoin=args.rejoin)
    print(f"Formatting {config.log_dir} with cluster id {args.cluster_id} and node id {config.node_id}"
          + (" (rejoining: no votes until caught up)" if args.rejoin else ""))
