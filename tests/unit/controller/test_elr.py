"""Eligible leader replicas (KIP-966) at the controller: the ISR may empty below
min.insync.replicas, the members it lost stay eligible, and the first of them back leads cleanly;
off, the same failures leave the partition leaderless."""
from __future__ import annotations

from controller_helpers import controller, create, heartbeat

from quorum.controller import api
from quorum.errors import Errors
from quorum.metadata.invariants import violations

ELR = "eligible.leader.replicas.version"


def _p(c):
    return c.core.image.topics.topic_by_name("t").partitions[0]


def _only(c, epochs, alive, at):
    """Time passes to ``at``; only the brokers in ``alive`` heartbeat, so the others are fenced (one per tick)."""
    c.now = at
    for b in alive:
        heartbeat(c, b, epochs[b])
    for step in range(len(epochs)):
        c.tick(at + 9001 + step)
        for b in alive:
            heartbeat(c, b, epochs[b])


def _cluster(elr_on: bool, min_isr: str = "2"):
    c, epochs = controller(3)
    if elr_on:
        (r,) = c.request(api.UpdateFeaturesRequest(((ELR, 1),)))
        assert r.error is Errors.NONE
    create(c, "t", -1, -1, assignments=((0, 1, 2),), configs=(("min.insync.replicas", min_isr),))
    return c, epochs


def test_the_isr_empties_into_the_elr_and_the_first_member_back_leads():
    c, epochs = _cluster(elr_on=True)
    _only(c, epochs, (0, 1), 1000)  # 2 fenced: the ISR (0, 1) is still at min.insync.replicas
    p = _p(c)
    assert p.isr == (0, 1) and p.elr == () and p.leader == 0
    _only(c, epochs, (0,), 20_000)  # 1 fenced: below min ISR, so 1 joins the ELR
    p = _p(c)
    assert p.isr == (0,) and p.elr == (1,) and p.leader == 0
    _only(c, epochs, (), 40_000)  # 0 fenced: the ISR empties; 0 and 1 hold everything committed
    p = _p(c)
    assert p.isr == () and p.elr == (0, 1) and p.leader == -1
    assert violations(c.core.image) == []
    heartbeat(c, 1, epochs[1])  # broker 1 returns first: it leads, cleanly, from the ELR
    p = _p(c)
    assert p.leader == 1 and p.isr == (1,) and p.elr == (0,)
    assert violations(c.core.image) == []


def test_without_elr_the_same_failures_leave_it_leaderless():
    c, epochs = _cluster(elr_on=False)
    _only(c, epochs, (0, 1), 1000)
    _only(c, epochs, (0,), 20_000)
    _only(c, epochs, (), 40_000)
    p = _p(c)
    assert p.isr == (0,) and p.elr == () and p.leader == -1  # the last member stays in the ISR
    heartbeat(c, 1, epochs[1])
    assert _p(c).leader == -1  # 1 is not in the ISR: no clean leader


def test_an_isr_at_min_insync_replicas_keeps_no_elr():
    c, epochs = _cluster(elr_on=True, min_isr="1")
    _only(c, epochs, (0,), 1000)
    p = _p(c)
    assert p.isr == (0,) and p.elr == () and p.last_known_elr == ()


def test_elr_off_by_an_unsafe_downgrade_only():
    c, epochs = _cluster(elr_on=True)
    _only(c, epochs, (0,), 1000)
    assert _p(c).elr != ()
    (r,) = c.request(api.UpdateFeaturesRequest(((ELR, 0),), upgrade_type="SAFE_DOWNGRADE"))
    assert r.error is Errors.INVALID_UPDATE_VERSION and "eligible leader replicas of 1 partition(s)" in r.message
    assert _p(c).elr != ()
    (r,) = c.request(api.UpdateFeaturesRequest(((ELR, 0),), upgrade_type="UNSAFE_DOWNGRADE"))
    assert r.error is Errors.NONE and "eligible leader replicas of 1 partition(s) cleared" in r.message
    p = _p(c)
    assert p.elr == () and p.last_known_elr == () and c.core.image.features.level(ELR) == 0
    assert violations(c.core.image) == []


def test_a_restarted_broker_leaves_the_elr_for_the_last_known_elr():
    from controller_helpers import register

    c, epochs = _cluster(elr_on=True)
    _only(c, epochs, (0,), 1000)
    _only(c, epochs, (), 20_000)
    p = _p(c)
    assert p.isr == () and p.leader == -1 and len(p.elr) == 2 and 0 in p.elr
    other = next(b for b in p.elr if b != 0)
    epochs[other] = register(c, other, gen=1, unfence=False)  # its process restarted: a new incarnation
    p = _p(c)
    assert p.elr == (0,) and other in p.last_known_elr  # what it held is no longer vouched for
    heartbeat(c, other, epochs[other])  # unfenced, but not eligible: still leaderless
    assert _p(c).leader == -1
    heartbeat(c, 0, epochs[0])  # broker 0 (never restarted, still in the ELR) comes back and leads
    p = _p(c)
    assert p.leader == 0 and p.isr == (0,)
    assert violations(c.core.image) == []
