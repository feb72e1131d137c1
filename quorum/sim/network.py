"""The simulated network: delays, drops, duplicates and partitions, all from one seeded RNG."""
from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class NetworkFaults:
    drop_rate: float = 0.0  # chance a message is lost
    duplicate_rate: float = 0.0  # chance a message is delivered twice
    min_delay_ms: int = 1
    max_delay_ms: int = 5


@dataclass
class Network:
    rng: random.Random
    faults: NetworkFaults = field(default_factory=NetworkFaults)
    blocked: set[tuple[int, int]] = field(default_factory=set)  # (src, dst) pairs that cannot talk

    def partition(self, *groups: set[int]) -> None:
        """Cut every link between different groups (links inside a group stay up)."""
        self.blocked.clear()
        for i, a in enumerate(groups):
            for b in groups[i + 1:]:
                for x in a:
                    for y in b:
                        self.blocked.add((x, y))
                        self.blocked.add((y, x))

    def isolate(self, node: int, others: set[int]) -> None:
        self.partition({node}, set(others) - {node})

    def heal(self) -> None:
        self.blocked.clear()

    def connected(self, src: int, dst: int) -> bool:
        return (src, dst) not in self.blocked

    def deliveries(self) -> list[int]:
        """Delays (ms) at which one sent message arrives: [] if dropped, two if duplicated."""
        f = self.faults
        if self.rng.random() < f.drop_rate:
            return []
        out = [self.rng.randint(f.min_delay_ms, f.max_delay_ms)]
        if self.rng.random() < f.duplicate_rate:
            out.append(self.rng.randint(f.min_delay_ms, f.max_delay_ms * 3))
        return out
