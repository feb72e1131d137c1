"""``sparkraft shell (--snapshot FILE | --bootstrap-controller HOST:PORT)``: browse a metadata image.

The image comes from a checkpoint-format file (a ``.checkpoint`` snapshot or a broker's
``metadata-cache``; Apache Kafka's own ``.checkpoint`` snapshots too, recognised by their format) or from the quorum (its committed log, read as an observer up to the high
watermark). Commands: ``ls``, ``cd``, ``cat``, ``find``, ``tree``, ``pwd``, ``help``, ``exit``; on a
terminal with a prompt and tab completion, from a pipe one command per line (exit 1 if any failed).
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_command, client_security


def register(subparsers) -> None:
    parser = add_command(subparsers, "shell", "browse the metadata image: ls, cd, cat, find, tree", run_shell)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE",
                        help="a .checkpoint snapshot (sparkraft's or Apache Kafka's) or a broker's metadata-cache")
    source.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT...]",
                        help="read the committed image from the quorum")
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to look for the quorum's leader (default 15)")


def run_shell(args: argparse.Namespace) -> int:
    from quorum.shell.commands import Shell
    from quorum.shell.repl import run_repl
    from quorum.shell.tree import image_tree
    from quorum.snapshot.checkpoint import read_checkpoint

    if args.snapshot:
        from quorum.kafka_import.files import kafka_snapshot_image
        from quorum.kafka_log.batches import looks_like_kafka

        try:
            with open(args.snapshot, "rb") as f:
                kafkas = looks_like_kafka(f.read(1 << 20))  # a snapshot's first batch is its small header
            _, image = (None, kafka_snapshot_image(args.snapshot)) if kafkas else read_checkpoint(args.snapshot)
        except FileNotFoundError:
            raise ValueError(f"{args.snapshot}: no such file") from None
    else:
        from quorum.rpc.log_reader import read_image

        image = read_image(args.bootstrap_controller, timeout=args.timeout, security=client_security(args))
    return run_repl(Shell(image_tree(image)))
