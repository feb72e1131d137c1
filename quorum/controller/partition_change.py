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

Without eligible leader replicas the ISR is never made empty (Kafka keeps the last member): a
target ISR that would be empty leaves the ISR as it is, and the partition goes leaderless if that
member cannot lead. With them (``Elr``, KIP-966) the ISR may empty: a member that leaves it while
it is below ``min.insync.replicas`` joins the ELR, and with the ISR empty an ELR member may lead
(it then becomes the ISR); an unclean election or ELR turned off clears the ELR.
The record holds only what changed; nothing changed gives None (no record).
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.change_block import UNCHANGED_LEADER
from quorum.metadata.topics import NO_LEADER, PartitionRegistration


class Election(enum.Enum):
    ANY = "ANY"
    PREFERRED = "PREFERRED"
    UNCLEAN = "UNCLEAN"


@dataclass(frozen=True, slots=True)
class Elr:
    """Eligible leader replicas are on for the partition's topic (KIP-966): its effective
    ``min.insync.replicas``, and the brokers known to have shut down uncleanly (never eligible)."""

    min_isr: int
    unclean_shutdown: tuple[int, ...] = ()


def elect_leader(p: PartitionRegistration, replicas: Sequence[int], isr: Sequence[int],
                 acceptable: Callable[[int], bool], election: Election,
                 elr: Sequence[int] = ()) -> tuple[int, bool]:
    """(new leader or -1, whether the election was unclean). With the ISR empty, a member of the
    ELR is a valid (clean) leader."""

    def valid(b: int) -> bool:
        return (b in isr or (not isr and b in elr)) and acceptable(b)

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


def preferred_leader_only(p: PartitionRegistration, elr: Optional[Elr]) -> bool:
    """Is a PREFERRED election of ``p``, whose first replica is in the ISR and may lead, exactly
    "the first replica leads" (the record ``change`` writes: the leader, nothing else)? So when no
    reassignment is in flight (it could complete) and there is no ELR to keep or clear. A balance
    elects a million partitions this way at 2M, without the general path's work for each."""
    return (not p.adding_replicas and not p.removing_replicas and not p.elr and not p.last_known_elr
            and (elr is None or len(p.isr) >= elr.min_isr))


GENERAL = object()  # shrink_isr's "not this kind of change: take the general path"


def shrink_isr(p: PartitionRegistration, target_isr: Sequence[int], acceptable: Callable[[int], bool],
               elr: Optional[Elr]):
    """The change ``change`` makes for brokers leaving ``p``'s ISR (``target_isr``, a non-empty
    subset of it) with an ANY or UNCLEAN election, as a row of :class:`ChangeColumns` (the new
    leader or UNCHANGED_LEADER, the new ISR or None; None: nothing changes), or ``GENERAL`` where
    that takes more than "the ISR shrinks, the leader stays if it still may lead, else the first
    replica in the ISR that may": a reassignment in flight, an ELR to keep or work out, or no member
    left to lead. What fencing or a controlled shutdown does to 200,000 partitions at 2M, without
    the general path's work or a record per change."""
    if (not target_isr or p.adding_replicas or p.removing_replicas or p.elr or p.last_known_elr
            or (elr is not None and len(target_isr) < elr.min_isr)):
        return GENERAL
    isr = tuple(target_isr)
    leader = p.leader
    if leader == NO_LEADER or leader not in isr or not acceptable(leader):
        for b in p.replicas:
            if b in isr and acceptable(b):
                leader = b
                break
        else:
            return GENERAL
    if leader == p.leader:
        return None if isr == p.isr else (UNCHANGED_LEADER, isr)
    return leader, (None if isr == p.isr else isr)


class IsrShrinks:
    """``shrink_isr`` for ``leaving`` taken out of partitions' ISRs, worked out once per distinct
    (ISR, leader, replicas) and ELR settings, on which alone its row depends when no reassignment
    or ELR is in flight: a controlled shutdown of a broker in 222,000 partitions at 2M (27 brokers,
    RF 3) has 486 of them.
    ``acceptable`` must not change while this is used. Each distinct new ISR is kept once."""

    __slots__ = ("leaving", "acceptable", "_rows", "_isrs")

    def __init__(self, leaving: int, acceptable: Callable[[int], bool]) -> None:
        self.leaving, self.acceptable = leaving, acceptable
        self._rows: dict[Optional[Elr], dict] = {}
        self._isrs: dict[tuple[int, ...], tuple[int, ...]] = {}

    def target_isr(self, p: PartitionRegistration) -> list[int]:
        return [b for b in p.isr if b != self.leaving]

    def rows(self, elr: Optional[Elr]) -> Callable[[PartitionRegistration], object]:
        """The row function for partitions of a topic with ELR settings ``elr``."""
        known = self._rows.setdefault(elr, {})

        def row(p: PartitionRegistration):
            if p.adding_replicas or p.removing_replicas or p.elr or p.last_known_elr:
                return GENERAL  # (what shrink_isr says of these)
            key = (p.isr, p.leader, p.replicas)
            found = known.get(key, _UNKNOWN)
            if found is _UNKNOWN:
                found = shrink_isr(p, self.target_isr(p), self.acceptable, elr)
                if type(found) is tuple and found[1] is not None:
                    found = (found[0], self._isrs.setdefault(found[1], found[1]))
                known[key] = found
            return found
        return row


