"""Every role change of the Raft core, as Kafka's QuorumState makes them: one method per target role,
all through ``_become``, which checks the move against this table (``_TRANSITIONS``: a test holds
the two equal, column by column) and never lowers the epoch. The
election state each role must persist comes from the role (roles.py); the core hands it out in its
next Ready, before anything is sent.

Transitions::

    from \\ to    Unattached   Prospective    Candidate  Leader    Follower  Resigned
    Unattached    epoch up     timeout        -          -         leader    -
    Prospective   lost/epoch   -              majority   -         leader    -
    Candidate     epoch up     timeout(*)     -          majority  leader    -
    Leader        epoch up     -              -          -         epoch up  resign / no quorum
    Follower      epoch up,    fetch timeout  -          -         epoch up  -
                  EndEpoch
    Resigned      epoch up     timeout        -          -         leader    -

    (*) a candidate whose election times out goes back to pre-vote.
    Observers only ever are Unattached or Follower.

"epoch up" means a message carried a higher epoch; "leader" means a message
named the leader of the current or a higher epoch.
"""
from __future__ import annotations

from typing import Optional

from quorum.errors import Errors
from quorum.log import control_records
from quorum.log.election_state import ElectionState
from quorum.raft import limits
from quorum.raft.accumulator import BatchAccumulator
from quorum.raft.errors import RaftSafetyError
from quorum.raft.messages import FetchResponse
from quorum.raft.progress import LeaderProgress
from quorum.raft.roles import Candidate, Follower, Leader, Prospective, Resigned, Role, Unattached
from quorum.raft.state import RaftState, part


