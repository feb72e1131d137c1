"""Leader election and ISR changes as sparse PartitionChangeRecords (Kafka's PartitionChangeBuilder).

A change names a target ISR (and optionally target replicas) and an election kind:

- ``ANY`` (the default): keep the current leader if it is still a valid leader (in the target ISR
  and acceptable: registered, unfenced, not in controlled shutdown); otherwise the first valid
  replica in replica order; otherwise no leader (-1).
- ``PREFERRED``: the first replica if valid; else as ``ANY``.
- ``UNCLEAN``: as ``ANY``, but when no ISR member is acceptable, the first acceptable replica even
  outside the ISR, which then becomes the whole ISR (data loss is accepted).

A partition being reassigned (``adding``/``removing`` replicas) completes in whichever change
first finds every replica it keeps in the ISR: the removed replicas go, and a leader among them
moves to a kept replica. A replica leaving the replicas bumps the leader epoch.

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
           election: Election = Election.ANY, target_adding: Optional[Sequence[int]] = None,
           target_removing: Optional[Sequence[int]] = None) -> Optional[pb.PartitionChangeRecord]:
    """The sparse record taking ``p`` to the target, or None if nothing would change."""
    replicas = tuple(target_replicas) if target_replicas is not None else p.replicas
    adding = tuple(target_adding) if target_adding is not None else p.adding_replicas
    removing = tuple(target_removing) if target_removing is not None else p.removing_replicas
    isr = tuple(b for b in (target_isr if target_isr is not None else p.isr) if b in replicas)
    if not isr:
        isr = tuple(b for b in p.isr if b in replicas) or p.isr  # never an empty ISR
    if adding or removing:
        replicas, isr, adding, removing = complete_reassignment(replicas, isr, adding, removing)
    leader, unclean = elect_leader(p, replicas, isr, acceptable, election)
    if unclean:
        isr = (leader,)
    record = pb.PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    changed = False
    if leader != p.leader or (leader != NO_LEADER and not set(p.replicas) <= set(replicas)):
        record.leader = leader  # a replica leaving bumps the leader epoch (Kafka does the same)
        changed = True
    if isr != p.isr:
        record.isr.ids.extend(isr)
        changed = True
    if replicas != p.replicas:
        record.replicas.ids.extend(replicas)
        changed = True
    if adding != p.adding_replicas:
        record.adding_replicas.SetInParent()
        record.adding_replicas.ids.extend(adding)
        changed = True
    if removing != p.removing_replicas:
        record.removing_replicas.SetInParent()
        record.removing_replicas.ids.extend(removing)
        changed = True
    return record if changed else None


def complete_reassignment(replicas: tuple[int, ...], isr: tuple[int, ...], adding: tuple[int, ...],
                          removing: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """(replicas, isr, adding, removing) after a reassignment completes, if it can: once every
    replica it keeps is in the ISR, the removed ones leave the replicas and the ISR (Kafka's
    PartitionReassignmentReplicas.maybeCompleteReassignment). Otherwise as given."""
    kept = tuple(b for b in replicas if b not in removing)
    kept_isr = tuple(b for b in isr if b not in removing)
    if kept and kept_isr and set(kept) <= set(kept_isr):
        return kept, kept_isr, (), ()
    return replicas, isr, adding, removing
