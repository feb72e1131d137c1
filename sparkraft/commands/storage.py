"""``sparkraft storage``: make a cluster id and format a node's metadata log directory."""
from __future__ import annotations

import argparse

from sparkraft.commands import add_command, add_group, add_storage_options
from sparkraft.commands.features import release_version


def register(subparsers) -> None:
    commands = add_group(subparsers, "storage", "format a node's storage before its first start")
    add_command(commands, "random-uuid", "print a new random cluster id", run_random_uuid)
    fmt = add_command(commands, "format", "write meta.properties into an empty metadata.log.dir",
                      run_format)
    fmt.add_argument("-c", "--config", required=True, metavar="FILE", help="the node's properties file")
    fmt.add_argument("-t", "--cluster-id", required=True, metavar="ID",
                     help="the cluster id (from 'sparkraft storage random-uuid'), the same on every node")
    how = fmt.add_mutually_exclusive_group()
    how.add_argument("--standalone", action="store_true",
                     help="a dynamic quorum (kraft.version 1) of this one controller; grow it with "
                          "'sparkraft quorum add-controller'")
    how.add_argument("--initial-controllers", metavar="ID@HOST:PORT:DIRID,...",
                     help="a dynamic quorum of these controllers (this node among them, with the directory "
                          "id given here; make ids with 'sparkraft storage random-uuid')")
    how.add_argument("--no-initial-controllers", action="store_true",
                     help="a controller that joins a running dynamic quorum later (it starts as an observer)")
    how.add_argument("--rejoin", action="store_true",
                     help="static quorums: this voter's disk was lost and replaced: it will not vote until it "
                          "has caught up with the quorum again (without this, a replaced voter could help "
                          "elect a stale leader and lose committed records)")
    fmt.add_argument("--release-version", "-r", type=release_version, metavar="VERSION",
                     help="the metadata.version the cluster starts at, Kafka's name (3.9-IV0; 3.9 for its newest "
                          "level) or level (default: the highest this sparkraft supports)")
    fmt.add_argument("--feature", "-f", action="append", default=[], metavar="NAME=LEVEL",
                     help="another feature's starting level, e.g. eligible.leader.replicas.version=1 (repeatable)")
    fmt.add_argument("--add-scram", action="append", default=[], metavar="'MECHANISM=[name=N,password=P]'",
                     help="a SCRAM user the first active controller creates (repeatable; also iterations=N); "
                          "give every controller the same")
    fmt.add_argument("--from-warehouse", metavar="URI",
                     help="restore: start this controller's log at a consistent cut of a `sparkraft materialize` "
                          "warehouse (another cluster's metadata, after losing a majority or for a staging copy); "
                          "give every controller of the new quorum the same cut")
    fmt.add_argument("--as-of-offset", type=int, metavar="N",
                     help="with --from-warehouse: the newest cut at or below offset N (default: the newest cut)")
    add_storage_options(fmt)
    info = add_command(commands, "info", "print a formatted directory's node id, directory id, cluster id and "
                       "kraft.version", run_info)
    info.add_argument("-c", "--config", required=True, metavar="FILE", help="the node's properties file")
    info.add_argument("--json", action="store_true", help="one JSON object")


def run_random_uuid(args: argparse.Namespace) -> None:
    from quorum.log.meta_properties import random_cluster_id

    print(random_cluster_id())


def run_format(args: argparse.Namespace) -> None:
    from quorum.config import load_config
    from quorum.log.meta_properties import metadata_partition_dir, validate_cluster_id
    from quorum.snapshot.files import write_bootstrap_metadata, write_bootstrap_snapshot

    validate_cluster_id(args.cluster_id)
    config = load_config(args.config)
    voters = _initial_voters(args, config)
    if args.from_warehouse is not None or args.as_of_offset is not None:
        return _restore(args, config, voters)
    bootstrap = _bootstrap_features(args, config, _scram_users(args, config))
    meta, voters = _format_directory(args, config, voters)
    if voters is not None:
        write_bootstrap_snapshot(metadata_partition_dir(config.log_dir), args.cluster_id, voters)
    if bootstrap is not None:
        write_bootstrap_metadata(config.log_dir, args.cluster_id, bootstrap)
    how = (" (rejoining: no votes until caught up)" if args.rejoin
           else f" (a dynamic quorum of {', '.join(map(str, voters.replica_keys))})" if voters is not None
           else " (joins a dynamic quorum as an observer)" if args.no_initial_controllers else "")
    scram = f"; SCRAM users {', '.join(sorted(bootstrap.scram.users()))}" \
        if bootstrap is not None and bootstrap.scram.users() else ""
    levels = "; " + ", ".join(f"{n}={lvl}" for n, lvl in bootstrap.features.levels.items()) \
        if bootstrap is not None and bootstrap.features.levels else ""
    print(f"Formatting {config.log_dir} with cluster id {args.cluster_id}, node id {config.node_id} and "
          f"directory id {meta.directory_id}{how}{scram}{levels}")


