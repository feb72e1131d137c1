"""Changing the controller set of a running cluster (KIP-853): add a voter, replace a failed one,
and how long client writes stall meanwhile, at 20,000 / 200,000 / 2,000,000 partitions.

Everything runs for real on loopback: three ``sparkraft controller start`` processes (metadata
controllers, fsync on, default timeouts) formatted as a static quorum, 28 brokers heartbeating
(threads of this process), topics of 100 partitions (RF 3). Then, as an operator would:

- **upgrade**: ``UpdateFeatures kraft.version=1`` (``sparkraft features upgrade``): the voter set
  moves into the log.
- **add**: a fourth controller is formatted ``--no-initial-controllers`` and started; it catches up
  as an observer (by FetchSnapshot when the leader's log no longer starts at 0) and is added with
  AddRaftVoter, which the leader accepts once it has caught up. Time from its start until the
  change is committed. Goal: <= 10 s at 2,000,000 partitions.
- **replace**: a follower voter is SIGKILLed and its disk wiped; a new disk is formatted
  ``--no-initial-controllers`` and started, the old replica removed and the new one added. Time
  from the SIGKILL until the new replica votes. Goal: <= 15 s.
- **longest write gap**: a client writes a config change in a closed loop throughout; the longest
  time between two acknowledged writes during each change, against one election timeout (the
  goal: writes never stall longer).

Kafka publishes no figure for these; the goals are the issue's.
"""
from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from bench.controller_bench import create_partitions, run_sizes, settle, start_rig, stop_rig, wait_until
from bench.harness.plots import _finish, _pyplot
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "membership"
TITLE = "Adding and replacing a controller of a running cluster (KIP-853)"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (20_000, 200_000, 2_000_000)
GOAL_ADD_S = 10.0
GOAL_REPLACE_S = 15.0
NEW_CONTROLLER = 4
CHANGE_TIMEOUT_S = 600


class WriteProbe:
    """Closed-loop config writes from one client, each acknowledgement's time kept."""

    def __init__(self, bootstrap: str):
        from quorum.rpc.controller_client import ControllerClient

        self.client = ControllerClient(bootstrap, timeout=60, rpc_timeout=5)
        self.acks: list[float] = []
        self.errors = 0
        self.last_error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="write-probe", daemon=True)

    def _run(self) -> None:
        from quorum.controller import api

        resource = api.ConfigResourceKey("TOPIC", "t000000")
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                self.client.alter_configs(resource, [api.AlterableConfig("retention.ms", "SET", str(60_000 + i))])
                self.acks.append(time.monotonic())
            except Exception as e:  # counted: the gap it causes is what is measured
                self.errors += 1
                self.last_error = f"{type(e).__name__}: {e}"

    def __enter__(self) -> "WriteProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()

    def longest_gap(self, start: float, end: float) -> float:
        """The longest time in [start, end] without an acknowledged write."""
        times = [start] + [t for t in self.acks if start < t < end] + [end]
        return max(b - a for a, b in zip(times, times[1:]))


def _upgrade(rig) -> float:
    """kraft.version 1, asked again until every voter has said its directory id; the seconds it took."""
    from quorum.controller import api
    from quorum.errors import Errors

    started = time.monotonic()

    def done():
        (r,) = rig.admin.call(api.UpdateFeaturesRequest((("kraft.version", 1),)))
        return r.error is Errors.NONE

    wait_until(done, 60, "kraft.version 1", interval=0.2)
    return time.monotonic() - started


def _add(rig, raft, cluster_id: str) -> dict:
    cluster = rig.cluster
    started = time.monotonic()
    directory = cluster.start_joiner(NEW_CONTROLLER, cluster_id)
    listening = time.monotonic()
    raft.add_voter(NEW_CONTROLLER, directory, [("CONTROLLER", "127.0.0.1", cluster.ports[NEW_CONTROLLER])])
    ended = time.monotonic()
    via_snapshot = any(cluster.data_dir(NEW_CONTROLLER).rglob("*.checkpoint"))
    return {"seconds": ended - started, "started_s": listening - started, "via_snapshot": via_snapshot,
            "window": (started, ended)}


def _replace(rig, raft, cluster_id: str) -> dict:
    from quorum.log.meta_properties import read_meta_properties

    cluster = rig.cluster
    leader = raft.describe_quorum().leader_id
    victim = next(n for n in (1, 2, 3) if n != leader)
    old = read_meta_properties(cluster.data_dir(victim)).directory_id
    started = time.monotonic()
    cluster.voter(victim).kill()
    shutil.rmtree(cluster.data_dir(victim))
    new = cluster.start_joiner(victim, cluster_id)
    raft.remove_voter(victim, old)
    raft.add_voter(victim, new, [("CONTROLLER", "127.0.0.1", cluster.ports[victim])])
    ended = time.monotonic()
    return {"seconds": ended - started, "node": victim, "window": (started, ended)}


