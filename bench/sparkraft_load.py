"""Client-side load on a replicated log: closed-loop writers in client processes, and one
sequential writer for latency. A sparkraft quorum is written through
:class:`quorum.rpc.raft_client.RaftClient`, as an application would; an etcd cluster (``--target
etcd``) through etcd's own gRPC ``KV.Put`` at its leader, one Put per record, so both systems get
the same load from the same generator. ``--op`` makes each writer do something else each time round
(``OPS``): a metadata write through ControllerClient (an IncrementalAlterConfigs, or a CreateTopics
then its DeleteTopics) against an etcd transaction of as many keys, or the same config in Kafka's
protocol to the Kafka listener ``--kafka`` names (a broker's, which forwards it, or the active
controller's) (``bench metadata_writes``).

Writers run in separate client processes (``python -m bench.sparkraft_load``, driven by JSON lines
like the PySyncObj nodes) so the benchmark process's own GIL does not cap the load; each process
runs its share of the writers as threads, one RaftClient per thread. A client process announces
itself once connected, then answers one ``run`` command: append from ``begin`` to ``end``
(``time.monotonic()`` values, one clock for every process on the machine).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from bench.harness.procs import ChildProcess, python_module_command
from bench.harness.stats import latency_summary_ms
from bench.harness.workload import Load

_READY_TIMEOUT_S = 60  # a client process imports grpc and finds the leader within this


def bench_record(size: int) -> bytes:
    """An opaque record: the voters run ``--raft-only``, so nothing decodes it."""
    return os.urandom(size)


class Writers:
    """``load.writers`` writers spread over ``processes`` client processes, started together.

    Entering starts the processes and waits until each has found the leader; the clock starts then:
    ``warmup`` seconds unmeasured, then ``seconds`` measured. :meth:`collect` waits for the end.
    """

    def __init__(self, bootstrap: str, load: Load, processes: int, warmup: float, seconds: float,
                 log_dir: Path, target: str = "sparkraft", command_config: Path | None = None,
                 op: str | None = None, kafka: str | None = None) -> None:
        self._warmup, self._seconds = warmup, seconds
        n = max(1, min(processes, load.writers))
        shares = [load.writers // n + (1 if i < load.writers % n else 0) for i in range(n)]
        self._clients = [
            ChildProcess(f"client-{i}", python_module_command(
                "bench.sparkraft_load", "--target", target, *(("--op", op) if op else ()),
                "--bootstrap", bootstrap, "--threads", str(share),
                "--records", str(load.records_per_append), "--record-bytes", str(load.record_bytes),
                *(("--command-config", str(command_config)) if command_config else ()),
                *(("--kafka", kafka) if kafka else ())),
                log_dir / f"client-{i}.log", json_control=True)
            for i, share in enumerate(shares)]
        self.measured_from = 0.0  # time.monotonic() at which the measured window opens

    def __enter__(self) -> "Writers":
        for client in self._clients:
            client.start()
        for client in self._clients:
            client.receive(_READY_TIMEOUT_S, "its start")
        self.measured_from = time.monotonic() + self._warmup
        end = self.measured_from + self._seconds
        for client in self._clients:
            client.send({"cmd": "run", "begin": self.measured_from, "end": end})
        return self

    def __exit__(self, *exc) -> None:
        for client in self._clients:
            client.stop(timeout=5)

    def pids(self) -> dict[str, int]:
        return {c.name: c.pid for c in self._clients}

    def collect(self) -> dict:
        parts = [c.receive(self._warmup + self._seconds + 120, "'run'") for c in self._clients]
        records = sum(p["records"] for p in parts)
        by_op: dict[str, list[float]] = {}  # operation -> its latencies, from every client process
        for p in parts:
            for name, samples in p["by_op"].items():
                by_op.setdefault(name, []).extend(samples)
        return {
            "committed": records,
            "seconds": self._seconds,
            "records_per_s": records / self._seconds,
            "appends_per_s": sum(p["appends"] for p in parts) / self._seconds,
            "errors": sum(p["errors"] for p in parts),
            "append_latency_ms": latency_summary_ms([s for samples in by_op.values() for s in samples]),
            # each operation's own rate and latency (create and delete of a create-delete writer)
            "by_op": {name: {"per_s": len(samples) / self._seconds, "latency_ms": latency_summary_ms(samples)}
                      for name, samples in by_op.items()},
        }


def single_writer_latencies(client, count: int, warmup: int, record_bytes: int,
                            max_seconds: float) -> list[float]:
    """Seconds per ``append`` of one record, sequential, after ``warmup`` unmeasured appends;
    stops after ``count`` measured appends or ``max_seconds``."""
    record = [bench_record(record_bytes)]
    samples = []
    stop_at = time.monotonic() + max_seconds
    for i in range(warmup + count):
        start = time.perf_counter()
        client.append(record)
        if i >= warmup:
            samples.append(time.perf_counter() - start)
        if time.monotonic() > stop_at:
            break
    return samples


# -- the client process -----------------------------------------------------------------------

# What one writer does each time round its loop: (name, call, records it writes) per operation.
Step = list[tuple[str, Callable[[], Any], int]]

OPS = {
    "sparkraft": ("append", "alter-config", "create-delete", "kafka-alter-config"),
    "etcd": ("put", "txn"),
}


def _write_until(step: Step, begin: float, end: float, totals: dict, lock: threading.Lock) -> None:
    """One writer: each operation of ``step`` in turn, waiting for each to be acknowledged; counts
    what completes inside [begin, end), per operation."""
    done_records, done, errors = 0, 0, 0
    by_op: dict[str, list[float]] = {name: [] for name, _, _ in step}
    while time.monotonic() < end:
        for name, call, records in step:
            start = time.monotonic()
            try:
                call()
            except Exception:  # counted; the clients already retried until their own deadline
                errors += 1
                continue
            finished = time.monotonic()
            if begin <= finished < end:
                done_records += records
                done += 1
                by_op[name].append(finished - start)
    with lock:
        totals["records"] += done_records
        totals["appends"] += done
        totals["errors"] += errors
        for name, latencies in by_op.items():
            totals["by_op"].setdefault(name, []).extend(latencies)


class EtcdAppender:
    """``append(records)`` for an etcd cluster: one ``KV.Put`` per record to ``endpoint`` (its
    leader), each Put acknowledged once etcd has committed and applied it (fsynced on a majority)."""

    def __init__(self, endpoint: str, key: bytes, timeout: float = 10.0):
        import grpc

        from bench.gen.etcdserverpb import etcd_kv_pb2, etcd_kv_pb2_grpc

        self._pb = etcd_kv_pb2
        self._channel = grpc.insecure_channel(endpoint)
        self._kv = etcd_kv_pb2_grpc.KVStub(self._channel)
        self._key = key
        self._timeout = timeout

    def append(self, records: list[bytes]) -> None:
        for record in records:
            self._kv.Put(self._pb.PutRequest(key=self._key, value=record), timeout=self._timeout)

    def txn_put(self, keys: list[bytes], value: bytes) -> None:
        """One transaction putting every key (a topic and its partition, say)."""
        ops = [self._pb.RequestOp(request_put=self._pb.PutRequest(key=k, value=value)) for k in keys]
        self._kv.Txn(self._pb.TxnRequest(success=ops), timeout=self._timeout)

    def txn_delete(self, keys: list[bytes]) -> None:
        ops = [self._pb.RequestOp(request_delete_range=self._pb.DeleteRangeRequest(key=k)) for k in keys]
        self._kv.Txn(self._pb.TxnRequest(success=ops), timeout=self._timeout)

    def connect(self) -> None:
        self.append([b"hello"])

    def close(self) -> None:
        self._channel.close()


def _etcd_step(op: str, client: EtcdAppender, records: list[bytes], name: str) -> Step:
    """``put``: a Put of the writer's own key; ``txn``: what CreateTopics and DeleteTopics of one
    partition write, as etcd transactions of as many keys (a topic key and a partition key)."""
    if op == "put":
        return [("put", lambda: client.append(records), len(records))]
    keys = [f"/topics/{name}".encode(), f"/partitions/{name}/0".encode()]
    value = records[0]
    return [("create", lambda: client.txn_put(keys, value), 2), ("delete", lambda: client.txn_delete(keys), 1)]


class KafkaConfigWriter:
    """IncrementalAlterConfigs (v1) of one topic's ``retention.ms`` over one Kafka connection, as a
    Kafka client sends it; ``close()`` for the writer's loop."""

    def __init__(self, endpoint: str, topic: str):
        from kio.schema.incremental_alter_configs.v1 import request as kafka

        from quorum.kafka.client import KafkaConnection

        host, port = endpoint.rsplit(":", 1)
        self._kafka, self._topic, self._counter = kafka, topic, iter(range(10 ** 12))
        self._connection = KafkaConnection(host, int(port), timeout=30)

    def alter(self) -> None:
        k = self._kafka
        body = k.IncrementalAlterConfigsRequest(resources=(k.AlterConfigsResource(
            resource_type=2, resource_name=self._topic, configs=(k.AlterableConfig(
                name="retention.ms", config_operation=0, value=str(86_400_000 + next(self._counter))),)),),
            validate_only=False)
        (answer,) = self._connection.request(body).responses
        if answer.error_code != 0:
            raise RuntimeError(f"IncrementalAlterConfigs failed: {answer.error_code} {answer.error_message}")

    def close(self) -> None:
        self._connection.close()


