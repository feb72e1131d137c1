"""What a request handler may use of the controller: the narrow view the ``*_control`` modules are
written against, so that none of them needs (or imports) ControllerCore, which imports them all.
ControllerCore is the one implementation; a test checks that it has every member named here."""
from __future__ import annotations

import random
from collections.abc import Collection
from typing import Optional, Protocol

from quorum.controller.index import PartitionIndex
from quorum.controller.sessions import Sessions
from quorum.controller.settings import ControllerSettings
from quorum.metadata.image import MetadataImage


class ControllerContext(Protocol):
    node_id: int
    cluster_id: str
    settings: ControllerSettings
    rng: random.Random  # seeded per node: placement and ids are reproducible in the simulation
    index: PartitionIndex  # partitions by broker, kept with the speculative image
    sessions: Sessions  # broker heartbeats (the active controller's memory, not the log)

    @property
    def spec(self) -> MetadataImage:
        """The speculative image: what the log will hold once everything proposed commits."""

    @property
    def next_write_offset(self) -> int:
        """The offset the next proposed record gets."""

    def first_record_offset(self, record_count: int) -> int:
        """The offset the first record of an operation of ``record_count`` records will get."""

    def acceptable(self, broker: int) -> bool:
        """Registered, unfenced and not shutting down: may lead a partition."""

    def new_uuid(self) -> str:
        """A fresh id no topic or ACL has (from ``rng``)."""

    def voters(self) -> Optional[Collection[int]]:
        """The quorum's voters now (None where no quorum is known: a core on its own)."""

    def reported_refusal(self, report, now_ms: int) -> list:
        """The audit entry of a refusal another controller answered (a RecordRefusalRequest), or
        none while refusals alike are being summarised (quorum/controller/audit.py)."""


MEMBERS = ("node_id", "cluster_id", "settings", "rng", "index", "sessions", "spec", "next_write_offset",
           "first_record_offset", "acceptable", "new_uuid", "voters", "reported_refusal")
