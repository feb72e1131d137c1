"""The active controller at scale: create, controlled shutdown, broker-failure recovery, controller
failover and memory, at 20,000 / 200,000 / 2,000,000 partitions (topics of 100 partitions, RF 3).

Each step starts from steady state (every voter holds the log, no process busy replaying), as
between events in a real cluster. Everything runs for real on loopback: three ``sparkraft controller start`` processes (metadata
controllers, fsync on, default timeouts), 28 brokers heartbeating through the broker lifecycle code
(threads of this process, one ControllerClient) and two ``sparkraft broker start`` processes.

- **create**: CreateTopics requests of 100 topics each, two in flight, until every partition is
  committed; partitions/s.
- **controlled shutdown**: SIGTERM one broker process; it heartbeats ``want_shutdown`` until the
  controller has moved all its leaderships. Time from SIGTERM until that is committed (the process
  then flushes its copy of the metadata log and exits; that time is recorded too).
- **recovery**: SIGKILL the other broker process; the controller fences it after
  ``broker.session.timeout.ms`` (9 s) and moves its leaderships in the same atomic operation.
  Time from SIGKILL until the committed image shows it fenced (detection included).
- **controller failover**: SIGKILL the active
  controller; time until a CreateTopics request is answered by the new one (its client follows
  NOT_CONTROLLER from a cold start).
- **memory**: resident set size of each controller process once the partitions exist.

Kafka's published KRaft figures at 2,000,000 partitions (32 s controlled shutdown, 37 s recovery from
an uncontrolled shutdown) are the reference line. Goals: <= 10 s, <= 15 s with the 9 s detection,
failover < 2 s at every size, < 2 GiB.
"""
from __future__ import annotations

import concurrent.futures
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness.plots import line_chart
from bench.harness.procs import ChildProcess, free_ports, python_module_command, wait_quiet
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "controller"
TITLE = "The active controller at 20k / 200k / 2M partitions (3 controllers, 30 brokers, loopback)"
REQUIRES: tuple[str, ...] = ()

PARTITIONS_PER_TOPIC = 100
REPLICATION_FACTOR = 3
TOPICS_PER_REQUEST = 100
REQUESTS_IN_FLIGHT = 2
SIMULATED_BROKERS = 28  # BrokerLifecycle threads; plus the two broker processes below
PROCESS_BROKERS = (129, 130)  # 129: controlled shutdown (SIGTERM), 130: SIGKILL
RACKS = ("rack-a", "rack-b", "rack-c")
SESSION_TIMEOUT_MS = 9000
KAFKA_CONTROLLED_SHUTDOWN_S = 32.0
KAFKA_RECOVERY_S = 37.0
GOAL_CONTROLLED_SHUTDOWN_S = 10.0
GOAL_RECOVERY_S = 15.0
GOAL_FAILOVER_S = 2.0
GOAL_RSS_GIB = 2.0
QUIET_TIMEOUT_S = 600  # how long steady state may take to reach after a step (brokers replaying 2M)

QUICK_SIZES = (20_000,)
FULL_SIZES = (20_000, 200_000, 2_000_000)


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class BrokerFleet:
    """Brokers 101.. (28 by default) as BrokerLifecycle threads: they register, get unfenced and heartbeat every
    2 s, as broker processes would, each over its own ControllerClient (its own connections), as
    each process has. One client shared by all would make their heartbeats take turns on one wire
    connection: behind a controller busy with large changes, 28 heartbeats in a row outlast the
    session timeout and the controller fences brokers that are alive."""

    def __init__(self, bootstrap: str, cluster_id: str, count: int = SIMULATED_BROKERS):
        from quorum.broker.lifecycle import BrokerLifecycle
        from quorum.controller import api
        from quorum.rpc.controller_client import ControllerClient
        from quorum.uuids import random_uuid

        self.clients = {b: ControllerClient(bootstrap, timeout=10, rpc_timeout=5)
                        for b in range(101, 101 + count)}
        self.brokers = [
            BrokerLifecycle(self.clients[b], b, cluster_id, random_uuid(),
                            (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 20000 + b),), RACKS[b % 3])
            for b in range(101, 101 + count)]
        self.threads = [threading.Thread(target=b.run, name=f"broker-{b.broker_id}", daemon=True)
                        for b in self.brokers]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def unfenced(self) -> bool:
        return all(b.state.broker_epoch >= 0 and not b.state.fenced for b in self.brokers)

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()
        for t in self.threads:
            t.join(5)
        for client in self.clients.values():
            client.close()


