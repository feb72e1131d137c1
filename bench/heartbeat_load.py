"""A load process of simulated brokers (``python -m bench.heartbeat_load``, driven by JSON lines):
each registers with the active controller, then heartbeats every ``--interval-ms`` reporting its
registration offset as applied (so it is caught up and unfenced), as a broker process would.

Lightweight on purpose: one asyncio loop and one wire connection per controller
(quorum/wire/client.py) carry thousands of brokers, so 10,000 brokers need a few processes, not
10,000. A NOT_CONTROLLER answer that names the active controller moves every broker there; a
broker the controller forgot (BROKER_ID_NOT_REGISTERED, STALE_BROKER_EPOCH) registers again.

Protocol on stdin/stdout: it prints ``{"ready": true}`` once every broker is registered and
unfenced (its first heartbeat answered not fenced), then
takes ``{"cmd": "run", "end": T, "kill_at": K}`` (``time.monotonic()`` values) and heartbeats until
``end``; it answers with the latencies of the heartbeats that succeeded (all, and those sent before
``kill_at``), how many failed, the answers that said fenced, and per broker the first success
among heartbeats sent after ``kill_at``.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time

from quorum.controller import api
from quorum.errors import Errors
from quorum.rpc import controller_convert as cc
from quorum.rpc.wire_methods import BY_NAME
from quorum.uuids import random_uuid
from quorum.wire.client import PeerWireConnection

REGISTER, HEARTBEAT = BY_NAME["RegisterBroker"], BY_NAME["BrokerHeartbeat"]
MAX_REGISTRATIONS_IN_FLIGHT = 64
_FORGOTTEN = (Errors.BROKER_ID_NOT_REGISTERED, Errors.STALE_BROKER_EPOCH)


class Brokers:
    def __init__(self, loop, endpoints: dict[int, tuple[str, int]], cluster_id: str, ids: range, interval_ms: int):
        self.loop = loop
        self.endpoints = endpoints  # controller id -> its wire listener
        self.cluster_id = cluster_id
        self.ids = ids
        self.interval = interval_ms / 1000
        self.active = next(iter(endpoints))
        self.connections: dict[int, PeerWireConnection] = {}
        self.epochs: dict[int, int] = {}
        self.latencies: list[float] = []
        self.latencies_before_kill: list[float] = []  # of heartbeats sent before kill_at
        self.failures = 0
        self.fenced_answers = 0
        self.reregistered = 0
        self.kill_at = float("inf")
        self.first_after_kill: dict[int, float] = {}
        self.measuring = False

    def _connection(self) -> PeerWireConnection:
        conn = self.connections.get(self.active)
        if conn is None or conn.closed:
            host, port = self.endpoints[self.active]
            conn = self.connections[self.active] = PeerWireConnection(self.loop, host, port, "", lambda c, e: None)
        return conn

    def call(self, method, request) -> asyncio.Future:
        """The response message (or the WireCallError) of one request to the active controller."""
        future = self.loop.create_future()

        def done(response, error):
            if not future.done():
                future.set_result(error if error is not None else response)
        self._connection().request(method, cc.request_to_proto(request), int(max(1.0, self.interval) * 1000), done)
        return future

    def _redirect(self, response) -> None:
        """Follow NOT_CONTROLLER to the controller it names (or the next one if it names none)."""
        leader = getattr(response, "leader_id", -1)
        if leader in self.endpoints:
            self.active = leader
        else:
            self._next()

    async def register(self, broker_id: int) -> None:
        request = api.RegisterBrokerRequest(broker_id, self.cluster_id, random_uuid(),
                                            (api.BrokerEndpoint("PLAINTEXT", "127.0.0.1", 20000 + broker_id % 40000),),
                                            rack=f"rack-{broker_id % 3}")
        while True:
            response = await self.call(REGISTER, request)
            error = getattr(response, "error", None)
            if error == 0:
                self.epochs[broker_id] = response.broker_epoch
                return
            if error is None or Errors(error) in (Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT):
                if error is None:
                    self._next()
                else:
                    self._redirect(response)
                await asyncio.sleep(0.05)
                continue
            raise RuntimeError(f"broker {broker_id}: registration refused: {response.error_message}")

    def _next(self) -> None:
        ids = list(self.endpoints)
        self.active = ids[(ids.index(self.active) + 1) % len(ids)]

    async def register_all(self) -> None:
        gate = asyncio.Semaphore(MAX_REGISTRATIONS_IN_FLIGHT)

        async def one(broker_id):
            async with gate:
                await self.register(broker_id)
        await asyncio.gather(*(one(b) for b in self.ids))

    async def unfence_all(self) -> None:
        """One heartbeat per broker until the answer says unfenced: a broker's first heartbeat as
        caught up is a write (the controller unfences it), later ones are not, so the run that is
        measured is the steady state."""
        gate = asyncio.Semaphore(MAX_REGISTRATIONS_IN_FLIGHT)

        async def one(broker_id):
            async with gate:
                while True:
                    epoch = self.epochs[broker_id]
                    response = await self.call(HEARTBEAT, api.BrokerHeartbeatRequest(broker_id, epoch, epoch))
                    if getattr(response, "error", None) == 0:
                        if not response.is_fenced:
                            return
                    else:
                        await self._recover(broker_id, response)
                    await asyncio.sleep(0.05)
        await asyncio.gather(*(one(b) for b in self.ids))

    async def heartbeat(self, broker_id: int) -> None:
        sent = time.monotonic()
        epoch = self.epochs[broker_id]
        response = await self.call(HEARTBEAT, api.BrokerHeartbeatRequest(broker_id, epoch, epoch))
        now = time.monotonic()
        error = getattr(response, "error", None)
        if error == 0:
            if self.measuring:
                self.latencies.append(now - sent)
                if sent < self.kill_at:
                    self.latencies_before_kill.append(now - sent)
                self.fenced_answers += response.is_fenced
            if sent >= self.kill_at and broker_id not in self.first_after_kill:
                self.first_after_kill[broker_id] = now
            return
        if self.measuring:
            self.failures += 1
        await self._recover(broker_id, response)

    async def _recover(self, broker_id: int, response) -> None:
        """After a failed heartbeat: the next controller (no answer), the one a NOT_CONTROLLER names,
        or a new registration (the controller forgot the broker)."""
        error = getattr(response, "error", None)
        if error is None:
            self._next()
        elif Errors(error) is Errors.NOT_CONTROLLER:
            self._redirect(response)
        elif Errors(error) in _FORGOTTEN:
            self.reregistered += self.measuring
            await self.register(broker_id)

    async def run(self, end: float) -> None:
        """Each broker heartbeats every interval from a random phase, until ``end``."""
        start = time.monotonic()
        due = sorted((start + random.random() * self.interval, b) for b in self.ids)
        pending: set[asyncio.Task] = set()
        while time.monotonic() < end:
            now = time.monotonic()
            fired = 0
            while fired < len(due) and due[fired][0] <= now:
                task = self.loop.create_task(self.heartbeat(due[fired][1]))
                pending.add(task)
                task.add_done_callback(pending.discard)
                fired += 1
            if fired:
                due = due[fired:] + sorted((t + self.interval, b) for t, b in due[:fired])
                due.sort()
            await asyncio.sleep(0.005)
        if pending:
            await asyncio.wait(pending, timeout=5)


async def _main(args) -> None:
    loop = asyncio.get_running_loop()
    endpoints = {int(k): (h, int(p)) for k, hp in json.loads(args.controllers).items() for h, p in [hp.rsplit(":", 1)]}
    brokers = Brokers(loop, endpoints, args.cluster_id, range(args.first_id, args.first_id + args.count),
                      args.interval_ms)
    await brokers.register_all()
    await brokers.unfence_all()
    print(json.dumps({"ok": True, "ready": True}), flush=True)
    command = json.loads(await loop.run_in_executor(None, sys.stdin.readline))
    brokers.kill_at = command.get("kill_at") or float("inf")
    brokers.measuring = True
    await brokers.run(command["end"])
    print(json.dumps({"ok": True, "latencies_s": brokers.latencies,
                      "latencies_before_kill_s": brokers.latencies_before_kill, "failures": brokers.failures,
                      "fenced_answers": brokers.fenced_answers, "reregistered": brokers.reregistered,
                      "first_after_kill": brokers.first_after_kill, "brokers": args.count}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="simulated brokers heartbeating (run by bench heartbeats)")
    parser.add_argument("--controllers", required=True, help='JSON {"id": "host:wireport", ...}')
    parser.add_argument("--cluster-id", required=True)
    parser.add_argument("--first-id", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--interval-ms", type=int, default=2000)
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
