"""A million elections: the preferred-leader balance of half the partitions, and a controlled shutdown.

The rig of ``bench day2`` (three ``sparkraft controller start`` processes, fsync on; 28 brokers
heartbeating from this process, whose leader side and metadata image also run here; two ``sparkraft
broker start`` processes), topics of 100 partitions, RF 3, without its 30-minute rolling restart:

- **imbalance**: every other partition's replica order is rotated by a reassignment that moves
  nothing (the same brokers: it completes at once), so that half the partitions are led by a
  replica that is no longer their first. At 2M that is 1,000,000 partitions, about what the roll of
  27 brokers in ``bench day2`` leaves (986,716).
- **balance**: one ElectLeaders PREFERRED of every partition (what ``leader-election
  --all-topic-partitions`` sends, and what the automatic balance does in batches): the time until
  it is answered (every election committed), until the bench's broker image has every partition
  led by its preferred replica, and until every broker has reported (in a heartbeat, every 2 s)
  an offset past the balance. Goal at 2M: ≤ 20 s committed and in every broker's image.
- **controlled shutdown**: SIGTERM of broker process 129 until the controller has moved every
  leadership off it and fenced it (``bench controller``'s measurement; it leads a thirtieth of the
  partitions, about 67,000 at 2M). Goal: ≤ 2 s for a broker leading 74,000 at 2M.
"""
from __future__ import annotations

import time
from pathlib import Path

from bench.controller_bench import (
    PARTITIONS_PER_TOPIC,
    PROCESS_BROKERS,
    REPLICATION_FACTOR,
    _controlled_shutdown,
    run_sizes,
    settle,
    wait_until,
)
from bench.day2_bench import REQUEST_PARTITIONS, STEP_TIMEOUT_S, IsrFleet, _caught_up, rig_with_fleet
from bench.harness.plots import bar_chart, largest_size
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "elections"
TITLE = "A million elections: the preferred-leader balance of half the partitions, and a controlled shutdown"
REQUIRES: tuple[str, ...] = ()

QUICK_SIZES = (20_000,)
FULL_SIZES = (200_000, 2_000_000)  # 2M: about 10 minutes on 2 cores
GOAL_BALANCE_S = 20.0
GOAL_SHUTDOWN_S = 2.0
# this benchmark at sparkraft 555ea84, before partition change blocks, the hour the work was
# measured (2026-11-28, 2 x Intel Xeon; bench/results/partial/elections-2m-before.json)
BEFORE = {2_000_000: {"balance_committed_s": 82.85, "controlled_shutdown_s": 6.76}}


def _imbalance(rig, fleet: IsrFleet, ctx: Context) -> dict:
    """Rotate the replicas of every other partition (nothing moves), until every rotation is done
    and in the fleet's image; the partitions now led by another replica than their first."""
    from quorum.controller import api
    from quorum.errors import Errors

    _caught_up(fleet, rig)
    image = fleet.metadata.image
    moves = [(api.TopicPartition(t.name, pid), t.partitions[pid].replicas[1:] + t.partitions[pid].replicas[:1])
             for t in sorted(image.topics.by_id.values(), key=lambda t: t.name)
             for pid in sorted(t.partitions) if pid % 2 == 0]
    started = time.monotonic()
    for k in range(0, len(moves), REQUEST_PARTITIONS):
        results = rig.admin.alter_reassignments(moves[k:k + REQUEST_PARTITIONS])
        bad = [r for r in results if r.error is not Errors.NONE]
        if bad:
            raise RuntimeError(f"reassignment refused: {bad[0].partition}: {bad[0].error.name}: {bad[0].message}")
        ctx.progress.line(f"  {min(k + REQUEST_PARTITIONS, len(moves)):,} / {len(moves):,} replica orders rotated")
    wait_until(lambda: not rig.admin.list_reassignments(), STEP_TIMEOUT_S, "every rotation completed", interval=0.2)
    _caught_up(fleet, rig)
    _, imbalanced, _ = fleet.health.counts(fleet.metadata.image)
    return {"rotated": len(moves), "rotate_s": time.monotonic() - started, "imbalanced": imbalanced}


def _balance(rig, fleet: IsrFleet) -> dict:
    started = time.monotonic()
    results = rig.admin.elect_leaders("PREFERRED", None)  # answered once every election is committed
    committed_s = time.monotonic() - started
    target = rig.admin.describe_cluster().metadata_offset

    def balanced():
        _, imbalanced, pending = fleet.health.counts(fleet.metadata.image)
        return fleet.metadata.applied_offset >= target and imbalanced == 0 and not pending
    wait_until(balanced, STEP_TIMEOUT_S, "every partition led by its preferred replica", interval=0.05)
    image_s = time.monotonic() - started

    def every_broker():
        brokers = rig.admin.describe_cluster().brokers
        return all(b.metadata_offset >= target for b in brokers if not b.fenced)
    wait_until(every_broker, STEP_TIMEOUT_S, "every broker's reported offset past the balance", interval=0.05)
    return {"elections": len(results), "balance_committed_s": committed_s, "balance_in_image_s": image_s,
            "balance_reported_by_every_broker_s": time.monotonic() - started}