@dataclass
class Rig:
    """One cluster for one size: controllers, the fleet, the two broker processes."""

    cluster: SparkraftCluster
    fleet: BrokerFleet
    broker_procs: dict[int, ChildProcess]
    admin: object  # ControllerClient for the benchmark's own requests


def _broker_config(work: Path, broker_id: int, voters: str) -> Path:
    port = free_ports(1)[0]
    path = work / f"broker-{broker_id}.properties"
    path.write_text("\n".join([
        "process.roles=broker", f"node.id={broker_id}", f"controller.quorum.voters={voters}",
        f"listeners=PLAINTEXT://127.0.0.1:{port}", f"broker.rack={RACKS[broker_id % 3]}",
        f"metadata.log.dir={work / f'b{broker_id}'}", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}",
        ""]))
    return path


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(interval)


def start_rig(work: Path, ctx: Context, process_brokers: tuple[int, ...] = PROCESS_BROKERS,
              overrides: dict[str, str] | None = None, kafka_listeners: bool = False) -> Rig:
    from quorum.rpc.controller_client import ControllerClient

    cluster = SparkraftCluster(work / "controllers", raft_only=False, kafka_listeners=kafka_listeners,
                               overrides={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                          **(overrides or {})}).__enter__()
    try:
        info = cluster.client.describe_quorum()
        fleet = BrokerFleet(cluster.bootstrap, info.cluster_id)
        fleet.start()
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in cluster.ports.items())
        procs = {}
        for b in process_brokers:
            config = _broker_config(work, b, voters)
            procs[b] = ChildProcess(f"broker-{b}", python_module_command(
                "sparkraft", "broker", "start", "--config", str(config)), work / f"broker-{b}.log").start()
        admin = ControllerClient(cluster.bootstrap, timeout=120, rpc_timeout=120)
        expected = set(range(101, 101 + SIMULATED_BROKERS)) | set(process_brokers)
        wait_until(lambda: {b.broker_id for b in admin.describe_cluster().brokers if not b.fenced} >= expected,
              60, f"{len(expected)} brokers registered and unfenced", interval=0.2)
        return Rig(cluster, fleet, procs, admin)
    except BaseException:
        cluster.__exit__()
        raise


def stop_rig(rig: Rig) -> None:
    for p in rig.broker_procs.values():
        p.stop(timeout=5)
    rig.fleet.stop()
    rig.admin.close()
    rig.cluster.__exit__()


def create_partitions(rig: Rig, partitions: int, ctx: Context, first_topic: int = 0) -> float:
    from quorum.controller import api
    from quorum.errors import Errors

    """Topics t<first_topic>... of 100 partitions each, RF 3, until ``partitions`` more exist."""
    topics = first_topic + partitions // PARTITIONS_PER_TOPIC
    requests = [[api.CreatableTopic(f"t{i:06d}", PARTITIONS_PER_TOPIC, REPLICATION_FACTOR)
                 for i in range(start, min(topics, start + TOPICS_PER_REQUEST))]
                for start in range(first_topic, topics, TOPICS_PER_REQUEST)]
    done = [0]
    lock = threading.Lock()
    last_report = [time.monotonic()]

    def send(batch):
        results = rig.admin.create_topics(batch)
        bad = [r for r in results if r.error is not Errors.NONE]
        if bad:
            raise RuntimeError(f"create failed: {bad[0].name}: {bad[0].error.name}: {bad[0].message}")
        with lock:
            done[0] += len(batch) * PARTITIONS_PER_TOPIC
            if time.monotonic() - last_report[0] > 5:
                last_report[0] = time.monotonic()
                ctx.progress.line(f"  {done[0]:,} / {partitions:,} partitions committed")

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(REQUESTS_IN_FLIGHT) as pool:
        for f in [pool.submit(send, b) for b in requests]:
            f.result()
    return time.monotonic() - started


