"""Apache Kafka's brokers on sparkraft's controllers, beside the same brokers on Apache Kafka's own
controllers, in one run on one machine (issue 42).

Both quorums are three controller processes on 127.0.0.1 (sparkraft's answering Kafka's protocol on
a second controller listener; Kafka 4.4's with a static voter set), each with three Kafka 4.4 brokers
(tests/apache_kafka.py's KafkaBrokers, the same settings for both). Measured, from the brokers' own
logs where Kafka logs the moment:

- **registration to unfenced**: each broker's "is now STARTING" (it starts registering) to "has been
  unfenced" (RUNNING), the three started at once;
- **controlled shutdown**: with a topic of N partitions at replication factor 3 (each broker leads
  a third), SIGTERM to one broker: "Beginning controlled shutdown" to "asked us to exit controlled
  shutdown" (every leadership moved away), and SIGTERM to the process's exit;
- **controller failover**: SIGKILL of the active controller to every broker following the new
  leader (each broker's Raft client logs its transition to the new epoch);
- **producing through a failover**: tests/java/NumberedClients.java sends as fast as it can
  (acks=all, idempotent) while the active controller is SIGKILLed 3 s in: throughput, and the p50 and
  p99 of send-to-ack; then every partition is read back and each acknowledged message must be there.
- **admin writes through a broker**: bench/kafka/AdminWrites.java, Kafka's AdminClient with 1 and
  16 writers, each making one write at a time (IncrementalAlterConfigs of a topic's retention.ms;
  CreateTopics of one partition): writes a second, p50 and p99. The broker forwards each to the
  active controller in an Envelope, as it does to Kafka's controllers.

Goal (issue 42): within 1.5x of Apache Kafka's controllers on each, and no acknowledged message lost;
(issue 60) admin writes at least 8x Kafka's controllers' throughput, with a lower p50.
sparkraft's controllers are reached on their one port (the quorum, sparkraft's clients and Kafka's
brokers alike).
--quick: 300 partitions and 30,000 messages; full: 3,000 partitions and 200,000 messages.
"""
from __future__ import annotations

import datetime
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.procs import free_ports
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import percentile
from bench.suite import Context

NAME = "kafka_brokers"
TITLE = "Apache Kafka's brokers on sparkraft's controllers, beside Kafka's own controllers"
REQUIRES: tuple[str, ...] = ()
GOAL_RATIO = 1.5
ADMIN_GOAL = 8.0  # admin writes through a broker: at least this many times Kafka's controllers' writes a second
ADMIN_WRITERS = (1, 16)
ADMIN_WRITES = Path(__file__).resolve().parent / "kafka" / "AdminWrites.java"
BROKERS = (101, 102, 103)
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def _harness():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests import apache_kafka

    return apache_kafka


def _times(log: str, needle: str) -> list[float]:
    """The wall-clock times (seconds since the epoch) of the broker log lines holding ``needle``."""
    out = []
    for line in log.splitlines():
        if needle in line:
            m = LOG_TIME.match(line)
            if m:
                when = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
                out.append(when.timestamp())
    return out


