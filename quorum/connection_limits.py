"""What connections may cost a listener, whatever its protocol: how many are admitted (in all, per
client address, per second), how long one may stay silent or take to send a request, and how many
bytes of requests still arriving all of them may hold. The wire (quorum/wire/server.py), the
Kafka listener (quorum/kafka/server.py) and gRPC (quorum/node/server.py: what gRPC's own options
can express) read the same ``ConnectionLimits``, filled from the same config keys as Kafka's.

Sans-I/O: ``ConnectionGate`` decides admissions from the addresses and a clock it is given,
``BufferBudget`` counts bytes; the servers close, pause and resume.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

UNBOUNDED = 2**31 - 1  # Kafka's Int.MaxValue: "no limit"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """One listener's bounds; each field names the config key that sets it (quorum/config.py)."""

    max_connections: int = 10_000  # max.connections: open at once on the listener
    max_connections_per_ip: int = 1_000  # max.connections.per.ip
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)  # max.connections.per.ip.overrides
    max_creation_rate: int = UNBOUNDED  # max.connection.creation.rate: new connections a second
    idle_timeout_s: float = 600.0  # connections.max.idle.ms: no request and nothing in flight
    request_arrival_s: float = 30.0  # socket.request.arrival.timeout.ms: first byte -> last of a request
    max_buffered_bytes: int = 64 * 1024 * 1024  # queued.max.request.bytes: requests still arriving, all connections
    max_unauthenticated_bytes: int = 512 * 1024  # sasl.server.max.receive.size: a request before a login

    def per_ip(self, host: str) -> int:
        return self.per_ip_overrides.get(host, self.max_connections_per_ip)


DEFAULT_LIMITS = ConnectionLimits()


class ConnectionGate:
    """Admits connections to one listener. ``admit(host)`` counts the connection and returns None,
    or returns why it is refused (and counts nothing); ``release(host)`` when it closes. One
    thread's (the listener's loop)."""

    def __init__(self, limits: ConnectionLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self._clock = clock
        self.open = 0
        self._per_host: dict[str, int] = {}
        # max.connection.creation.rate as a token bucket holding at most a second's worth
        self._tokens = float(min(limits.max_creation_rate, UNBOUNDED))
        self._refilled = clock()
        self.refused = 0

    def admit(self, host: str) -> Optional[str]:
        why = self._refusal(host)
        if why is not None:
            self.refused += 1
            return why
        self.open += 1
        self._per_host[host] = self._per_host.get(host, 0) + 1
        return None

    def _refusal(self, host: str) -> Optional[str]:
        limits = self.limits
        if self.open >= limits.max_connections:
            return f"{self.open} connections are open (max.connections={limits.max_connections})"
        allowed = limits.per_ip(host)
        held = self._per_host.get(host, 0)
        if held >= allowed:
            return f"{host} holds {held} connections (max.connections.per.ip={allowed})"
        if limits.max_creation_rate < UNBOUNDED:
            now = self._clock()
            rate = limits.max_creation_rate
            self._tokens = min(float(rate), self._tokens + (now - self._refilled) * rate)
            self._refilled = now
            if self._tokens < 1.0:
                return f"more than {rate} new connections a second (max.connection.creation.rate)"
            self._tokens -= 1.0
        return None

    def release(self, host: str) -> None:
        held = self._per_host.get(host, 0)
        if held == 0:
            return  # never admitted
        if held == 1:
            del self._per_host[host]
        else:
            self._per_host[host] = held - 1
        self.open -= 1


class BufferBudget:
    """Bytes of requests still arriving, over every connection of a listener (Kafka's
    queued.max.request.bytes): past ``limit``, a server stops reading the connections that hold
    part of a request until others finish theirs or close."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0

    def change(self, delta: int) -> None:
        self.held += delta

    @property
    def exhausted(self) -> bool:
        return self.held >= self.limit


# Bytes of log in Fetch answers at once, per listener: two of the leader's largest answers (8 MiB
# each); an answer's bytes are copied a few times on the way out (read, exported to Kafka's format,
# encoded, framed), so this keeps hostile fetches of the whole log to well under 100 MB.
ANSWER_BYTES = 16 << 20


class AnswerBudget:
    """Bytes of log in answers not yet written out, over every connection of a listener. A Fetch
    asks for up to the leader's fetch cap (8 MiB); it is granted what is left of ``limit``, and at
    least 1 byte (one whole batch: a fetcher always progresses), so many fetches at once, or slow
    readers of their answers, hold at most ``limit`` plus one batch each. Handler threads take,
    the listener's loop gives back once the answer is written: thread-safe."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self._lock = threading.Lock()

    def take(self, want: int) -> int:
        with self._lock:
            granted = max(1, min(want, self.limit - self.held))
            self.held += granted
            return granted

    def give(self, granted: int) -> None:
        if granted:
            with self._lock:
                self.held -= granted
