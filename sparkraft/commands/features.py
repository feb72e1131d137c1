"""``sparkraft features upgrade``: raise a finalized feature level, as ``kafka-features.sh upgrade``.

``--feature kraft.version=1`` turns a static quorum (``controller.quorum.voters``) dynamic: the Raft
leader writes the voters, with the directory ids they fetch with, into the log, after which
``quorum add-controller`` and ``remove-controller`` work. ``--metadata N`` is
``--feature metadata.version=N``. ``--dry-run`` validates without changing anything. Each feature
gets one line; a refused one says why (Kafka's error name) and the command exits 1.
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_command, add_group
from sparkraft.commands.topics import add_bootstrap, client


def register(subparsers) -> None:
    commands = add_group(subparsers, "features", "finalized feature levels (metadata.version, kraft.version)")
    upgrade = add_command(commands, "upgrade", "raise feature levels, e.g. kraft.version=1 (a dynamic quorum)",
                          run_upgrade)
    upgrade.add_argument("--feature", action="append", default=[], metavar="NAME=LEVEL",
                         help="a feature and the level to raise it to (repeatable)")
    upgrade.add_argument("--metadata", type=int, metavar="VERSION", help="the metadata.version level")
    upgrade.add_argument("--dry-run", action="store_true", help="validate only; change nothing")
    add_bootstrap(upgrade)


def parse_updates(features: list[str], metadata: int | None) -> list[tuple[str, int]]:
    """``NAME=LEVEL`` arguments (and ``--metadata``) as (name, level); ValueError naming a bad one."""
    updates = []
    for text in features:
        name, eq, level = text.partition("=")
        if not eq or not name.strip() or not level.strip().isdigit():
            raise ValueError(f"--feature {text!r} is not NAME=LEVEL (a level is a number >= 0)")
        updates.append((name.strip(), int(level)))
    if metadata is not None:
        updates.append(("metadata.version", metadata))
    if not updates:
        raise ValueError("name at least one --feature NAME=LEVEL or --metadata VERSION")
    return updates


def run_upgrade(args: argparse.Namespace) -> int:
    from quorum.controller import api

    updates = parse_updates(args.feature, args.metadata)
    with client(args) as c:
        results = c.call(api.UpdateFeaturesRequest(tuple(updates), validate_only=args.dry_run))
    failed = False
    for (name, level), r in zip(updates, results):
        if r.error.value == 0:
            print(f"{name} {'can be' if args.dry_run else 'was'} upgraded to {level}.")
        else:
            failed = True
            print(f"Could not upgrade {name} to {level}. {r.error.name}: {r.message}")
    return 1 if failed else 0
