"""``sparkraft demo``: the embedded default, everything in one process.

Today: a 3-controller quorum of ControllerNodes on 127.0.0.1 ephemeral ports, storage formatted
under DIR (or a temporary directory), an active controller elected, three brokers (101-103, one per
rack) each loading its own metadata image (from its cache, else the log) and following the log,
registered and unfenced once caught up, topics created and described as
``sparkraft topics describe`` and ``sparkraft brokers list`` print them, and the quorum's status
as ``sparkraft quorum describe`` prints it; then the Spark streaming job materialises the log into
the Delta tables under DIR/warehouse and SQL queries run over them. Each step is a function of the
shared :class:`Demo` state in ``STEPS``, printed as ``[i/n] title``.
"""
from __future__ import annotations

import argparse
import logging
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

from sparkraft.commands import add_command
from sparkraft.commands.demo_cluster import VOTERS, Demo, DemoBroker

BROKERS = ((101, "rack-a"), (102, "rack-b"), (103, "rack-c"))
TOPICS = (("orders", 6, 3), ("payments", 3, 2), ("audit-log", 1, 3))  # name, partitions, replication factor


def register(subparsers) -> None:
    demo = add_command(subparsers, "demo", "run a 3-controller quorum in this process and show it working",
                       run_demo)
    demo.add_argument("--dir", metavar="DIR",
                      help="where to keep the controllers' storage (kept afterwards; default: a temp dir, removed)")
    demo.add_argument("--secure", action="store_true",
                      help="the same over mutual TLS with the ACL authorizer on: a throwaway CA and certificates "
                           "in DIR/pki, controllers and brokers with principals of their own, an admin super user, "
                           "and ACLs for the streaming job")


def step_format(demo: Demo) -> None:
    from quorum.log.meta_properties import META_PROPERTIES_FILE, format_storage, random_cluster_id, read_meta_properties

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
    from quorum.node.controller_process import new_controller_node
    from quorum.raft.settings import RaftSettings

    settings = RaftSettings(election_timeout_ms=500, fetch_timeout_ms=1000)
    placeholder = {i: ("127.0.0.1", 0) for i in VOTERS}
    for i in VOTERS:
        demo.nodes[i] = new_controller_node(i, placeholder, ("127.0.0.1", 0), demo.node_dir(i), settings,
                                              security=demo.node_security(i))
    addresses = {i: ("127.0.0.1", n.port) for i, n in demo.nodes.items()}
    for node in demo.nodes.values():
        node.raft.set_voter_addresses(addresses)
    for node in demo.nodes.values():
        node.start()
    demo.out("      voters " + ",".join(f"{i}@127.0.0.1:{p}" for i, (_, p) in addresses.items())
             + (": SSL listeners, mutual TLS, StandardAuthorizer, super user User:admin" if demo.secure else ""))


def step_elect(demo: Demo) -> None:
    from quorum.rpc.controller_client import ControllerClient

    t0 = time.monotonic()
    deadline = t0 + 15
    while time.monotonic() < deadline and not any(n.is_active for n in demo.nodes.values()):
        time.sleep(0.01)
    active = [i for i, n in demo.nodes.items() if n.is_active]
    if not active:
        raise TimeoutError("no active controller within 15s")
    demo.leader_id = active[0]
    for node in demo.nodes.values():  # every node agrees before we go on
        node.raft.wait_for_leader(timeout=15)
    demo.client = ControllerClient(demo.bootstrap, security=demo.client_security("admin"))
    demo.out(f"      controller {demo.leader_id} is active in epoch {demo.nodes[demo.leader_id].raft.status().epoch} "
             f"(elected in {time.monotonic() - t0:.2f}s)")


def step_brokers(demo: Demo) -> None:
    for broker_id, rack in BROKERS:
        broker = demo.brokers[broker_id] = DemoBroker(demo, broker_id, rack)
        broker.start()
        stats = broker.metadata.stats
        start = ("nothing to load: it reads the log from its start" if stats.bootstrap_offset < 0 else
                 f"metadata from {stats.bootstrap_source} at offset {stats.bootstrap_offset} in "
                 f"{stats.bootstrap_seconds * 1000:.0f} ms")
        demo.out(f"      broker {broker_id} ({rack}): {start}, now following the log")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(b.lifecycle.state.fenced for b in demo.brokers.values()):
        time.sleep(0.05)
    unfenced = [b for b in demo.brokers.values() if not b.lifecycle.state.fenced]
    for b in unfenced:
        b.start_kafka()
    demo.out(f"      {len(unfenced)} of {len(BROKERS)} brokers registered and unfenced (each once its own "
             f"image reached its registration record)")