class Transitions(RaftState):
    # what this part uses of the core: RaftState's attributes it reads (a list or dict may change in
    # place) and assigns, and the other parts' methods it calls (tests/unit/test_raft_structure.py)
    PART = part(reads="_persisted key log node_id rejoining settings voter_history",
                writes="role",
                calls=("_campaigns _election_deadline _fetch_deadline _forget_ballots _leading _majority _send "
                       "_violation is_voter voters"))

    # ------------------------------------------------------------------ transitions
    def _initial_role(self, st: ElectionState, now: int) -> Role:
        if st.leader_id == self.node_id:
            # We led this epoch before a restart; we cannot know what we appended
            # after the last flush, so we must not lead it again.
            return Resigned(st.epoch, self._election_deadline(now), (), set())
        if st.leader_id is not None:
            return Follower(st.epoch, st.leader_id, st.voted_id, self._fetch_deadline(now))
        if self._campaigns and self.voters == {self.node_id}:
            return Unattached(st.epoch, st.voted_id, now)  # sole voter: campaign at once
        return Unattached(st.epoch, st.voted_id, self._election_deadline(now) if self._campaigns else now)

    def _election_state(self) -> ElectionState:
        return self.role.election_state(self.node_id, self._persisted, self.rejoining)

    def _become(self, role: Role) -> None:
        """Every role change: checked against the transition table (the module docstring, and
        _TRANSITIONS below), never to a lower epoch; leaving leadership answers parked fetches."""
        old = self.role
        if old.epoch > role.epoch:
            raise RaftSafetyError(f"epoch would go back from {old.epoch} to {role.epoch}")
        if type(role) not in _TRANSITIONS[type(old)]:
            raise RaftSafetyError(f"no transition from {old.name} to {role.name} (epoch {old.epoch} -> {role.epoch})")
        leader = self._leading()
        if leader is not None:  # (a leader never becomes the leader again: see the table)
            self._abandon_leadership(leader, role)
        if role.campaigning:
            self._forget_ballots()  # a new campaign asks every voter again, now
        self.role = role

    def _become_unattached(self, epoch: int, now: int, voted_id: Optional[int] = None,
                           deadline: Optional[int] = None, lost_leader: Optional[int] = None) -> None:
        if deadline is None:
            deadline = self._election_deadline(now) if self._campaigns else now
        self._become(Unattached(epoch, voted_id, deadline, lost_leader_id=lost_leader))

    def _become_follower(self, epoch: int, leader_id: int, now: int) -> None:
        r = self.role
        voted = r.voted_id if r.epoch == epoch else None
        # A leader this node already lost in this epoch, named again by others who still follow it
        # (they may be about to lose it too): it gets an election timeout to answer a Fetch, not a
        # whole fetch timeout. Otherwise a dead leader's followers could take turns dragging each
        # other back for a fetch timeout each (the four-voter stall: 20 s without a leader).
        relapse = r.epoch == epoch and r.last_leader == leader_id
        deadline = self._election_deadline(now) if relapse else self._fetch_deadline(now)
        self._become(Follower(epoch, leader_id, voted, deadline))

    def _become_prospective(self, now: int) -> None:
        r = self.role
        voted = self._persisted.voted_id if self._persisted.epoch == r.epoch else None
        # the leader it has just stopped following: others still naming it do not pull this campaign
        # back to it (Prospective.keeps_leader). After a lost pre-vote they may: it may be alive
        # after all (this node was cut off), and following it again is how this node rejoins.
        prospective = Prospective(r.epoch, r.followed_leader, voted, self._election_deadline(now),
                                  granted=self._own_vote())
        self._become(prospective)
        self._maybe_win_prevote(prospective, now)

    def _own_vote(self) -> set[int]:
        """A candidate counts its own vote only if it is in its latest voter set."""
        return {self.node_id} if self.is_voter else set()

    def _maybe_win_prevote(self, r: Prospective, now: int) -> None:
        if r.has_majority(self._majority()):
            if r.epoch >= limits.MAX_EPOCH:  # never in practice: refuse to overflow, say why, stay put
                self._violation(self.node_id, f"epoch {r.epoch} is the last one: no election can be held")
                return self._become_unattached(r.epoch, now, r.voted_id)
            candidate = Candidate(r.epoch + 1, self._election_deadline(now), granted=self._own_vote())
            self._become(candidate)
            self._maybe_win_election(candidate, now)

    def _maybe_win_election(self, r: Candidate, now: int) -> None:
        if r.has_majority(self._majority()):
            self._become_leader(r, now)

    def _become_leader(self, cand: Candidate, now: int) -> None:
        start = self.log.end_offset
        records = [control_records.leader_change(self.node_id, self.voters, cand.granted)]
        h = self.voter_history
        from_bootstrap = h.kraft_version >= 1 and (h.latest_offset is None or h.latest_offset < 0)
        if from_bootstrap:
            # The voter set came from the bootstrap snapshot, not the log: write it into the log, so a
            # node that fetches the log from its start learns it too (as Kafka's first leader does).
            records += [control_records.kraft_version(h.kraft_version), h.latest.encode()]
        batch = self.log.append_as_leader(records, cand.epoch, now, control=True)
        self.voter_history.note_batch(batch)
        self._become(Leader(
            epoch=cand.epoch, leader_id=self.node_id, epoch_start_offset=start,
            progress=LeaderProgress(self.key, self.voter_history.latest, start, now,
                                    self.settings.observer_idle_timeout_ms, self.settings.max_observers),
            accumulator=BatchAccumulator(cand.epoch, self.log.end_offset, self.settings.append_linger_ms,
                                         self.settings.max_batch_bytes),
            begin_epoch_unacked=set(self.voters - {self.node_id})))

    def _become_resigned(self, r: Leader, now: int) -> None:
        successors = r.progress.successors()
        ids = tuple(k.id for k in successors)
        self._become(Resigned(r.epoch, self._election_deadline(now), ids, set(ids),
                              tuple(k.directory_id for k in successors)))

    def _abandon_leadership(self, old: Leader, new: Role) -> None:
        old.accumulator.drain()  # unappended proposals are dropped; their callers see NOT_CONTROLLER
        for (src, corr) in old.parked:
            self._send(src, corr, FetchResponse(Errors.NOT_LEADER_OR_FOLLOWER, new.epoch, new.leader_id))
        old.parked.clear()


# The module docstring's transition table: from each role, the roles _become may go to.
_TRANSITIONS: dict[type, frozenset[type]] = {
    Unattached: frozenset({Unattached, Prospective, Follower}),
    Prospective: frozenset({Unattached, Candidate, Follower}),
    Candidate: frozenset({Unattached, Prospective, Leader, Follower}),
    Leader: frozenset({Unattached, Follower, Resigned}),
    Follower: frozenset({Unattached, Prospective, Follower}),
    Resigned: frozenset({Unattached, Prospective, Follower}),
}
