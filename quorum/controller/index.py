"""Per-broker partition indexes, so broker events cost what they change, not the cluster size.

Kafka keeps ``BrokersToIsrs``: for each broker, the partitions whose ISR holds it (and whether it
leads them), plus the partitions with no leader. Fencing a broker walks only its ISR entries;
unfencing one walks only the leaderless partitions. Here each entry is a bit mask of partition ids
per (broker, topic id): a few bytes per topic a broker replicates, instead of a set entry per
partition (2 million partitions x RF 3 as Python set entries would cost gigabytes).

The index follows one image: the committed image on a standby, the speculative image (committed +
handled-but-uncommitted records) on the active controller. ``update(old, new, ...)`` moves it from
``old`` to ``new`` for the partitions that may differ between them.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Optional

from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import change_block
from quorum.metadata.image import MetadataImage
from quorum.metadata.topics import NO_LEADER, PartitionRegistration

Masks = dict[str, int]  # topic id -> bit mask of partition ids


def bits(mask: int) -> Iterator[int]:
    """The partition ids of ``mask``, lowest first."""
    return _bits(mask)


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def masks_of(partitions: Iterable[tuple[str, int]], *more: Masks) -> Masks:
    """(topic id, partition id) pairs, and any further masks, as one topic id -> mask table."""
    out: Masks = {}
    for tid, pid in partitions:
        out[tid] = out.get(tid, 0) | 1 << pid
    for masks in more:
        for tid, m in masks.items():
            out[tid] = out.get(tid, 0) | m
    return out


def _set(table: dict[int, Masks], broker: int, topic_id: str, bit: int) -> None:
    masks = table.get(broker)
    if masks is None:
        masks = table[broker] = {}
    masks[topic_id] = masks.get(topic_id, 0) | bit


def _clear(table: dict[int, Masks], broker: int, topic_id: str, bit: int) -> None:
    masks = table.get(broker)
    if masks is None:
        return
    m = masks.get(topic_id, 0) & ~bit
    if m:
        masks[topic_id] = m
    else:
        masks.pop(topic_id, None)
        if not masks:
            del table[broker]


def _move(table: dict[int, Masks], topic_id: str, bit: int, old: tuple[int, ...], new: tuple[int, ...]) -> None:
    """The partition's bit from the brokers in ``old`` only to those in ``new`` only."""
    for b in old:
        if b not in new:
            _clear(table, b, topic_id, bit)
    for b in new:
        if b not in old:
            _set(table, b, topic_id, bit)


def _absent(pid: int) -> None:
    return None


