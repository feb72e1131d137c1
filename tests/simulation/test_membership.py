"""Dynamic quorum (KIP-853) in the simulation: membership changes under faults, invariants on
every step (invariants.py: one leader per epoch across voter sets, at most one uncommitted voter
change, votes only for voters of the voter's own log, elections by a majority of the winner's own
voter set, commits durable on a majority of the leader's current set, nothing committed lost, a
node's kraft.version what the committed records say)."""
import pytest

from quorum.sim.scenarios import MEMBERSHIP_SCENARIOS, membership_chaos, upgrade_chaos


@pytest.mark.parametrize("name", sorted(MEMBERSHIP_SCENARIOS))
def test_membership_scenario_holds_invariants(name):
    for seed in range(15):
        c = MEMBERSHIP_SCENARIOS[name](seed)
        assert c.inv.acked and c.leader() is not None


@pytest.mark.parametrize("seed", [3767, 3985])
def test_a_leader_that_removed_itself_notices_when_the_new_set_moved_on(seed):
    """Found by hand-run seeds: a leader whose log holds its own removal, uncommitted, that the new
    set committed and moved on from (a new leader elected without it) got no fetch and no message,
    and as the set's majority no longer counted its own vote it never looked (check-quorum's timer
    assumed the leader votes): a leader forever, in an old epoch."""
    c = membership_chaos(seed)
    assert sum(1 for n in c.nodes.values() if n.alive and n.core.is_leader) == 1


@pytest.mark.parametrize("block", range(4))
def test_membership_chaos_seeds(block):
    """200 seeds of voter changes (the leader's removal and disk replacements included) mixed with
    crashes that lose unflushed writes, partitions and lossy links."""
    changes = {}
    for seed in range(block * 50, block * 50 + 50):
        c = membership_chaos(seed)
        assert c.leader() is not None
        for what, n in c.membership_results.items():
            changes[what] = changes.get(what, 0) + n
    assert changes.get("add NONE", 0) > 10 and changes.get("remove NONE", 0) > 10, changes


def test_upgrade_chaos_seeds():
    """200 static quorums upgraded to kraft.version 1 under faults, voters announcing new endpoints
    afterwards; each ends with every node holding the static voters and their directory ids."""
    asked = {}
    for seed in range(200):
        c = upgrade_chaos(seed)
        for what, n in c.membership_results.items():
            asked[what] = asked.get(what, 0) + n
    assert asked.get("upgrade NONE", 0) >= 200 and asked.get("update NONE", 0) > 50, asked
