"""Overload: 4× the sustainable write rate for a minute, open loop, against a 3-voter quorum.

First the sustainable rate S is measured (closed loop, 64 writers, one 100-byte record each). Then
two open-loop writers (``bench.overload_load``) append at 4 × S in all over pipelined wire
connections for the overload window, whatever the answers; then at 0.8 × S to watch the recovery.
Reported: what was acknowledged and what was shed (REQUEST_TIMED_OUT, retriable, refused at once),
every voter's resident memory before and at its peak, the seconds after the overload until the
acknowledged rate is back to the offered one, and whether every acknowledged record is in the log
of a majority of the voters (read from their segment files once the voters have stopped).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness.plots import line_chart
from bench.harness.procs import ChildProcess, python_module_command
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.workload import Load
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "overload"
TITLE = "Overload: 4x the sustainable write rate, open loop, then back to normal"
REQUIRES: tuple[str, ...] = ()

LOAD_PROCESSES = 2
OVERLOAD_FACTOR = 4.0
RECOVERY_FACTOR = 0.8


@dataclass(frozen=True)
class Settings:
    overload_s: float
    recovery_s: float


QUICK = Settings(overload_s=15, recovery_s=8)
FULL = Settings(overload_s=60, recovery_s=15)


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class MemorySampler:
    """Every voter's RSS twice a second, on a thread, until ``stop``."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.samples.append((time.monotonic(), {n: rss_mb(p) for n, p in self.pids.items()}))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def series(self, start: float, end: float, step: float = 5.0) -> dict[str, list[float]]:
        """Each voter's peak RSS per ``step`` seconds from ``start`` to ``end``: does it level off?"""
        out: dict[str, list[float]] = {n: [] for n in self.pids}
        t = start
        while t < end:
            for n, v in self.peak(t, t + step).items():
                out[n].append(v)
            t += step
        return out

    def peak(self, start: float, end: float) -> dict[str, float]:
        window = [s for t, s in self.samples if start <= t <= end]
        return {n: round(max((s[n] for s in window), default=0.0), 1) for n in self.pids}


def _open_loop(cluster: SparkraftCluster, wire: str, rate: float, seconds: float, tag: str) -> tuple[float, list[dict]]:
    procs = [ChildProcess(f"{tag}-{i}", python_module_command("bench.overload_load", "--wire", wire,
                                                              "--name", f"{tag}{i}"),
                          cluster._dir / f"{tag}-{i}.log", json_control=True).start() for i in range(LOAD_PROCESSES)]
    try:
        for p in procs:
            p.receive(60, "its start")
        begin = time.monotonic() + 0.5
        for p in procs:
            p.send({"cmd": "run", "begin": begin, "end": begin + seconds, "rate": rate / LOAD_PROCESSES})
        return begin, [p.receive(seconds + 60, "its appends") for p in procs]
    finally:
        for p in procs:
            p.stop(timeout=5)


def _per_second(parts: list[dict], key: str, seconds: int) -> list[int]:
    return [sum(p[key][i] for p in parts) for i in range(seconds)]


def _in_logs(cluster: SparkraftCluster, acked: set[bytes]) -> dict[int, int]:
    """For each voter, how many of ``acked`` its log holds (read from its files, the voter stopped)."""
    from quorum.log.file_log import FileLog
    from quorum.log.meta_properties import metadata_partition_dir

    found = {}
    for node_id in cluster.ports:
        log = FileLog(metadata_partition_dir(cluster.data_dir(node_id)))
        try:
            held = {r.rstrip(b".") for b in log.batches(log.start_offset, log.end_offset) if not b.control
                    for r in b.records}
        finally:
            log.close()
        found[node_id] = len(acked & held)
    return found


