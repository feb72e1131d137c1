"""What the controller core hands its driver (an Operation: batches to propose, the reply once they
are committed) and what it keeps of each proposed batch until it is (Inflight)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

from quorum.errors import SparkraftError
from quorum.metadata.image import MetadataImage


@dataclass
class Operation:
    """What one request (or timer) turned into.

    ``batches``: encoded records, each inner list one atomic proposal, to propose in order.
    ``reply``: the answer once the last batch is committed (at once if there are no batches).
    ``error``: the request was rejected: nothing to propose, answer with this error now.
    ``reply_fn``: if set, the reply is ``reply_fn(offset of the first record of the first batch)``.
    """

    batches: list[list[bytes]] = field(default_factory=list)
    reply: object = None
    error: Optional[SparkraftError] = None
    reply_fn: Optional[Callable[[int], object]] = None
    name: str = ""

    @property
    def record_count(self) -> int:
        return sum(len(b) for b in self.batches)


@dataclass(slots=True)
class Inflight:
    """One proposed batch, not yet committed: its offsets, and (for the last batch of an
    operation) the speculative image after it and what the operation touched."""

    base: int
    end: int
    snapshot: Optional[MetadataImage] = None
    touched: Optional[tuple[set, set, list]] = None  # partitions, topics, and blocks (their rows' partitions)
