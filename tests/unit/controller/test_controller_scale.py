"""Cost follows what changes: fencing a broker touches its own partitions only (per-broker index).

The full-size measurement (20,000 topics x 100 partitions, RF 3, 30 brokers) is in the report of
the controller work; this keeps a small version of it in the test suite.
"""

import pytest
from controller_helpers import controller, heartbeat

from quorum.controller import api
from quorum.controller.index import PartitionIndex, bits
from quorum.controller.partition_change import change
from quorum.controller.topics_control import TopicPolicies, move_off
from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
from quorum.metadata.invariants import violations
from quorum.metadata.records import decode_record


def test_fencing_one_broker_writes_one_change_per_partition_it_is_in():
    c, epochs = controller(30, racks=["a", "b", "c"])
    for t in range(100):
        op = c.core.handle(api.CreateTopicsRequest((api.CreatableTopic(f"topic-{t}", 100, 3),)), c.now)
        c.propose(op)
    image = c.core.image
    holding = [(tid, pid) for tid, t in image.topics.by_id.items() for pid, p in t.partitions.items() if 7 in p.isr]
    c.now = 9000
    for b in epochs:
        if b != 7:
            heartbeat(c, b, epochs[b])
    (op,) = c.core.tick(9500)
    assert op.record_count == len(holding) + 2  # + its BrokerRegistrationChangeRecord and the audit entry
    c.propose(op)
    image = c.core.image
    assert image.cluster.broker(7).fenced and violations(image) == []
    assert PartitionIndex.build(image).snapshot() == c.core.index.snapshot()



def test_a_controlled_shutdown_writes_its_isr_shrinks_as_blocks_that_standbys_read_back():
    """The shrinks go from columns straight to blocks with an ISR column; a standby decoding the log
    builds the same image, and the index matches one built from it."""
    c, epochs = controller(30, racks=["a", "b", "c"])
    for t in range(30):
        c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic(f"topic-{t}", 100, 3),)), c.now))
    before = c.core.image
    holding = {(tid, pid) for tid, t in before.topics.by_id.items() for pid, p in t.partitions.items() if 7 in p.isr}
    led = {key for key in holding if before.topics.by_id[key[0]].partitions[key[1]].leader == 7}
    first = len(c.log)
    reply = heartbeat(c, 7, epochs[7], want_shutdown=True)
    assert reply.should_shutdown and led
    blocks = [m for b in c.log[first:] for m in (decode_record(f).message for f in b.records)
              if type(m) is pb.PartitionChangeBlockRecord]
    assert sum(len(b.partition_ids) for b in blocks) == len(holding)
    assert all(b.isr and b.list_ids for b in blocks)  # every row takes broker 7 out of the ISR
    image = c.core.image
    for tid, pid in holding:
        p, was = image.topics.by_id[tid].partitions[pid], before.topics.by_id[tid].partitions[pid]
        assert p.isr == tuple(b for b in was.isr if b != 7) and p.leader != 7
        assert p.leader_epoch == was.leader_epoch + ((tid, pid) in led)
    assert _reference_image(c, c.log).topics == image.topics
    assert violations(image) == [] and PartitionIndex.build(image).snapshot() == c.core.index.snapshot()


def _reference_image(c, batches):
    """The image a standby builds by decoding every batch."""
    from quorum.controller.core import ControllerCore

    ref = ControllerCore(2, c.cluster_id, c.core.settings)
    for b in batches:
        ref.replay_committed(b)
    return ref.image


@pytest.mark.parametrize("lose_leadership", [False, True])
def test_own_multi_batch_operation_is_published_from_its_image_even_across_a_leadership_loss(lose_leadership):
    """The active controller does not decode the first batches of its own multi-batch operation
    (its last batch brings the image after all of it). If it loses leadership in between, the
    batches it kept aside are replayed first, so the next leader's End completes the operation
    exactly. Either way the image equals a standby's that decoded every batch."""

    c, _ = controller(brokers=3, max_records_per_batch=100)
    c.hold = True
    op = c.core.handle(api.CreateTopicsRequest((api.CreatableTopic("big", 250, 3),)), c.now)
    c.propose(op)
    assert len(c.uncommitted) == 3  # Begin + Topic + 250 partitions + End, 100 per batch
    first, last = c.uncommitted[:2], c.uncommitted[2]
    for b in first:
        c.log.append(b)
        c.core.replay_committed(b)
    assert c.core.in_transaction and c.core.image.topics.topic_by_name("big") is None
    if lose_leadership:
        c.core.deactivate()
    c.log.append(last)
    c.core.replay_committed(last)
    assert not c.core.in_transaction
    assert len(c.core.image.topics.topic_by_name("big").partitions) == 250
    assert c.core.image == _reference_image(c, c.log)