def _format_directory(args: argparse.Namespace, config, voters):
    """(meta.properties written into the log directory, the dynamic quorum's voters: those named by
    ``--initial-controllers``, or with ``--standalone`` this node alone under its new directory id)."""
    from quorum.log.meta_properties import format_storage

    directory_id = voters[config.node_id].key.directory_id if voters and args.initial_controllers else None
    meta = format_storage(config.log_dir, args.cluster_id, config.node_id, rejoin=args.rejoin,
                          directory_id=directory_id)
    return meta, _standalone(config, meta.directory_id) if args.standalone else voters


def _restore(args: argparse.Namespace, config, voters) -> None:
    """``--from-warehouse``: everything checked and the cut read before anything is written; then
    the log directory, and the cut as its first snapshot (verified by reading it back)."""
    import sys
    import time

    from delta_tables.restore import restored_image, summary, users_without_keys
    from quorum.log.election_state import ElectionState
    from quorum.log.election_store import QUORUM_STATE_FILE, FileElectionStore
    from quorum.log.meta_properties import metadata_partition_dir
    from quorum.snapshot.files import write_restored_snapshot

    if args.from_warehouse is None:
        raise ValueError("--as-of-offset goes with --from-warehouse")
    if not config.is_controller:
        raise ValueError("--from-warehouse is for controllers (brokers fetch the restored metadata from them)")
    if args.release_version is not None or args.feature:
        raise ValueError("--from-warehouse restores the cut's own feature levels: --release-version and --feature "
                         "do not go with it")
    if args.rejoin or args.no_initial_controllers:
        raise ValueError("--from-warehouse formats the controllers of a new quorum: not with --rejoin or "
                         "--no-initial-controllers (a controller joining later fetches the restored metadata)")
    started = time.monotonic()
    print(f"Reading the newest consistent cut{'' if args.as_of_offset is None else f' at or below offset {args.as_of_offset}'}"
          f" in {args.from_warehouse} ...", file=sys.stderr, flush=True)
    image, cut = restored_image(args.from_warehouse, args.as_of_offset, _scram_users(args, config))
    missing = users_without_keys(args.from_warehouse, cut, image)
    if missing:
        print(f"Note: SCRAM users {', '.join(missing)} are not restored: a warehouse never holds their keys. Give "
              f"them again with --add-scram, or with `sparkraft configs alter --entity-type users` later.",
              file=sys.stderr)
    meta, voters = _format_directory(args, config, voters)
    partition = metadata_partition_dir(config.log_dir)
    snapshot = write_restored_snapshot(partition, args.cluster_id, image, cut.offset + 1, voters)
    # a log that holds records comes with its quorum-state: here epoch 0, no vote cast, nothing promised
    FileElectionStore(partition / QUORUM_STATE_FILE).write(ElectionState.empty())
    how = f" (a dynamic quorum of {', '.join(map(str, voters.replica_keys))})" if voters is not None else ""
    print(f"Formatting {config.log_dir} with cluster id {args.cluster_id}, node id {config.node_id} and directory id "
          f"{meta.directory_id}{how}, restored from the cut at offset {cut.offset} of {args.from_warehouse}: "
          f"{summary(image)}; snapshot {snapshot.name} written and verified in {time.monotonic() - started:.1f}s")


def _bootstrap_features(args: argparse.Namespace, config, image):
    """``image`` (the SCRAM users, or None) with ``--release-version`` and ``--feature`` levels
    (checked as the controller checks an upgrade); None when there is nothing to bootstrap."""
    from sparkraft.commands.features import parse_updates

    if args.release_version is None and not args.feature:
        return image
    if not config.is_controller:
        raise ValueError("--release-version and --feature are for controllers (the first active controller writes them)")
    from quorum.controller.features_control import bootstrap_image
    from quorum.metadata.image import MetadataImage

    try:
        return bootstrap_image(parse_updates(args.feature, args.release_version), image or MetadataImage.EMPTY)
    except KeyError as e:
        raise ValueError(str(e.args[0])) from None