def _leaders(rig: Rig, broker_id: int, sample_topics: list[str]) -> int:
    return sum(1 for d in rig.admin.describe_topics(sample_topics) if not isinstance(d, Exception)
               for p in d.partitions if p.leader == broker_id)


def _controlled_shutdown(rig: Rig, sample: list[str]) -> dict:
    """SIGTERM until the controller has moved every leadership off the broker and committed that
    (it then marks the broker fenced): what Kafka's figure measures. The process exits after
    that, once it has flushed its copy of the metadata log; that time is reported beside it."""
    broker = PROCESS_BROKERS[0]
    led_before = _leaders(rig, broker, sample)
    proc = rig.broker_procs[broker]
    started = time.monotonic()
    proc.popen.terminate()

    def moved():
        return any(b.broker_id == broker and b.fenced for b in rig.admin.describe_cluster().brokers)

    wait_until(moved, 120, f"broker {broker}'s leaderships moved", interval=0.05)
    elapsed = time.monotonic() - started
    code = proc.popen.wait(120)
    exited = time.monotonic() - started
    if code != 0:
        raise RuntimeError(f"broker {broker} exited {code} after SIGTERM:\n{proc.log_tail(5)}")
    return {"seconds": elapsed, "process_exit_s": exited, "sample_led_before": led_before,
            "sample_led_after": _leaders(rig, broker, sample)}


def _recovery(rig: Rig, sample: list[str]) -> dict:
    broker = PROCESS_BROKERS[1]
    led_before = _leaders(rig, broker, sample)
    killed = time.monotonic()
    rig.broker_procs[broker].kill()

    def fenced():
        return any(b.broker_id == broker and b.fenced for b in rig.admin.describe_cluster().brokers)

    wait_until(fenced, 120, f"broker {broker} fenced", interval=0.05)
    elapsed = time.monotonic() - killed
    return {"seconds": elapsed, "detection_s": SESSION_TIMEOUT_MS / 1000, "sample_led_before": led_before,
            "sample_led_after": _leaders(rig, broker, sample)}


def settle(rig: Rig, ctx: Context) -> None:
    """Steady state before each measurement, as in a real cluster between events: every voter
    holds the whole log and no process is still busy (standbys and broker processes replaying
    what was just committed: on 2 cores they would otherwise compete with the step measured)."""
    def caught_up():
        info = rig.cluster.client.describe_quorum()
        return all(v.log_end_offset >= info.high_watermark for v in info.voters)

    wait_until(caught_up, 60, "every voter holds the whole log", interval=0.1)
    pids = {f"controller-{n}": rig.cluster.voter(n).pid for n in rig.cluster.ports if rig.cluster.voter(n).alive()}
    pids.update({f"broker-{b}": p.pid for b, p in rig.broker_procs.items() if p.alive()})
    waited = wait_quiet(pids, QUIET_TIMEOUT_S)
    if waited > 2:
        ctx.progress.line(f"  steady state after {waited:.0f}s")


def _failover(rig: Rig) -> dict:
    from quorum.rpc.controller_client import ControllerClient

    leader = rig.cluster.leader_id()
    with ControllerClient(rig.cluster.bootstrap, timeout=60, rpc_timeout=2) as client:
        killed = time.monotonic()
        rig.cluster.voter(leader).kill()
        client.create_topic("after-failover", 1, REPLICATION_FACTOR)
        elapsed = time.monotonic() - killed
    return {"seconds": elapsed, "killed": leader}


def rig_with_partitions(partitions: int, ctx: Context, **rig_options) -> tuple[Rig, Path, float]:
    """A rig in its own directory with ``partitions`` created: (rig, directory, seconds to create)."""
    work = ctx.work_dir / f"p{partitions}"
    work.mkdir()
    with ctx.progress.phase(f"{partitions:,} partitions: 3 controllers, 30 brokers"):
        rig = start_rig(work, ctx, **rig_options)
    try:
        with ctx.progress.phase(f"create {partitions:,} partitions"):
            return rig, work, create_partitions(rig, partitions, ctx)
    except BaseException:
        stop_rig(rig)
        raise


