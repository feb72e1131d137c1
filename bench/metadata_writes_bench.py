"""Metadata writes: the active controller's request path against etcd's, 3 members each, fsync on.

A metadata store's users write metadata, not raw log records. Both systems get the same closed-loop
load from the same generator (``bench.sparkraft_load``: writers in two client processes, each
writer its own key or topic, each waiting for its write to be acknowledged):

- ``alter-config`` against ``put``: an IncrementalAlterConfigs setting one config of the writer's
  own topic through ControllerClient (one ConfigRecord, committed and applied by the active
  controller before it answers) against an etcd ``KV.Put`` of a 100-byte value (committed and
  applied to etcd's store);
- ``create-delete`` against ``txn``: CreateTopics of one partition, RF 3 (a TopicRecord and a
  PartitionRecord), then DeleteTopics of it, against an etcd transaction putting as many keys (a
  topic key and a partition key), then one deleting them.

Three brokers heartbeat from this process, so topics can be placed. Reported per concurrency:
writes/s and latency of each operation, and sparkraft ÷ etcd.

- ``kafka-alter-config``, sparkraft alone: the same config in Kafka's protocol, as a Kafka client
  sends it, to the active controller's own Kafka listener and through a ``sparkraft broker start``
  process's listener, which forwards it to the active controller and answers once its own image
  holds the write (read-your-writes). The difference of the p50s is what forwarding adds.

Goals (issue 44): IncrementalAlterConfigs ≥ 1.0× etcd's Puts at every concurrency and its p50 at
one writer ≤ etcd's; CreateTopics ≥ 0.5× etcd's transactions; forwarding through a broker adds
≤ 1 ms at p50.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bench.harness.plots import grouped_bar_chart
from bench.harness.procs import ChildProcess, python_module_command
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import ratio
from bench.harness.workload import Load
from bench.suite import Context

NAME = "metadata_writes"
TITLE = "Metadata writes: IncrementalAlterConfigs and CreateTopics against etcd's Put and Txn (3 members, fsync on)"
REQUIRES: tuple[str, ...] = ()

CONCURRENCY = (1, 16, 64, 256)
VALUE_BYTES = 100
BROKERS = 3
# (what is compared, sparkraft's op, its operation names, etcd's op, its operation names)
PAIRS = (
    ("a config against a Put", "alter-config", ("alter-config",), "put", ("put",)),
    ("a topic against a transaction", "create-delete", ("create", "delete"), "txn", ("create", "delete")),
)
GOALS = {"alter-config": 1.0, "create": 0.5}  # sparkraft ÷ etcd, at every concurrency
KAFKA_CONCURRENCY = (1, 16)
# ControllerClient on the wire; the active controller's own Kafka listener; a broker's, forwarding
KAFKA_PATHS = ("wire", "controller", "broker")
GOAL_FORWARDING_MS = 1.0
BROKER_PROCESS = 201


@dataclass(frozen=True)
class Settings:
    seconds: float
    warmup: float


QUICK = Settings(seconds=3, warmup=1)
FULL = Settings(seconds=10, warmup=2)


def _measure(system: dict, cluster, op: str, settings: Settings, ctx: Context, label: str) -> None:
    for c in CONCURRENCY:
        with ctx.progress.phase(f"{label}: {op}, {c} writers, {settings.seconds:g} s"):
            r = cluster.throughput(Load(c, 1, VALUE_BYTES), settings.seconds, settings.warmup, op=op)
        point = system.setdefault("by_concurrency", {}).setdefault(str(c), {})
        for name, measured in r["by_op"].items():
            point[name] = {**measured, "errors": r["errors"]}
        point.setdefault("cpu_percent", {})[op] = r.get("cpu_percent")
        ctx.progress.line("  " + ", ".join(f"{name} {m['per_s']:,.0f}/s p50 {m['latency_ms'].get('p50', 0):.2f} ms"
                                           for name, m in r["by_op"].items()))


def _broker_process(work: Path, cluster) -> tuple[ChildProcess, int]:
    """A ``sparkraft broker start`` process with a PLAINTEXT Kafka listener, and its port (the
    controller benchmark's broker configuration)."""
    from bench.controller_bench import _broker_config
    from bench.kafka_bench import _broker_port

    voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in cluster.ports.items())
    config = _broker_config(work, BROKER_PROCESS, voters)
    proc = ChildProcess(f"broker-{BROKER_PROCESS}", python_module_command(
        "sparkraft", "broker", "start", "--config", str(config)), work / f"broker-{BROKER_PROCESS}.log").start()
    return proc, _broker_port(work, BROKER_PROCESS)