class _Quorum:
    """Three controllers: sparkraft's (``kind`` "sparkraft") or Apache Kafka's ("kafka")."""

    def __init__(self, kind: str, work: Path):
        self.kind, self.work = kind, work
        work.mkdir(parents=True)
        ak = _harness()
        if kind == "sparkraft":
            from bench.sparkraft_cluster import SparkraftCluster
            from quorum.log.meta_properties import random_cluster_id

            self.cluster_id = random_cluster_id()
            self.sr = SparkraftCluster(work / "controllers", raft_only=False, cluster_id=self.cluster_id)
            self.listener = "CONTROLLER"  # the controllers' one port
            self.ports = self.sr.ports
        else:
            (work / "controllers").mkdir()
            self.kq = ak.KafkaQuorum(work / "controllers", free_ports(4), brokers=0)
            self.cluster_id = _random_kafka_cluster_id()
            self.listener = "CONTROLLER"
            self.ports = self.kq.controller_ports

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())

    @property
    def bootstrap_controller(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    def start(self) -> None:
        if self.kind == "sparkraft":
            self.sr.__enter__()
        else:
            self.kq.format(self.cluster_id)
            self.kq.start_all()

    def leader(self) -> int:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            out = _harness().kafka_tool("kafka-metadata-quorum", "--bootstrap-controller", self.bootstrap_controller,
                                        "describe", "--status")
            m = re.search(r"LeaderId:\s+(\d+)", out.stdout)
            if out.returncode == 0 and m:
                return int(m.group(1))
            time.sleep(0.5)
        raise RuntimeError(f"no leader among the {self.kind} controllers")

    def kill(self, node_id: int) -> None:
        if self.kind == "sparkraft":
            self.sr.voter(node_id).popen.send_signal(signal.SIGKILL)
            self.sr.voter(node_id).popen.wait(30)
        else:
            self.kq.kill(node_id)

    def restart(self, node_id: int) -> None:
        if self.kind == "sparkraft":
            self.sr._start(node_id)
        else:
            self.kq.start(node_id)

    def close(self) -> None:
        if self.kind == "sparkraft":
            self.sr.__exit__()
        else:
            self.kq.stop_all()


def _random_kafka_cluster_id() -> str:
    from quorum.log.meta_properties import random_cluster_id

    return random_cluster_id()


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")


def _running(brokers, b: int, since: int) -> bool:
    return len(_times(brokers.log(b), "has been unfenced")) > since


def _under_replicated(brokers, topic: str) -> bool:
    out = _harness().kafka_tool("kafka-topics", "--bootstrap-server", brokers.bootstrap_server, "--describe",
                                "--topic", topic, "--under-replicated-partitions")
    return out.returncode == 0 and not out.stdout.strip()


def _one_system(kind: str, ctx: Context, partitions: int, messages: int, admin_seconds: int) -> dict:
    ak = _harness()
    work = ctx.work_dir / kind
    quorum = _Quorum(kind, work)
    out: dict = {}
    brokers = None
    try:
        with ctx.progress.phase(f"{kind}: three controllers"):
            quorum.start()
            quorum.leader()
        root = work / "brokers"
        root.mkdir()
        brokers = ak.KafkaBrokers(root, quorum.cluster_id, quorum.voters, quorum.listener,
                                  dict(zip(BROKERS, free_ports(len(BROKERS)))))
        brokers.format()
        with ctx.progress.phase(f"{kind}: three Kafka brokers register and are unfenced"):
            for b in BROKERS:
                brokers.start(b)
            _wait(lambda: all(_running(brokers, b, 0) for b in BROKERS), 300, "three brokers unfenced")
            out["register_to_unfenced_s"] = [
                _times(brokers.log(b), "has been unfenced")[0] - _times(brokers.log(b), "is now STARTING")[0]
                for b in BROKERS]
        with ctx.progress.phase(f"{kind}: a topic of {partitions:,} partitions, RF 3"):
            created = ak.kafka_tool("kafka-topics", "--bootstrap-server", brokers.bootstrap_server, "--create",
                                    "--topic", "bench", "--partitions", str(partitions), "--replication-factor", "3",
                                    "--config", "min.insync.replicas=2", timeout=600)
            if created.returncode != 0:
                raise RuntimeError(created.stderr[-2000:])
            _wait(lambda: _under_replicated(brokers, "bench"), 600, "every replica in sync")
        with ctx.progress.phase(f"{kind}: controlled shutdown of broker 101"):
            started = time.time()
            brokers.stop(101, timeout=600)
            exited = time.time() - started
            log = brokers.log(101)
            out["controlled_shutdown_s"] = _times(log, "asked us to exit controlled shutdown")[-1] - \
                _times(log, "Beginning controlled shutdown")[-1]
            out["shutdown_to_exit_s"] = exited
            brokers.start(101)
            _wait(lambda: _running(brokers, 101, 1), 300, "broker 101 back")
            _wait(lambda: _under_replicated(brokers, "bench"), 600, "every replica in sync again")
        with ctx.progress.phase(f"{kind}: SIGKILL of the active controller"):
            leader = quorum.leader()
            before = {b: len(_times(brokers.log(b), "Completed transition to FollowerState")) for b in BROKERS}
            killed = time.time()
            quorum.kill(leader)
            _wait(lambda: all(len(_times(brokers.log(b), "Completed transition to FollowerState")) > before[b]
                              for b in BROKERS), 120, "every broker following a new leader")
            out["failover_s"] = [_times(brokers.log(b), "Completed transition to FollowerState")[-1] - killed
                                 for b in BROKERS]
            quorum.restart(leader)
            time.sleep(5)
        with ctx.progress.phase(f"{kind}: {messages:,} messages through another failover"):
            out["produce"] = _produce_through_failover(quorum, brokers, work, messages)
        out["admin"] = {}
        for what in ("configs", "creates"):
            for writers in ADMIN_WRITERS:
                with ctx.progress.phase(f"{kind}: admin writes through a broker, {what}, {writers} writer(s)"):
                    out["admin"][f"{what}/{writers}"] = _admin_writes(brokers, what, writers, admin_seconds)
    finally:
        if brokers is not None:
            brokers.close()
        quorum.close()
    return out


def _produce_through_failover(quorum, brokers, work: Path, messages: int) -> dict:
    ak = _harness()
    created = ak.kafka_tool("kafka-topics", "--bootstrap-server", brokers.bootstrap_server, "--create", "--topic",
                            "produce", "--partitions", "12", "--replication-factor", "3", "--config",
                            "min.insync.replicas=2")
    if created.returncode != 0:
        raise RuntimeError(created.stderr[-2000:])
    _wait(lambda: _under_replicated(brokers, "produce"), 300, "the producer's topic in sync")
    acks = work / "acks.txt"
    with open(acks, "w") as a:
        started = time.monotonic()
        producer = ak.java_clients("produce", brokers.bootstrap_server, "produce", str(messages), "12", "0",
                                   stdout=a)
        _wait(lambda: acks.exists() and acks.stat().st_size > 0, 120, "the first acknowledgements")
        time.sleep(3)
        quorum.kill(quorum.leader())
        if producer.wait(900) != 0:
            raise RuntimeError("the producer failed")
        seconds = time.monotonic() - started
    lines = acks.read_text().splitlines()
    latencies = [float(line.split()[4]) for line in lines if line.startswith("ACK ")]
    acked = {int(line.split()[3]): (int(line.split()[1]), int(line.split()[2])) for line in lines if line.startswith("ACK ")}
    read = work / "read.txt"
    with open(read, "w") as r:
        if ak.java_clients("read", brokers.bootstrap_server, "produce", stdout=r).wait(600) != 0:
            raise RuntimeError("reading the topic back failed")
    in_log = {}
    for line in read.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0].isdigit():
            in_log[int(parts[2])] = (int(parts[0]), int(parts[1]))
    lost = sum(1 for v, where in acked.items() if in_log.get(v) != where)
    return {"messages": messages, "acked": len(acked), "lost": lost, "seconds": seconds,
            "per_s": len(acked) / seconds, "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99)}


def _admin_writes(brokers, what: str, writers: int, seconds: int) -> dict:
    """bench/kafka/AdminWrites.java through the brokers: writes a second, p50 and p99 in ms."""
    ak = _harness()
    folder = ak.need_kafka()
    out = subprocess.run(ak.java("-Xmx512m", "-cp", f"{folder}/*", str(ADMIN_WRITES), brokers.bootstrap_server, what,
                                 str(writers), str(seconds)), capture_output=True, text=True, timeout=seconds + 300)
    if out.returncode != 0 or "DONE" not in out.stdout:
        raise RuntimeError(f"AdminWrites {what} {writers} failed: {out.stderr[-2000:]}")
    ops = int(re.search(r"^OPS (\d+)$", out.stdout, re.M).group(1))
    latencies = [float(v) for v in re.findall(r"^LATENCY_MS (\S+)$", out.stdout, re.M)]
    return {"ops": ops, "per_s": ops / seconds, "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99)}


def run(ctx: Context) -> dict:
    partitions, messages = (300, 30_000) if ctx.quick else (3_000, 200_000)
    admin_seconds = 5 if ctx.quick else 15
    from bench.kafka_log_format import measure

    results: dict = {"partitions": partitions, "systems": {}}
    with ctx.progress.phase("the metadata log in Kafka's format: encoded on the way out, or stored"):
        results["log_format"] = measure(200_000 if ctx.quick else 2_000_000)
    for kind in ("sparkraft", "kafka"):
        results["systems"][kind] = _one_system(kind, ctx, partitions, messages, admin_seconds)
    return results


def _ratio(ours, theirs):
    return None if not ours or not theirs else ours / theirs


def _figures(document: dict) -> list[tuple[str, float, float]]:
    s = document["results"]["systems"]
    sr, k = s["sparkraft"], s["kafka"]
    return [
        ("registration to unfenced, slowest broker: s", max(sr["register_to_unfenced_s"]),
         max(k["register_to_unfenced_s"])),
        ("controlled shutdown (leaderships moved): s", sr["controlled_shutdown_s"], k["controlled_shutdown_s"]),
        ("SIGTERM to exit: s", sr["shutdown_to_exit_s"], k["shutdown_to_exit_s"]),
        ("failover, last broker following: s", max(sr["failover_s"]), max(k["failover_s"])),
        ("producing through a failover: p50 ms", sr["produce"]["p50_ms"], k["produce"]["p50_ms"]),
        ("producing through a failover: p99 ms", sr["produce"]["p99_ms"], k["produce"]["p99_ms"]),
        ("producing through a failover: messages/s (higher is better)", sr["produce"]["per_s"], k["produce"]["per_s"]),
        *((f"admin {key.replace('/', ', ')} writer(s): {stat}", sr["admin"][key][field], k["admin"][key][field])
          for key in sr.get("admin", {}) for stat, field in (("writes/s (higher is better)", "per_s"),
                                                             ("p50 ms", "p50_ms"), ("p99 ms", "p99_ms"))),
    ]


def report(document: dict) -> str:
    r = document["results"]
    rows = [[what, fmt_number(ours, 2), fmt_number(theirs, 2), fmt_number(_ratio(ours, theirs), 2)]
            for what, ours, theirs in _figures(document)]
    lost = {k: v["produce"]["lost"] for k, v in r["systems"].items()}
    f = r["log_format"]
    fmt = [[f"{f['partitions']:,}", fmt_number(f["export_s"], 1), fmt_number(f["decode_sparkraft_s"], 1),
            fmt_number(f["decode_kafka_s"], 1), fmt_number(f["sparkraft_bytes"] / 1e6, 0),
            fmt_number(f["kafka_bytes"] / 1e6, 0)]]
    return "\n".join([
        f"{measured_on(document)}: three Kafka 4.4 brokers on three sparkraft controllers, and the same three on "
        f"three Kafka 4.4 controllers, one after the other; a topic of {r['partitions']:,} partitions at RF 3.", "",
        markdown_table(["", "on sparkraft", "on Kafka's controllers", "ratio"], rows), "",
        f"Acknowledged messages lost: {lost}. Goal: within {GOAL_RATIO:g}x of Kafka's controllers on each, "
        f"none lost.", "",
        *([verdict, ""] if (verdict := _admin_verdict(r["systems"])) else []),
        "The metadata log in Kafka's format, for a creation of N partitions (one process, batches of 1,000):", "",
        markdown_table(["partitions", "export (encode on the way out): s", "sparkraft decodes its own: s",
                        "sparkraft would decode Kafka's: s", "sparkraft's MB", "Kafka's MB"], fmt),
    ])


def _admin_verdict(systems: dict) -> str:
    sr, k = systems["sparkraft"].get("admin"), systems["kafka"].get("admin")
    if not sr or not k:
        return ""  # a run from before admin writes were measured
    ratios = {key: _ratio(sr[key]["per_s"], k[key]["per_s"]) for key in sr}
    lower_p50 = all(sr[key]["p50_ms"] < k[key]["p50_ms"] for key in sr)
    met = all(r is not None and r >= ADMIN_GOAL for r in ratios.values()) and lower_p50
    shown = ", ".join(f"{key.replace('/', ' x')}: {fmt_number(r, 1)}x" for key, r in ratios.items())
    return (f"Admin writes through a broker, sparkraft's writes a second over Kafka's controllers': {shown}; "
            f"p50 lower everywhere: {lower_p50}. Goal (at least {ADMIN_GOAL:g}x, lower p50): "
            f"{'met' if met else 'missed'}.")


def plot(document: dict, plots_dir: Path) -> list[Path]:
    figures = [f for f in _figures(document) if "messages/s" not in f[0] and not f[0].startswith("admin")]
    paths = [grouped_bar_chart(
        plots_dir / "kafka_brokers.png", "Kafka's brokers: on sparkraft vs on Kafka's controllers",
        [w.split(":")[0].replace(", ", "\n") for w, _o, _t in figures],
        {"on sparkraft": [o for _w, o, _t in figures], "on Kafka's controllers": [t for _w, _o, t in figures]},
        "seconds or ms", subtitle=measured_on(document), value_format="{:.2f}")]
    admin = [f for f in _figures(document) if f[0].startswith("admin") and "writes/s" in f[0]]
    if admin:
        paths.append(grouped_bar_chart(
            plots_dir / "kafka_brokers_admin.png", "Admin writes through a Kafka broker (Kafka's AdminClient)",
            [w.split(":")[0].replace("admin ", "").replace(", ", "\n") for w, _o, _t in admin],
            {"on sparkraft": [o for _w, o, _t in admin], "on Kafka's controllers": [t for _w, _o, t in admin]},
            "writes a second", subtitle=measured_on(document), value_format="{:.0f}"))
    return paths
