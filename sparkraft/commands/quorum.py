"""``sparkraft quorum describe``: the quorum's state as its leader sees it (Kafka's kafka-metadata-quorum).

``--status`` prints one object (ClusterId, LeaderId, LeaderEpoch, HighWatermark, MaxFollowerLag,
MaxFollowerLagTimeMs, CurrentVoters, CurrentObservers; voters and observers as objects with ``id`` and
``directoryId``, voters with their ``endpoints`` too, as Kafka 3.9+ prints them); ``--replication``
one row per replica (NodeId, DirectoryId, LogEndOffset, Lag, LastFetchTimestamp,
LastCaughtUpTimestamp, Status). Timestamps are wall-clock ms, -1 when unknown, and an unknown
directory id (a static voter's) is Kafka's zero UUID, as Kafka prints them. The fields are computed in
quorum/rpc/quorum_status.py (the demo and the console show them too).
"""
from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING

from quorum.rpc.quorum_status import REPLICATION_KEYS, STATUS_KEYS, replication_rows, status_fields
from sparkraft.commands import add_command, add_group, client_security

__all__ = ["format_replication", "format_status", "replication_rows", "status_fields"]

if TYPE_CHECKING:
    from quorum.rpc.raft_client import QuorumInfo


def register(subparsers) -> None:
    commands = add_group(subparsers, "quorum", "inspect the metadata quorum")
    describe = add_command(commands, "describe", "describe the quorum's status or replication", run_describe)
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="leader, epoch, high watermark, voters, lag")
    what.add_argument("--replication", action="store_true", help="one row per replica: offsets, lag, times")
    describe.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                          help="any controllers of the quorum (down or followers are fine)")
    describe.add_argument("--json", action="store_true", help="print JSON")
    describe.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                          help="how long to look for the leader (default 15)")

    add = add_command(commands, "add-controller", "add a controller to a dynamic quorum's voters (KIP-853): it "
                      "must be running and caught up as an observer; returns once the change is committed",
                      run_add_controller)
    add.add_argument("-c", "--config", required=True, metavar="FILE",
                     help="the new controller's properties file (its node.id, listener and formatted directory)")
    remove = add_command(commands, "remove-controller", "remove a voter from a dynamic quorum (the active "
                         "controller too: it hands over once the removal commits)", run_remove_controller)
    remove.add_argument("--controller-id", required=True, type=int, metavar="N", help="the voter's node id")
    remove.add_argument("--controller-directory-id", required=True, metavar="DIRID",
                        help="the voter's directory id (quorum describe --status shows it)")
    for cmd in (add, remove):
        cmd.add_argument("--bootstrap-controller", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                         help="any controllers of the quorum: the change goes to the leader")
        cmd.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                         help="how long to keep asking while the leader is not ready (the new controller "
                              "still catching up, another change pending; default 30)")


SETTLE_S = 5.0  # how long describe waits for a newly elected leader's high watermark
VOTER_SETTLE_S = 1.5  # and for every voter to have caught up with it once


def _unsettled(info: "QuorumInfo", waited: float, timeout: float) -> bool:
    """Whether a describe answer is from a leader too new to know its quorum's state, and is worth
    asking again after ``waited`` seconds: its high watermark, for up to SETTLE_S; a voter that has
    not caught up with it yet (its first fetch is from before the leader's epoch began, so it is
    behind with no caught-up time), for up to VOTER_SETTLE_S (a voter that is down stays unknown)."""
    if waited >= timeout:
        return False
    if info.high_watermark < 0:
        return waited < SETTLE_S
    behind = any(v.last_caught_up_ms is None for v in info.voters if v.replica_id != info.leader_id)
    return behind and waited < VOTER_SETTLE_S


def run_describe(args: argparse.Namespace) -> None:
    from quorum.rpc.raft_client import RaftClient

    with RaftClient(args.bootstrap_controller, timeout=args.timeout, security=client_security(args)) as client:
        info = client.describe_quorum()
        # A leader just elected knows no high watermark until a majority has fetched its epoch's
        # first record, nor a follower's directory id and progress until it has fetched (each within
        # milliseconds); an answer from before then says -1 and all-zero ids, so ask again a little.
        started = time.monotonic()
        while _unsettled(info, time.monotonic() - started, args.timeout):
            time.sleep(0.1)
            info = client.describe_quorum()
    if args.status:
        print(json.dumps(status_fields(info)) if args.json else format_status(info))
    else:
        print(json.dumps(replication_rows(info)) if args.json else format_replication(info))


def run_add_controller(args: argparse.Namespace) -> None:
    from quorum.config import load_config
    from quorum.log.meta_properties import read_meta_properties
    from quorum.rpc.raft_client import RaftClient

    config = load_config(args.config)
    if not config.is_controller or config.controller_listener is None:
        raise ValueError(f"{args.config} is not a controller's configuration (process.roles, listeners)")
    meta = read_meta_properties(config.log_dir)
    if meta.directory_id is None:
        raise ValueError(f"{config.log_dir} has no directory.id; format it with 'sparkraft storage format "
                         f"--no-initial-controllers'")
    host, port = config.controller_listener
    with RaftClient(args.bootstrap_controller, timeout=args.timeout, cluster_id=meta.cluster_id,
                    security=client_security(args)) as client:
        # every controller listener, as Kafka's add-controller sends: the ones after the first are
        # where it answers Kafka's protocol, which DescribeCluster then names (KIP-919)
        client.add_voter(config.node_id, meta.directory_id,
                         [(config.controller_listener_name, host, port), *config.more_controller_listeners()])
    print(f"Added controller {config.node_id} (directory {meta.directory_id}) at "
          f"{config.controller_listener_name}://{host}:{port} to the voters")


def run_remove_controller(args: argparse.Namespace) -> None:
    from quorum.rpc.raft_client import RaftClient
    from quorum.uuids import validate_uuid

    validate_uuid(args.controller_directory_id, "--controller-directory-id")
    with RaftClient(args.bootstrap_controller, timeout=args.timeout, security=client_security(args)) as client:
        client.remove_voter(args.controller_id, args.controller_directory_id)
    print(f"Removed controller {args.controller_id} (directory {args.controller_directory_id}) from the voters")


def format_status(info: "QuorumInfo") -> str:
    fields = status_fields(info)
    lines = []
    for key in STATUS_KEYS:
        value = fields[key]
        if isinstance(value, list):
            value = "[" + ", ".join(json.dumps(v, separators=(", ", ": ")) for v in value) + "]"
        lines.append(f"{key + ':':<24}{value}")
    return "\n".join(lines)


def format_replication(info: "QuorumInfo") -> str:
    rows = [list(REPLICATION_KEYS)] + [[str(r[k]) for k in REPLICATION_KEYS] for r in replication_rows(info)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(REPLICATION_KEYS))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
