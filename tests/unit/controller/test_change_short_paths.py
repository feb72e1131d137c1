"""The short paths of a preferred election and of an ISR shrink write exactly what the general one
(``change``) writes where they apply."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quorum.controller.partition_change import (
    GENERAL,
    Election,
    Elr,
    IsrShrinks,
    change,
    preferred_leader_only,
    shrink_isr,
)
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata import change_block
from quorum.metadata.topics import PartitionRegistration

TOPIC = "AAAAAAAAAAAAAAAAAAAAAQ"


def as_record(pid: int, row) -> pb.PartitionChangeRecord:
    """An ISR shrink's row of ChangeColumns as the record it stands for."""
    columns = change_block.ChangeColumns()
    pids, leaders, isrs = columns.topic(TOPIC)
    pids.append(pid)
    leaders.append(row[0])
    isrs.append(row[1])
    (record,) = columns.changes()
    return record


@st.composite
def partitions(draw) -> PartitionRegistration:
    replicas = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True)))
    isr = tuple(b for b in replicas if draw(st.booleans()))
    rest = [b for b in replicas if b not in isr]
    moving = draw(st.integers(0, 3)) == 0 and len(replicas) > 1
    elr = tuple(b for b in rest if draw(st.booleans()))
    return PartitionRegistration(
        replicas, isr, removing_replicas=replicas[-1:] if moving else (),
        adding_replicas=replicas[:1] if moving and draw(st.booleans()) else (),
        leader=draw(st.sampled_from((-1, *replicas))), leader_epoch=3, partition_epoch=7,
        elr=elr if draw(st.booleans()) else (),
        last_known_elr=tuple(b for b in rest if b not in elr) if draw(st.integers(0, 3)) == 0 else ())


@settings(max_examples=1000, deadline=None)
@given(partitions(), st.one_of(st.none(), st.builds(Elr, st.integers(1, 4))), st.sets(st.integers(0, 5)))
def test_the_short_path_is_the_general_one_where_it_applies(p, elr, fenced):
    preferred = p.replicas[0]

    def acceptable(b: int) -> bool:
        return b not in fenced

    if p.leader == preferred or preferred not in p.isr or not acceptable(preferred) or not preferred_leader_only(p, elr):
        return  # the general path's case
    general = change(TOPIC, 4, p, acceptable, election=Election.PREFERRED, elr=elr)
    assert general == pb.PartitionChangeRecord(partition_id=4, topic_id=TOPIC, leader=preferred)


def test_it_leaves_a_reassignment_or_an_elr_to_the_general_path():
    base = PartitionRegistration((1, 2, 3), (1, 2, 3), leader=2)
    assert preferred_leader_only(base, None) and preferred_leader_only(base, Elr(2))
    assert not preferred_leader_only(base._replace(adding_replicas=(1,), removing_replicas=(3,)), None)
    assert not preferred_leader_only(base._replace(isr=(1,), elr=(2,)), Elr(2))
    assert not preferred_leader_only(base._replace(isr=(1, 2)), Elr(3))  # below min ISR: the ELR may change


@settings(max_examples=1000, deadline=None)
@given(partitions(), st.one_of(st.none(), st.builds(Elr, st.integers(1, 4))), st.sets(st.integers(0, 5)),
       st.sets(st.integers(0, 5)), st.sampled_from([Election.ANY, Election.UNCLEAN]))
def test_an_isr_shrink_is_the_general_change_where_it_applies(p, elr, fenced, leaving, election):
    def acceptable(b: int) -> bool:
        return b not in fenced

    target = [b for b in p.isr if b not in leaving]
    short = shrink_isr(p, target, acceptable, elr)
    if short is GENERAL:
        return
    general = change(TOPIC, 4, p, acceptable, target_isr=target, election=election, elr=elr)
    assert (None if short is None else as_record(4, short)) == general


def test_an_isr_shrink_takes_the_usual_case_and_leaves_the_rest():
    p = PartitionRegistration((1, 2, 3), (1, 2, 3), leader=1, leader_epoch=5)
    moved = shrink_isr(p, [2, 3], lambda b: b != 1, None)  # the leader shuts down
    assert moved == (2, (2, 3))
    record = as_record(0, moved)
    assert record.leader == 2 and list(record.isr.ids) == [2, 3]
    kept = shrink_isr(p, [1, 2], lambda b: b != 3, None)  # a follower does
    assert kept == (change_block.UNCHANGED_LEADER, (1, 2))
    record = as_record(0, kept)
    assert not record.HasField("leader") and list(record.isr.ids) == [1, 2]
    assert shrink_isr(p, [1, 2, 3], lambda b: True, None) is None  # nothing changes
    assert shrink_isr(p, [2], lambda b: b == 1, None) is GENERAL  # nobody left to lead
    assert shrink_isr(p, [2, 3], lambda b: b != 1, Elr(3)) is GENERAL  # below min ISR with ELR


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(partitions(), st.sampled_from((None, Elr(1), Elr(2), Elr(3)))), min_size=1, max_size=12),
       st.integers(0, 5), st.sets(st.integers(0, 5)), st.data())
def test_isr_shrinks_worked_out_once_per_kind_are_each_partitions_own(drawn, leaving, fenced, data):
    """IsrShrinks reuses a row across partitions alike in ISR, leader, replicas and ELR settings:
    each partition still gets exactly ``shrink_isr``'s row for it (here many share replicas and
    ISR with different leaders, and the same partition comes with different ELR settings)."""
    def acceptable(b: int) -> bool:
        return b != leaving and b not in fenced

    shrinks = IsrShrinks(leaving, acceptable)
    for p, elr in drawn + [(p._replace(leader=data.draw(st.sampled_from((-1, *p.replicas)))), elr) for p, elr in drawn]:
        direct = shrink_isr(p, [b for b in p.isr if b != leaving], acceptable, elr)
        assert shrinks.rows(elr)(p) == direct
