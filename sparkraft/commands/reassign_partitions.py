"""``sparkraft reassign-partitions``: move partitions between brokers, as ``kafka-reassign-partitions.sh``.

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3`` prints the topics' current
  assignment and a proposed one over the listed brokers (placed as new partitions are: striped,
  rack-aware), both in Kafka's reassignment JSON. Nothing changes.
- ``--execute --reassignment-json-file F`` prints the current assignment of the partitions named
  (keep it to roll back) and starts their reassignments.
- ``--verify`` says of each partition whether its reassignment is complete or still in progress
  (exit 1 while any is in progress).
- ``--cancel`` reverts those of the partitions named whose reassignment is in flight to their
  original replicas (NO_REASSIGNMENT_IN_PROGRESS if none is).

The JSON is Kafka's: ``{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}``
(``log_dirs`` is accepted and must be ``any``: a sparkraft broker has no log directories). A file
that is not such JSON, a partition named twice, a replica list with a broker twice or a broker
that is not registered, and an unknown topic or partition are refused before anything is sent: one
line starting with Kafka's error name, exit 1, nothing changed.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from sparkraft.commands import add_bootstrap, add_command, client


def register(subparsers) -> None:
    parser = add_command(subparsers, "reassign-partitions", "move partitions between brokers (Kafka's JSON)",
                         run_reassign)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose an assignment of whole topics")
    action.add_argument("--execute", action="store_true", help="start the reassignment in the JSON file")
    action.add_argument("--verify", action="store_true", help="is the reassignment in the JSON file complete?")
    action.add_argument("--cancel", action="store_true", help="revert the reassignments in the JSON file")
    parser.add_argument("--reassignment-json-file", metavar="F", help="Kafka's reassignment JSON")
    parser.add_argument("--topics-to-move-json-file", metavar="F",
                        help='with --generate: {"version":1,"topics":[{"topic":"t"}]}')
    parser.add_argument("--broker-list", metavar="1,2,3", help="with --generate: the brokers to place replicas on")
    add_bootstrap(parser)


# ---------------------------------------------------------------- Kafka's JSON
def _read_json(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object with \"version\" and \"partitions\"")
    return data


def parse_reassignment(path: str) -> list[tuple[str, int, tuple[int, ...]]]:
    """[(topic, partition, replicas)] from Kafka's reassignment JSON; ValueError / SparkraftError
    for what Kafka's tool refuses."""
    from quorum.errors import Errors, SparkraftError

    data = _read_json(path)
    entries = data.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise SparkraftError(Errors.INVALID_REQUEST, f"{path}: the partition reassignment list cannot be empty")
    out, seen = [], set()
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("topic"), str) and type(e.get("partition")) is int
                and isinstance(e.get("replicas"), list) and all(type(b) is int for b in e["replicas"])):
            raise ValueError(f"{path}: each partition needs \"topic\" (string), \"partition\" (integer) and "
                             f"\"replicas\" (integers): {json.dumps(e)}")
        dirs = e.get("log_dirs", ["any"] * len(e["replicas"]))
        if not isinstance(dirs, list) or len(dirs) != len(e["replicas"]) or any(d != "any" for d in dirs):
            raise ValueError(f"{path}: log_dirs of {e['topic']}-{e['partition']} must be \"any\" per replica "
                             f"(sparkraft brokers have no log directories)")
        key = (e["topic"], e["partition"])
        if key in seen:
            raise SparkraftError(Errors.INVALID_REQUEST, f"Partition reassignment contains duplicate topic "
                                                         f"partitions: {e['topic']}-{e['partition']}")
        seen.add(key)
        replicas = tuple(e["replicas"])
        if not replicas:
            raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT, f"Partition {e['topic']}-{e['partition']} "
                                                                    f"has an empty replica list")
        if len(set(replicas)) != len(replicas):
            raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT, f"Partition replica lists may not contain "
                                                                    f"duplicate entries: {e['topic']}-"
                                                                    f"{e['partition']} contains {list(replicas)}")
        out.append((e["topic"], e["partition"], replicas))
    return out