@pytest.mark.parametrize("seed", range(6))
def test_a_standby_index_follows_blocks_inside_and_outside_transactions(seed):
    """A standby's index follows blocks from what their replay found; around a transaction begun
    mid-batch, one aborted, and one still open, it still equals an index built from the image."""
    import random

    from quorum.controller.core import ControllerCore
    from quorum.log.batch import Batch
    from quorum.metadata import change_block
    from quorum.metadata.records import encode_record

    rng = random.Random(seed)
    c, _ = controller(6)
    for t in range(4):
        c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic(f"topic-{t}", 40, 3),)), c.now))
    standby = ControllerCore(2, c.cluster_id, c.core.settings)
    for b in c.log:
        standby.replay_committed(b)
    image = standby.image
    keys = sorted((tid, pid) for tid, t in image.topics.by_id.items() for pid in t.partitions)

    def block():
        rows = sorted(rng.sample(keys, rng.randint(2, 30)))
        changes = []
        for tid, pid in rows:
            p = image.topics.by_id[tid].partitions[pid]
            change = pb.PartitionChangeRecord(topic_id=tid, partition_id=pid, leader=rng.choice(p.replicas))
            if rng.random() < 0.5:
                change.isr.ids.extend(sorted(rng.sample(p.replicas, rng.randint(1, len(p.replicas)))))
            changes.append(change)
        return [change_block.block_of(changes)] + [change_block.CONTINUATION] * (len(changes) - 1)

    begin, end = pb.BeginTransactionRecord(name="t"), pb.EndTransactionRecord()
    abort = pb.AbortTransactionRecord(reason="test")
    batches = [[*block(), begin, *block()], [*block(), end], [*block(), begin, *block()], [*block(), abort],
               [begin, *block()], [*block()]]  # the last transaction stays open
    offset = c.end_offset
    for records in batches:
        frames = tuple(change_block.CONTINUATION_BYTES if r is change_block.CONTINUATION else encode_record(r)
                       for r in records)
        standby.replay_committed(Batch(offset, c.epoch, 0, frames))
        offset += len(frames)
        image = standby.image
        assert standby.index.snapshot() == PartitionIndex.build(image).snapshot(), records


def test_taking_a_broker_off_its_partitions_writes_what_the_general_change_would_for_each():
    """``move_off`` works a shrink out once per distinct (ISR, leader, replicas) and reuses it:
    over partitions whose ISRs and leaders an earlier fencing and a controlled shutdown left
    varied, every row it writes is the record the general path writes for that partition."""
    c, epochs = controller(12, racks=["a", "b", "c"])
    for t in range(20):
        c.propose(c.core.handle(api.CreateTopicsRequest((api.CreatableTopic(f"topic-{t}", 30, 3 + t % 2),)), c.now))
    heartbeat(c, 3, epochs[3], want_fence=True)
    heartbeat(c, 5, epochs[5], want_shutdown=True)
    ctx, leaving = c.core, 7
    spec, policies = ctx.spec, TopicPolicies(ctx)
    expected = {}
    for tid, mask in ctx.index.isr_masks(leaving).items():
        for pid in bits(mask):
            p = spec.topics.by_id[tid].partitions[pid]
            record = change(tid, pid, p, lambda b: b != leaving and ctx.acceptable(b),
                            target_isr=[b for b in p.isr if b != leaving], election=policies.election(tid),
                            elr=policies.elr(tid))
            if record is not None:
                expected[tid, pid] = record
    written = {}
    for r in move_off(ctx, leaving):
        for record in (r.changes() if type(r) is not pb.PartitionChangeRecord else [r]):
            written[record.topic_id, record.partition_id] = record
    leaders = {spec.topics.by_id[tid].partitions[pid].leader for tid, pid in expected}
    assert len(expected) > 100 and len(leaders) > 5  # varied enough to share ISRs across leaders
    assert written == expected