def step_broker_images(demo: Demo) -> None:
    from quorum.rpc.log_reader import MetadataLogReader

    with MetadataLogReader(demo.bootstrap, security=demo.client_security("admin")) as reader:
        hw = reader.high_watermark()
    for b in demo.brokers.values():
        b.metadata.wait_for(hw - 1, timeout=10)
    for b in demo.brokers.values():
        m = b.metadata
        image = m.image
        demo.out(f"      broker {b.broker_id}: applied offset {m.applied_offset} (quorum high watermark {hw}), "
                 f"{len(image.topics.topic_names())} topics, {image.topics.partition_count()} partitions, "
                 f"{m.stats.records_fetched} records fetched since it started from {m.stats.bootstrap_source}")


def step_topics(demo: Demo) -> None:
    from quorum.errors import Errors, SparkraftError

    t0 = time.monotonic()
    for name, partitions, rf in TOPICS:
        try:
            demo.client.create_topic(name, partitions, rf)
        except SparkraftError as e:
            if e.error is not Errors.TOPIC_ALREADY_EXISTS:
                raise
            demo.out(f"      {name} exists from a previous run")
            continue
        demo.out(f"      created {name}: {partitions} partitions, replication factor {rf}")
    demo.client.alter_configs(_topic_key("orders"), [_set("retention.ms", "86400000")])
    demo.out(f"      set retention.ms=86400000 on orders ({time.monotonic() - t0:.2f}s for all of it)")


def step_kafka_client(demo: Demo) -> None:
    """confluent-kafka's AdminClient (librdkafka, the C client most Kafka clients wrap) pointed at
    broker 101: Metadata answered from the broker's image, CreateTopics forwarded to the active
    controller, and the new topic in the same broker's next Metadata answer."""
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = demo.brokers[101]
    address = f"127.0.0.1:{broker.port}"
    admin = AdminClient({"bootstrap.servers": address, "log_level": 0, **demo.kafka_client_config()})
    listed = admin.list_topics(timeout=30)
    demo.out(f"      AdminClient({{'bootstrap.servers': '{address}'}}).list_topics(): cluster {listed.cluster_id}, "
             f"brokers {sorted(listed.brokers)}, topics {sorted(listed.topics)}")
    t0 = time.monotonic()
    created = admin.create_topics([NewTopic("clicks", 4, 3)], operation_timeout=30)["clicks"]
    try:
        created.result(60)
        demo.out(f"      create_topics([NewTopic('clicks', 4, 3)]) through broker 101, forwarded to controller "
                 f"{demo.client.describe_cluster().controller_id}: done in {(time.monotonic() - t0) * 1000:.0f} ms")
    except Exception as e:  # a rerun with --dir: it exists
        error = e.args[0] if e.args and hasattr(e.args[0], "name") else None
        demo.out("      create_topics([NewTopic('clicks', 4, 3)]): "
                 + (f"{error.name()}: {error.str()}" if error is not None else str(e)))
    topic = admin.list_topics(topic="clicks", timeout=30).topics["clicks"]
    leaders = {p.id: p.leader for p in topic.partitions.values()}
    demo.out(f"      list_topics('clicks'): {len(topic.partitions)} partitions, leaders {leaders} "
             f"(also in `sparkraft topics describe --topic clicks`)")


def _topic_key(name: str):
    from quorum.controller.api import ConfigResourceKey

    return ConfigResourceKey("TOPIC", name)


def _set(key: str, value: str):
    from quorum.controller.api import AlterableConfig

    return AlterableConfig(key, "SET", value)


def step_acls(demo: Demo) -> None:
    """--secure: the streaming job's principal may read the log (CLUSTER_ACTION) and find the quorum
    (DESCRIBE) on the cluster, and nothing else; a stranger's request is refused."""
    from quorum.controller import api
    from quorum.errors import SparkraftError
    from quorum.rpc.controller_client import ControllerClient

    bindings = [api.AclBinding("CLUSTER", "kafka-cluster", "LITERAL", "User:materializer", "*", op, "ALLOW")
                for op in ("CLUSTER_ACTION", "DESCRIBE")]
    demo.client.create_acls(bindings)
    for b in bindings:
        demo.out(f"      ALLOW {b.principal} {b.operation} on the cluster")
    with ControllerClient(demo.bootstrap, timeout=5, security=demo.client_security("stranger")) as stranger:
        try:
            stranger.create_topic("not-yours", 1, 1)
            raise RuntimeError("the authorizer let User:stranger create a topic")
        except SparkraftError as e:
            demo.out(f"      User:stranger creating a topic: {e}")
    config = demo.ca.root / "admin.properties"
    config.write_text(f"security.protocol=SSL\nssl.truststore.location={demo.ca.truststore}\n"
                      f"ssl.keystore.location={demo.ca.keystore('admin')}\n")
    demo.out(f"      client settings for User:admin: --command-config {config}")
    step_scram_user(demo)


