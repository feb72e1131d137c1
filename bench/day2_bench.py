"""Day-2 operations at scale: a feature upgrade, decommissioning a broker by reassignment, the leader
balance after a rolling restart of every broker, and a broker's whole exit after SIGTERM.

Everything runs for real on loopback, on the rig of ``bench controller``: three ``sparkraft
controller start`` processes (fsync on), 28 brokers heartbeating (BrokerLifecycle threads of this
process) whose partition-leader side (one ISR expansion for all of them,
``quorum/broker/isr_expansion.py``) also runs here over one shared metadata image, and two
``sparkraft broker start`` processes; topics of 100 partitions, RF 3.

- **feature upgrade**: UpdateFeatures ``eligible.leader.replicas.version=1``, request to answer.
  Goal: <= 1 s.
- **decommission**: every partition with a replica on broker 101 is reassigned to put another
  broker in its place (AlterPartitionReassignments, 100,000 partitions a request): time until
  the controller has accepted them all, and until every reassignment has completed (the new
  replicas brought into the ISRs by their leaders, the old one dropped).
- **rolling restart, then balance**: brokers 102-128 in turn shut down (controlled shutdown), come
  back with a new incarnation and rejoin their ISRs (an operator waits for that before the next);
  then the preferred-leader elections of every imbalanced partition (ElectLeaders PREFERRED of
  all partitions, what ``leader-election --all-topic-partitions`` sends and what the automatic
  balance does in batches when its check fires): time until every partition is led by its
  preferred replica again. Goal: <= 10 s. The rig runs with ``leader.imbalance.check.interval.seconds``
  long enough that the automatic check never fires during the bench (with a short one it
  rebalances between restarts and leaves nothing to measure at the end).
- **broker exit after SIGTERM**: the broker process 129 from SIGTERM until the process has exited
  (controlled shutdown, then its copy of the log flushed): what each step of a rolling restart
  waits for. Goal: <= 5 s. Kafka's published controlled shutdown at 2,000,000 partitions (32 s)
  is drawn beside it.
"""
from __future__ import annotations

import itertools
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from bench.controller_bench import (
    KAFKA_CONTROLLED_SHUTDOWN_S,
    PARTITIONS_PER_TOPIC,
    PROCESS_BROKERS,
    RACKS,
    REPLICATION_FACTOR,
    _controlled_shutdown,
    create_partitions,
    run_sizes,
    settle,
    start_rig,
    stop_rig,
    wait_until,
)
from bench.harness.plots import bar_chart, largest_size
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "day2"
TITLE = "Day-2 operations: feature upgrade, decommission, leader balance after a roll, broker exit"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (200_000, 2_000_000)  # 2M: about 40 minutes on 2 cores, most of it the rolling restart
DECOMMISSIONED = 101
ROLLED = tuple(range(102, 129))
GOAL_UPGRADE_S = 1.0
GOAL_BALANCE_S = 10.0
GOAL_EXIT_S = 5.0
REQUEST_PARTITIONS = 100_000
STEP_TIMEOUT_S = 900
# The 28 simulated brokers heartbeat from this process, which also replays the whole log for their
# leader side (the GIL is shared). Their sessions lapsed at 2M mostly because they shared one client
# (fixed in the rig); 30 s leaves margin for the rest: a lapse fences a broker (67,000 partition
# changes at 2M). None of the steps measured depends on it.
SESSION_TIMEOUT_MS = 30_000


