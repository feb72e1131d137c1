"""Cost follows what changes: fencing a broker touches its own partitions only (per-broker index).

The full-size measurement (20,000 topics x 100 partitions, RF 3, 30 brokers) is in the report of
the controller work; this keeps a small version of it in the test suite.
"""
import time

from controller_helpers import controller, heartbeat

from quorum.controller import api
from quorum.controller.index import PartitionIndex
from quorum.metadata.invariants import violations


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
    start = time.perf_counter()
    (op,) = c.core.tick(9500)
    elapsed = time.perf_counter() - start
    assert op.record_count == len(holding) + 1  # + its BrokerRegistrationChangeRecord
    c.propose(op)
    image = c.core.image
    assert image.cluster.broker(7).fenced and violations(image) == []
    assert PartitionIndex.build(image).snapshot() == c.core.index.snapshot()
    assert elapsed < 5, elapsed
