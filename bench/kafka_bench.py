"""Kafka clients' path: a broker answering Kafka's protocol, against the controller over gRPC.

The cluster is the controller benchmark's (3 controller processes with fsync, 28 simulated brokers,
two ``sparkraft broker start`` processes, topics of 100 partitions, RF 3) at 200,000 partitions
(20,000 in --quick). Broker process 129 is the one asked; its Kafka listener is on loopback.

- **Metadata, one topic** (100 partitions): requests per second from 8 connections, each sending
  the same pre-encoded Metadata v12 request and reading the whole answer; against the same answer
  from the controllers over gRPC (DescribeTopics of that topic, 8 threads of ControllerClient).
- **Metadata, 100 topics** (10,000 partitions): the same, 100 topic names per request.
- **Metadata, the whole cluster**: one request for every topic, from a fresh connection: the first
  answer after the broker's listener opened and the next ones. The broker warms its answers before
  it opens a listener and as its image changes, so both are joined from kept encodings. At
  2,000,000 partitions the same answer is timed in this process over a 2M image
  (``MetadataAnswers`` as the listener uses it), without a rig of that size: cold (never warmed:
  every topic encoded while the client waits), the warming itself (off the request path), the
  first answer after it, and again.
- **CreateTopics latency**: 200 creates of a 1-partition topic, one at a time, sent to the broker
  (forwarded) and sent to the active controller directly; p50 and p99. The difference of the p50s
  is what forwarding adds (it includes the broker waiting until its image has the topic).

- **A controller's Kafka listener** (issue 41): DescribeQuorum and CreateTopics, 200 of each one at
  a time, sent in Kafka's protocol to the active controller's second controller listener, and the
  same over gRPC (RaftClient, ControllerClient) in the same run; p50 and p99.
- **Java AdminClient ``describeTopics``** of every topic through broker 129 (Apache Kafka 4.4's
  client in jshell, from Maven Central's jars): the first call and the median of the next two.

Goals (issue 20): >= 5,000 single-topic Metadata requests/s from one broker, a full-cluster answer
at 2,000,000 partitions in <= 2 s, forwarding adds <= 2 ms at p50. Issue 41: a controller's Kafka
listener within 1 ms of gRPC at p50 for DescribeQuorum and CreateTopics; the Java AdminClient's
``describeTopics`` of 200,000 partitions in <= 2 s.
"""
from __future__ import annotations

import datetime
import threading
import time
from pathlib import Path

from bench.controller_bench import PARTITIONS_PER_TOPIC, PROCESS_BROKERS, rig_with_partitions, settle, stop_rig
from bench.harness.plots import grouped_bar_chart, largest_size
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import latency_summary_ms, ratio
from bench.suite import Context

NAME = "kafka"
TITLE = "Kafka clients: Metadata and CreateTopics through a broker vs the controller over gRPC"
REQUIRES: tuple[str, ...] = ("kio",)

QUICK_SIZES = (20_000,)
FULL_SIZES = (200_000,)
IN_PROCESS_FULL = 2_000_000  # the whole-cluster answer, timed in this process (full mode)
CONNECTIONS = 8
CREATES = 200
GOAL_SINGLE_TOPIC_RPS = 5000.0
GOAL_FULL_CLUSTER_2M_S = 2.0
GOAL_FORWARDING_MS = 2.0
QUORUM_CALLS = 200
GOAL_CONTROLLER_KAFKA_VS_GRPC_MS = 1.0
GOAL_JAVA_DESCRIBE_S = 2.0
JAVA_DESCRIBE = """
import org.apache.kafka.clients.admin.*;
var props = new Properties();
props.put("bootstrap.servers", "127.0.0.1:%(port)d");
props.put("default.api.timeout.ms", "600000");
props.put("request.timeout.ms", "600000");
var admin = Admin.create(props);
var names = admin.listTopics().names().get();
for (int i = 0; i < 3; i++) {
    long started = System.nanoTime();
    var described = admin.describeTopics(names).allTopicNames().get();
    long took = System.nanoTime() - started;
    int partitions = described.values().stream().mapToInt(d -> d.partitions().size()).sum();
    System.out.println("RUN " + took + " " + partitions);
}
admin.close();
"""


def _broker_port(work: Path, broker: int) -> int:
    for line in (work / f"broker-{broker}.properties").read_text().splitlines():
        if line.startswith("listeners="):
            return int(line.rsplit(":", 1)[1])
    raise RuntimeError(f"broker {broker} has no listeners line")


