"""Reading the lakehouse after a long history: what the maintenance job keeps a reader's cost at.

A cluster of 2,000 partitions (200 topics of 10, RF 3, 30 brokers) is built in this process by the
in-memory controller and materialised by the materialiser (the Spark job's foreachBatch code, fed
straight from the log). Then one change at a time, each its own micro-batch, as a cluster with one
change a second and the job's 1 s trigger commits them: a topic config set, a topic created, a topic
deleted, in turn. The same micro-batches go to two warehouses; ``jobs/maintenance.py``'s
``maintain`` runs on one of them after every ``every`` changes, with the tables' retention
shortened to ``window_s`` so that the run reaches the steady state a day's retention reaches in a
day; it never runs on the other.

At each of those points (``SETTLE`` changes after the round), in both warehouses: a reader's cold
read of the newest consistent cut (``latest_cut``, every table opened at the cut's version, the
state tables read whole), the median of ``READS``; the Delta log entries and live data files; the
maintenance round's time.

A year of one change a second is 31.5 million micro-batches. What a maintained table's read still
grows with is the log entries its retention keeps, because delta-rs lists a table's whole
``_delta_log`` to open it. So at the end the maintenance job also runs once on the unmaintained
warehouse, with the tables' own retention (a day: it removes no entry of the run), and its cut is
read again: a maintained read with every commit of the run kept. What opening a table costs per log
entry (``records``, there against in the maintained warehouse), times the entries a day's (and a
week's) retention keeps at one change a second (each table's commits per change, counted here),
added to the maintained read: the year's read.

Goal (issue 21): maintenance on a schedule that keeps a year of one-change-per-second history
readable in under a second.
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from bench.harness.plots import line_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.suite import Context

NAME = "history"
TITLE = "Reading the lakehouse after a long history, with and without the maintenance job"
REQUIRES: tuple[str, ...] = ()

TOPICS, TOPIC_PARTITIONS, BROKERS = 200, 10, 30
QUICK = {"changes": 1_500, "every": 300, "window_s": 30}
FULL = {"changes": 3_000, "every": 500, "window_s": 60}
READS = 5
# Changes between a maintenance round and the reads: one of each kind, so that the cut names the
# compacted version of every table a change writes (a cut names each table's version as of the
# materialiser's last commit to it; right after a round it still names the versions before it).
SETTLE = 3
RETENTIONS_S = {"a day (the default)": 86_400, "a week": 7 * 86_400}
GOAL_READ_S = 1.0


class _LogFeed:
    """The controller's log since the last call, as one micro-batch in the source's columns."""

    def __init__(self, controller):
        self.controller = controller
        self.next_batch = 0

    def batch(self):
        from streaming.source import record_row, rows_table

        rows = []
        log = self.controller.log
        for b in log[self.next_batch:]:
            rows += [record_row(b.base_offset + i, b.epoch, b.append_time_ms, raw, b.control)
                     for i, raw in enumerate(b.records)]
        self.next_batch = len(log)
        return rows_table(rows)


def _cluster():
    from quorum.controller import api
    from quorum.controller.local import LocalController
    from quorum.controller.settings import ControllerSettings

    c = LocalController(ControllerSettings(seed=7))
    for b in range(BROKERS):
        reply = c.request(api.RegisterBrokerRequest(b, c.cluster_id, f"Inc000xxxxxxxxxxxxx{b:03d}",
                                                    (api.BrokerEndpoint("PLAINTEXT", "localhost", 9092 + b),)))
        c.request(api.BrokerHeartbeatRequest(b, reply.broker_epoch, c.core.last_committed_offset))
    c.request(api.CreateTopicsRequest(tuple(api.CreatableTopic(f"t{i}", TOPIC_PARTITIONS, 3) for i in range(TOPICS))))
    return c


def _change(c, k: int) -> None:
    """The ``k``-th change: a config set, a topic created, that topic deleted, in turn."""
    from quorum.controller import api

    kind, n = k % 3, k // 3
    if kind == 0:
        key = api.ConfigResourceKey("TOPIC", f"t{n % TOPICS}")
        c.request(api.IncrementalAlterConfigsRequest(((key, (api.AlterableConfig("retention.ms", "SET",
                                                                                 str(60_000 + n)),)),)))
    elif kind == 1:
        c.request(api.CreateTopicsRequest((api.CreatableTopic(f"h{n}", 1, 3),)))
    else:
        c.request(api.DeleteTopicsRequest((f"h{n}",)))


def _apply_change(c, feed: _LogFeed, materializers, k: int) -> None:
    _change(c, k)
    batch = feed.batch()
    for m in materializers:
        m.process(batch)


def _read_cut(warehouse: str) -> float:
    """Seconds for a cold read of the newest cut: every table at its version, the state tables whole."""
    from delta_tables.cut import latest_cut, read_table, tables_at
    from delta_tables.schemas import STATE_TABLES

    started = time.monotonic()
    tables = tables_at(warehouse, latest_cut(warehouse))
    for t in STATE_TABLES:
        read_table(tables[t])
    return time.monotonic() - started


def _median_s(fn, times: int = READS) -> float:
    samples = []
    for _ in range(times):
        started = time.monotonic()
        fn()
        samples.append(time.monotonic() - started)
    return statistics.median(samples)


def _point(warehouse: Path, changes: int) -> dict:
    """A read of the newest cut, and what the tables hold: log entries per table, live data files."""
    from deltalake import DeltaTable

    from delta_tables.schemas import ALL_TABLES, RECORDS

    entries = {t: sum(1 for p in (warehouse / t / "_delta_log").iterdir() if p.suffix == ".json") for t in ALL_TABLES}
    files = sum(len(DeltaTable(str(warehouse / t)).file_uris()) for t in ALL_TABLES)
    return {"changes": changes, "read_s": _median_s(lambda: _read_cut(str(warehouse))), "log_entries": entries,
            "data_files": files, "open_records_s": _median_s(lambda: DeltaTable(str(warehouse / RECORDS)))}


def _shorten_retention(warehouse: Path, seconds: int) -> None:
    from deltalake import DeltaTable

    from delta_tables.schemas import ALL_TABLES

    window = f"interval {seconds} seconds"
    for t in ALL_TABLES:
        DeltaTable(str(warehouse / t)).alter.set_table_properties(
            {"delta.logRetentionDuration": window, "delta.deletedFileRetentionDuration": window})


def run(ctx: Context) -> dict:
    from delta_tables.writer import DeltaRsWriter
    from jobs.maintenance import maintain
    from streaming.materializer import Materializer

    plan = QUICK if ctx.quick else FULL
    with ctx.progress.phase(f"a cluster of {TOPICS * TOPIC_PARTITIONS:,} partitions, materialised twice"):
        c = _cluster()
        feed = _LogFeed(c)
        first = feed.batch()
        warehouses = {w: ctx.work_dir / w for w in ("maintained", "unmaintained")}
        materializers = {}
        for w, path in warehouses.items():
            materializers[w] = Materializer(DeltaRsWriter(path))
            materializers[w].process(first)
        _shorten_retention(warehouses["maintained"], plan["window_s"])
        for m in materializers.values():  # the writers see the new properties (and commit after them)
            m.writer = DeltaRsWriter(m.writer.warehouse)
    points: dict[str, list] = {w: [_point(path, 0)] for w, path in warehouses.items()}
    maintenance: list[dict] = []
    applied = 0
    with ctx.progress.phase(f"{plan['changes']:,} changes, one micro-batch each; maintenance every "
                            f"{plan['every']:,} in one warehouse ({plan['window_s']} s retention)"):
        started = time.monotonic()
        while applied < plan["changes"] + SETTLE:
            _apply_change(c, feed, materializers.values(), applied)
            applied += 1
            if applied % plan["every"] == 0:
                t0 = time.monotonic()
                maintain(str(warehouses["maintained"]))
                maintenance.append({"changes": applied, "seconds": time.monotonic() - t0})
            if applied % plan["every"] != SETTLE or applied < plan["every"]:
                continue
            for w, path in warehouses.items():
                points[w].append(_point(path, applied))
            m_, u_ = points["maintained"][-1], points["unmaintained"][-1]
            ctx.progress.line(f"  {applied:,} changes ({(time.monotonic() - started) / applied * 1000:.0f} ms "
                              f"each, both warehouses): read {m_['read_s']:.3f} s maintained "
                              f"({m_['data_files']:,} files, {sum(m_['log_entries'].values()):,} log entries), "
                              f"{u_['read_s']:.3f} s not ({u_['data_files']:,} files, "
                              f"{sum(u_['log_entries'].values()):,}); maintenance {maintenance[-1]['seconds']:.2f} s")
    with ctx.progress.phase("the unmaintained warehouse maintained once, keeping every log entry"):
        maintain(str(warehouses["unmaintained"]))
        for _ in range(SETTLE):
            _apply_change(c, feed, [materializers["unmaintained"]], applied)
            applied += 1
        kept = _point(warehouses["unmaintained"], applied)
    ctx.progress.line(f"  read {kept['read_s']:.3f} s ({kept['data_files']:,} files, "
                      f"{sum(kept['log_entries'].values()):,} log entries)")
    return {"partitions": TOPICS * TOPIC_PARTITIONS, "every": plan["every"], "window_s": plan["window_s"],
            "points": points, "all_kept": kept, "maintenance": maintenance,
            "year": _year(points, kept), "systems": {"sparkraft": {"errors": []}}}


def _listed(entries: dict[str, float]) -> float:
    """Log entries a read of a cut lists: every table once, ``snapshots`` twice (the cut, then at it)."""
    from delta_tables.schemas import SNAPSHOTS

    return sum(entries.values()) + entries[SNAPSHOTS]


def _year(points: dict[str, list], kept: dict) -> dict:
    """The maintained read at the end of the run, plus what opening a table costs per entry of its
    log (``records`` opened where the run kept every entry, against where the maintenance job kept
    a window), times the entries each retention keeps in a year (at one change a second, each
    table's commits per change as the unmaintained warehouse counted them)."""
    from delta_tables.schemas import RECORDS

    last = points["maintained"][-1]
    per_entry_s = (kept["open_records_s"] - last["open_records_s"]) / (
        kept["log_entries"][RECORDS] - last["log_entries"][RECORDS])
    per_change = {t: n / kept["changes"] for t, n in kept["log_entries"].items()}
    out = {"seconds_per_log_entry": per_entry_s, "commits_per_change": per_change,
           "maintained_read_s": last["read_s"], "retentions": {}}
    for name, seconds in RETENTIONS_S.items():
        listed = _listed({t: rate * seconds for t, rate in per_change.items()})
        out["retentions"][name] = {"listed": listed, "read_s": last["read_s"] + per_entry_s * (
            listed - _listed(last["log_entries"]))}
    return out


def report(document: dict) -> str:
    r = document["results"]
    points = r["points"]
    rows = [[f"{m['changes']:,}", fmt_number(m["read_s"], 3), f"{m['data_files']:,}",
             f"{sum(m['log_entries'].values()):,}", fmt_number(u["read_s"], 3), f"{u['data_files']:,}",
             f"{sum(u['log_entries'].values()):,}"]
            for m, u in zip(points["maintained"], points["unmaintained"])]
    rounds = [x["seconds"] for x in r["maintenance"]]
    y = r["year"]
    years = [[name, f"{int(v['listed']):,}", fmt_number(v["read_s"], 2), "met" if v["read_s"] < GOAL_READ_S else
              "missed"] for name, v in y["retentions"].items()]
    return "\n".join([
        f"{measured_on(document)}: {r['partitions']:,} partitions, one change per micro-batch; the maintenance job "
        f"every {r['every']:,} changes on the first warehouse (its tables' retention {r['window_s']} s for the run).",
        "", markdown_table(["changes", "maintained: read s", "data files", "log entries", "unmaintained: read s",
                            "data files", "log entries"], rows), "",
        f"Maintenance rounds: median {fmt_number(statistics.median(rounds), 2) if rounds else '–'} s, "
        f"longest {fmt_number(max(rounds), 2) if rounds else '–'} s. The unmaintained warehouse maintained "
        f"once at the end, keeping all {sum(r['all_kept']['log_entries'].values()):,} log entries: read "
        f"{fmt_number(r['all_kept']['read_s'], 3)} s ({r['all_kept']['data_files']:,} data files): "
        f"opening `records` there took {fmt_number(r['all_kept']['open_records_s'] * 1000, 1)} ms against "
        f"{fmt_number(points['maintained'][-1]['open_records_s'] * 1000, 1)} ms in the maintained one: "
        f"{y['seconds_per_log_entry'] * 1e6:.2f} µs per log entry.", "",
        "A year at one change a second (the maintained read, plus listing what the retention keeps):", "",
        markdown_table(["retention", "log entries a read lists", "read s", f"goal < {GOAL_READ_S:g} s"], years)])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    points = document["results"]["points"]
    series = {w: [(p["changes"], p["read_s"]) for p in ps] for w, ps in points.items()}
    return [line_chart(plots_dir / "history.png", "Reading the newest cut as history grows", series,
                       "changes (one micro-batch each)", "seconds", subtitle=document["machine"]["date"][:10],
                       log_x=False, log_y=False, references={"goal": GOAL_READ_S})]
