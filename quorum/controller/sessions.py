"""Broker sessions: the active controller's memory of each broker's last heartbeat, not the log."""
from __future__ import annotations

import heapq
from typing import Callable, Optional


class Sessions:
    """Last heartbeat time and reported metadata offset per broker (the active controller's memory
    only: DescribeCluster answers the offsets, for partition leaders' ISR expansion), and a heap of contacts
    ordered by (time, broker) as Kafka's BrokerHeartbeatManager orders them: the next expiry and the
    broker that expired first are read off its front, not found by scanning every broker on each pass
    of the controller's loop (at 10,000 brokers that scan was the controller's main cost). A contact
    that a later one replaced stays in the heap until it reaches the front and is dropped there."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.last_contact: dict[int, int] = {}
        self.reported_offsets: dict[int, int] = {}  # broker -> metadata offset of its last heartbeat
        self._heap: list[tuple[int, int]] = []  # (contact time, broker), stale entries included

    def touch(self, broker: int, now_ms: int) -> None:
        self.last_contact[broker] = now_ms
        heapq.heappush(self._heap, (now_ms, broker))

    def forget(self, broker: int) -> None:
        self.last_contact.pop(broker, None)
        self.reported_offsets.pop(broker, None)

    def valid(self, broker: int, now_ms: int) -> bool:
        last = self.last_contact.get(broker)
        return last is not None and now_ms <= last + self.timeout_ms

    def oldest(self, watched: Callable[[int], bool]) -> Optional[tuple[int, int]]:
        """(last contact, broker) of the broker heard from longest ago among those ``watched`` holds
        (unfenced ones), or None. Contacts of brokers not watched are dropped from the heap: a broker
        must heartbeat to be unfenced, and that contact is pushed anew."""
        heap, last = self._heap, self.last_contact
        while heap:
            at, broker = heap[0]
            if last.get(broker) == at and watched(broker):
                return at, broker
            heapq.heappop(heap)
        return None