def _metadata_request(topics):
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    return MetadataRequest(topics=None if topics is None else tuple(
        MetadataRequestTopic(topic_id=None, name=t) for t in topics), allow_auto_topic_creation=False,
        include_topic_authorized_operations=False)


def _throughput(seconds: float, worker) -> float:
    """Answers per second of CONNECTIONS threads each running ``worker(stop) -> count``."""
    stop = threading.Event()
    counts = [0] * CONNECTIONS

    def run(i):
        counts[i] = worker(stop)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(CONNECTIONS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    return sum(counts) / (time.monotonic() - started)


def _broker_metadata_rps(port: int, topics, seconds: float) -> float:
    from quorum.kafka.client import KafkaConnection, encode_request

    frame = encode_request(_metadata_request(topics), 1)

    def worker(stop):
        n = 0
        with KafkaConnection("127.0.0.1", port, timeout=60) as c:
            while not stop.is_set():
                c.send_raw(frame)
                c.read_frame()
                n += 1
        return n
    return _throughput(seconds, worker)


def _controller_describe_rps(bootstrap: str, topics, seconds: float) -> float:
    from quorum.rpc.controller_client import ControllerClient

    def worker(stop):
        n = 0
        client = ControllerClient(bootstrap, timeout=60, rpc_timeout=60)
        try:
            while not stop.is_set():
                answers = client.describe_topics(topics)
                if any(isinstance(a, Exception) for a in answers):
                    raise RuntimeError(f"DescribeTopics failed: {answers[0]}")
                n += 1
        finally:
            client.close()
        return n
    return _throughput(seconds, worker)


def _full_cluster(port: int, repeats: int) -> dict:
    """Seconds for the whole-cluster answer: the first after start, then the median of the next."""
    from quorum.kafka.client import KafkaConnection, encode_request

    frame = encode_request(_metadata_request(None), 1)
    times, size = [], 0
    for _ in range(repeats + 1):
        with KafkaConnection("127.0.0.1", port, timeout=600) as c:
            started = time.monotonic()
            c.send_raw(frame)
            size = len(c.read_frame())
            times.append(time.monotonic() - started)
    rest = sorted(times[1:])
    return {"first_s": times[0], "kept_s": rest[len(rest) // 2], "bytes": size}


def _timed_kafka_create(c, name: str, through: str) -> float:
    """Seconds for one CreateTopics of a 1-partition, RF 3 topic over Kafka connection ``c``."""
    from kio.schema.create_topics.v7 import request as create

    body = create.CreateTopicsRequest(topics=(create.CreatableTopic(
        name=name, num_partitions=1, replication_factor=3, assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=30), validate_only=False)
    started = time.monotonic()
    answer = c.request(body)
    took = time.monotonic() - started
    if answer.topics[0].error_code != 0:
        raise RuntimeError(f"create through {through} failed: {answer.topics[0]}")
    return took


def _create_latencies(port: int, bootstrap: str, prefix: str) -> dict:
    from quorum.kafka.client import KafkaConnection
    from quorum.rpc.controller_client import ControllerClient

    through_broker, direct = [], []
    with KafkaConnection("127.0.0.1", port, timeout=60) as c:
        for i in range(CREATES):
            through_broker.append(_timed_kafka_create(c, f"{prefix}-b{i}", "the broker"))
    client = ControllerClient(bootstrap, timeout=60, rpc_timeout=60)
    try:
        client.create_topic(f"{prefix}-warm", 1, 3)
        for i in range(CREATES):
            started = time.monotonic()
            client.create_topic(f"{prefix}-d{i}", 1, 3)
            direct.append(time.monotonic() - started)
    finally:
        client.close()
    return {"broker_ms": latency_summary_ms(through_broker), "controller_ms": latency_summary_ms(direct)}


def _controller_kafka_vs_grpc(rig, prefix: str) -> dict:
    """DescribeQuorum and CreateTopics one at a time: in Kafka's protocol to the active controller's
    Kafka listener, and over gRPC, in the same run (ms: p50, p99)."""
    from kio.schema.describe_quorum.v2 import request as quorum

    from quorum.kafka.client import KafkaConnection
    from quorum.rpc.controller_client import ControllerClient

    cluster = rig.cluster
    leader = cluster.leader_id()
    describe = quorum.DescribeQuorumRequest(topics=(quorum.TopicData(
        topic_name="__cluster_metadata", partitions=(quorum.PartitionData(partition_index=0),)),))
    timed: dict[str, list[float]] = {"kafka_describe": [], "grpc_describe": [], "kafka_create": [], "grpc_create": []}
    with KafkaConnection("127.0.0.1", cluster.kafka_ports[leader], timeout=60) as c:
        c.request(describe)  # the connection's first answer is not the steady state's
        for _ in range(QUORUM_CALLS):
            started = time.monotonic()
            answer = c.request(describe)
            timed["kafka_describe"].append(time.monotonic() - started)
            if answer.error_code != 0 or answer.topics[0].partitions[0].error_code != 0:
                raise RuntimeError(f"DescribeQuorum through the Kafka listener failed: {answer}")
        for i in range(CREATES):
            timed["kafka_create"].append(_timed_kafka_create(c, f"{prefix}-k{i}", "the controller's Kafka listener"))
    raft = cluster.client
    raft.describe_quorum()
    for _ in range(QUORUM_CALLS):
        started = time.monotonic()
        raft.describe_quorum()
        timed["grpc_describe"].append(time.monotonic() - started)
    with ControllerClient(cluster.bootstrap, timeout=60, rpc_timeout=60) as client:
        client.create_topic(f"{prefix}-gwarm", 1, 3)
        for i in range(CREATES):
            started = time.monotonic()
            client.create_topic(f"{prefix}-g{i}", 1, 3)
            timed["grpc_create"].append(time.monotonic() - started)
    out = {k: latency_summary_ms(v) for k, v in timed.items()}
    out["describe_adds_ms"] = out["kafka_describe"]["p50"] - out["grpc_describe"]["p50"]
    out["create_adds_ms"] = out["kafka_create"]["p50"] - out["grpc_create"]["p50"]
    return out


def _java_describe_topics(port: int, partitions: int, work: Path) -> dict:
    """Apache Kafka's AdminClient ``describeTopics`` of every topic through a broker: the first
    call's seconds and the median of the next two."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import apache_kafka

    out = apache_kafka.jshell(JAVA_DESCRIBE % {"port": port}, work)
    runs = [line.split() for line in out.splitlines() if line.startswith("RUN ")]
    if len(runs) != 3:
        raise RuntimeError(f"the AdminClient program printed {out[-500:]!r}")
    seconds = [int(r[1]) / 1e9 for r in runs]
    if any(int(r[2]) != partitions for r in runs):
        raise RuntimeError(f"describeTopics saw {runs[0][2]} partitions, not {partitions:,}")
    return {"first_s": seconds[0], "again_s": sorted(seconds[1:])[0], "partitions": partitions}


def _in_process_full_cluster(partitions: int, ctx: Context) -> dict:
    """The whole-cluster answer over an image of ``partitions``, as the listener makes it: cold
    (every topic encoded as it is asked), the warming a broker does before it opens a listener,
    the first answer after it, and again (all joined from what was kept)."""
    from bench.snapshot_bench import build_image
    from quorum.kafka.metadata_answer import MetadataAnswers

    with ctx.progress.phase(f"build a {partitions:,}-partition image in this process"):
        c = build_image(partitions, ctx)
    image = c.core.image
    request = _metadata_request(None)
    started = time.monotonic()
    MetadataAnswers("PLAINTEXT").answer(image, request, 12, c.cluster_id, 101)
    cold_s = time.monotonic() - started
    answers = MetadataAnswers("PLAINTEXT")
    started = time.monotonic()
    answers.warm(image)
    warm_s = time.monotonic() - started
    started = time.monotonic()
    first = answers.answer(image, request, 12, c.cluster_id, 101)
    first_s = time.monotonic() - started
    kept = []
    for _ in range(3):
        started = time.monotonic()
        answers.answer(image, request, 12, c.cluster_id, 101)
        kept.append(time.monotonic() - started)
    return {"partitions": partitions, "cold_s": cold_s, "warm_s": warm_s, "first_s": first_s,
            "kept_s": sorted(kept)[1], "bytes": len(first.body)}


def _one_size(partitions: int, ctx: Context) -> dict:
    seconds = 3.0 if ctx.quick else 10.0
    rig, work, create_s = rig_with_partitions(partitions, ctx, kafka_listeners=True)
    try:
        out: dict = {"partitions": partitions, "create_s": create_s}
        settle(rig, ctx)
        broker = PROCESS_BROKERS[0]
        port = _broker_port(work, broker)
        bootstrap = rig.cluster.bootstrap
        topics = partitions // PARTITIONS_PER_TOPIC
        one = [f"t{topics // 2:06d}"]
        hundred = [f"t{i:06d}" for i in range(0, topics, max(1, topics // 100))][:100]
        with ctx.progress.phase("the whole cluster's Metadata from the broker"):
            out["full_cluster"] = _full_cluster(port, 3)
        for label, names in (("one_topic", one), ("hundred_topics", hundred)):
            with ctx.progress.phase(f"Metadata of {len(names)} topic(s): broker (Kafka) vs controllers (gRPC)"):
                out[label] = {"broker_rps": _broker_metadata_rps(port, names, seconds),
                              "controller_rps": _controller_describe_rps(bootstrap, names, seconds)}
                out[label]["ratio"] = ratio(out[label]["broker_rps"], out[label]["controller_rps"])
            ctx.progress.line(f"  {label}: broker {out[label]['broker_rps']:,.0f}/s, controller "
                              f"{out[label]['controller_rps']:,.0f}/s")
        with ctx.progress.phase(f"CreateTopics x{CREATES}: through broker {broker} vs to the controller"):
            out["create"] = _create_latencies(port, bootstrap, f"bench{partitions}")
        c = out["create"]
        c["forwarding_adds_ms"] = c["broker_ms"]["p50"] - c["controller_ms"]["p50"]
        ctx.progress.line(f"  CreateTopics p50: broker {c['broker_ms']['p50']:.2f} ms, controller "
                          f"{c['controller_ms']['p50']:.2f} ms")
        settle(rig, ctx)
        with ctx.progress.phase(f"DescribeQuorum and CreateTopics x{QUORUM_CALLS}/{CREATES}: a controller's Kafka "
                                f"listener vs gRPC"):
            out["controller_kafka"] = k = _controller_kafka_vs_grpc(rig, f"ck{partitions}")
        ctx.progress.line(f"  DescribeQuorum p50: Kafka {k['kafka_describe']['p50']:.2f} ms, gRPC "
                          f"{k['grpc_describe']['p50']:.2f} ms; CreateTopics p50: Kafka {k['kafka_create']['p50']:.2f} "
                          f"ms, gRPC {k['grpc_create']['p50']:.2f} ms")
        expected = partitions + 2 * (CREATES + 1) + 2 * CREATES  # the creates above, 1 partition each
        with ctx.progress.phase(f"Java AdminClient describeTopics of {expected:,} partitions through broker {broker}"):
            try:
                out["java_describe"] = j = _java_describe_topics(port, expected, work)
                ctx.progress.line(f"  describeTopics: {j['first_s']:.2f} s first, {j['again_s']:.2f} s again")
            except Exception as e:
                out["java_describe"] = {"error": f"{type(e).__name__}: {e}"}
        return out
    finally:
        stop_rig(rig)


def run(ctx: Context) -> dict:
    from bench.controller_bench import run_sizes

    results = {"settings": {"connections": CONNECTIONS, "creates": CREATES,
                            "partitions_per_topic": PARTITIONS_PER_TOPIC},
               "sizes": [], "systems": {"sparkraft": {"errors": []}}}
    results = run_sizes(ctx, ctx.sizes(QUICK_SIZES, FULL_SIZES), _one_size, results)
    if not ctx.quick:
        try:
            results["in_process"] = _in_process_full_cluster(IN_PROCESS_FULL, ctx)
        except Exception as e:
            results["systems"]["sparkraft"]["errors"].append(f"in-process 2M: {type(e).__name__}: {e}")
    return results


def report(document: dict) -> str:
    results = document["results"]
    rows = []
    for s in results["sizes"]:
        c = s["create"]
        rows.append([f"{s['partitions']:,}",
                     fmt_number(s["one_topic"]["broker_rps"]), fmt_number(s["one_topic"]["controller_rps"]),
                     fmt_number(s["one_topic"]["ratio"], 2),
                     fmt_number(s["hundred_topics"]["broker_rps"]), fmt_number(s["hundred_topics"]["controller_rps"]),
                     fmt_number(s["hundred_topics"]["ratio"], 2),
                     fmt_number(s["full_cluster"]["first_s"], 2), fmt_number(s["full_cluster"]["kept_s"], 3),
                     fmt_number(c["broker_ms"]["p50"], 2), fmt_number(c["controller_ms"]["p50"], 2),
                     fmt_number(c["forwarding_adds_ms"], 2)])
    table = markdown_table(["partitions", "Metadata 1 topic: broker req/s", "controller gRPC req/s", "ratio",
                            "100 topics: broker req/s", "controller req/s", "ratio",
                            "whole cluster: first s", "again s", "CreateTopics p50 via broker ms",
                            "to controller ms", "forwarding adds ms"], rows)
    lines = [f"{measured_on(document)}: 3 controller processes (fsync on), 30 brokers, topics of "
             f"{PARTITIONS_PER_TOPIC} partitions, RF 3; {CONNECTIONS} connections for the request rates; "
             f"{CREATES} creates one at a time.", "", table]
    full = results.get("in_process")
    if full:
        lines += ["", f"The whole-cluster answer at {full['partitions']:,} partitions, in-process "
                      f"({full['bytes'] / 2**20:,.0f} MiB): {full['first_s']:.3f} s the first time after the "
                      f"broker warmed its answers ({full['warm_s']:.2f} s of warming, before the listener "
                      f"opens and then off the request path), {full['kept_s']:.3f} s again; "
                      f"{full['cold_s']:.2f} s cold (never warmed: every topic encoded while the client waits)."]
    controller_rows, java_lines = [], []
    for s in results["sizes"]:
        k = s.get("controller_kafka")
        if k:
            controller_rows.append([f"{s['partitions']:,}",
                                    f"{k['kafka_describe']['p50']:.2f} / {k['kafka_describe']['p99']:.2f}",
                                    f"{k['grpc_describe']['p50']:.2f} / {k['grpc_describe']['p99']:.2f}",
                                    f"{k['describe_adds_ms']:+.2f}",
                                    f"{k['kafka_create']['p50']:.2f} / {k['kafka_create']['p99']:.2f}",
                                    f"{k['grpc_create']['p50']:.2f} / {k['grpc_create']['p99']:.2f}",
                                    f"{k['create_adds_ms']:+.2f}"])
        j = s.get("java_describe")
        if j and "error" in j:
            java_lines.append(f"Java AdminClient describeTopics at {s['partitions']:,} partitions: {j['error']}")
        elif j:
            java_lines.append(f"Java AdminClient (Kafka 4.4) `describeTopics` of all {j['partitions']:,} partitions "
                              f"through a broker: {j['first_s']:.2f} s the first call, {j['again_s']:.2f} s again.")
    if controller_rows:
        lines += ["", f"A controller's Kafka listener against gRPC, {QUORUM_CALLS} DescribeQuorum and {CREATES} "
                      f"CreateTopics one at a time to the active controller (ms, p50 / p99):", "",
                  markdown_table(["partitions", "DescribeQuorum, Kafka", "gRPC", "Kafka adds (p50)",
                                  "CreateTopics, Kafka", "gRPC", "Kafka adds (p50)"], controller_rows)]
    if java_lines:
        lines += [""] + java_lines
    errors = results.get("systems", {}).get("sparkraft", {}).get("errors", [])
    lines += ["", f"Goals: ≥ {GOAL_SINGLE_TOPIC_RPS:,.0f} single-topic Metadata requests/s, the whole cluster at "
                  f"2,000,000 partitions in ≤ {GOAL_FULL_CLUSTER_2M_S:g} s, forwarding adds ≤ "
                  f"{GOAL_FORWARDING_MS:g} ms at p50; a controller's Kafka listener within "
                  f"{GOAL_CONTROLLER_KAFKA_VS_GRPC_MS:g} ms of gRPC at p50; Java describeTopics of 200,000 "
                  f"partitions ≤ {GOAL_JAVA_DESCRIBE_S:g} s."]
    lines += [f"Errors: {e}" for e in errors]
    return "\n".join(lines)


def plot(document: dict, plots_dir: Path) -> list[Path]:
    s, where = largest_size(document)
    if s is None:
        return []
    return [grouped_bar_chart(
        plots_dir / "kafka.png", "Metadata requests/s: a broker (Kafka protocol) vs the controllers (gRPC)",
        ["1 topic", "100 topics"],
        {"broker (Kafka)": [s["one_topic"]["broker_rps"], s["hundred_topics"]["broker_rps"]],
         "controllers (gRPC)": [s["one_topic"]["controller_rps"], s["hundred_topics"]["controller_rps"]]},
        "requests/s", subtitle=where, goal=GOAL_SINGLE_TOPIC_RPS, value_format="{:,.0f}")]