def _scram_users(args: argparse.Namespace, config):
    """The image of ``--add-scram``'s credentials (salted here), or None; checked before anything is
    written."""
    from quorum.controller import scram_control
    from quorum.controller.api import AlterUserScramCredentialsRequest
    from quorum.errors import Errors, SparkraftError
    from quorum.metadata.delta import MetadataDelta
    from quorum.metadata.image import MetadataImage
    from sparkraft.commands.scram_specs import parse_spec, upsertion

    if not args.add_scram:
        return None
    if not config.is_controller:
        raise ValueError("--add-scram is for controllers (the first active controller writes the credentials)")
    upserts = []
    for item in args.add_scram:
        m, values = parse_spec(item, ("name", "password", "iterations"))
        if not values.get("name"):
            raise SparkraftError(Errors.UNACCEPTABLE_CREDENTIAL, f"--add-scram {m.name}: a name is required")
        upserts.append(upsertion(m, values["name"], values))
    records, results = scram_control.alter(MetadataImage.EMPTY, AlterUserScramCredentialsRequest(upsertions=tuple(upserts)))
    for r in results:
        if r.error is not Errors.NONE:
            raise SparkraftError(r.error, f"--add-scram {r.user}: {r.message}")
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in records:
        delta.replay(record)
    return delta.apply()


def _initial_voters(args: argparse.Namespace, config):
    """The voter set ``--initial-controllers`` names (checked), or None; refuses flags that do not fit
    the configuration. Nothing is written before these checks pass."""
    from quorum.log.voter_set import VoterSet
    from quorum.uuids import validate_uuid

    dynamic_flag = args.standalone or args.initial_controllers or args.no_initial_controllers
    if dynamic_flag and not config.is_controller:
        raise ValueError("--standalone, --initial-controllers and --no-initial-controllers are for controllers")
    if dynamic_flag and not config.dynamic_quorum:
        raise ValueError("this controller's configuration has controller.quorum.voters (a static quorum); a "
                         "dynamic one is configured with controller.quorum.bootstrap.servers instead")
    if config.dynamic_quorum and not dynamic_flag:
        raise ValueError("a controller of a dynamic quorum (controller.quorum.bootstrap.servers) is formatted "
                         "with --standalone, --initial-controllers or --no-initial-controllers")
    if not args.initial_controllers:
        return None
    voters = VoterSet.parse(args.initial_controllers, config.controller_listener_name)
    for v in voters.values():
        validate_uuid(v.key.directory_id, f"directory id of controller {v.key.id}")
    if config.node_id not in voters:
        raise ValueError(f"--initial-controllers does not name this node (node.id {config.node_id})")
    return voters


def _standalone(config, directory_id: str):
    from quorum.log.voter_set import Endpoint, ReplicaKey, Voter, VoterSet

    host, port = config.controller_listener
    return VoterSet([Voter(ReplicaKey(config.node_id, directory_id),
                           (Endpoint(config.controller_listener_name, host, port),
                            *(Endpoint(*e) for e in config.more_controller_listeners())))])


def run_info(args: argparse.Namespace) -> None:
    import json

    from quorum.config import load_config
    from quorum.log.api import OffsetAndEpoch
    from quorum.log.meta_properties import metadata_partition_dir, read_meta_properties
    from quorum.raft.voter_history import read_raft_state
    from quorum.rpc.convert import format_listener
    from quorum.snapshot.file_store import FileSnapshotStore

    config = load_config(args.config)
    meta = read_meta_properties(config.log_dir)
    store = FileSnapshotStore(metadata_partition_dir(config.log_dir), meta.cluster_id)
    bootstrap = OffsetAndEpoch(0, 0)
    voters, level = read_raft_state(store, bootstrap) if bootstrap in store.ids() else (None, 0)
    level = max(level, 1 if config.dynamic_quorum else 0)
    info = {"nodeId": meta.node_id, "directoryId": meta.directory_id, "clusterId": meta.cluster_id,
            "kraftVersion": level, "logDir": str(config.log_dir),
            "bootstrapVoters": None if voters is None else [
                {"id": v.key.id, "directoryId": v.key.directory_id,
                 "endpoints": [format_listener(e) for e in v.endpoints]} for v in voters.values()]}
    if args.json:
        print(json.dumps(info))
        return
    for key, value in info.items():
        if key == "bootstrapVoters" and value is not None:
            value = ", ".join(f"{v['id']}@{v['endpoints'][0] if v['endpoints'] else '?'} ({v['directoryId']})"
                              for v in value)
        print(f"{key}: {value}")
