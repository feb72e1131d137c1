"""Which log directory each replica is in (KIP-858, metadata.version 3.7-IV2 and later), as Kafka's
controller decides it: a new replica goes to its broker's only log directory if it has one, is
UNASSIGNED (the broker picks, then says which with AssignReplicasToDirs) if it has several, and
MIGRATING (not known) on a broker that registered none (sparkraft's own brokers hold no data)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Sequence

from quorum.controller.levels import directories_enabled
from quorum.metadata.topics import MIGRATING, UNASSIGNED

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext


def default_dir_of(ctx: "ControllerContext") -> Optional[Callable[[int], str]]:
    """broker -> the directory a new replica there starts in; None where no directory is known of
    any broker (below 3.7-IV2, or only brokers without log directories): partitions then carry none."""
    image = ctx.spec
    if not directories_enabled(image):
        return None
    brokers = image.cluster.brokers
    if not any(b.log_dirs for b in brokers.values()):
        return None
    cache: dict[int, str] = {}

    def default_dir(broker_id: int) -> str:
        found = cache.get(broker_id)
        if found is None:
            registration = brokers.get(broker_id)
            if registration is None:
                found = UNASSIGNED
            elif not registration.log_dirs:
                found = MIGRATING
            else:
                found = registration.log_dirs[0] if len(registration.log_dirs) == 1 else UNASSIGNED
            cache[broker_id] = found
        return found
    return default_dir


def new_directories(default_dir: Optional[Callable[[int], str]], replicas: Sequence[int]) -> list[str]:
    """A new partition's directories (none: not known)."""
    if default_dir is None:
        return []
    dirs = [default_dir(b) for b in replicas]
    return [] if all(d == MIGRATING for d in dirs) else dirs
