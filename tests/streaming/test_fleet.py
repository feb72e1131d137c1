"""A fleet in one Spark application (``materialize --sources FILE``, docs/use/fleet.md): twelve
clusters, nine single-controller sparkraft quorums, one more whose SCRAM password the job has wrong
and two Apache Kafka nodes, and a cluster that cannot be reached, in one job. The unreachable and
the refused ones are reported (one line each in the log, the ``sources`` table, the metrics), the
password nowhere, while the others stay fresh; one quorum SIGKILLed mid-run catches up once
restarted, every offset once; a cluster added to the file starts without restarting the others,
with the single-cluster warehouse it had already, going on from its cut; SQL across the fleet
equals the union of each cluster's warehouse made alone, and ``--cluster`` reads one."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_ports, newest_cut_offset, sparkraft_cmd, wait_for

from delta_tables.cut import latest_cut, read_table, tables_at
from delta_tables.fleet import cluster_warehouse, read_sources_table
from delta_tables.schemas import RECORDS, SNAPSHOTS
from quorum.kafka_import.reader import KafkaMetadataLogReader
from quorum.uuids import random_uuid
from streaming.fleet_job import PLANNING_MODULES

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from apache_kafka import KafkaNode, need_kafka  # noqa: E402
from test_metrics import scrape  # noqa: E402
from test_scram_processes import _formatted  # noqa: E402

WRONG_PASSWORD = "not-the-admins-password-4711"
PLAIN = ("east", "west", "north", "c4", "c5", "c6", "c7", "c8", "c9")  # with "refused": ten sparkraft quorums
KAFKAS = ("apache", "apache2")  # and two Apache Kafka nodes: twelve clusters (and one nothing answers at)

pytestmark = pytest.mark.slow


def _entry(name: str, bootstrap: str, *more: str) -> str:
    return (f"  - name: {name}\n    bootstrap-controller: {bootstrap}\n    trigger: 0.3\n    idle-flush: 1\n"
            + "".join(f"    {line}\n" for line in more))


def _sources(wh) -> dict:
    table = read_sources_table(str(wh))
    return {} if table is None else {r["cluster"]: r for r in table.to_pylist()}


def test_one_job_keeps_many_clusters_fresh_and_one_clusters_trouble_stays_its_own(controller_processes, tmp_path):
    from quorum.rpc.controller_client import ControllerClient

    quorums = {}
    for name in PLAIN:
        cp = controller_processes(voters=(1,))
        cp.format()
        cp.start()
        quorums[name] = cp
    for cp in quorums.values():
        cp.wait_leader()
    nowhere = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    secured = _formatted(controller_processes, tmp_path, voters=(1,))  # SCRAM users over TLS
    secured.start()
    wrong = secured.pki.client_config("wrong", protocol="SASL_SSL", mechanism="SCRAM-SHA-512", username="admin",
                                      password=WRONG_PASSWORD)
    need_kafka()
    kafkas = {}
    for name in KAFKAS:
        (tmp_path / name).mkdir()
        kafkas[name] = KafkaNode(tmp_path / name, *free_ports(2))
        kafkas[name].format(random_uuid())
        kafkas[name].start()
    wh, ck, sources = tmp_path / "fleet", tmp_path / "ck", tmp_path / "sources.yaml"
    where = {name: cluster_warehouse(str(wh), name) for name in (*PLAIN, *KAFKAS)}
    # north has a single-cluster warehouse of its own already: it joins the fleet as it is
    # (made by the code a one-cluster job runs, in this process: a Spark start of its own would be most of its time)
    where["north"] = _alone(quorums["north"].bootstrap(), "sparkraft", tmp_path / "north-alone")
    joined_at = latest_cut(where["north"]).offset
    sources.write_text("sources:\n" + "".join(_entry(n, cp.bootstrap()) for n, cp in quorums.items() if n != "north")
                       + _entry("lost", nowhere) + _entry("refused", secured.bootstrap(), f"command-config: {wrong}")
                       + "".join(_entry(n, k.bootstrap_controller, "source: kafka") for n, k in kafkas.items()))
    log = open(tmp_path / "job.log", "wb")
    metrics_port = free_ports(1)[0]
    job = subprocess.Popen(sparkraft_cmd("materialize", "--sources", str(sources), "--warehouse", str(wh),
                                         "--checkpoint", str(ck), "--metrics-listener", f"127.0.0.1:{metrics_port}"),
                           stdout=log, stderr=subprocess.STDOUT)
    clients = {n: ControllerClient(cp.bootstrap(), timeout=20) for n, cp in quorums.items()}
    try:
        def fresh(name: str) -> bool:
            return _fresh(clients[name], where[name], name)

        for name in PLAIN:
            if name != "north":
                fresh(name)
        for name in ("lost", "refused"):
            wait_for(lambda: _sources(wh).get(name, {}).get("state") == "failing", 120, f"{name} reported as failing")
        assert _sources(wh)["lost"]["last_error"] and _sources(wh)["east"]["state"] == "running"
        assert "SASL_AUTHENTICATION_FAILED" in _sources(wh)["refused"]["last_error"], _sources(wh)["refused"]
        for name, kafka in kafkas.items():
            with KafkaMetadataLogReader(kafka.bootstrap_controller) as reader:  # Apache Kafka's, to its end
                end = reader.high_watermark()
            wait_for(lambda: newest_cut_offset(where[name]) >= end - 1, 180, f"{name}'s tables")
        metrics = scrape(metrics_port)  # a series per cluster
        assert metrics['sparkraft_fleet_cluster_up{cluster="lost"}'] == 0
        assert metrics['sparkraft_fleet_cluster_up{cluster="east"}'] == 1
        assert metrics['sparkraft_materializer_applied_offset{cluster="east"}'] > 0
        # a quorum SIGKILLed mid-run: the others go on; restarted, it catches up
        quorums["west"].kill(1)
        fresh("east")
        quorums["west"].start([1])
        quorums["west"].wait_leader()
        fresh("west")
        # a cluster added to the file starts; the others are not restarted
        sources.write_text(sources.read_text() + _entry("north", quorums["north"].bootstrap(),
                                                        f"warehouse: {where['north']}"))
        fresh("north")
        # one removed from the file stops; the others go on
        kept = [entry for entry in sources.read_text().split("  - name: ") if not entry.startswith("c9\n")]
        sources.write_text("  - name: ".join(kept))
        wait_for(lambda: _sources(wh).get("c9", {}).get("state") == "removed", 60, "c9 to be removed")
        gone_at = newest_cut_offset(where["c9"])
        clients["c9"].call_committed(_no_op("c9"))
        fresh("east")
        assert newest_cut_offset(where["c9"]) == gone_at  # nothing more read of it
        # each cluster materialised the old way, alone, by the code a one-cluster job runs
        alone = {n: _alone(cp.bootstrap(), "sparkraft", tmp_path / "alone" / n) for n, cp in quorums.items()}
        alone.update({n: _alone(k.bootstrap_controller, "kafka", tmp_path / "alone" / n) for n, k in kafkas.items()})
        assert job.poll() is None
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0
    finally:
        if job.poll() is None:
            job.kill()
        log.close()
        for c in clients.values():
            c.close()
        for kafka in kafkas.values():
            kafka.stop()
    text = (tmp_path / "job.log").read_text(errors="replace")
    assert "Traceback" not in text and WRONG_PASSWORD not in text
    for name in ("lost", "refused"):  # said once, not once per retry
        assert len([line for line in text.splitlines() if f"WARNING streaming.job: Cluster {name}:" in line]) == 1
    assert not any(WRONG_PASSWORD.encode() in p.read_bytes() for p in wh.rglob("*") if p.is_file())
    # north went on from its own cut: nothing before it read or cut again
    north_cuts = read_table(tables_at(where["north"], None)[SNAPSHOTS]).column("offset").to_pylist()
    assert sorted(north_cuts) == sorted(set(north_cuts)) and north_cuts.count(joined_at) == 1
    assert _sources(wh)["north"]["warehouse"] == where["north"]
    for name in PLAIN:  # every offset once
        w = where[name]
        cut = latest_cut(w)
        offsets = read_table(tables_at(w, cut)[RECORDS]).column("offset").to_pylist()
        assert sorted(offsets) == list(range(cut.offset + 1)), name
    # SQL across the fleet: the union of each cluster's warehouse made alone (c9, removed, is not in it)
    del alone["c9"]
    fleet = _sql(wh, 'SELECT cluster, name, value FROM configs ORDER BY cluster, name')
    own = sorted((name, c["name"], c["value"]) for name, w in alone.items()
                 for c in read_table(tables_at(w, None)["configs"]).to_pylist())
    assert [(r["cluster"], r["name"], r["value"]) for r in fleet] == own and len(own) >= len(PLAIN)
    assert {r["cluster"] for r in fleet} == {*PLAIN, *KAFKAS} - {"c9"}
    voters = _sql(wh, "SELECT cluster, count(*) AS n FROM voters GROUP BY cluster ORDER BY cluster")
    assert {r["cluster"]: r["n"] for r in voters} == {
        n: read_table(tables_at(w, None)["voters"]).num_rows for n, w in sorted(alone.items())}
    on_spark = _sql(wh, 'SELECT cluster, name, value FROM configs ORDER BY cluster, name', "--engine", "spark")
    assert [(r["cluster"], r["name"], r["value"]) for r in on_spark] == own  # Delta's Spark reader, the same
    assert _sql(wh, "SELECT name FROM configs", "--cluster", "west") == [{"name": "num.partitions"}]
    # the one-cluster tools take --cluster on a fleet's warehouse, and ask for it
    changed = subprocess.run(sparkraft_cmd("changes", "--warehouse", str(wh), "--cluster", "east", "--from-offset", "0",
                                           "--to-offset", "1000000000", "--table", "configs", "--json"),
                             capture_output=True, text=True, timeout=120)
    assert changed.returncode == 0 and json.loads(changed.stdout)[0]["name"] == "num.partitions", changed.stderr
    planned = subprocess.run(sparkraft_cmd("revert", "--warehouse", str(wh), "--cluster", "west", "--to-offset",
                                           "1000000000"), capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0 and "Nothing to do" in planned.stdout, planned.stderr
    unnamed = subprocess.run(sparkraft_cmd("audit", "--warehouse", str(wh)), capture_output=True, text=True,
                             timeout=120)
    assert unnamed.returncode == 1 and "name the cluster with --cluster NAME" in unnamed.stderr
    wrong = subprocess.run(sparkraft_cmd("sql", "SELECT 1", "--warehouse", str(wh), "--cluster", "south"),
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 1 and "has no cluster 'south'" in wrong.stderr and wrong.stderr.count("\n") == 1


def test_a_cluster_whose_write_fails_or_that_stops_answering_is_set_aside_and_caught_up_once(
        controller_processes, tmp_path):
    """One query for the fleet, yet one cluster's trouble is its own: a Delta write that fails (the
    ``delta-before-cut`` failpoint, EIO, once) sets that cluster aside for a backoff and its range is
    read again, every offset once; a cluster SIGSTOPped keeps no one else waiting, and catches up
    once it answers again."""
    import os

    from quorum.rpc.controller_client import ControllerClient

    quorums = {}
    for name in ("east", "west", "south"):
        cp = controller_processes(voters=(1,))
        cp.format()
        cp.start()
        cp.wait_leader()
        quorums[name] = cp
    wh, ck, sources = tmp_path / "fleet", tmp_path / "ck", tmp_path / "sources.yaml"
    where = {name: cluster_warehouse(str(wh), name) for name in quorums}
    sources.write_text("sources:\n" + "".join(_entry(n, cp.bootstrap()) for n, cp in quorums.items()))
    (tmp_path / "once").mkdir()
    env = {**os.environ, "SPARKRAFT_FAILPOINTS": "delta-before-cut=eio",
           "SPARKRAFT_FAILPOINTS_ONCE": str(tmp_path / "once")}
    log = open(tmp_path / "job.log", "wb")
    job = subprocess.Popen(sparkraft_cmd("materialize", "--sources", str(sources), "--warehouse", str(wh),
                                         "--checkpoint", str(ck)), stdout=log, stderr=subprocess.STDOUT, env=env)
    clients = {n: ControllerClient(cp.bootstrap(), timeout=20) for n, cp in quorums.items()}
    try:
        def fresh(name: str) -> bool:
            return _fresh(clients[name], where[name], name)

        for name in quorums:
            fresh(name)
        # the Python processes that only planned the query are gone (streaming/fleet_job.py), the reader's stay
        wait_for(lambda: not any(m in line for line in _descendants(job.pid) for m in PLANNING_MODULES), 30,
                 "the planning daemons to end")
        assert any(b"pyspark.daemon" in line for line in _descendants(job.pid))
        quorums["south"].send(1, signal.SIGSTOP)
        for _ in range(3):  # the others stay fresh while south does not answer
            for name in ("east", "west"):
                fresh(name)
        quorums["south"].send(1, signal.SIGCONT)
        fresh("south")
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0
    finally:
        quorums["south"].send(1, signal.SIGCONT)
        if job.poll() is None:
            job.kill()
        log.close()
        for c in clients.values():
            c.close()
    text = (tmp_path / "job.log").read_text(errors="replace")
    assert "Traceback" not in text
    failed = [line for line in text.splitlines() if "[Errno 5]" in line and "WARNING streaming.job: Cluster" in line]
    assert len(failed) == 1, text[-5000:]  # the failpoint fired once, in one cluster, said once
    name = failed[0].split("Cluster ", 1)[1].split(":", 1)[0]
    assert f"Cluster {name}: recovered" in text
    for name in quorums:  # every offset once, the failed cluster's included
        cut = latest_cut(where[name])
        offsets = read_table(tables_at(where[name], cut)[RECORDS]).column("offset").to_pylist()
        assert sorted(offsets) == list(range(cut.offset + 1)), name


def _fresh(client, warehouse: str, name: str) -> bool:
    """A change to the cluster, and its tables reaching it."""
    committed = client.call_committed(_no_op(name))[1]
    return wait_for(lambda: newest_cut_offset(warehouse) >= committed, 120,
                    f"{name}'s tables to reach offset {committed}")


def _descendants(pid: int) -> list[bytes]:
    from quorum.metrics.processes import descendants

    out = []
    for p in descendants(pid):
        try:
            out.append(Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" "))
        except OSError:
            continue
    return out


def _alone(bootstrap: str, protocol: str, wh: Path) -> str:
    """A cluster's log to its end in a warehouse of its own, by the code a one-cluster job's Spark
    tasks and foreachBatch run (a Spark start per cluster would be most of the test's time)."""
    import pyarrow as pa

    from delta_tables.writer import DeltaRsWriter
    from streaming.materializer import Materializer
    from streaming.quorum_access import QuorumOptions
    from streaming.source import LogRange, read_range

    quorum = QuorumOptions(bootstrap, "", None, protocol)
    with quorum.reader(timeout=30) as reader:
        end = reader.high_watermark()
    m = Materializer(DeltaRsWriter(str(wh)))
    m.process(pa.Table.from_batches(list(read_range(quorum, LogRange(0, end)))))
    return str(wh)


def _no_op(name: str):
    """A write a cluster takes again and again (no brokers needed): a cluster-wide default config."""
    from quorum.controller import api

    return api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("CLUSTER", ""), (
        api.AlterableConfig("num.partitions", "SET", "1"),)),))


def _sql(wh, query: str, *args: str) -> list[dict]:
    out = subprocess.run(sparkraft_cmd("sql", query, "--warehouse", str(wh), "--json", *args), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