class IsrFleet:
    """The partition-leader side of the simulated brokers: one metadata image following the log,
    and one IsrExpansion for all of them over it, in rounds on one thread."""

    def __init__(self, bootstrap: str, cluster_id: str, lifecycles: dict):
        from quorum.broker.isr_expansion import IsrExpansion
        from quorum.broker.metadata_client import BrokerMetadataClient
        from quorum.rpc.controller_client import ControllerClient

        self.lifecycles = lifecycles  # broker -> its current BrokerLifecycle (replaced on a restart)
        self.metadata = BrokerMetadataClient(bootstrap, cluster_id, fetch_wait_ms=200)
        self.client = ControllerClient(bootstrap, timeout=60, rpc_timeout=60)
        # one for every simulated broker: each record is looked at once, not once per broker
        self.expansion = IsrExpansion(sorted(lifecycles), self.client, lambda: self.metadata.image,
                                      lambda b: self.lifecycles[b].state.broker_epoch)
        self.metadata.add_listener(self.expansion.on_update)
        self.health = PartitionHealth()
        self.metadata.add_listener(self.health.on_update)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="isr-fleet", daemon=True)

    def start(self) -> "IsrFleet":
        self.metadata.start()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self.expansion.round()
            except Exception:  # a failover: the next round retries
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        for lifecycle in self.lifecycles.values():  # the restarted ones are not the rig's to stop
            lifecycle.stop()
        self.metadata.stop(save=False)
        self.client.close()