def run(ctx: Context) -> dict:
    settings = QUICK if ctx.quick else FULL
    cluster = SparkraftCluster(ctx.work_dir / "quorum")
    with ctx.progress.phase("start 3 voters"):
        cluster.__enter__()
    stopped = False
    try:
        with ctx.progress.phase("sustainable rate: 64 closed-loop writers, 6 s"):
            sustainable = cluster.throughput(Load(64, 1, 100), 6, 2)["records_per_s"]
        ctx.progress.line(f"  sustainable: {sustainable:,.0f} writes/s")
        wire = cluster.wire_endpoint(cluster.leader_id())
        pids = {f"controller-{i}": cluster.voter(i).pid for i in cluster.ports}
        sampler = MemorySampler(pids)
        time.sleep(1.5)
        before = {n: round(rss_mb(p), 1) for n, p in pids.items()}
        rate = OVERLOAD_FACTOR * sustainable
        with ctx.progress.phase(f"overload: {rate:,.0f} appends/s offered for {settings.overload_s:g} s"):
            begin, overload = _open_loop(cluster, wire, rate, settings.overload_s, "over")
        peak = sampler.peak(begin, begin + settings.overload_s + 5)
        calm = RECOVERY_FACTOR * sustainable
        with ctx.progress.phase(f"recovery: {calm:,.0f} appends/s offered for {settings.recovery_s:g} s"):
            recovery_begin, recovery = _open_loop(cluster, wire, calm, settings.recovery_s, "calm")
        sampler.stop()
        series = sampler.series(begin, recovery_begin + settings.recovery_s)
        after = {n: round(rss_mb(p), 1) for n, p in pids.items()}
        cluster.__exit__(None, None, None)
        stopped = True
        acked = {i.encode() for p in overload + recovery for i in p["acked_ids"]}
        with ctx.progress.phase(f"look for the {len(acked):,} acknowledged records in the voters' logs"):
            in_logs = _in_logs(cluster, acked)
    finally:
        if not stopped:
            cluster.__exit__(None, None, None)
    n_over, n_calm = int(settings.overload_s), int(settings.recovery_s)
    calm_acked = _per_second(recovery, "acked_per_s", n_calm)
    back = next((i for i, a in enumerate(calm_acked) if a >= 0.95 * calm), None)
    majority = sum(1 for v in in_logs.values() if v == len(acked)) >= 2
    result = {
        "settings": {"overload_s": settings.overload_s, "recovery_s": settings.recovery_s,
                     "factor": OVERLOAD_FACTOR, "recovery_factor": RECOVERY_FACTOR},
        "sustainable_per_s": sustainable, "offered_per_s": rate,
        "overload": {"acked_per_s": _per_second(overload, "acked_per_s", n_over),
                     "shed_per_s": _per_second(overload, "shed_per_s", n_over),
                     "failed": sum(sum(p["failed_per_s"]) for p in overload),
                     "not_sent": sum(p["not_sent"] for p in overload),
                     "unanswered": sum(p["unanswered"] for p in overload)},
        "recovery": {"offered_per_s": calm, "acked_per_s": calm_acked,
                     "shed": sum(sum(p["shed_per_s"]) for p in recovery),
                     "seconds_to_offered_rate": back},
        "rss_mb": {"before": before, "peak_during_overload": peak, "after": after, "peak_per_5s": series},
        "acknowledged": len(acked), "acknowledged_in_log": in_logs, "none_lost": majority,
    }
    o = result["overload"]
    ctx.progress.line(f"  overload: {sum(o['acked_per_s']) / n_over:,.0f} acked/s, {sum(o['shed_per_s']) / n_over:,.0f} "
                      f"shed/s; RSS before {before}, peak {peak}; back to the offered rate after {back} s; "
                      f"every acknowledged record on a majority: {majority}")
    return result


def report(document: dict) -> str:
    r = document["results"]
    o, rec, rss = r["overload"], r["recovery"], r["rss_mb"]
    n = len(o["acked_per_s"]) or 1
    in_log = {str(k): v for k, v in r["acknowledged_in_log"].items()}  # (JSON makes the ids strings)
    rows = [[name, rss["before"][name], rss["peak_during_overload"][name], rss["after"][name],
             f"{in_log[name.removeprefix('controller-')]:,}"] for name in rss["before"]]
    return "\n".join([
        f"{measured_on(document)}. Sustainable: {fmt_number(r['sustainable_per_s'])} writes/s (64 closed-loop "
        f"writers); offered {fmt_number(r['offered_per_s'])}/s ({r['settings']['factor']:g}×) open loop for "
        f"{r['settings']['overload_s']:g} s, then {fmt_number(rec['offered_per_s'])}/s for "
        f"{r['settings']['recovery_s']:g} s.",
        "",
        f"- During the overload: {fmt_number(sum(o['acked_per_s']) / n)} acknowledged/s, "
        f"{fmt_number(sum(o['shed_per_s']) / n)} shed/s (REQUEST_TIMED_OUT, retriable), "
        f"{o['failed']:,} failed otherwise, {o['unanswered']:,} never answered, "
        f"{o['not_sent']:,} not sent (client backlog full).",
        f"- After it: the offered {fmt_number(rec['offered_per_s'])}/s acknowledged again after "
        f"{rec['seconds_to_offered_rate']} s; {rec['shed']:,} shed.",
        f"- Every one of the {r['acknowledged']:,} acknowledged records is in a majority of the logs: "
        f"{'yes' if r['none_lost'] else '**no**'}.",
        "",
        markdown_table(["voter", "RSS before MB", "peak during overload MB", "after MB", "acknowledged records in its log"],
                       rows),
        "",
        "Peak RSS per 5 s from the start of the overload (MB): " + "; ".join(
            f"{name} {', '.join(f'{v:g}' for v in values)}" for name, values in rss.get("peak_per_5s", {}).items()),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    r = document["results"]
    o, rec = r["overload"], r["recovery"]
    n = len(o["acked_per_s"])
    series = {"acknowledged/s": [(i + 1, v) for i, v in enumerate(o["acked_per_s"] + rec["acked_per_s"])],
              "shed/s": [(i + 1, v) for i, v in enumerate(o["shed_per_s"] + [0] * len(rec["acked_per_s"]))]}
    where = f"{document['machine']['cpu_count']} CPUs, {document['machine']['date'][:10]}, {document['mode']} mode"
    return [line_chart(plots_dir / "overload.png", f"Overload ({n} s at 4x), then recovery", series,
                       "second", "appends/s", subtitle=where, log_x=False, log_y=False,
                       references={"sustainable": r["sustainable_per_s"]})]
