"""``sparkraft demo``: the embedded default, everything in one process.

Today: a 3-voter quorum of RaftNodes on 127.0.0.1 ephemeral ports, storage formatted under DIR
(or a temporary directory), a leader elected, records appended through the leader, and the
quorum's status printed as ``sparkraft quorum describe`` prints it. Later steps (the controller,
a broker, the Spark job) are added to ``STEPS``: each step is a function of the shared
:class:`Demo` state, printed as ``[i/n] title``.
"""
from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from sparkraft.commands import add_command

VOTERS = (1, 2, 3)
RECORDS = 1000  # appended by the demo
RECORDS_PER_PROPOSAL = 10
PROGRESS_EVERY = 200


def register(subparsers) -> None:
    demo = add_command(subparsers, "demo", "run a 3-controller quorum in this process and show it working",
                       run_demo)
    demo.add_argument("--dir", metavar="DIR",
                      help="where to keep the controllers' storage (kept afterwards; default: a temp dir, removed)")


@dataclass
class Demo:
    """What the steps share."""

    root: Path
    out: Callable[[str], None] = print
    cluster_id: str = ""
    nodes: dict = field(default_factory=dict)  # node id -> RaftNode
    leader_id: Optional[int] = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes.values())

    def node_dir(self, node_id: int) -> Path:
        return self.root / f"controller-{node_id}"


def step_format(demo: Demo) -> None:
    from quorum.log.meta_properties import (META_PROPERTIES_FILE, format_storage, random_cluster_id,
                                            read_meta_properties)

    existing = [read_meta_properties(demo.node_dir(i)) for i in VOTERS
                if (demo.node_dir(i) / META_PROPERTIES_FILE).exists()]
    demo.cluster_id = existing[0].cluster_id if existing else random_cluster_id()
    for i in VOTERS:
        d = demo.node_dir(i)
        if (d / META_PROPERTIES_FILE).exists():
            demo.out(f"      {d}: already formatted, reusing its log")
        else:
            format_storage(d, demo.cluster_id, i)
            demo.out(f"      {d}: formatted (node {i})")
    demo.out(f"      cluster id {demo.cluster_id}")


def step_start(demo: Demo) -> None:
    from quorum.node import RaftNode
    from quorum.raft.settings import RaftSettings

    settings = RaftSettings(election_timeout_ms=500, fetch_timeout_ms=1000)
    placeholder = {i: ("127.0.0.1", 0) for i in VOTERS}
    for i in VOTERS:
        demo.nodes[i] = RaftNode(i, placeholder, ("127.0.0.1", 0), demo.node_dir(i), settings)
    addresses = {i: ("127.0.0.1", n.port) for i, n in demo.nodes.items()}
    for node in demo.nodes.values():
        node.set_voter_addresses(addresses)
    for node in demo.nodes.values():
        node.start()
    demo.out("      voters " + ",".join(f"{i}@127.0.0.1:{p}" for i, (_, p) in addresses.items()))


def step_elect(demo: Demo) -> None:
    t0 = time.monotonic()
    demo.leader_id = demo.nodes[VOTERS[0]].wait_for_leader(timeout=15)
    leader = demo.nodes[demo.leader_id]
    # Every node agrees before we go on.
    for node in demo.nodes.values():
        node.wait_for_leader(timeout=15)
    demo.out(f"      node {demo.leader_id} leads epoch {leader.status().epoch} "
             f"(elected in {time.monotonic() - t0:.2f}s)")


def step_append(demo: Demo) -> None:
    leader = demo.nodes[demo.leader_id]
    t0 = time.monotonic()
    pending = []
    last = -1
    for n in range(0, RECORDS, RECORDS_PER_PROPOSAL):
        records = [f"demo-record-{k}".encode() for k in range(n, n + RECORDS_PER_PROPOSAL)]
        pending.append(leader.propose(records))
        done = n + RECORDS_PER_PROPOSAL
        if done % PROGRESS_EVERY == 0:
            for future in pending:
                last = future.result(timeout=15)
            pending.clear()
            demo.out(f"      committed {done:>4}/{RECORDS} records (last offset {last})")
    elapsed = time.monotonic() - t0
    demo.out(f"      {RECORDS} records in {elapsed:.2f}s ({RECORDS / elapsed:,.0f} records/s)")
    # Let the followers hear the final high watermark, so the status shows them caught up.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(n.status().high_watermark < last + 1 for n in demo.nodes.values()):
        time.sleep(0.02)


def step_status(demo: Demo) -> None:
    from quorum.rpc.raft_client import RaftClient
    from sparkraft.commands.quorum import format_replication, format_status

    with RaftClient(demo.bootstrap) as client:
        info = client.describe_quorum()
    demo.out("")
    demo.out(format_status(info))
    demo.out("")
    demo.out(format_replication(info))
    demo.out("")


STEPS: list[tuple[str, Callable[[Demo], None]]] = [
    ("Format storage for 3 controllers", step_format),
    ("Start the quorum", step_start),
    ("Elect a leader", step_elect),
    (f"Append {RECORDS} records through the leader", step_append),
    ("Quorum status (as `sparkraft quorum describe --status` and `--replication` print it)", step_status),
]


def shutdown(demo: Demo) -> None:
    quiet = logging.getLogger("quorum")
    level = quiet.level
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:
        quiet.setLevel(logging.ERROR)  # peers going away one by one is expected here
    try:
        # The leader first: it resigns and hands over while its followers are still there.
        order = sorted(demo.nodes, key=lambda i: i != demo.leader_id)
        for i in order:
            demo.nodes[i].shutdown(graceful=True)
    finally:
        quiet.setLevel(level)


def run_demo(args: argparse.Namespace) -> None:
    temporary = args.dir is None
    root = Path(tempfile.mkdtemp(prefix="sparkraft-demo-")) if temporary else Path(args.dir)
    demo = Demo(root)
    t0 = time.monotonic()
    try:
        for i, (title, step) in enumerate(STEPS, 1):
            demo.out(f"[{i}/{len(STEPS) + 1}] {title}")
            step(demo)
    finally:
        if demo.nodes:
            demo.out(f"[{len(STEPS) + 1}/{len(STEPS) + 1}] Shut down")
            shutdown(demo)
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    demo.out(f"Done in {time.monotonic() - t0:.1f}s" + ("" if temporary else f"; storage kept in {root}"))