def _one_size(partitions: int, ctx: Context) -> dict:
    rig, _, create_s = rig_with_partitions(partitions, ctx)
    try:
        out: dict = {"partitions": partitions, "create_s": create_s}
        out["create_partitions_per_s"] = partitions / out["create_s"]
        pids = {n: rig.cluster.voter(n).pid for n in rig.cluster.ports}
        out["rss_mib"] = {str(n): rss_mib(pid) for n, pid in pids.items()}
        sample = [f"t{i:06d}" for i in range(0, partitions // PARTITIONS_PER_TOPIC,
                                             max(1, partitions // PARTITIONS_PER_TOPIC // 50))]
        settle(rig, ctx)
        with ctx.progress.phase("controlled shutdown of broker 129 (SIGTERM)"):
            out["controlled_shutdown"] = _controlled_shutdown(rig, sample)
        settle(rig, ctx)
        with ctx.progress.phase("SIGKILL of broker 130 until fenced, leaderships moved"):
            out["recovery"] = _recovery(rig, sample)
        settle(rig, ctx)
        with ctx.progress.phase("SIGKILL of the active controller until a create is answered"):
            out["failover"] = _failover(rig)
        if partitions <= AUDIT_SHARE_UP_TO:
            out["audit"] = audit_share(rig.cluster.bootstrap)
        ctx.progress.line(f"  create {out['create_s']:.1f}s, controlled shutdown "
                          f"{out['controlled_shutdown']['seconds']:.2f}s, recovery {out['recovery']['seconds']:.2f}s, "
                          f"failover {out['failover']['seconds']:.2f}s, RSS {out['rss_mib']} MiB")
        return out
    finally:
        stop_rig(rig)


AUDIT_SHARE_UP_TO = 200_000  # partitions: the log is read whole to count its audit entries' bytes


def audit_share(bootstrap: str) -> dict:
    """The audit trail's part of the metadata log the workload wrote (issue 62: at most 20 % more):
    the committed log's record bytes, those of AuditRecords, and how many there are."""
    from quorum.metadata.records import RecordType
    from quorum.rpc.log_reader import MetadataLogReader, SnapshotRequired

    audit_id = int(RecordType.AUDIT_RECORD).to_bytes(2, "big")
    total = audit = entries = 0
    with MetadataLogReader(bootstrap, timeout=60) as reader:
        end = reader.high_watermark()
        try:
            reader.read(0, max_records=1)
            offset = 0
        except SnapshotRequired as e:
            offset = e.snapshot_id.offset
        for r in reader.follow(offset, until=end, wait_ms=0):
            total += len(r.data)
            if not r.control and r.data[:2] == audit_id:
                audit, entries = audit + len(r.data), entries + 1
    return {"record_bytes": total, "audit_bytes": audit, "audit_entries": entries,
            "growth": audit / max(1, total - audit)}


def run_sizes(ctx: Context, sizes, one_size, results: dict) -> dict:
    """``results`` with ``one_size(partitions, ctx)`` of each size under "sizes"; a size that fails
    is reported and listed under the errors, and the sizes that worked are kept."""
    results.setdefault("sizes", [])
    errors = results.setdefault("systems", {}).setdefault("sparkraft", {}).setdefault("errors", [])
    for partitions in sizes:
        try:
            results["sizes"].append(one_size(partitions, ctx))
        except Exception as e:
            ctx.progress.line(f"{partitions:,} partitions FAILED: {type(e).__name__}: {e}")
            errors.append(f"{partitions}: {type(e).__name__}: {e}")
    return results


def run(ctx: Context) -> dict:
    sizes = ctx.sizes(QUICK_SIZES, FULL_SIZES)
    results = {"settings": {"partitions_per_topic": PARTITIONS_PER_TOPIC, "replication_factor": REPLICATION_FACTOR,
                            "brokers": SIMULATED_BROKERS + len(PROCESS_BROKERS),
                            "session_timeout_ms": SESSION_TIMEOUT_MS},
               "sizes": [], "systems": {"sparkraft": {"errors": []}}}
    return run_sizes(ctx, sizes, _one_size, results)


def _max_rss_gib(size: dict) -> float | None:
    values = [v for v in size["rss_mib"].values() if v is not None]
    return max(values) / 1024 if values else None


def report(document: dict) -> str:
    results = document["results"]
    rows = []
    for s in results["sizes"]:
        rows.append([f"{s['partitions']:,}", fmt_number(s["create_s"], 1), fmt_number(s["create_partitions_per_s"]),
                     fmt_number(s["controlled_shutdown"]["seconds"], 2),
                     fmt_number(s["controlled_shutdown"].get("process_exit_s"), 1),
                     fmt_number(s["recovery"]["seconds"], 2),
                     fmt_number(s["failover"]["seconds"], 2), fmt_number(_max_rss_gib(s), 2)])
    table = markdown_table(["partitions", "create s", "partitions/s", "controlled shutdown s",
                            "broker process exit s", "recovery s (9 s detection incl.)", "controller failover s", "max controller RSS GiB"],
                           rows)
    errors = results.get("systems", {}).get("sparkraft", {}).get("errors", [])
    return "\n".join([
        f"{measured_on(document)}: "
        f"3 controller processes (fsync on), 30 brokers, topics of {PARTITIONS_PER_TOPIC} partitions, RF "
        f"{REPLICATION_FACTOR}.",
        "",
        table,
        "",
        f"Kafka's published KRaft figures at 2,000,000 partitions: {KAFKA_CONTROLLED_SHUTDOWN_S:g} s controlled "
        f"shutdown, {KAFKA_RECOVERY_S:g} s recovery. Goals: ≤ {GOAL_CONTROLLED_SHUTDOWN_S:g} s, ≤ "
        f"{GOAL_RECOVERY_S:g} s, failover < {GOAL_FAILOVER_S:g} s, < {GOAL_RSS_GIB:g} GiB.",
        *[f"\nThe audit trail at {s['partitions']:,} partitions: {s['audit']['audit_entries']:,} entries, "
          f"{s['audit']['audit_bytes']:,} of the log's {s['audit']['record_bytes']:,} record bytes: the log "
          f"{s['audit']['growth'] * 100:.2f} % larger than without them (goal ≤ 20 %)."
          for s in results["sizes"] if s.get("audit")],
        *([""] + [f"Errors: {e}" for e in errors] if errors else []),
    ])


def plot(document: dict, plots_dir: Path) -> list[Path]:
    sizes = document["results"]["sizes"]
    if not sizes:
        return []
    machine = document["machine"]
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    series = {
        "create": [(s["partitions"], s["create_s"]) for s in sizes],
        "controlled shutdown": [(s["partitions"], s["controlled_shutdown"]["seconds"]) for s in sizes],
        "recovery (incl. 9 s detection)": [(s["partitions"], s["recovery"]["seconds"]) for s in sizes],
        "controller failover": [(s["partitions"], s["failover"]["seconds"]) for s in sizes],
    }
    references = {f"Kafka at 2M: recovery {KAFKA_RECOVERY_S:g} s": KAFKA_RECOVERY_S,
                  f"Kafka at 2M: controlled shutdown {KAFKA_CONTROLLED_SHUTDOWN_S:g} s": KAFKA_CONTROLLED_SHUTDOWN_S,
                  f"goal at 2M: recovery {GOAL_RECOVERY_S:g} s": GOAL_RECOVERY_S,
                  f"goal at 2M: controlled shutdown {GOAL_CONTROLLED_SHUTDOWN_S:g} s": GOAL_CONTROLLED_SHUTDOWN_S}
    paths = [line_chart(plots_dir / "controller-growth.png", "Controller operations by partition count",
                        series, "partitions", "seconds", subtitle=where, references=references)]
    rss = {"max controller RSS": [(s["partitions"], _max_rss_gib(s) * 1024) for s in sizes if _max_rss_gib(s)]}
    if rss["max controller RSS"]:
        paths.append(line_chart(plots_dir / "controller-memory.png", "Controller resident memory", rss,
                                "partitions", "MiB", subtitle=where))
    return paths
