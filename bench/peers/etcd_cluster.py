"""A 3-member etcd cluster on loopback (Debian's ``etcd-server``), for the durable-writes benchmark.

etcd fsyncs its write-ahead log before a write is acknowledged, as sparkraft does, so the two are
compared like for like. Load goes to the leader through etcd's gRPC ``KV.Put``
(:class:`bench.sparkraft_load.EtcdAppender`), from the same client processes and generator as
sparkraft's.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench import sparkraft_load
from bench.harness.procs import ChildProcess, cpu_during, free_ports
from bench.harness.workload import Load

CLIENT_PROCESSES = 2
NAMES = ("m1", "m2", "m3")


def etcd_binary() -> str | None:
    return shutil.which("etcd")


class EtcdCluster:
    def __init__(self, work_dir: Path) -> None:
        self._dir = work_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 * len(NAMES))
        self.client_ports = dict(zip(NAMES, ports[:len(NAMES)]))
        self.peer_ports = dict(zip(NAMES, ports[len(NAMES):]))
        self._members: dict[str, ChildProcess] = {}

    def __enter__(self) -> "EtcdCluster":
        binary = etcd_binary()
        if binary is None:
            raise RuntimeError("etcd is not installed (apt-get install etcd-server)")
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in self.peer_ports.items())
        for name in NAMES:
            client, peer = f"http://127.0.0.1:{self.client_ports[name]}", f"http://127.0.0.1:{self.peer_ports[name]}"
            self._members[name] = ChildProcess(name, [
                binary, "--name", name, "--data-dir", str(self._dir / name),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", "sparkraft-bench"], self._dir / f"{name}.log").start()
        try:
            for name in NAMES:
                self._members[name].wait_for_port("127.0.0.1", self.client_ports[name], timeout=30)
            self.leader()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for member in self._members.values():
            member.stop(timeout=10)

    def _status(self, name: str):
        import grpc

        from bench.gen.etcdserverpb import etcd_kv_pb2, etcd_kv_pb2_grpc

        with grpc.insecure_channel(f"127.0.0.1:{self.client_ports[name]}") as channel:
            return etcd_kv_pb2_grpc.MaintenanceStub(channel).Status(etcd_kv_pb2.StatusRequest(), timeout=2)

    def leader(self, timeout: float = 30.0) -> str:
        """The leader's name, once the members agree on one."""
        deadline = time.monotonic() + timeout
        while True:
            for name, member in self._members.items():
                if not member.alive():
                    continue
                try:
                    status = self._status(name)
                except Exception:
                    continue
                if status.leader and status.leader == status.header.member_id:
                    return name
            if time.monotonic() > deadline:
                raise TimeoutError(f"no etcd leader within {timeout:.0f}s")
            time.sleep(0.1)

    def endpoint(self, name: str) -> str:
        return f"127.0.0.1:{self.client_ports[name]}"

    # -- measurements (ReplicatedLogUnderTest) -------------------------------------------------
    def pids(self) -> dict[str, int]:
        leader = self.leader()
        return {("leader" if n == leader else f"follower-{n}"): m.pid for n, m in self._members.items()
                if m.alive()}

    def throughput(self, load: Load, seconds: float, warmup: float, op: str | None = None) -> dict:
        with sparkraft_load.Writers(self.endpoint(self.leader()), load, CLIENT_PROCESSES, warmup, seconds,
                                    self._dir, target="etcd", op=op) as writers:
            pids = {**self.pids(), **writers.pids()}
            start_in = max(0.0, writers.measured_from - time.monotonic())
            result, cpu = cpu_during(pids, start_in, seconds, writers.collect)
        return {**result, "cpu_percent": cpu}

    def latency(self, count: int, warmup: int, record_bytes: int, max_seconds: float) -> list[float]:
        client = sparkraft_load.EtcdAppender(self.endpoint(self.leader()), b"latency")
        try:
            return sparkraft_load.single_writer_latencies(client, count, warmup, record_bytes, max_seconds)
        finally:
            client.close()
