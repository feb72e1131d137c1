"""How long a quorum is without a leader after it loses one, and the bound it must keep.

``time_to_new_leader`` runs one seeded cluster: a leader elected and writing, then lost (``how``:
frozen, i.e. cut off from everyone as a SIGSTOPped process is, or crashed), optionally right after
it appended a voter's addition (``during_add``: the voter sets of the survivors may differ), and
measures the simulated milliseconds until another node leads.

``bound_ms``: the followers notice within the fetch timeout plus its jitter (half an election
timeout at most, core._fetch_deadline), and a new leader must follow within two election timeouts
(one campaign's randomized deadline is up to two of them). On a lossy network a lost ballot can
cost a round; the bound then allows one request timeout more (``lossy=True``).
"""
from __future__ import annotations

from typing import Optional

from quorum.raft.settings import RaftSettings
from quorum.sim.cluster import Cluster
from quorum.sim.network import NetworkFaults

FAST = RaftSettings(election_timeout_ms=300, fetch_timeout_ms=1000, request_timeout_ms=1000)  # the tests' timeouts


def bound_ms(settings: RaftSettings, lossy: bool = False) -> int:
    t = settings.election_timeout_ms
    return settings.fetch_timeout_ms + t // 2 + 2 * t + (settings.request_timeout_ms if lossy else 0)


def time_to_new_leader(seed: int, voters: int = 4, how: str = "freeze", during_add: bool = False,
                       settings: RaftSettings = FAST, faults: Optional[NetworkFaults] = None) -> int:
    c = Cluster(seed, voters=voters, dynamic=True, spares=1, settings=settings, faults=faults)
    assert c.run_until(lambda: c.leader() is not None and c.leader().core.high_watermark > 0, 60_000), \
        f"seed {seed}: no first leader"
    for _ in range(10):
        c.write(3)
        c.run_for(20)
    c.run_for(500 + c.rng.randrange(1000))  # the loss lands anywhere in the followers' fetch cycles
    assert c.run_until(lambda: c.leader() is not None, 60_000), f"seed {seed}: no leader to lose"
    old = c.leader().node_id
    if during_add:
        c.change_voters(add=voters + 1)
    c.run_for(c.rng.randrange(60))
    lost_at = c.now
    if how == "crash":
        c.crash(old)
    else:
        c.net.isolate(old, set(c.nodes))
    assert c.run_until(lambda: any(n.alive and n.core.is_leader and n.node_id != old for n in c.nodes.values()),
                       120_000), f"seed {seed}: no new leader in 120 s"
    return c.now - lost_at