class PartitionHealth:
    """The under-replicated and the imbalanced (not led by their preferred replica) partitions of
    the fleet's image, kept from each metadata update's partition records (a look-up each) after
    one scan: seeing when a step is over by scanning 2,000,000 partitions again and again took
    seconds of this process's GIL, which the fleet being waited for needs, and so could only be
    done now and then (a broker back in every ISR was seen up to half a minute late)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scanned = False
        self._pending: dict[tuple[str, int], int] = {}  # partition -> offset of its latest record
        self.under_replicated: set[tuple[str, int]] = set()
        self.imbalanced: set[tuple[str, int]] = set()

    def on_update(self, update) -> None:
        from quorum.metadata import change_block
        from quorum.metadata.records import RecordType

        with self._lock:
            if update.reloaded:
                self._scanned = False
            for offset, decoded in update.records:
                t = getattr(decoded, "type", None)
                if t is RecordType.PARTITION_CHANGE_RECORD or t is RecordType.PARTITION_RECORD:
                    self._pending[decoded.message.topic_id, decoded.message.partition_id] = offset
                elif t is RecordType.PARTITION_CHANGE_BLOCK_RECORD:  # row i is the change at offset + i
                    self._pending.update(zip(change_block.touched(decoded.message), itertools.count(offset)))
                elif t is RecordType.REMOVE_TOPIC_RECORD:
                    self._scanned = False
            if self._scanned:
                self._settle(update.image)

    def _settle(self, image) -> None:
        """Look again at the partitions whose records ``image`` shows (inside a transaction it
        stays at the transaction's start, and they wait)."""
        by_id, visible = image.topics.by_id, image.offset
        for key in [k for k, offset in self._pending.items() if offset <= visible]:
            del self._pending[key]
            t = by_id.get(key[0])
            self._note(key, t.partitions.get(key[1]) if t is not None else None)

    def _note(self, key: tuple[str, int], p) -> None:
        (self.under_replicated.add if p is not None and len(p.isr) < len(p.replicas)
         else self.under_replicated.discard)(key)
        (self.imbalanced.add if p is not None and p.leader != p.replicas[0] else self.imbalanced.discard)(key)

    def counts(self, image) -> tuple[int, int, bool]:
        """(under-replicated, imbalanced, whether records are still to be seen in an image);
        ``image`` is scanned whole the first time (and after a snapshot or a topic deletion)."""
        with self._lock:
            if not self._scanned:
                self.under_replicated.clear()
                self.imbalanced.clear()
                for t in image.topics.by_id.values():
                    for pid, p in t.partitions.items():
                        self._note((t.topic_id, pid), p)
                self._pending = {k: o for k, o in self._pending.items() if o > image.offset}
                self._scanned = True
            return len(self.under_replicated), len(self.imbalanced), bool(self._pending)


def _counts(image, broker: int) -> tuple[int, int, int]:
    """(partitions with a replica on ``broker``, under-replicated partitions, partitions not led by
    their preferred replica)."""
    on, under, imbalanced = 0, 0, 0
    for t in image.topics.by_id.values():
        for p in t.partitions.values():
            if broker in p.replicas:
                on += 1
            if len(p.isr) < len(p.replicas):
                under += 1
            if p.leader != p.replicas[0]:
                imbalanced += 1
    return on, under, imbalanced


def _caught_up(fleet: IsrFleet, rig) -> None:
    """The fleet's image has everything the controller has committed."""
    target = rig.admin.describe_cluster().metadata_offset
    wait_until(lambda: fleet.metadata.applied_offset >= target, STEP_TIMEOUT_S, "the fleet's image caught up",
               interval=0.1)


def _feature_upgrade(rig) -> dict:
    from quorum.controller import api
    from quorum.errors import Errors

    started = time.monotonic()
    (r,) = rig.admin.call(api.UpdateFeaturesRequest((("eligible.leader.replicas.version", 1),)))
    elapsed = time.monotonic() - started
    if r.error is not Errors.NONE:
        raise RuntimeError(f"feature upgrade refused: {r.error.name}: {r.message}")
    return {"seconds": elapsed}


def _decommission(rig, fleet: IsrFleet, ctx: Context) -> dict:
    from quorum.controller import api
    from quorum.errors import Errors

    _caught_up(fleet, rig)
    image = fleet.metadata.image
    brokers = sorted(b for b in image.cluster.brokers if b != DECOMMISSIONED)
    moves = []
    i = 0
    for t in sorted(image.topics.by_id.values(), key=lambda t: t.name):
        for pid in sorted(t.partitions):
            p = t.partitions[pid]
            if DECOMMISSIONED in p.replicas:
                while brokers[i % len(brokers)] in p.replicas:
                    i += 1
                spare = brokers[i % len(brokers)]
                i += 1
                moves.append((api.TopicPartition(t.name, pid),
                              tuple(spare if b == DECOMMISSIONED else b for b in p.replicas)))
    ctx.progress.line(f"  {len(moves):,} partitions to move off broker {DECOMMISSIONED}")
    started = time.monotonic()
    for k in range(0, len(moves), REQUEST_PARTITIONS):
        results = rig.admin.alter_reassignments(moves[k:k + REQUEST_PARTITIONS])
        bad = [r for r in results if r.error is not Errors.NONE]
        if bad:
            raise RuntimeError(f"reassignment refused: {bad[0].partition}: {bad[0].error.name}: {bad[0].message}")
    accepted = time.monotonic() - started

    def done():
        left = len(rig.admin.list_reassignments())
        if left and time.monotonic() - done.last > 5:
            done.last = time.monotonic()
            ctx.progress.line(f"  {left:,} reassignments in flight")
        return left == 0
    done.last = time.monotonic()
    wait_until(done, STEP_TIMEOUT_S, "every reassignment completed", interval=0.2)
    completed = time.monotonic() - started
    _caught_up(fleet, rig)
    left_on, _, _ = _counts(fleet.metadata.image, DECOMMISSIONED)
    if left_on:
        raise RuntimeError(f"broker {DECOMMISSIONED} still holds {left_on} replicas")
    return {"partitions": len(moves), "accept_s": accepted, "complete_s": completed}


def _restart(rig, fleet: IsrFleet, broker: int) -> float:
    """A controlled shutdown of ``broker``, then the same broker back with a new incarnation; the
    seconds the controlled shutdown took."""
    from quorum.broker.lifecycle import BrokerLifecycle
    from quorum.controller import api
    from quorum.uuids import random_uuid

    started = time.monotonic()
    old = fleet.lifecycles[broker]
    old.stop()
    if not old.controlled_shutdown(timeout=STEP_TIMEOUT_S):
        raise RuntimeError(f"broker {broker}: controlled shutdown not confirmed")
    shutdown_s = time.monotonic() - started
    new = BrokerLifecycle(old.client, broker, old.cluster_id, random_uuid(),
                          (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 20000 + broker),), RACKS[broker % 3],
                          offset_source=old.offset_source)
    fleet.lifecycles[broker] = new
    threading.Thread(target=new.run, name=f"broker-{broker}", daemon=True).start()
    wait_until(lambda: new.state.broker_epoch >= 0 and not new.state.fenced, STEP_TIMEOUT_S,
               f"broker {broker} unfenced again", interval=0.1)
    return shutdown_s


