"""An open-loop writer for the overload benchmark (``python -m bench.overload_load``, JSON lines):
appends at a fixed rate whatever the answers, over a few pipelined wire connections to the leader,
one 100-byte record per append that names itself (``<process>:<seq>``), so the benchmark can look
for every acknowledged record in the log afterwards.

At most ``--max-outstanding`` appends wait for an answer; a send due while that many wait is
counted as not sent (the client's own backlog is not the server's to hold). Commands:
``{"cmd": "run", "begin": T0, "end": T1, "rate": R}`` appends at R/s from T0 to T1 and answers with
per-second counts (acknowledged, shed with a retriable refusal, failed) and the acknowledged ids.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from quorum.errors import Errors
from quorum.gen.sparkraft.v1 import raft_pb2
from quorum.rpc.wire_methods import BY_NAME
from quorum.wire.client import PeerWireConnection

APPEND = BY_NAME["Append"]
TIMEOUT_MS = 10_000


async def run(host: str, port: int, name: str, connections: int, max_outstanding: int,
              begin: float, end: float, rate: float) -> dict:
    loop = asyncio.get_running_loop()
    conns = [PeerWireConnection(loop, host, port, "", lambda c, e: None) for _ in range(connections)]
    seconds = int(end - begin + 0.999) + 30
    acked, shed, failed = [0] * seconds, [0] * seconds, [0] * seconds
    acked_ids: list[str] = []
    outstanding = 0
    not_sent = 0
    done_all = asyncio.Event()

    def answered(record_id: str, response, error) -> None:
        nonlocal outstanding
        outstanding -= 1
        second = min(seconds - 1, max(0, int(time.monotonic() - begin)))
        if error is None and response.error == 0:
            acked[second] += 1
            acked_ids.append(record_id)
        elif error is None and Errors(response.error) is Errors.REQUEST_TIMED_OUT:
            shed[second] += 1
        else:
            failed[second] += 1
        if outstanding == 0 and time.monotonic() >= end:
            done_all.set()

    await asyncio.sleep(max(0.0, begin - time.monotonic()))
    seq = 0
    while (now := time.monotonic()) < end:
        due = int((now - begin) * rate)
        while seq < due:
            if outstanding >= max_outstanding:
                not_sent += due - seq
                seq = due
                break
            record_id = f"{name}:{seq}"
            request = raft_pb2.AppendRequest(records=[record_id.encode().ljust(100, b".")])
            outstanding += 1
            conns[seq % connections].request(APPEND, request, TIMEOUT_MS,
                                             lambda r, e, i=record_id: answered(i, r, e))
            seq += 1
        await asyncio.sleep(0.002)
    if outstanding:
        try:
            await asyncio.wait_for(done_all.wait(), TIMEOUT_MS / 1000 + 5)
        except asyncio.TimeoutError:
            pass
    for conn in conns:
        conn.close()
    return {"ok": True, "sent": seq - not_sent, "not_sent": not_sent, "acked_per_s": acked, "shed_per_s": shed,
            "failed_per_s": failed, "acked_ids": acked_ids, "unanswered": outstanding}


def main() -> None:
    parser = argparse.ArgumentParser(description="an open-loop writer (run by bench overload)")
    parser.add_argument("--wire", required=True, help="the leader's wire listener, HOST:PORT")
    parser.add_argument("--name", required=True)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--max-outstanding", type=int, default=4000)
    args = parser.parse_args()
    host, port = args.wire.rsplit(":", 1)
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    command = json.loads(sys.stdin.readline())
    result = asyncio.run(run(host, int(port), args.name, args.connections, args.max_outstanding,
                             command["begin"], command["end"], command["rate"]))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
