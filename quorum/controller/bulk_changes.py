"""Changes of many partitions at once (a fencing, a controlled shutdown, a restart, an election of
every partition): each topic's election policy worked out once (TopicPolicies), then each
partition's change, the ISR shrinks gathered into one ChangeColumns."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Optional

from google.protobuf.message import Message

from quorum.controller import configs_control, levels
from quorum.controller.index import Masks, bits
from quorum.controller.partition_change import GENERAL, Election, Elr, IsrShrinks, change
from quorum.metadata import change_block

if TYPE_CHECKING:
    from quorum.controller.context import ControllerContext


class TopicPolicies:
    """What each topic (by id) asks of its elections, worked out once per topic in a pass over many
    partitions: ``unclean.leader.election.enable``, and with eligible leader replicas on (KIP-966)
    the topic's effective ``min.insync.replicas`` (at most its replication factor, as Kafka's).
    ``unclean_shutdown``: brokers that restarted without a clean shutdown (never ELR members)."""

    def __init__(self, ctx: "ControllerContext", unclean_shutdown: tuple[int, ...] = ()):
        self._image = ctx.spec
        self._elr_on = levels.elr_enabled(self._image)
        self._unclean_shutdown = unclean_shutdown
        self._known: dict[str, tuple[bool, Optional[Elr]]] = {}

    def _of(self, topic_id: str) -> tuple[bool, Optional[Elr]]:
        known = self._known.get(topic_id)
        if known is None:
            image = self._image
            topic = image.topics.by_id[topic_id]
            elr = None
            if self._elr_on:
                first = topic.partitions.get(0) or next(iter(topic.partitions.values()), None)
                rf = len(first.replicas) if first is not None else 1
                elr = Elr(min(configs_control.min_insync_replicas(image, topic.name), rf), self._unclean_shutdown)
            known = self._known[topic_id] = (configs_control.unclean_election_enabled(image, topic.name), elr)
        return known

    def __call__(self, topic_id: str) -> bool:
        """Does the topic allow unclean elections?"""
        return self._of(topic_id)[0]

    def elr(self, topic_id: str) -> Optional[Elr]:
        return self._of(topic_id)[1]

    def election(self, topic_id: str) -> Election:
        return Election.UNCLEAN if self(topic_id) else Election.ANY


def changes(ctx: "ControllerContext", partitions: Masks, acceptable: Callable[[int], bool],
             shrinks_of: Optional[IsrShrinks], policies: Optional[TopicPolicies] = None) -> list[Message]:
    """Each partition's change (``partitions``: topic id -> mask of partition ids, walked in topic id
    and partition order): a broker taken out of its ISR (``shrinks_of``; None: the ISR stays) and a
    leader elected; an election with no ISR member left to lead goes outside the ISR where the
    topic allows unclean elections (Kafka's controller does the same on every such change).
    ISR shrinks (nearly all of a fencing or a controlled shutdown) come last, as one ChangeColumns;
    each partition changes once, so their order among the others does not matter."""
    by_id = ctx.spec.topics.by_id
    policies = policies or TopicPolicies(ctx)
    out: list[Message] = []
    shrinks = change_block.ChangeColumns()
    for tid in sorted(partitions):
        partition_of = by_id[tid].partitions.getter()  # a topic's lookups once
        election, elr = policies.election(tid), policies.elr(tid)
        shrink = shrinks_of.rows(elr) if shrinks_of is not None else None
        columns = None  # this topic's columns in ``shrinks`` (None: not asked for yet)
        for pid in bits(partitions[tid]):
            p = partition_of(pid)
            row = GENERAL if shrink is None else shrink(p)
            if row is GENERAL:
                isr = None if shrinks_of is None else shrinks_of.target_isr(p)
                record = change(tid, pid, p, acceptable, target_isr=isr, election=election, elr=elr)
                if record is not None:
                    out.append(record)
            elif row is not None:
                if columns is None:
                    columns = shrinks.topic(tid)
                columns[0].append(pid)
                columns[1].append(row[0])
                columns[2].append(row[1])
    if len(shrinks):
        out.append(shrinks)
    return out