def _roll_then_balance(rig, fleet: IsrFleet, ctx: Context) -> dict:
    started = time.monotonic()
    for n, broker in enumerate(ROLLED, 1):
        step = time.monotonic()
        shutdown_s = _restart(rig, fleet, broker)
        unfenced_s = time.monotonic() - step

        def rejoined():
            _caught_up(fleet, rig)
            under, _, pending = fleet.health.counts(fleet.metadata.image)
            return under == 0 and not pending
        wait_until(rejoined, STEP_TIMEOUT_S, f"broker {broker} back in every ISR", interval=0.2)
        ctx.progress.line(f"  {n}/{len(ROLLED)} brokers restarted ({time.monotonic() - started:.0f}s): broker "
                          f"{broker} shut down in {shutdown_s:.1f}s, unfenced again at {unfenced_s:.1f}s, back in "
                          f"every ISR at {time.monotonic() - step:.1f}s")
    _caught_up(fleet, rig)
    imbalanced_after_roll = _counts(fleet.metadata.image, 0)[2]
    roll_s = time.monotonic() - started
    rolled = time.monotonic()
    rig.admin.elect_leaders("PREFERRED", None)  # answered once every election is committed
    committed_s = time.monotonic() - rolled

    def balanced():
        _caught_up(fleet, rig)
        _, imbalanced, pending = fleet.health.counts(fleet.metadata.image)
        return imbalanced == 0 and not pending
    wait_until(balanced, STEP_TIMEOUT_S, "every partition led by its preferred replica", interval=0.2)
    return {"brokers_restarted": len(ROLLED), "roll_s": roll_s, "imbalanced_after_roll": imbalanced_after_roll,
            "balance_committed_s": committed_s, "balance_s": time.monotonic() - rolled}


def _broker_exit(rig) -> dict:
    """``bench controller``'s controlled shutdown of broker process 129, read for the whole exit."""
    measured = _controlled_shutdown(rig, [])
    return {"controlled_shutdown_s": measured["seconds"], "exit_s": measured["process_exit_s"]}