def _one_size(partitions: int, ctx: Context) -> dict:
    with rig_with_fleet(partitions, ctx) as (rig, fleet, create_s):
        out: dict = {"partitions": partitions, "create_s": create_s}
        with ctx.progress.phase("rotate the replica order of every other partition"):
            out["imbalance"] = _imbalance(rig, fleet, ctx)
        settle(rig, ctx)
        with ctx.progress.phase(f"PREFERRED election of every partition ({out['imbalance']['imbalanced']:,} "
                                f"imbalanced)"):
            out["balance"] = _balance(rig, fleet)
        settle(rig, ctx)
        _caught_up(fleet, rig)
        broker = PROCESS_BROKERS[0]
        out["shutdown_leads"] = sum(1 for t in fleet.metadata.image.topics.by_id.values()
                                    for p in t.partitions.values() if p.leader == broker)
        with ctx.progress.phase(f"controlled shutdown of broker {broker} (SIGTERM), leading "
                                f"{out['shutdown_leads']:,} partitions"):
            measured = _controlled_shutdown(rig, [])
        out["controlled_shutdown_s"], out["process_exit_s"] = measured["seconds"], measured["process_exit_s"]
        b = out["balance"]
        ctx.progress.line(f"  {b['elections']:,} elections: committed {b['balance_committed_s']:.2f}s, in the "
                          f"image {b['balance_in_image_s']:.2f}s, reported by every broker "
                          f"{b['balance_reported_by_every_broker_s']:.2f}s; controlled shutdown "
                          f"{out['controlled_shutdown_s']:.2f}s")
        return out


def run(ctx: Context) -> dict:
    results = {"settings": {"partitions_per_topic": PARTITIONS_PER_TOPIC, "replication_factor": REPLICATION_FACTOR,
                            "brokers": 28 + len(PROCESS_BROKERS)},
               "sizes": [], "systems": {"sparkraft": {"errors": []}}}
    return run_sizes(ctx, ctx.sizes(QUICK_SIZES, FULL_SIZES), _one_size, results)


def report(document: dict) -> str:
    rows = []
    for s in document["results"]["sizes"]:
        b = s["balance"]
        before = BEFORE.get(s["partitions"], {})
        rows.append([f"{s['partitions']:,}", f"{b['elections']:,}", fmt_number(b["balance_committed_s"], 2),
                     fmt_number(b["balance_in_image_s"], 2), fmt_number(b["balance_reported_by_every_broker_s"], 2),
                     fmt_number(before.get("balance_committed_s"), 1), f"{s['shutdown_leads']:,}",
                     fmt_number(s["controlled_shutdown_s"], 2), fmt_number(before.get("controlled_shutdown_s"), 2)])
    table = markdown_table(["partitions", "elections", "balance committed s", "in the bench's broker image s",
                            "reported by every broker s", "before: committed s", "broker 129 leads",
                            "controlled shutdown s", "before s"], rows)
    errors = document["results"].get("systems", {}).get("sparkraft", {}).get("errors", [])
    return "\n".join([
        f"{measured_on(document)}: 3 controller processes (fsync on), 30 brokers, topics of {PARTITIONS_PER_TOPIC} "
        f"partitions, RF {REPLICATION_FACTOR}; half the partitions' replica order rotated, then one PREFERRED "
        f"election of every partition; then SIGTERM of broker process {PROCESS_BROKERS[0]}.",
        "",
        table,
        "",
        f"Goals at 2,000,000: the balance committed and in every broker's image ≤ {GOAL_BALANCE_S:g} s; a controlled "
        f"shutdown of a broker leading 74,000 partitions ≤ {GOAL_SHUTDOWN_S:g} s. \"Reported by every broker\" waits "
        f"for each broker's next heartbeat (every 2 s) to name an offset past the balance.",
        *([""] + [f"Errors: {e}" for e in errors] if errors else []),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    s, where = largest_size(document)
    if s is None:
        return []
    b = s["balance"]
    before = BEFORE.get(s["partitions"], {})
    labels = ["balance:\ncommitted", "balance: in the\nbroker image", "balance: reported\nby every broker",
              "controlled\nshutdown"]
    values = [b["balance_committed_s"], b["balance_in_image_s"], b["balance_reported_by_every_broker_s"],
              s["controlled_shutdown_s"]]
    colors = ["tab:blue"] * 4
    if before:
        labels += ["before: balance\ncommitted", "before: controlled\nshutdown"]
        values += [before["balance_committed_s"], before["controlled_shutdown_s"]]
        colors += ["tab:gray"] * 2
    return [bar_chart(plots_dir / "elections.png", f"{b['elections']:,} elections and a controlled shutdown "
                      "(seconds)", labels, values, "seconds", subtitle=where, value_format="{:,.2f}", colors=colors)]