def _sparkraft_step(op: str, bootstrap: str, security, records: list[bytes], name: str, kafka: str | None = None):
    """(client, step): ``append``: a raw append through RaftClient (a ``--raft-only`` quorum);
    ``alter-config``: an IncrementalAlterConfigs of the writer's own topic (one ConfigRecord);
    ``create-delete``: CreateTopics of one partition (two records), then DeleteTopics of it;
    ``kafka-alter-config``: the same config in Kafka's protocol to the Kafka listener ``kafka``."""
    if op == "append":
        from quorum.rpc.raft_client import RaftClient

        client = RaftClient(bootstrap, timeout=30.0, security=security)
        client.describe_quorum()  # connect and find the leader before the clock starts
        return client, [("append", lambda: client.append(records), len(records))]
    from quorum.controller import api
    from quorum.rpc.controller_client import ControllerClient

    client = ControllerClient(bootstrap, timeout=30.0, security=security)
    if op == "kafka-alter-config":
        client.create_topic(name, 1, 1)
        client.close()
        writer = KafkaConfigWriter(kafka, name)
        writer.alter()  # connected, and the broker's image has the topic, before the clock starts
        return writer, [("kafka-alter-config", writer.alter, 1)]
    if op == "alter-config":
        client.create_topic(name, 1, 1)
        key, counter = api.ConfigResourceKey("TOPIC", name), iter(range(10 ** 12))
        return client, [("alter-config", lambda: client.alter_configs(
            key, [api.AlterableConfig("retention.ms", "SET", str(86_400_000 + next(counter)))]), 1)]
    client.describe_cluster()
    return client, [("create", lambda: client.create_topic(name, 1, 3), 2),
                    ("delete", lambda: client.delete_topic(name), 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description="a benchmark client process (run by bench)")
    parser.add_argument("--target", choices=tuple(OPS), default="sparkraft")
    parser.add_argument("--op", help="what each writer does: " + "; ".join(
        f"{t}: {', '.join(ops)}" for t, ops in OPS.items()) + " (default: the first)")
    parser.add_argument("--bootstrap", required=True, help="controllers, or the etcd leader's HOST:PORT")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--records", type=int, required=True, help="records per append")
    parser.add_argument("--record-bytes", type=int, required=True)
    parser.add_argument("--command-config", help="client security settings (the TLS benchmark)")
    parser.add_argument("--kafka", help="HOST:PORT of the Kafka listener kafka-alter-config writes to")
    args = parser.parse_args()
    op = args.op or OPS[args.target][0]
    if op not in OPS[args.target]:
        parser.error(f"--op {op} is not one of {args.target}'s: {', '.join(OPS[args.target])}")
    if op == "kafka-alter-config" and not args.kafka:
        parser.error("--op kafka-alter-config needs --kafka HOST:PORT")
    records = [bench_record(args.record_bytes) for _ in range(args.records)]
    names = [f"bench-{os.getpid()}-{i}" for i in range(args.threads)]
    clients, steps = [], []
    if args.target == "etcd":
        for name in names:
            client = EtcdAppender(args.bootstrap, name.encode())
            client.connect()
            clients.append(client)
            steps.append(_etcd_step(op, client, records, name))
    else:
        from quorum.security.client import ClientSecurity

        security = ClientSecurity.from_command_config(args.command_config)
        for name in names:
            client, step = _sparkraft_step(op, args.bootstrap, security, records, name, args.kafka)
            clients.append(client)
            steps.append(step)
    print(json.dumps({"ok": True, "ready": True}), flush=True)

    command = json.loads(sys.stdin.readline())
    totals = {"records": 0, "appends": 0, "errors": 0, "by_op": {}}
    lock = threading.Lock()
    writers = [threading.Thread(target=_write_until, name=f"writer-{i}",
                                args=(step, command["begin"], command["end"], totals, lock))
               for i, step in enumerate(steps)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    print(json.dumps({"ok": True, **totals}), flush=True)
    for client in clients:
        client.close()


if __name__ == "__main__":
    main()