_UNKNOWN = object()  # a row not yet worked out


def change(topic_id: str, partition_id: int, p: PartitionRegistration, acceptable: Callable[[int], bool],
           target_isr: Optional[Sequence[int]] = None, target_replicas: Optional[Sequence[int]] = None,
           election: Election = Election.ANY, target_adding: Optional[Sequence[int]] = None,
           target_removing: Optional[Sequence[int]] = None, elr: Optional[Elr] = None,
           target_elr: Optional[Sequence[int]] = None,
           target_last_known_elr: Optional[Sequence[int]] = None) -> Optional[pb.PartitionChangeRecord]:
    """The sparse record taking ``p`` to the target, or None if nothing would change. ``elr``: the
    topic's ELR settings when eligible leader replicas are on (None: off, and any ELR is cleared)."""
    # (list comprehensions, not generators, in this path: one call per partition of a 2M fencing)
    replicas = tuple(target_replicas) if target_replicas is not None else p.replicas
    adding = tuple(target_adding) if target_adding is not None else p.adding_replicas
    removing = tuple(target_removing) if target_removing is not None else p.removing_replicas
    isr = tuple([b for b in (target_isr if target_isr is not None else p.isr) if b in replicas])
    if not isr and elr is None:
        isr = tuple([b for b in p.isr if b in replicas]) or p.isr  # without ELR, never an empty ISR
    if adding or removing:
        replicas, isr, adding, removing = complete_reassignment(replicas, isr, adding, removing)
    eligible = tuple(target_elr) if target_elr is not None else p.elr
    last_known = tuple(target_last_known_elr) if target_last_known_elr is not None else p.last_known_elr
    if elr is not None:
        eligible, last_known = _target_elr(p, replicas, isr, eligible, last_known, elr)
    leader, unclean = elect_leader(p, replicas, isr, acceptable, election, eligible if elr is not None else ())
    if unclean:
        isr = (leader,)
    elif leader != NO_LEADER and leader not in isr:  # elected from the ELR: it is the ISR now
        isr = (leader,)
        eligible = tuple(b for b in eligible if b != leader)
    if unclean or elr is None:
        eligible, last_known = (), ()
    record = pb.PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    changed = False
    if leader != p.leader or (leader != NO_LEADER and not set(p.replicas) <= set(replicas)):
        record.leader = leader  # a replica leaving bumps the leader epoch (Kafka does the same)
        changed = True
    for name, new, old in (("isr", isr, p.isr), ("replicas", replicas, p.replicas),
                           ("adding_replicas", adding, p.adding_replicas),
                           ("removing_replicas", removing, p.removing_replicas),
                           ("eligible_leader_replicas", eligible, p.elr),
                           ("last_known_elr", last_known, p.last_known_elr)):
        if new != old:
            field = getattr(record, name)
            field.SetInParent()  # present even when empty: "now empty", not "unchanged"
            field.ids.extend(new)
            changed = True
    return record if changed else None


def _target_elr(p: PartitionRegistration, replicas: tuple[int, ...], isr: tuple[int, ...],
                eligible: tuple[int, ...], last_known: tuple[int, ...], elr: Elr
                ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Kafka's maybePopulateTargetElr: while the ISR is at least ``min.insync.replicas`` there is no
    ELR; below it, members leaving the ISR join the ELR (they hold everything committed up to
    then), except brokers that shut down uncleanly, and every member ever dropped is remembered in
    the last-known ELR. In replica order."""
    if len(isr) >= elr.min_isr:
        return (), ()
    candidates = set(eligible) | set(p.isr)
    new_elr = tuple(b for b in replicas if b in candidates and b not in isr and b not in elr.unclean_shutdown)
    known = candidates | set(last_known)
    new_last = tuple(b for b in replicas if b in known and b not in isr and b not in new_elr)
    return new_elr, new_last


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