def step_scram_user(demo: Demo) -> None:
    """--secure: a SCRAM user for a person, allowed to see the audit topic; she logs in with her password
    (these listeners also want a certificate, any the CA signed: the login names the principal)."""
    import os
    import secrets

    from quorum.controller import api
    from quorum.errors import Errors, SparkraftError
    from quorum.rpc.controller_client import ControllerClient
    from quorum.security.client import ClientSecurity
    from sparkraft.commands.scram_specs import parse_spec, upsertion

    password = secrets.token_urlsafe(12)
    m, values = parse_spec(f"SCRAM-SHA-512=[password={password}]", ("password", "iterations"))
    (result,) = demo.client.call(api.AlterUserScramCredentialsRequest(upsertions=(upsertion(m, "alice", values),)))
    if result.error is not Errors.NONE:
        raise SparkraftError(result.error, result.message)
    demo.client.create_acls([api.AclBinding("TOPIC", "audit-", "PREFIXED", "User:alice", "*", "DESCRIBE", "ALLOW")])
    config = demo.ca.root / "alice.properties"
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds her password
    with os.fdopen(fd, "w") as f:
        f.write(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=alice\n"
                f"sasl.password={password}\nssl.truststore.location={demo.ca.truststore}\n"
                f"ssl.keystore.location={demo.ca.keystore('guest')}\n")
    with ControllerClient(demo.bootstrap, timeout=5, security=ClientSecurity.from_file(str(config))) as alice:
        visible = alice.list_topics()
    demo.out(f"      SCRAM user alice: logged in with SCRAM-SHA-512, may DESCRIBE topics audit-*, sees {list(visible)}")
    demo.out(f"      client settings for User:alice (her password inside): --command-config {config}")


def step_materialize(demo: Demo) -> None:
    from delta_tables.cut import latest_cut
    from streaming import job

    t0 = time.monotonic()
    demo.spark = job.spark_session("sparkraft-demo")
    demo.out(f"      Spark session up in {time.monotonic() - t0:.1f}s")
    t1 = time.monotonic()
    job.run(demo.bootstrap, str(demo.warehouse), str(demo.root / "checkpoint"), available_now=True,
            spark=demo.spark, security=demo.client_security("materializer"))
    cut = latest_cut(str(demo.warehouse))
    demo.out(f"      tables in {demo.warehouse} at consistent cut offset {cut.offset} "
             f"({time.monotonic() - t1:.1f}s): " + ", ".join(f"{t} v{v}" for t, v in cut.versions.items()))


DEMO_QUERIES = (
    ("Leaders per broker", "SELECT leader AS broker_id, count(*) AS partitions_led FROM partitions "
                           "GROUP BY leader ORDER BY leader"),
    ("Under-replicated partitions", "SELECT topic_name, \"partition\", replicas, isr FROM partitions "
                                    "WHERE cardinality(isr) < cardinality(replicas) ORDER BY 1, 2"),
    ("Topic configs", "SELECT resource_name AS topic, name, value, last_offset FROM configs "
                      "WHERE resource_type = 'TOPIC' ORDER BY 1, 2"),
    ("Records by type", "SELECT type, count(*) AS n FROM records GROUP BY type ORDER BY n DESC, type"),
)


def step_sql(demo: Demo) -> None:
    from delta_tables.sql import query_datafusion
    from sparkraft.commands.sql import format_rows

    if not demo.kept:
        demo.out("      (these tables go when the demo ends; `sparkraft demo --dir DIR` keeps them, and the "
                 "commands below then run as printed)")
    for title, query in DEMO_QUERIES:
        table = query_datafusion(str(demo.warehouse), query)
        demo.out(f"      -- {title}: sparkraft sql {shlex.quote(query)} --warehouse {demo.warehouse}")
        for line in format_rows(table.column_names, table.to_pylist()).splitlines():
            demo.out(f"      {line}")
        demo.out("")