def _one_size(partitions: int, ctx: Context) -> dict:
    from quorum.raft.settings import RaftSettings
    from quorum.rpc.raft_client import RaftClient

    work = ctx.work_dir / f"p{partitions}"
    work.mkdir()
    with ctx.progress.phase(f"{partitions:,} partitions: 3 controllers (static), 28 brokers"):
        rig = start_rig(work, ctx, process_brokers=())
    try:
        out: dict = {"partitions": partitions, "election_timeout_s": RaftSettings().election_timeout_ms / 1000}
        with ctx.progress.phase(f"create {partitions:,} partitions"):
            out["create_s"] = create_partitions(rig, partitions, ctx)
        settle(rig, ctx)
        with ctx.progress.phase("upgrade to kraft.version 1"):
            out["upgrade_s"] = _upgrade(rig)
        cluster_id = rig.cluster.client.describe_quorum().cluster_id
        with RaftClient(rig.cluster.bootstrap, timeout=CHANGE_TIMEOUT_S, rpc_timeout=30) as raft, \
                WriteProbe(rig.cluster.bootstrap) as probe:
            try:
                wait_until(lambda: len(probe.acks) > 20, 60, "the write probe running")
            except TimeoutError:
                raise TimeoutError(f"the write probe is not acknowledged ({probe.errors} errors, the last "
                                   f"{probe.last_error})") from None
            with ctx.progress.phase(f"add controller {NEW_CONTROLLER} (start to voting)"):
                out["add"] = _add(rig, raft, cluster_id)
            rig.cluster.wait_voters_caught_up(120)  # not settle(): the probe keeps everyone busy
            with ctx.progress.phase("replace a follower's disk (SIGKILL to the new replica voting)"):
                out["replace"] = _replace(rig, raft, cluster_id)
            time.sleep(1)
        for step in ("add", "replace"):
            start, end = out[step].pop("window")
            out[step]["longest_write_gap_s"] = probe.longest_gap(start, end)
            out[step]["writes"] = sum(1 for t in probe.acks if start < t < end)
        out["write_errors"] = probe.errors
        ctx.progress.line(f"  add {out['add']['seconds']:.2f}s (snapshot: {out['add']['via_snapshot']}), "
                          f"replace {out['replace']['seconds']:.2f}s, longest write gaps "
                          f"{out['add']['longest_write_gap_s']:.2f}s / {out['replace']['longest_write_gap_s']:.2f}s")
        return out
    finally:
        stop_rig(rig)


def run(ctx: Context) -> dict:
    sizes = ctx.sizes(QUICK_SIZES, FULL_SIZES)
    results = {"sizes": [], "systems": {"sparkraft": {"errors": []}}}
    return run_sizes(ctx, sizes, _one_size, results)


def report(document: dict) -> str:
    results = document["results"]
    rows = [[f"{s['partitions']:,}", fmt_number(s["upgrade_s"], 2), fmt_number(s["add"]["seconds"], 2),
             "yes" if s["add"]["via_snapshot"] else "no (the whole log)", fmt_number(s["replace"]["seconds"], 2),
             fmt_number(s["add"]["longest_write_gap_s"], 2), fmt_number(s["replace"]["longest_write_gap_s"], 2),
             fmt_number(s["election_timeout_s"], 1)]
            for s in results["sizes"]]
    table = markdown_table(["partitions", "upgrade s", "add s (start → voting)", "caught up by snapshot",
                            "replace s (SIGKILL → new replica voting)", "longest write gap, add s",
                            "longest write gap, replace s", "election timeout s"], rows)
    errors = results.get("systems", {}).get("sparkraft", {}).get("errors", [])
    return "\n".join([
        f"{measured_on(document)}: "
        f"3 controller processes (fsync on, default timeouts), 28 brokers, topics of 100 partitions, RF 3; "
        f"a client writing config changes in a closed loop throughout.",
        "",
        table,
        "",
        f"Goals: add ≤ {GOAL_ADD_S:g} s and replace ≤ {GOAL_REPLACE_S:g} s at 2,000,000 partitions; no write "
        f"gap longer than one election timeout.",
        *([""] + [f"Errors: {e}" for e in errors] if errors else []),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    machine = document["machine"]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{s['partitions']:,}" for s in sizes]
    x = range(len(sizes))
    width = 0.2
    bars = {"add (start → voting)": [s["add"]["seconds"] for s in sizes],
            "replace (SIGKILL → voting)": [s["replace"]["seconds"] for s in sizes],
            "longest write gap, add": [s["add"]["longest_write_gap_s"] for s in sizes],
            "longest write gap, replace": [s["replace"]["longest_write_gap_s"] for s in sizes]}
    for i, (name, values) in enumerate(bars.items()):
        ax.bar([j + (i - 1.5) * width for j in x], values, width, label=name)
    ax.axhline(GOAL_ADD_S, linestyle="--", color="grey", linewidth=1)
    ax.axhline(GOAL_REPLACE_S, linestyle=":", color="grey", linewidth=1)
    ax.axhline(sizes[0]["election_timeout_s"], linestyle="-.", color="red", linewidth=1)
    ax.text(len(sizes) - 0.5, GOAL_ADD_S, f"goal: add {GOAL_ADD_S:g} s", fontsize=7, va="bottom", ha="right")
    ax.text(len(sizes) - 0.5, GOAL_REPLACE_S, f"goal: replace {GOAL_REPLACE_S:g} s", fontsize=7, va="bottom",
            ha="right")
    ax.text(len(sizes) - 0.5, sizes[0]["election_timeout_s"], "one election timeout", fontsize=7, va="bottom",
            ha="right", color="red")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels)
    ax.set_xlabel("partitions")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=7)
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    return [_finish(fig, ax, plots_dir / "membership.png", "Changing the controller set of a running cluster",
                    where)]