@contextmanager
def rig_with_fleet(partitions: int, ctx: Context):
    """The rig at ``partitions`` (created, then settled) with its IsrFleet, as (rig, fleet, seconds the
    creation took); both stopped on leaving."""
    work = ctx.work_dir / f"p{partitions}"
    work.mkdir()
    with ctx.progress.phase(f"{partitions:,} partitions: 3 controllers, 30 brokers"):
        rig = start_rig(work, ctx, overrides={"leader.imbalance.check.interval.seconds": "36000",
                                              "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    fleet = None
    try:
        lifecycles = {b.broker_id: b for b in rig.fleet.brokers}
        fleet = IsrFleet(rig.cluster.bootstrap, rig.admin.describe_cluster().cluster_id, lifecycles).start()
        for b in lifecycles.values():  # they report the offset of the image their leader side uses
            b.offset_source = lambda: fleet.metadata.applied_offset
        with ctx.progress.phase(f"create {partitions:,} partitions"):
            create_s = create_partitions(rig, partitions, ctx)
        settle(rig, ctx)
        yield rig, fleet, create_s
    finally:
        if fleet is not None:
            fleet.stop()
        stop_rig(rig)


def _one_size(partitions: int, ctx: Context) -> dict:
    with rig_with_fleet(partitions, ctx) as (rig, fleet, create_s):
        out: dict = {"partitions": partitions, "create_s": create_s}
        with ctx.progress.phase("feature upgrade: eligible.leader.replicas.version=1"):
            out["feature_upgrade"] = _feature_upgrade(rig)
        settle(rig, ctx)
        with ctx.progress.phase(f"decommission broker {DECOMMISSIONED} by reassignment"):
            out["decommission"] = _decommission(rig, fleet, ctx)
        settle(rig, ctx)
        with ctx.progress.phase(f"rolling restart of brokers {ROLLED[0]}-{ROLLED[-1]}, then the leader balance"):
            out["balance"] = _roll_then_balance(rig, fleet, ctx)
        settle(rig, ctx)
        with ctx.progress.phase(f"SIGTERM of broker process {PROCESS_BROKERS[0]} until it exits"):
            out["broker_exit"] = _broker_exit(rig)
        ctx.progress.line(
            f"  upgrade {out['feature_upgrade']['seconds']:.3f}s; decommission of "
            f"{out['decommission']['partitions']:,}: accepted {out['decommission']['accept_s']:.2f}s, completed "
            f"{out['decommission']['complete_s']:.2f}s; balance after the roll {out['balance']['balance_s']:.2f}s "
            f"({out['balance']['imbalanced_after_roll']:,} imbalanced); broker exit {out['broker_exit']['exit_s']:.2f}s")
        return out


def run(ctx: Context) -> dict:
    sizes = ctx.sizes(QUICK_SIZES, FULL_SIZES)
    results = {"settings": {"partitions_per_topic": PARTITIONS_PER_TOPIC, "replication_factor": REPLICATION_FACTOR,
                            "brokers": 28 + len(PROCESS_BROKERS), "leader_imbalance_check_interval_s": 36000},
               "sizes": [], "systems": {"sparkraft": {"errors": []}}}
    return run_sizes(ctx, sizes, _one_size, results)


def report(document: dict) -> str:
    results = document["results"]
    rows = []
    for s in results["sizes"]:
        d, b, x = s["decommission"], s["balance"], s["broker_exit"]
        rows.append([f"{s['partitions']:,}", fmt_number(s["feature_upgrade"]["seconds"], 3),
                     f"{d['partitions']:,}", fmt_number(d["accept_s"], 2), fmt_number(d["complete_s"], 2),
                     f"{b['imbalanced_after_roll']:,}", fmt_number(b.get("balance_committed_s"), 2),
                     fmt_number(b["balance_s"], 2), fmt_number(b["roll_s"], 0),
                     fmt_number(x["controlled_shutdown_s"], 2), fmt_number(x["exit_s"], 2)])
    table = markdown_table(["partitions", "feature upgrade s", "decommission: partitions moved", "accepted s",
                            "completed s", "imbalanced after the roll", "balance committed s",
                            "balanced in a broker's image s", "roll of 27 brokers s",
                            "broker: controlled shutdown s", "broker: exit after SIGTERM s"], rows)
    errors = results.get("systems", {}).get("sparkraft", {}).get("errors", [])
    return "\n".join([
        f"{measured_on(document)}: 3 controller processes (fsync on), 30 brokers, topics of "
        f"{PARTITIONS_PER_TOPIC} partitions, RF {REPLICATION_FACTOR}; the balance is one PREFERRED election of "
        f"every partition once the roll is over.",
        "",
        table,
        "",
        f"Goals: feature upgrade ≤ {GOAL_UPGRADE_S:g} s, balanced ≤ {GOAL_BALANCE_S:g} s after the roll, a "
        f"broker's exit ≤ {GOAL_EXIT_S:g} s. Kafka publishes a controlled shutdown of "
        f"{KAFKA_CONTROLLED_SHUTDOWN_S:g} s at 2,000,000 partitions and no figure for the others.",
        *([""] + [f"Errors: {e}" for e in errors] if errors else []),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    s, where = largest_size(document)
    if s is None:
        return []
    labels = ["feature upgrade", "decommission:\naccepted", "decommission:\ncompleted", "balanced after\nthe roll",
              "broker exit\nafter SIGTERM"]
    values = [s["feature_upgrade"]["seconds"], s["decommission"]["accept_s"], s["decommission"]["complete_s"],
              s["balance"]["balance_s"], s["broker_exit"]["exit_s"]]
    colors = ["tab:blue"] * 5
    if s["partitions"] == 2_000_000:  # Kafka's figure is for this size only
        labels.append("Kafka: controlled\nshutdown at 2M")
        values.append(KAFKA_CONTROLLED_SHUTDOWN_S)
        colors.append("tab:gray")
    return [bar_chart(plots_dir / "day2.png", "Day-2 operations (seconds)", labels, values, "seconds",
                      subtitle=where, value_format="{:,.2f}", colors=colors)]
