"""``sparkraft leader-election``: elect partition leaders now, as ``kafka-leader-election.sh``.

``PREFERRED`` makes each partition's first replica its leader again where it is in the ISR and its
broker is unfenced (after a rolling restart moved leadership away); ``UNCLEAN`` gives a leaderless
partition a leader from outside its ISR, which may lose what only the old ISR had (an explicit
request: ``unclean.leader.election.enable`` is not consulted, as in Kafka). The output is Kafka's:
which partitions got a new leader, which already had a valid one, and one line per failure; any
failure exits 1.
"""
from __future__ import annotations

import argparse

from sparkraft.commands import add_bootstrap, add_command, client


def register(subparsers) -> None:
    parser = add_command(subparsers, "leader-election", "elect partition leaders: PREFERRED or UNCLEAN",
                         run_leader_election)
    parser.add_argument("--election-type", required=True, type=str.upper, choices=("PREFERRED", "UNCLEAN"),
                        help="PREFERRED: the first replica, if in the ISR; UNCLEAN: any live replica of a "
                             "leaderless partition")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    which.add_argument("--topic", metavar="T", help="one topic's partition (with --partition)")
    parser.add_argument("--partition", type=int, metavar="P", help="the partition of --topic")
    add_bootstrap(parser)


def run_leader_election(args: argparse.Namespace) -> int:
    from quorum.controller import api
    from quorum.errors import Errors

    if args.topic is not None and args.partition is None:
        raise ValueError("--topic needs --partition")
    if args.all_topic_partitions and args.partition is not None:
        raise ValueError("--partition goes with --topic, not with --all-topic-partitions")
    wanted = None if args.all_topic_partitions else [api.TopicPartition(args.topic, args.partition)]
    with client(args) as c:
        results = c.elect_leaders(args.election_type, wanted)
    name = {r.partition: f"{r.partition.topic}-{r.partition.partition}" for r in results}
    elected = [name[r.partition] for r in results if r.error is Errors.NONE]
    valid = [name[r.partition] for r in results if r.error is Errors.ELECTION_NOT_NEEDED]
    failed = [r for r in results if r.error not in (Errors.NONE, Errors.ELECTION_NOT_NEEDED)]
    if elected:
        print(f"Successfully completed leader election ({args.election_type}) for partitions {', '.join(elected)}")
    if valid:
        print(f"Valid replica already elected for partitions {', '.join(valid)}")
    if not results:
        print(f"No partition needed a leader election ({args.election_type}).")
    for r in failed:
        print(f"Error completing leader election ({args.election_type}) for partition: {name[r.partition]}: "
              f"{r.error.name}: {r.message}")
    return 1 if failed else 0
