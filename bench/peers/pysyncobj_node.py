"""One PySyncObj node, driven by JSON lines on stdin (one answer per line on stdout).

Run by :mod:`bench.peers.pysyncobj_cluster`, never by hand::

    python -m bench.peers.pysyncobj_node --self 127.0.0.1:P1 --partners 127.0.0.1:P2,127.0.0.1:P3 \
        --conf '{"appendEntriesPeriod": 0.01}'

The replicated state machine counts the 100-byte payloads it applies (sparkraft's log keeps records
and applies nothing, so neither side pays for a growing state). PySyncObj has no client protocol:
a caller lives in a node's process, so the load runs inside the leader's process (its best case).

Commands: ``status``, ``throughput`` (closed loop with ``inflight`` calls outstanding),
``latency`` (one synchronous call at a time), ``await_commit`` (retry until a call commits: the end
of a failover) and ``quit``. Logging goes to stderr.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated


class Counter(SyncObj):
    def __init__(self, self_address: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(self_address, partners, conf)
        self._count = 0
        self._bytes = 0

    @replicated
    def add(self, payload: bytes) -> int:
        self._count += 1
        self._bytes += len(payload)
        return self._count


def status(node: Counter) -> dict:
    leader = node._getLeader()
    return {"self": node.selfNode.address, "leader": leader.address if leader else None,
            "ready": node.isReady(), "commit_index": node.raftCommitIndex}


def throughput(node: Counter, seconds: float, warmup: float, inflight: int, payload_bytes: int) -> dict:
    """Keep ``inflight`` calls outstanding; count those committed inside the measured window."""
    payload = b"x" * payload_bytes
    begin = time.monotonic() + warmup
    end = begin + seconds
    counts = {"committed": 0, "errors": 0, "outstanding": inflight}
    finished = threading.Event()

    def on_result(_result, error) -> None:  # runs on PySyncObj's tick thread, one at a time
        now = time.monotonic()
        if error == FAIL_REASON.SUCCESS:
            if begin <= now < end:
                counts["committed"] += 1
        else:
            counts["errors"] += 1
        if now < end:
            node.add(payload, callback=on_result)
        else:
            counts["outstanding"] -= 1
            if counts["outstanding"] == 0:
                finished.set()

    for _ in range(inflight):
        node.add(payload, callback=on_result)
    finished.wait(timeout=warmup + seconds + 30)
    return {"committed": counts["committed"], "seconds": seconds, "errors": counts["errors"],
            "records_per_s": counts["committed"] / seconds}


def latency(node: Counter, count: int, warmup: int, payload_bytes: int, max_seconds: float) -> dict:
    payload = b"x" * payload_bytes
    samples = []
    stop_at = time.monotonic() + max_seconds
    for i in range(warmup + count):
        start = time.perf_counter()
        node.add(payload, sync=True, timeout=10)
        if i >= warmup:
            samples.append(time.perf_counter() - start)
        if time.monotonic() > stop_at:
            break
    return {"latencies_s": samples}


def await_commit(node: Counter, timeout: float, interval: float, payload_bytes: int) -> dict:
    """Submit a call every ``interval`` s until one commits; its commit time ends a failover.

    Calls are not awaited one by one: one sent to the dead leader is never answered, and waiting
    for it would hide when the new leader started committing.
    """
    payload = b"x" * payload_bytes
    committed = threading.Event()
    first: list[float] = []

    def on_result(_result, error) -> None:
        if error == FAIL_REASON.SUCCESS and not first:
            first.append(time.monotonic())
            committed.set()

    deadline = time.monotonic() + timeout
    attempts = 0
    while time.monotonic() < deadline and not committed.is_set():
        attempts += 1
        node.add(payload, callback=on_result)
        committed.wait(interval)
    return {"committed_at": first[0] if first else None, "attempts": attempts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--self", required=True, dest="self_address")
    parser.add_argument("--partners", required=True)
    parser.add_argument("--conf", default="{}", help="SyncObjConf keyword arguments as JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    node = Counter(args.self_address, args.partners.split(","), SyncObjConf(**json.loads(args.conf)))
    commands = {
        "status": lambda _: status(node),
        "throughput": lambda c: throughput(node, c["seconds"], c["warmup"], c["inflight"],
                                           c["payload_bytes"]),
        "latency": lambda c: latency(node, c["count"], c["warmup"], c["payload_bytes"], c["max_seconds"]),
        "await_commit": lambda c: await_commit(node, c["timeout"], c["interval"], c["payload_bytes"]),
    }
    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "quit":
            break
        try:
            answer = {"ok": True, **commands[command["cmd"]](command)}
        except Exception as e:  # answer, so the driver reports it instead of hanging
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        print(json.dumps(answer), flush=True)
    node.destroy()


if __name__ == "__main__":
    main()
