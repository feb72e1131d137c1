"""A 3-voter sparkraft quorum on loopback, one ``sparkraft controller start`` process per voter.

By default each runs ``--raft-only``: the replicated log alone (no metadata controller replaying
it), taking raw Append RPCs, for the quorum benchmark. ``raft_only=False`` runs full metadata
controllers (the controller benchmark), which refuse raw appends.

Storage lives under the benchmark's work directory and is formatted with ``sparkraft storage
format``, exactly as an operator would. ``fsync=False`` starts the voters through
:mod:`bench.fsync_off` instead, which is the same CLI with fsync made a no-op.
"""
from __future__ import annotations

import time
from pathlib import Path

from bench import sparkraft_load
from bench.harness.procs import ChildProcess, cpu_during, free_ports, python_module_command
from bench.harness.workload import Load

CLIENT_PROCESSES = 2  # the throughput writers are spread over this many client processes


def _write_properties(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


class SparkraftCluster:
    def __init__(self, work_dir: Path, fsync: bool = True, size: int = 3,
                 overrides: dict[str, str] | None = None, raft_only: bool = True, tls: bool = False,
                 format_args: tuple[str, ...] = (), cluster_id: str | None = None,
                 kafka_listeners: bool = False, metrics: bool = False) -> None:
        """``tls``: SSL listeners with mutual TLS (a throwaway CA under ``work_dir/pki``); the
        benchmark's clients connect as ``CN=bench`` through ``command_config``. ``format_args``:
        more flags for every voter's ``storage format`` (``--from-warehouse W``, say); the voters
        are formatted at once, as on machines of their own. ``cluster_id``: the one to format with
        (default a new one). ``kafka_listeners``: each controller also answers Kafka's protocol, on
        ``kafka_ports[node]`` (a second controller listener, KIP-919). ``metrics``: each serves
        ``/metrics`` on ``metrics_ports[node]``."""
        self._format_args = tuple(format_args)
        self._cluster_id = cluster_id
        self._dir = work_dir
        self.raft_only = raft_only
        self._dir.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._overrides = dict(overrides or {})
        self.ports = dict(zip(range(1, size + 1), free_ports(size)))
        self.bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
        self.kafka_ports = dict(zip(range(1, size + 1), free_ports(size))) if kafka_listeners else {}
        self.metrics_ports = dict(zip(range(1, size + 1), free_ports(size))) if metrics else {}
        self._voters: dict[int, ChildProcess] = {}
        self._client = None  # the benchmark's own RaftClient (describe, latency), made on first use
        from quorum.security.client import PLAINTEXT, ClientSecurity

        self._ca = None
        self.security = PLAINTEXT  # how the benchmark's own clients connect
        self.command_config: Path | None = None  # the same, for the load processes
        if tls:
            from quorum.security.throwaway_ca import ThrowawayCa

            self._ca = ThrowawayCa(work_dir / "pki", organization="sparkraft bench")
            self.security = ClientSecurity("SSL", str(self._ca.truststore), str(self._ca.keystore("bench")))
            self.command_config = work_dir / "pki" / "bench.properties"
            _write_properties(self.command_config, self.security.options())

    # -- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "SparkraftCluster":
        from quorum.log.meta_properties import random_cluster_id

        cluster_id = self._cluster_id or random_cluster_id()
        formats = {node_id: ChildProcess(f"format-{node_id}", python_module_command(
            "sparkraft", "storage", "format", "--config", str(self._write_config(node_id)), "--cluster-id", cluster_id,
            *self._format_args), self._dir / f"format-{node_id}.log").start() for node_id in self.ports}
        for node_id, fmt in formats.items():
            if fmt.popen.wait() != 0:
                raise RuntimeError(f"sparkraft storage format failed for node {node_id}: {fmt.log_tail(3)}")
        for node_id in self.ports:
            self._start(node_id)
        try:
            for node_id in self.ports:
                self._wait_listening(node_id)
            if self.raft_only:
                self.wait_until_caught_up(timeout=60)
            else:
                self.client.describe_quorum()  # a leader is elected
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._client is not None:
            self._client.close()
        for voter in self._voters.values():
            voter.stop(timeout=10)

    def _write_config(self, node_id: int) -> Path:
        path = self._dir / f"controller-{node_id}.properties"
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.ports.items())
        _write_properties(path, {
            "process.roles": "controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "listeners": f"CONTROLLER://127.0.0.1:{self.ports[node_id]}" + (
                f",KAFKA://127.0.0.1:{self.kafka_ports[node_id]}" if self.kafka_ports else ""),
            "controller.listener.names": "CONTROLLER" + (",KAFKA" if self.kafka_ports else ""),
            "metadata.log.dir": str(self._dir / f"c{node_id}"),
            **({"metrics.listener": f"127.0.0.1:{self.metrics_ports[node_id]}"} if self.metrics_ports else {}),
            **({"listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.keystore.location": str(self._ca.keystore(f"controller-{node_id}")),
                "ssl.truststore.location": str(self._ca.truststore), "ssl.client.auth": "required",
                "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/"} if self._ca else {}),
            **self._overrides,
        })
        return path

    def _start(self, node_id: int) -> None:
        module = "sparkraft" if self._fsync else "bench.fsync_off"
        config = self._dir / f"controller-{node_id}.properties"
        mode = ("--raft-only",) if self.raft_only else ()
        argv = python_module_command(module, "controller", "start", *mode, "--config", str(config))
        self._voters[node_id] = ChildProcess(f"controller-{node_id}", argv,
                                             self._dir / f"controller-{node_id}.log").start()

    def _wait_listening(self, node_id: int) -> None:
        self._voters[node_id].wait_for_port("127.0.0.1", self.ports[node_id], timeout=30)

    # -- state --------------------------------------------------------------------------------
    @property
    def client(self):
        if self._client is None:
            from quorum.rpc.raft_client import RaftClient
            self._client = RaftClient(self.bootstrap, timeout=30.0, security=self.security)
        return self._client

    def leader_id(self) -> int:
        return self.client.describe_quorum().leader_id

    def wire_endpoint(self, node_id: int) -> str:
        """``127.0.0.1:PORT`` of voter ``node_id``'s wire listener, as it answers WireEndpoint."""
        import grpc

        from quorum.gen.sparkraft.v1 import raft_pb2, raft_pb2_grpc

        with grpc.insecure_channel(f"127.0.0.1:{self.ports[node_id]}") as channel:
            port = raft_pb2_grpc.RaftStub(channel).WireEndpoint(raft_pb2.WireEndpointRequest(), timeout=10).port
        return f"127.0.0.1:{port}"

    def voter(self, node_id: int) -> ChildProcess:
        return self._voters[node_id]

    def pids(self) -> dict[str, int]:
        leader = self.leader_id()
        return {("leader" if n == leader else f"follower-{n}"): v.pid
                for n, v in self._voters.items() if v.alive()}

    def wait_until_caught_up(self, timeout: float) -> None:
        """Until a leader has committed an append and every live voter holds the whole log."""
        deadline = time.monotonic() + timeout
        self.client.append([sparkraft_load.bench_record(100)])
        live = {n for n, v in self._voters.items() if v.alive()}
        while True:
            info = self.client.describe_quorum()
            behind = [v.replica_id for v in info.voters
                      if v.replica_id in live and v.log_end_offset < info.high_watermark]
            if not behind:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"voters {behind} did not catch up with the leader in {timeout:.0f}s")
            time.sleep(0.05)

    def wait_voters_caught_up(self, timeout: float, node_ids=None) -> float:
        """Until every live voter (or those given) holds the leader's high watermark as of the call;
        the seconds it took. No append: works for a metadata quorum too."""
        started = time.monotonic()
        target = self.client.describe_quorum().high_watermark
        want = set(node_ids or [n for n, v in self._voters.items() if v.alive()])
        while True:
            try:
                info = self.client.describe_quorum()
                behind = [v.replica_id for v in info.voters if v.replica_id in want and v.log_end_offset < target]
            except Exception:  # no leader for a moment
                behind = sorted(want)
            if not behind:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"voters {behind} did not reach offset {target} in {timeout:.0f}s")
            time.sleep(0.05)

    def rolling_restart(self, overrides: dict[str, str], timeout: float = 300) -> None:
        """Restart each controller in turn with ``overrides`` added to its config (SIGTERM, start,
        wait until it holds the log again), as an operator changing a setting would."""
        self._overrides.update(overrides)
        for node_id in self.ports:
            self._voters[node_id].stop(timeout=30)
            self._write_config(node_id)
            self._start(node_id)
            self._wait_listening(node_id)
            self.wait_voters_caught_up(timeout, [node_id])

    def rejoin_wiped(self, node_id: int, timeout: float = 600) -> float:
        """SIGKILL a voter, wipe its disk, re-format it with the same cluster id (``--rejoin``) and
        start it: the seconds until it holds the leader's high watermark again."""
        import shutil

        cluster_id = self.client.describe_quorum().cluster_id
        self._voters[node_id].kill()
        shutil.rmtree(self._dir / f"c{node_id}")
        config = self._dir / f"controller-{node_id}.properties"
        fmt = ChildProcess(f"format-{node_id}", python_module_command(
            "sparkraft", "storage", "format", "--config", str(config), "--cluster-id", cluster_id, "--rejoin"),
            self._dir / f"format-{node_id}.log").start()
        if fmt.popen.wait() != 0:
            raise RuntimeError(f"sparkraft storage format failed for node {node_id}: {fmt.log_tail(3)}")
        started = time.monotonic()
        self._start(node_id)
        self._wait_listening(node_id)
        self.wait_voters_caught_up(timeout, [node_id])
        return time.monotonic() - started

    def start_joiner(self, node_id: int, cluster_id: str) -> str:
        """Start controller ``node_id`` for a dynamic quorum (kraft.version 1): an empty directory
        formatted ``--no-initial-controllers``, the others named by controller.quorum.bootstrap.servers;
        it fetches as an observer until added. A voter's node id (whose process must be down and
        whose disk is gone) comes back as a new replica. Its directory id."""
        from quorum.log.meta_properties import read_meta_properties

        self.ports.setdefault(node_id, free_ports(1)[0])
        config = self._dir / f"controller-{node_id}.properties"
        others = ",".join(f"127.0.0.1:{p}" for n, p in self.ports.items() if n != node_id)
        _write_properties(config, {
            "process.roles": "controller", "node.id": str(node_id),
            "controller.quorum.bootstrap.servers": others,
            "listeners": f"CONTROLLER://127.0.0.1:{self.ports[node_id]}",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(self._dir / f"c{node_id}"),
            **({"metrics.listener": f"127.0.0.1:{self.metrics_ports[node_id]}"} if self.metrics_ports else {}),
            **self._overrides,
        })
        fmt = ChildProcess(f"format-{node_id}", python_module_command(
            "sparkraft", "storage", "format", "--config", str(config), "--cluster-id", cluster_id,
            "--no-initial-controllers"), self._dir / f"format-{node_id}.log").start()
        if fmt.popen.wait() != 0:
            raise RuntimeError(f"sparkraft storage format failed for node {node_id}: {fmt.log_tail(3)}")
        self._start(node_id)
        self._wait_listening(node_id)
        return read_meta_properties(self._dir / f"c{node_id}").directory_id

    def restart(self, node_id: int) -> None:
        """Start voter ``node_id`` again (after a kill) on its storage, listening before this returns."""
        self._start(node_id)
        self._wait_listening(node_id)

    def data_dir(self, node_id: int) -> Path:
        return self._dir / f"c{node_id}"

    # -- measurements (ReplicatedLogUnderTest) -------------------------------------------------
    def throughput(self, load: Load, seconds: float, warmup: float, op: str | None = None,
                   kafka: str | None = None) -> dict:
        """Closed-loop appends from CLIENT_PROCESSES processes (each runs its share of the writers);
        ``op``: another of bench.sparkraft_load's operations (a metadata write, on full controllers);
        ``kafka``: the Kafka listener a Kafka-protocol operation goes to."""
        with sparkraft_load.Writers(self.bootstrap, load, CLIENT_PROCESSES, warmup, seconds,
                                    self._dir, command_config=self.command_config, op=op, kafka=kafka) as writers:
            pids = {**self.pids(), **writers.pids()}
            start_in = max(0.0, writers.measured_from - time.monotonic())
            result, cpu = cpu_during(pids, start_in, seconds, writers.collect)
        return {**result, "cpu_percent": cpu}

    def latency(self, count: int, warmup: int, record_bytes: int, max_seconds: float) -> list[float]:
        """From the benchmark process, through one RaftClient (one gRPC hop to the leader)."""
        return sparkraft_load.single_writer_latencies(self.client, count, warmup, record_bytes, max_seconds)

    def failover(self, record_bytes: int, timeout: float) -> float:
        from quorum.rpc.raft_client import RaftClient

        leader = self.leader_id()
        with RaftClient(self.bootstrap, timeout=timeout) as client:
            # Find the leader first, so that no discovery is timed below.
            client.append([sparkraft_load.bench_record(record_bytes)])
            killed_at = time.monotonic()
            self._voters[leader].kill()
            try:
                # RaftClient retries (next server, leader hint, 50 ms backoff) until a leader commits.
                client.append([sparkraft_load.bench_record(record_bytes)])
            except Exception as e:
                raise TimeoutError(f"no append committed within {timeout:.0f}s of killing leader "
                                   f"{leader}: {e}") from None
            finally:
                elapsed = time.monotonic() - killed_at
                self._start(leader)
                self._wait_listening(leader)
                self.wait_until_caught_up(timeout=60)
        return elapsed
