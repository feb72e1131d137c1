"""A 3-node PySyncObj cluster on loopback, one process per node, and the measurements on it.

The nodes are :mod:`bench.peers.pysyncobj_node` processes driven over stdin/stdout. PySyncObj keeps
its log in memory by default and never fsyncs (even its optional journal file is only written to
the page cache), so it is compared with sparkraft both with and without fsync.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from bench.harness.procs import ChildProcess, cpu_during, free_ports, python_module_command
from bench.harness.workload import Load

# SyncObjConf keyword arguments per variant. "default" is the library as shipped. "tuned" keeps
# batching but ticks and sends AppendEntries every few ms instead of every 50/100 ms, with bigger
# batches and socket buffers (election timeouts stay at the defaults). "unbatched" sends each
# command at once (the library's advice for single-request latency: appendEntriesUseBatch=False).
VARIANTS: dict[str, dict] = {
    "default": {},
    "tuned": {"autoTickPeriod": 0.002, "appendEntriesPeriod": 0.005, "raftMinTimeout": 0.4,
              "raftMaxTimeout": 1.4, "appendEntriesBatchSizeBytes": 2 ** 20,
              "sendBufferSize": 2 ** 20, "recvBufferSize": 2 ** 20},
    "unbatched": {"appendEntriesUseBatch": False, "autoTickPeriod": 0.002},
}


class PySyncObjCluster:
    def __init__(self, work_dir: Path, conf: dict, size: int = 3) -> None:
        self._dir = work_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self._conf = conf
        self.addresses = [f"127.0.0.1:{port}" for port in free_ports(size)]
        self._nodes: dict[str, ChildProcess] = {}
        self._leader: str | None = None  # address every live node last agreed leads

    def __enter__(self) -> "PySyncObjCluster":
        for address in self.addresses:
            self._start(address)
        self.wait_for_leader(timeout=30)
        return self

    def __exit__(self, *exc) -> None:
        for node in self._nodes.values():
            node.stop(timeout=5)

    def _start(self, address: str) -> None:
        partners = ",".join(a for a in self.addresses if a != address)
        argv = python_module_command("bench.peers.pysyncobj_node", "--self", address,
                                     "--partners", partners, "--conf", json.dumps(self._conf))
        name = f"pysyncobj-{address.rsplit(':', 1)[1]}"
        self._nodes[address] = ChildProcess(name, argv, self._dir / f"{name}.log",
                                            json_control=True).start()

    def pids(self) -> dict[str, int]:
        """By role, numbered in address order as sparkraft's voters are (``follower-2``...)."""
        return {("leader" if a == self._leader else f"follower-{i}"): node.pid
                for i, (a, node) in enumerate(self._nodes.items(), start=1) if node.alive()}

    def wait_for_leader(self, timeout: float) -> str:
        """Until every live node names the same leader and is ready; returns that leader's address."""
        deadline = time.monotonic() + timeout
        while True:
            answers = [n.call({"cmd": "status"}, timeout=10) for n in self._nodes.values() if n.alive()]
            leaders = {a["leader"] for a in answers}
            if len(leaders) == 1 and None not in leaders and all(a["ready"] for a in answers):
                self._leader = leaders.pop()
                return self._leader
            if time.monotonic() > deadline:
                raise TimeoutError(f"PySyncObj elected no common leader in {timeout:.0f}s: {answers}")
            time.sleep(0.1)

    def throughput(self, load: Load, seconds: float, warmup: float) -> dict:
        """Committed commands/s, run inside the leader's process. PySyncObj has no batched call, so
        the load's records in flight become that many outstanding one-record calls."""
        leader = self._nodes[self._leader]
        command = {"cmd": "throughput", "seconds": seconds, "warmup": warmup,
                   "inflight": load.in_flight, "payload_bytes": load.record_bytes}
        result, cpu = cpu_during(self.pids(), warmup, seconds,
                                 lambda: leader.call(command, timeout=warmup + seconds + 60))
        return {**result, "cpu_percent": cpu}

    def latency(self, count: int, warmup: int, record_bytes: int, max_seconds: float) -> list[float]:
        """Seconds per synchronous call, one at a time, from the leader's process."""
        answer = self._nodes[self._leader].call(
            {"cmd": "latency", "count": count, "warmup": warmup, "payload_bytes": record_bytes,
             "max_seconds": max_seconds}, timeout=max_seconds + 60)
        return answer["latencies_s"]

    def failover(self, record_bytes: int, timeout: float) -> float:
        """SIGKILL the leader; seconds until a survivor's call commits. The node is then restarted."""
        killed = self._leader
        survivor = next(a for a in self.addresses if a != killed)
        killed_at = time.monotonic()
        self._nodes[killed].kill()
        answer = self._nodes[survivor].call(
            {"cmd": "await_commit", "timeout": timeout, "interval": 0.005,
             "payload_bytes": record_bytes}, timeout=timeout + 10)
        self._start(killed)
        self.wait_for_leader(timeout=30)
        if answer["committed_at"] is None:
            raise TimeoutError(f"no PySyncObj call committed within {timeout:.0f}s of killing the leader")
        return answer["committed_at"] - killed_at