class PartitionIndex:
    def __init__(self) -> None:
        self.isr: dict[int, Masks] = {}  # broker -> partitions whose ISR holds it
        self.elr: dict[int, Masks] = {}  # broker -> partitions whose ELR holds it (KIP-966)
        self.leads: dict[int, Masks] = {}  # broker -> partitions it leads
        self.leaderless: Masks = {}  # partitions with leader -1
        # the leader balance: per preferred replica (the first), how many partitions it prefers, and
        # those another broker (or none) leads
        self.preferred: dict[int, int] = {}
        self.imbalanced: dict[int, Masks] = {}
        # under-replicated partitions (an ISR shorter than the replicas) by ISR size: the metrics'
        # under-replicated and under-min-ISR counts cost the topics with such partitions, not 2M
        self.short_isr: dict[int, Masks] = {}
        # counts the metrics read on every scrape, kept as the bits move (at 2M partitions all
        # imbalanced, summing the masks cost a scrape 30 ms)
        self.leaderless_count = 0
        self.imbalanced_total = 0
        self.short_isr_total = 0

    @classmethod
    def build(cls, image: MetadataImage) -> PartitionIndex:
        index = cls()
        for topic in image.topics.by_id.values():
            for pid, p in topic.partitions.items():
                index._add(topic.topic_id, pid, p)
        return index

    # -- queries ------------------------------------------------------------------------------
    def isr_partitions(self, broker: int) -> list[tuple[str, int]]:
        return [(tid, pid) for tid, m in self.isr.get(broker, {}).items() for pid in _bits(m)]

    def led_masks(self, broker: int) -> Masks:
        """Topic id -> the mask of the partitions ``broker`` leads (the index's own: do not change it)."""
        return self.leads.get(broker, {})

    def isr_masks(self, broker: int) -> Masks:
        """Topic id -> the mask of the partitions whose ISR holds ``broker`` (the index's own)."""
        return self.isr.get(broker, {})

    def elr_masks(self, broker: int) -> Masks:
        """Topic id -> the mask of the partitions whose ELR holds ``broker`` (the index's own)."""
        return self.elr.get(broker, {})

    def leads_any(self, broker: int) -> bool:
        return bool(self.leads.get(broker))

    def imbalanced_partitions(self, preferred: int) -> list[tuple[str, int]]:
        return [(tid, pid) for tid, m in self.imbalanced.get(preferred, {}).items() for pid in _bits(m)]

    def imbalanced_by_topic(self) -> dict[str, int]:
        """Topic id -> the mask of its partitions not led by their preferred replica."""
        out: dict[str, int] = {}
        for masks in self.imbalanced.values():
            for tid, m in masks.items():
                out[tid] = out.get(tid, 0) | m
        return out

    def leaderless_by_topic(self) -> dict[str, int]:
        """Topic id -> the mask of its partitions without a leader."""
        return dict(self.leaderless)

    def imbalance(self, preferred: int) -> tuple[int, int]:
        """(partitions ``preferred`` is the preferred replica of but does not lead, all it prefers)."""
        return (sum(m.bit_count() for m in self.imbalanced.get(preferred, {}).values()),
                self.preferred.get(preferred, 0))

    def leaderless_partitions(self, isr_member: Optional[int] = None,
                              topic_ok: Optional[Callable[[str], bool]] = None,
                              elr_member: Optional[int] = None) -> list[tuple[str, int]]:
        """Leaderless partitions (whose ISR holds ``isr_member``, or whose ELR holds ``elr_member``,
        if given; of the topics ``topic_ok`` takes, if given: asked once per topic with leaderless
        partitions)."""
        member = (self.isr.get(isr_member, {}) if isr_member is not None
                  else self.elr.get(elr_member, {}) if elr_member is not None else None)
        out = []
        for tid, m in self.leaderless.items():
            if topic_ok is not None and not topic_ok(tid):
                continue
            if member is not None:
                m &= member.get(tid, 0)
            out.extend((tid, pid) for pid in _bits(m))
        return out

    def offline_count(self) -> int:
        return self.leaderless_count

    def imbalanced_count(self) -> int:
        return self.imbalanced_total

    def under_replicated_count(self) -> int:
        return self.short_isr_total

    def under_min_isr_count(self, min_isr: Callable[[str], int], ceiling: Optional[int] = None) -> int:
        """Partitions whose ISR is smaller than their topic's ``min_isr(topic id)`` (asked once per
        topic with under-replicated partitions). ``ceiling``: no topic's is higher, so ISRs of that
        size or more are not looked at (every broker fenced leaves 2M partitions with an ISR of 1)."""
        wanted: dict[str, int] = {}
        count = 0
        for size, masks in self.short_isr.items():
            if ceiling is not None and size >= ceiling:
                continue
            for tid, m in masks.items():
                need = wanted.get(tid)
                if need is None:
                    need = wanted[tid] = min_isr(tid)
                if size < need:
                    count += m.bit_count()
        return count

    # -- maintenance --------------------------------------------------------------------------
    def _shorten(self, tid: str, bit: int, p: PartitionRegistration, on: bool) -> None:
        """Mark (``on``) or unmark ``p`` under its ISR size if its ISR is shorter than its replicas."""
        if len(p.isr) < len(p.replicas):
            (_set if on else _clear)(self.short_isr, len(p.isr), tid, bit)
            self.short_isr_total += 1 if on else -1

    def _add(self, tid: str, pid: int, p: PartitionRegistration) -> None:
        bit = 1 << pid
        for b in p.isr:
            _set(self.isr, b, tid, bit)
        for b in p.elr:
            _set(self.elr, b, tid, bit)
        self._lead(tid, bit, p.leader)
        self._prefer(tid, bit, p, 1)
        self._shorten(tid, bit, p, True)

    def _remove(self, tid: str, pid: int, p: PartitionRegistration) -> None:
        bit = 1 << pid
        for b in p.isr:
            _clear(self.isr, b, tid, bit)
        for b in p.elr:
            _clear(self.elr, b, tid, bit)
        self._unlead(tid, bit, p.leader)
        self._prefer(tid, bit, p, -1)
        self._shorten(tid, bit, p, False)

    def _change(self, tid: str, pid: int, p: PartitionRegistration, q: PartitionRegistration) -> None:
        """From ``p`` to ``q``, touching only what differs: a broker leaving the ISR and a leader
        moving (what fencing and controlled shutdown do to 2 million partitions) clear one ISR
        bit and move one leader bit, instead of clearing and setting every member's."""
        bit = 1 << pid
        if p.isr != q.isr:
            _move(self.isr, tid, bit, p.isr, q.isr)
        if len(p.isr) != len(q.isr) or len(p.replicas) != len(q.replicas):
            self._shorten(tid, bit, p, False)
            self._shorten(tid, bit, q, True)
        if p.elr != q.elr:
            _move(self.elr, tid, bit, p.elr, q.elr)
        if p.leader != q.leader:
            self._unlead(tid, bit, p.leader)
            self._lead(tid, bit, q.leader)
        preferred = q.replicas[0]
        if p.replicas[0] != preferred:
            self._prefer(tid, bit, p, -1)
            self._prefer(tid, bit, q, 1)
        elif (p.leader != preferred) != (q.leader != preferred):  # same count, balance flipped
            (_set if q.leader != preferred else _clear)(self.imbalanced, preferred, tid, bit)
            self.imbalanced_total += 1 if q.leader != preferred else -1

    def _prefer(self, tid: str, bit: int, p: PartitionRegistration, sign: int) -> None:
        """Count ``p`` for (1) or against (-1) its preferred replica, and mark it imbalanced."""
        preferred = p.replicas[0]
        n = self.preferred.get(preferred, 0) + sign
        if n:
            self.preferred[preferred] = n
        else:
            self.preferred.pop(preferred, None)
        if p.leader != preferred:
            (_set if sign > 0 else _clear)(self.imbalanced, preferred, tid, bit)
            self.imbalanced_total += sign

    def _lead(self, tid: str, bit: int, leader: int) -> None:
        if leader == NO_LEADER:
            self.leaderless[tid] = self.leaderless.get(tid, 0) | bit
            self.leaderless_count += 1
        else:
            _set(self.leads, leader, tid, bit)

    def _unlead(self, tid: str, bit: int, leader: int) -> None:
        if leader == NO_LEADER:
            self.leaderless_count -= 1
            m = self.leaderless.get(tid, 0) & ~bit
            if m:
                self.leaderless[tid] = m
            else:
                self.leaderless.pop(tid, None)
        else:
            _clear(self.leads, leader, tid, bit)

    def update(self, old: MetadataImage, new: MetadataImage, partitions: Iterable[tuple[str, int]],
               topics: Iterable[str] = (), moves: Optional[change_block.Moves] = None) -> None:
        """Move from ``old`` to ``new`` where they may differ: the given partitions, and every
        partition of the given topics (created or removed ones). ``moves``: partitions whose
        registration in ``old`` and in ``new`` the caller already holds (what a block's replay
        found), as ``change_block.replay`` gathers them; one also in ``partitions`` or of a topic
        in ``topics`` is taken from the images instead."""
        old_t, new_t = old.topics.by_id, new.topics.by_id
        topics = set(topics)
        if moves:
            partitions = partitions if isinstance(partitions, (set, frozenset)) else set(partitions)
            self._follow(moves, partitions, topics)
        for tid in topics:
            ot, nt = old_t.get(tid), new_t.get(tid)
            if ot is nt:
                continue
            if ot is not None:
                for pid, p in ot.partitions.items():
                    q = nt.partitions.get(pid) if nt is not None else None
                    if q is not p:
                        self._remove(tid, pid, p)
            if nt is not None:
                for pid, q in nt.partitions.items():
                    p = ot.partitions.get(pid) if ot is not None else None
                    if q is not p:
                        self._add(tid, pid, q)
        by_topic: dict[str, list[int]] = {}  # a topic's lookups once, not once per partition
        for tid, pid in partitions:
            if tid not in topics:  # else done with its whole topic above (counts must not move twice)
                pids = by_topic.get(tid)
                if pids is None:
                    by_topic[tid] = [pid]
                else:
                    pids.append(pid)
        for tid, pids in by_topic.items():
            ot, nt = old_t.get(tid), new_t.get(tid)
            if ot is nt:
                continue
            old_p = ot.partitions.getter() if ot is not None else _absent
            new_p = nt.partitions.getter() if nt is not None else _absent
            moves = _MaskMoves()
            for pid in pids:
                p, q = old_p(pid), new_p(pid)
                if p is q or p == q:
                    continue
                if p is None:
                    self._add(tid, pid, q)
                elif q is None:
                    self._remove(tid, pid, p)
                elif not moves.add(pid, p, q):
                    self._change(tid, pid, p, q)
            if moves:
                self._move_masks(tid, moves)

    def _follow(self, moves: change_block.Moves, partitions: set[tuple[str, int]], topics: set[str]) -> None:
        """``update``'s ``moves``: each topic's changes gathered into one ``_MaskMoves``."""
        for tid, (pids, before, after) in moves.items():
            if tid in topics or not pids:
                continue
            masks = _MaskMoves()
            for pid, p, q in zip(pids, before, after):
                if partitions and (tid, pid) in partitions:
                    continue
                if not masks.add(pid, p, q):
                    self._change(tid, pid, p, q)
            if masks:
                self._move_masks(tid, masks)

    def _move_masks(self, tid: str, moves: "_MaskMoves") -> None:
        """A topic's changes gathered by ``_MaskMoves``: every clear, then every set."""
        for table, off, on in ((self.isr, moves.isr_off, moves.isr_on), (self.leads, moves.leads_off, moves.leads_on),
                               (self.imbalanced, moves.imbalanced_off, moves.imbalanced_on),
                               (self.short_isr, moves.short_isr_off, moves.short_isr_on)):
            for key, mask in off.items():
                _clear(table, key, tid, mask)
            for key, mask in on.items():
                _set(table, key, tid, mask)
        self.imbalanced_total += moves.imbalanced
        self.short_isr_total += moves.short_isr

    def snapshot(self) -> tuple:
        """A comparable copy (for tests)."""
        return ({b: dict(m) for b, m in self.isr.items()}, {b: dict(m) for b, m in self.leads.items()},
                dict(self.leaderless), dict(self.preferred), {b: dict(m) for b, m in self.imbalanced.items()},
                {b: dict(m) for b, m in self.elr.items()}, {n: dict(m) for n, m in self.short_isr.items()},
                self.leaderless_count, self.imbalanced_total, self.short_isr_total)


