"""Leader election and ISR changes as sparse PartitionChangeRecords (Kafka's PartitionChangeBuilder).

A change names a target ISR (and optionally target replicas) and an election kind:

- ``ANY`` (the default): keep the current leader if it is still a valid leader (in the target ISR
  and acceptable: registered, unfenced, not in controlled shutdown); otherwise the first valid
  replica in replica order; otherwise no leader (-1).
- ``PREFERRED``: the first replica if valid; else as ``ANY``.
- ``UNCLEAN``: as ``ANY``, but when no ISR member is acceptable, the first acceptable replica even
  outside the ISR, which then becomes the whole ISR (data loss is accepted).

The ISR is never made empty (Kafka without ELR keeps the last member): a target ISR that would be
empty leaves the ISR as it is, and the partition goes leaderless if that member cannot lead.
The record holds only what changed; nothing changed gives None (no record).
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.topics import NO_LEADER, PartitionRegistration


class Election(enum.Enum):
    ANY = "ANY"
    PREFERRED = "PREFERRED"
    UNCLEAN = "UNCLEAN"


def elect_leader(p: PartitionRegistration, replicas: Sequence[int], isr: Sequence[int],
                 acceptable: Callable[[int], bool], election: Election) -> tuple[int, bool]:
    """(new leader or -1, whether the election was unclean)."""

    def valid(b: int) -> bool:
        return b in isr and acceptable(b)

    if election is Election.PREFERRED and replicas and valid(replicas[0]):
        return replicas[0], False
    if p.leader != NO_LEADER and p.leader in replicas and valid(p.leader):
        return p.leader, False
    for b in replicas:
        if valid(b):
            return b, False
    if election is Election.UNCLEAN:
        for b in replicas:
            if acceptable(b):
                return b, True
    return NO_LEADER, False


def change(topic_id: str, partition_id: int, p: PartitionRegistration, acceptable: Callable[[int], bool],
           target_isr: Optional[Sequence[int]] = None, target_replicas: Optional[Sequence[int]] = None,
           election: Election = Election.ANY) -> Optional[pb.PartitionChangeRecord]:
    """The sparse record taking ``p`` to the target, or None if nothing would change."""
    replicas = tuple(target_replicas) if target_replicas is not None else p.replicas
    isr = tuple(b for b in (target_isr if target_isr is not None else p.isr) if b in replicas)
    if not isr:
        isr = tuple(b for b in p.isr if b in replicas) or p.isr  # never an empty ISR
    leader, unclean = elect_leader(p, replicas, isr, acceptable, election)
    if unclean:
        isr = (leader,)
    record = pb.PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    changed = False
    if leader != p.leader:
        record.leader = leader
        changed = True
    if isr != p.isr:
        record.isr.ids.extend(isr)
        changed = True
    if replicas != p.replicas:
        record.replicas.ids.extend(replicas)
        changed = True
    return record if changed else None