def _measure_kafka(system: dict, cluster, broker_port: int, settings: Settings, ctx: Context) -> None:
    ports = {"controller": cluster.kafka_ports[cluster.leader_id()], "broker": broker_port}
    for c in KAFKA_CONCURRENCY:
        for path in KAFKA_PATHS:
            op = "alter-config" if path == "wire" else "kafka-alter-config"
            with ctx.progress.phase(f"sparkraft: a config, {c} writers, {settings.seconds:g} s: "
                                    + ("ControllerClient" if path == "wire" else f"Kafka's protocol to the {path}")):
                r = cluster.throughput(Load(c, 1, VALUE_BYTES), settings.seconds, settings.warmup, op=op,
                                       kafka=f"127.0.0.1:{ports[path]}" if path in ports else None)
            measured = r["by_op"].get(op, {"per_s": 0.0, "latency_ms": {}})
            system.setdefault("kafka", {}).setdefault(str(c), {})[path] = {**measured, "errors": r["errors"]}
            ctx.progress.line(f"  {path}: {measured['per_s']:,.0f}/s p50 "
                              f"{measured['latency_ms'].get('p50', 0):.2f} ms")


def _sparkraft(ctx: Context, settings: Settings, system: dict) -> None:
    from bench.controller_bench import BrokerFleet, wait_until
    from bench.sparkraft_cluster import SparkraftCluster

    work = ctx.work_dir / "sparkraft"
    with ctx.progress.phase(f"sparkraft: start 3 controllers and {BROKERS} brokers"):
        cluster = SparkraftCluster(work, raft_only=False, kafka_listeners=True).__enter__()
    broker = None
    try:
        fleet = BrokerFleet(cluster.bootstrap, cluster.client.describe_quorum().cluster_id, count=BROKERS)
        fleet.start()
        try:
            wait_until(fleet.unfenced, 60, f"{BROKERS} brokers unfenced", interval=0.1)
            for _, ours, _, _, _ in PAIRS:
                _measure(system, cluster, ours, settings, ctx, "sparkraft")
            # Only now: a broker process fetches every write, on the same 2 cores as the quorum.
            with ctx.progress.phase("sparkraft: start a broker process"):
                broker, broker_port = _broker_process(work, cluster)
                broker.wait_for_port("127.0.0.1", broker_port, timeout=60)
            _measure_kafka(system, cluster, broker_port, settings, ctx)
        finally:
            fleet.stop()
    finally:
        if broker is not None:
            broker.stop(timeout=10)
        cluster.__exit__(None, None, None)


def _etcd(ctx: Context, settings: Settings, system: dict) -> None:
    from bench.peers.etcd_cluster import EtcdCluster

    with ctx.progress.phase("etcd: start 3 members"):
        cluster = EtcdCluster(ctx.work_dir / "etcd").__enter__()
    try:
        for _, _, _, theirs, _ in PAIRS:
            _measure(system, cluster, theirs, settings, ctx, "etcd")
    finally:
        cluster.__exit__(None, None, None)


def run(ctx: Context) -> dict:
    from bench.peers.etcd_cluster import etcd_binary

    settings = QUICK if ctx.quick else FULL
    results: dict = {"settings": {"seconds": settings.seconds, "warmup": settings.warmup, "value_bytes": VALUE_BYTES,
                                  "concurrency": list(CONCURRENCY), "brokers": BROKERS,
                                  "kafka_concurrency": list(KAFKA_CONCURRENCY)},
                     "systems": {"sparkraft": {"label": "sparkraft (fsync on)", "errors": []},
                                 "etcd": {"label": "etcd (Debian, fsync on)", "errors": []}}}
    for key, measure in (("sparkraft", _sparkraft), ("etcd", _etcd)):
        system = results["systems"][key]
        if key == "etcd" and etcd_binary() is None:
            system["errors"].append("etcd is not installed (apt-get install etcd-server): not measured")
            ctx.progress.line("etcd not installed: skipped (apt-get install etcd-server)")
            continue
        try:
            measure(ctx, settings, system)
        except Exception as e:
            ctx.progress.line(f"{system['label']} FAILED: {type(e).__name__}: {e}")
            system["errors"].append(f"{type(e).__name__}: {e}")
    return results


def _get(system: dict, c: int, op: str, *path):
    value = system.get("by_concurrency", {}).get(str(c), {}).get(op)
    for p in path:
        value = None if value is None else value.get(p)
    return value


