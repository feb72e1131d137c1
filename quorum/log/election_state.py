"""What a node must remember across restarts to stay safe: Kafka's ``quorum-state``.

It is written (atomically, fsynced) before any vote is granted and before a
new epoch is acted on; the stores live in ``quorum.log.election_store``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int
    leader_id: Optional[int] = None  # leader known for this epoch
    voted_id: Optional[int] = None  # whom this node voted for in this epoch
    # Set when a voter's disk was replaced (``storage format --rejoin``): it forgot its votes
    # and the records it acknowledged, so it must not vote until it has caught up again.
    rejoining: bool = False

    @staticmethod
    def empty() -> "ElectionState":
        return ElectionState(0, None, None)