class _MaskMoves:
    """One topic's partition changes that kept the replicas and the ELR and had a leader before and
    after (what a balance, a controlled shutdown, a fencing or an ISR expansion does to nearly all
    of them: the leader moves, the ISR loses or gains a broker): their index bits, gathered as a
    mask per (table, key) so that the index is touched once per broker, not once per partition.
    Within one change a bit is only ever cleared and then set under the same key, so applying every
    clear before every set is the order ``_change`` would have used."""

    __slots__ = ("isr_off", "isr_on", "leads_off", "leads_on", "imbalanced_off", "imbalanced_on",
                 "short_isr_off", "short_isr_on", "imbalanced", "short_isr")

    def __init__(self) -> None:
        # per index table, the bits to clear (``_off``) and to set (``_on``): key (a broker, or an
        # ISR size) -> mask
        self.isr_off: dict[int, int] = {}
        self.isr_on: dict[int, int] = {}
        self.leads_off: dict[int, int] = {}
        self.leads_on: dict[int, int] = {}
        self.imbalanced_off: dict[int, int] = {}
        self.imbalanced_on: dict[int, int] = {}
        self.short_isr_off: dict[int, int] = {}
        self.short_isr_on: dict[int, int] = {}
        self.imbalanced = 0  # change of the index's counts
        self.short_isr = 0

    def __bool__(self) -> bool:
        return bool(self.isr_off or self.isr_on or self.leads_off or self.leads_on or self.imbalanced_off
                    or self.imbalanced_on or self.short_isr_off or self.short_isr_on)

    def add(self, pid: int, p: PartitionRegistration, q: PartitionRegistration) -> bool:
        """Take the change from ``p`` to ``q`` if it is of this kind (False: it is not). (Inline
        mask updates: a controlled shutdown at 2M makes 200,000 of these calls.)"""
        old_leader, new_leader, replicas = p.leader, q.leader, q.replicas
        if old_leader == NO_LEADER or new_leader == NO_LEADER or p.replicas != replicas or p.elr != q.elr:
            return False
        bit = 1 << pid
        old_isr, new_isr = p.isr, q.isr
        if old_isr is not new_isr and old_isr != new_isr:  # (lists are interned: mostly the same object)
            off, on = self.isr_off, self.isr_on
            for b in old_isr:
                if b not in new_isr:
                    off[b] = off.get(b, 0) | bit
            for b in new_isr:
                if b not in old_isr:
                    on[b] = on.get(b, 0) | bit
            old_size, new_size, size = len(old_isr), len(new_isr), len(replicas)
            if old_size != new_size:
                if old_size < size:
                    off = self.short_isr_off
                    off[old_size] = off.get(old_size, 0) | bit
                    self.short_isr -= 1
                if new_size < size:
                    on = self.short_isr_on
                    on[new_size] = on.get(new_size, 0) | bit
                    self.short_isr += 1
        if old_leader != new_leader:
            off, on = self.leads_off, self.leads_on
            off[old_leader] = off.get(old_leader, 0) | bit
            on[new_leader] = on.get(new_leader, 0) | bit
            preferred = replicas[0]
            if old_leader == preferred:
                on = self.imbalanced_on
                on[preferred] = on.get(preferred, 0) | bit
                self.imbalanced += 1
            elif new_leader == preferred:
                off = self.imbalanced_off
                off[preferred] = off.get(preferred, 0) | bit
                self.imbalanced -= 1
        return True


def note_touched(message, parts: set, topics: set) -> None:
    """Note in ``parts`` / ``topics`` which partitions and topics the record ``message`` may change
    (what ``PartitionIndex.update`` then looks at)."""
    t = type(message)
    if t is pb.PartitionChangeRecord:
        parts.add((message.topic_id, message.partition_id))
    elif t is pb.PartitionChangeBlockRecord:
        parts.update(change_block.touched(message))
    elif t is pb.PartitionRecord or t is pb.TopicRecord or t is pb.RemoveTopicRecord:
        topics.add(message.topic_id)