def _ratio_text(got, goal) -> Optional[str]:
    """A ratio with its goal; None where there is no ratio (etcd not run: fmt_number gives None)."""
    text = None if got is None else fmt_number(got, 2)
    return None if text is None else text + (f" (goal ≥ {goal:g})" if goal is not None else "")


def report(document: dict) -> str:
    results = document["results"]
    ours, etcd = results["systems"]["sparkraft"], results["systems"]["etcd"]
    lines = [f"{measured_on(document)}: 3 members each, fsync on, closed-loop writers in two client processes "
             f"(each writer its own topic or key), {results['settings']['seconds']:g} s per point.", ""]
    for title, _, our_ops, _, their_ops in PAIRS:
        rows = []
        for c in results["settings"]["concurrency"]:
            for mine, theirs in zip(our_ops, their_ops):
                goal = GOALS.get(mine)
                got = ratio(_get(ours, c, mine, "per_s"), _get(etcd, c, theirs, "per_s"))
                rows.append([c, mine, fmt_number(_get(ours, c, mine, "per_s")),
                             fmt_number(_get(ours, c, mine, "latency_ms", "p50"), 2),
                             fmt_number(_get(ours, c, mine, "latency_ms", "p99"), 2),
                             fmt_number(_get(etcd, c, theirs, "per_s")),
                             fmt_number(_get(etcd, c, theirs, "latency_ms", "p50"), 2),
                             fmt_number(_get(etcd, c, theirs, "latency_ms", "p99"), 2),
                             _ratio_text(got, goal)])
        lines += [f"**{title}**", "",
                  markdown_table(["writers", "sparkraft", "per s", "p50 ms", "p99 ms", "etcd per s", "p50 ms",
                                  "p99 ms", "sparkraft ÷ etcd"], rows), ""]
    kafka = ours.get("kafka", {})
    if kafka:
        rows = []
        for c in results["settings"].get("kafka_concurrency", KAFKA_CONCURRENCY):
            point = kafka.get(str(c), {})
            p50 = {path: point.get(path, {}).get("latency_ms", {}).get("p50") for path in KAFKA_PATHS}
            row = [c]
            for path in KAFKA_PATHS:
                row += [fmt_number(point.get(path, {}).get("per_s")), fmt_number(p50[path], 2)]
            for base in ("controller", "wire"):
                adds = p50["broker"] - p50[base] if p50["broker"] is not None and p50[base] is not None else None
                row.append(fmt_number(adds, 2))
            rows.append(row)
        lines += ["**a config through a broker (forwarded), with a broker process fetching every write**", "",
                  markdown_table(["writers", "ControllerClient per s", "p50 ms", "Kafka's protocol to the active "
                                  "controller per s", "p50 ms", "through a broker per s", "p50 ms",
                                  "forwarding adds ms (vs the controller's Kafka listener)", "(vs ControllerClient)"],
                                 rows), ""]
    lines.append("Goals: IncrementalAlterConfigs ≥ 1.0× etcd's Puts at every concurrency, with a p50 at one writer "
                 "≤ etcd's; CreateTopics of one partition ≥ 0.5× etcd's transactions of as many keys; forwarding "
                 f"through a broker adds ≤ {GOAL_FORWARDING_MS:g} ms at p50.")
    errors = [f"{s['label']}: {e}" for s in results["systems"].values() for e in s.get("errors", [])]
    lines += [f"Errors: {e}" for e in errors]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    results, machine = document["results"], document["machine"]
    ours, etcd = results["systems"]["sparkraft"], results["systems"]["etcd"]
    if not ours.get("by_concurrency"):
        return []
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    groups = [f"{c} writers" for c in results["settings"]["concurrency"]]
    series = {}
    for _, _, our_ops, _, their_ops in PAIRS:
        for mine, theirs in zip(our_ops, their_ops):
            if mine == "delete":
                continue  # the create's twin: the plot keeps to the goals' operations
            series[f"sparkraft {mine}"] = [_get(ours, c, mine, "per_s") for c in results["settings"]["concurrency"]]
            if etcd.get("by_concurrency"):
                series[f"etcd {theirs}"] = [_get(etcd, c, theirs, "per_s") for c in results["settings"]["concurrency"]]
    return [grouped_bar_chart(plots_dir / "metadata-writes.png", "Metadata writes/s, 3 members, fsync on", groups,
                              series, "writes/s", subtitle=where, value_format="{:,.0f}")]
