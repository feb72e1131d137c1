"""Named failure scenarios over many seeds; invariants are checked after every event."""
import pytest

from quorum.sim.scenarios import SCENARIOS, chaos, initial_election

SEEDS = range(25)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_holds_invariants_for_many_seeds(name):
    fn = SCENARIOS[name]
    for seed in SEEDS:
        c = fn(seed)
        leader = c.leader()
        assert leader is not None and leader.core.high_watermark > 0
        assert c.inv.acked, f"{name} seed {seed}: no write was ever acknowledged"


@pytest.mark.parametrize("voters,observers", [(1, 0), (1, 3), (2, 1), (3, 0), (4, 2), (5, 3)])
def test_initial_election_every_size(voters, observers):
    for seed in range(10):
        c = initial_election(seed, voters, observers)
        # Observers follow the leader and hold the same committed log.
        hw = c.leader().core.high_watermark
        for i in range(101, 101 + observers):
            assert c.nodes[i].core.high_watermark == hw
            assert not c.nodes[i].core.is_leader


@pytest.mark.parametrize("block", range(6))
def test_chaos_seeds(block):
    """300 seeds of random crashes, wipes, partitions, drops, duplicates and delays."""
    for seed in range(block * 50, block * 50 + 50):
        c = chaos(seed)
        assert c.leader() is not None


def test_wiped_voter_does_not_vote_until_caught_up():
    from quorum.sim.cluster import Cluster
    c = Cluster(seed=3, voters=3)
    assert c.run_until(lambda: c.leader() is not None and c.leader().core.high_watermark > 0)
    for _ in range(20):
        c.write(2)
        c.run_for(10)
    victim = next(v for v in c.voters if v != c.leader().node_id)
    c.crash(victim)
    c.wipe(victim)
    c.start(victim)
    assert c.nodes[victim].core.rejoining
    assert c.nodes[victim].persisted.rejoining
    c.stabilize()
    assert not c.nodes[victim].core.rejoining
    assert not c.nodes[victim].persisted.rejoining  # cleared on disk too