def step_broker_from_delta(demo: Demo) -> None:
    from delta_tables.bootstrap import image_from_cut
    from quorum.rpc.log_reader import MetadataLogReader

    broker = demo.brokers[104] = DemoBroker(demo, 104, "rack-a",
                                            bootstrap_source=lambda: image_from_cut(str(demo.warehouse)))
    broker.start()
    stats = broker.metadata.stats
    demo.out(f"      broker 104: metadata from {stats.bootstrap_source} at offset {stats.bootstrap_offset} "
             f"in {stats.bootstrap_seconds * 1000:.0f} ms (the consistent cut in {demo.warehouse})")
    with MetadataLogReader(demo.bootstrap, security=demo.client_security("admin")) as reader:
        hw = reader.high_watermark()
    broker.metadata.wait_for(hw - 1, timeout=10)
    m = broker.metadata
    demo.out(f"      broker 104: applied offset {m.applied_offset}, {m.stats.records_fetched} records fetched after "
             f"the cut, {len(m.image.topics.topic_names())} topics, {m.image.topics.partition_count()} partitions")


def step_describe(demo: Demo) -> None:
    from sparkraft.commands.brokers import format_brokers
    from sparkraft.commands.topics import format_description

    demo.out("")
    for name, _, _ in TOPICS:
        demo.out(format_description(demo.client.describe_topic(name)))
    demo.out("")
    demo.out(format_brokers(demo.client.describe_cluster().brokers))
    demo.out("")


def step_status(demo: Demo) -> None:
    from quorum.rpc.raft_client import RaftClient
    from sparkraft.commands.quorum import format_replication, format_status

    # Let the followers fetch the last records and hear the high watermark, so they show caught up.
    target = demo.nodes[demo.leader_id].raft.status().log_end_offset
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and any(n.raft.status().high_watermark < target for n in demo.nodes.values()):
        time.sleep(0.02)
    with RaftClient(demo.bootstrap, security=demo.client_security("admin")) as client:
        info = client.describe_quorum()
    demo.out("")
    demo.out(format_status(info))
    demo.out("")
    demo.out(format_replication(info))
    demo.out("")


STEPS: list[tuple[str, Callable[[Demo], None]]] = [
    ("Format storage for 3 controllers", step_format),
    ("Start the quorum", step_start),
    ("Elect the active controller", step_elect),
    (f"Start {len(BROKERS)} brokers: load metadata, register, heartbeat until unfenced", step_brokers),
    (f"Create {len(TOPICS)} topics and alter a topic config", step_topics),
    ("Each broker's own metadata image, by offset", step_broker_images),
    ("A Kafka client through a broker (librdkafka: list, create, list again)", step_kafka_client),
    ("Describe (as `sparkraft topics describe` and `sparkraft brokers list` print it)", step_describe),
    ("Quorum status (as `sparkraft quorum describe --status` and `--replication` print it)", step_status),
    ("ACLs and a SCRAM user (--secure): the streaming job may read the log; a stranger may do nothing",
     step_acls),
    ("Materialise the metadata log into Delta tables (Spark Structured Streaming, available-now)",
     step_materialize),
    ("SQL over the cluster's metadata (DataFusion over the Delta tables)", step_sql),
    ("Start broker 104 from the Delta tables' consistent cut, then follow the log", step_broker_from_delta),
]


def shutdown(demo: Demo) -> None:
    quiet = logging.getLogger("quorum")
    level = quiet.level
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:
        quiet.setLevel(logging.ERROR)  # peers going away one by one is expected here
    if demo.spark is not None:
        demo.spark.stop()
    try:
        for broker in demo.brokers.values():
            broker.stop()
    finally:
        if demo.client is not None:
            demo.client.close()
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
    demo = Demo(root, kept=not temporary)
    steps = [(title, step) for title, step in STEPS if args.secure or step is not step_acls]
    t0 = time.monotonic()
    try:
        if args.secure:
            from quorum.security.throwaway_ca import ThrowawayCa

            demo.ca = ThrowawayCa(root / "pki")
            demo.out(f"      a throwaway CA and certificates in {demo.ca.root} (not for production)")
        for i, (title, step) in enumerate(steps, 1):
            demo.out(f"[{i}/{len(steps) + 1}] {title}")
            step(demo)
    finally:
        if demo.nodes:
            demo.out(f"[{len(steps) + 1}/{len(steps) + 1}] Shut down")
            shutdown(demo)
        if temporary:
            shutil.rmtree(root, ignore_errors=True)
    demo.out(f"Done in {time.monotonic() - t0:.1f}s" + (
        "; its storage and tables were removed (keep them with --dir DIR)" if temporary else
        f"; storage and tables kept in {root}: the sparkraft sql commands above run as printed"))