def reassignment_json(assignment) -> str:
    """Kafka's reassignment JSON of [(topic, partition, replicas)], on one line as Kafka prints it."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for t, p, r in assignment]}, separators=(",", ":"))


# ---------------------------------------------------------------- the commands
def run_reassign(args: argparse.Namespace) -> int:
    if args.generate:
        if not args.topics_to_move_json_file or not args.broker_list:
            raise ValueError("--generate needs --topics-to-move-json-file and --broker-list")
        return _generate(args)
    if not args.reassignment_json_file:
        raise ValueError("--execute, --verify and --cancel need --reassignment-json-file")
    wanted = parse_reassignment(args.reassignment_json_file)
    with client(args) as c:
        if args.verify:
            return _verify(c, wanted)
        if args.cancel:
            return _cancel(c, wanted)
        return _execute(c, wanted, _check(c, wanted))


def _refuse_unknown_brokers(named: set, registered: set) -> None:
    from quorum.errors import Errors, SparkraftError

    unknown = sorted(named - registered)
    if unknown:
        raise SparkraftError(Errors.INVALID_REPLICA_ASSIGNMENT, f"The proposed assignment contains non-existent "
                                                                f"brokerIDs: {','.join(map(str, unknown))}")


def _check(c, wanted) -> dict:
    """The current replicas of each partition named; refuses unknown topics, partitions and brokers."""
    from quorum.errors import Errors, SparkraftError

    _refuse_unknown_brokers({b for _, _, replicas in wanted for b in replicas},
                            {b.broker_id for b in c.describe_cluster().brokers})
    current = {}
    for topic in dict.fromkeys(t for t, _, _ in wanted):
        try:
            d = c.describe_topic(topic)
        except SparkraftError as e:
            raise SparkraftError(e.error, f"Topic {topic} not found: {e.message}") from None
        current.update({(topic, p.partition): p.replicas for p in d.partitions})
    missing = [f"{t}-{p}" for t, p, _ in wanted if (t, p) not in current]
    if missing:
        raise SparkraftError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition(s) {', '.join(missing)}")
    return current


def _execute(c, wanted, current) -> int:
    from quorum.controller import api
    from quorum.errors import Errors

    print("Current partition replica assignment\n")
    print(reassignment_json([(t, p, current[(t, p)]) for t, p, _ in wanted]))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    results = c.alter_reassignments([(api.TopicPartition(t, p), r) for t, p, r in wanted])
    failed = [r for r in results if r.error is not Errors.NONE]
    started = [f"{r.partition.topic}-{r.partition.partition}" for r in results if r.error is Errors.NONE]
    if started:
        print(f"Successfully started partition reassignment{'s' if len(started) > 1 else ''} for "
              f"{','.join(started)}")
    for r in failed:
        print(f"Error reassigning partition {r.partition.topic}-{r.partition.partition}: {r.error.name}: {r.message}")
    return 1 if failed else 0


def _verify(c, wanted) -> int:
    from quorum.controller import api

    ongoing = {(o.partition.topic, o.partition.partition)
               for o in c.list_reassignments([api.TopicPartition(t, p) for t, p, _ in wanted])}
    print("Status of partition reassignment:")
    pending = 0
    for t, p, replicas in wanted:
        if (t, p) in ongoing:
            pending += 1
            print(f"Reassignment of partition {t}-{p} is still in progress.")
            continue
        d = c.describe_topics([t], p, 1)[0]
        now = next((x.replicas for x in getattr(d, "partitions", ()) if x.partition == p), None)
        if now == replicas:
            print(f"Reassignment of partition {t}-{p} is completed.")
        else:
            pending += 1
            print(f"There is no active reassignment of partition {t}-{p}, but replica set is "
                  f"{list(now) if now is not None else 'unknown'} rather than {list(replicas)}.")
    return 1 if pending else 0


def _cancel(c, wanted) -> int:
    """Cancel those of the partitions named whose reassignment is in flight (as Kafka's tool does);
    none in flight is NO_REASSIGNMENT_IN_PROGRESS."""
    from quorum.controller import api
    from quorum.errors import Errors, SparkraftError

    ongoing = c.list_reassignments([api.TopicPartition(t, p) for t, p, _ in wanted])
    if not ongoing:
        raise SparkraftError(Errors.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress for "
                                                                 + ", ".join(f"{t}-{p}" for t, p, _ in wanted))
    results = c.alter_reassignments([(o.partition, None) for o in ongoing])
    done = [f"{r.partition.topic}-{r.partition.partition}" for r in results if r.error is Errors.NONE]
    failed = [r for r in results if r.error is not Errors.NONE]
    if done:
        print(f"Successfully cancelled partition reassignment{'s' if len(done) > 1 else ''} for: {','.join(done)}")
    for r in failed:
        print(f"Error cancelling partition reassignment for {r.partition.topic}-{r.partition.partition}: "
              f"{r.error.name}: {r.message}")
    return 1 if failed else 0


def _generate(args: argparse.Namespace) -> int:
    from quorum.controller.placement import UsableBroker, place

    data = _read_json(args.topics_to_move_json_file)
    topics = data.get("topics")
    if (not isinstance(topics, list) or not topics
            or not all(isinstance(t, dict) and isinstance(t.get("topic"), str) for t in topics)):
        raise ValueError(f"{args.topics_to_move_json_file}: expected {{\"version\":1,\"topics\":[{{\"topic\":\"t\"}}]}}")
    try:
        brokers = [int(b) for b in args.broker_list.split(",")]
    except ValueError:
        raise ValueError(f"--broker-list {args.broker_list!r}: expected broker ids such as 1,2,3") from None
    if len(set(brokers)) != len(brokers):
        raise ValueError(f"--broker-list {args.broker_list!r} names a broker twice")
    names = list(dict.fromkeys(t["topic"] for t in topics))
    with client(args) as c:
        registered = {b.broker_id: b for b in c.describe_cluster().brokers}
        _refuse_unknown_brokers(set(brokers), set(registered))
        current = []
        for name in names:
            d = c.describe_topic(name)
            current += [(name, p.partition, p.replicas) for p in sorted(d.partitions, key=lambda p: p.partition)]
    usable = [UsableBroker(b, registered[b].rack, False) for b in brokers]
    proposed, rng = [], random.Random()
    for name in names:
        parts = [(t, p, r) for t, p, r in current if t == name]
        rf = len(parts[0][2]) if parts else 1
        for (t, p, _), replicas in zip(parts, place(usable, len(parts), rf, rng)):
            proposed.append((t, p, tuple(replicas)))
    print("Current partition replica assignment")
    print(reassignment_json(current))
    print("\nProposed partition reassignment configuration")
    print(reassignment_json(proposed))
    return 0
