"""The election RPCs of the Raft core: Vote (and pre-vote), BeginQuorumEpoch, EndQuorumEpoch.

Part of :class:`~quorum.raft.core.RaftCore` (which inherits these handlers and dispatches to them
through its tables); every handler runs after the core settled the epoch the message carries.
"""
from __future__ import annotations

from typing import Optional

from quorum.errors import Errors
from quorum.log.voter_set import ReplicaKey
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.roles import Prospective
from quorum.raft.state import RaftState, part


class ElectionRpcs(RaftState):
    """Vote, BeginQuorumEpoch and EndQuorumEpoch, requests and responses (mixed into RaftCore)."""

    # what this part uses of the core: RaftState's attributes it reads (a list or dict may change in
    # place) and assigns, and the other parts' methods it calls (tests/unit/test_raft_structure.py)
    PART = part(reads="_backoff key node_id rejoining role settings",
                writes="",
                calls=("_become_follower _become_unattached _campaigns _election_deadline _in_recent_voter_sets "
                       "_leading _log_up_to_date _majority _maybe_win_prevote _refuse_epoch_jump _reply_error "
                       "_send _violation voters"))

    # ------------------------------------------------------------------ Vote
    def _handle_vote_request(self, src: int, corr: int, req: VoteRequest, now: int) -> None:
        r = self.role
        if not self._meant_for_this_replica(req.voter_directory_id):
            return self._reply_error(src, corr, req, Errors.INVALID_VOTER_KEY)
        if not self._in_recent_voter_sets(ReplicaKey(req.candidate_id, req.candidate_directory_id)):
            # A node votes only for a voter of its own log's voter sets. It need not be one itself:
            # a voter just added may not have fetched the record that says so (Raft thesis §4.1),
            # and the candidate counts only the votes of its own voters.
            return self._reply_error(src, corr, req, Errors.INCONSISTENT_VOTER_SET)
        if req.epoch < r.epoch:
            return self._send(src, corr, VoteResponse(Errors.NONE, r.epoch, r.leader_id, False, req.pre_vote))
        if self._refuse_epoch_jump(src, corr, req):
            return
        if req.last_epoch > req.epoch:
            self._violation(src, f"Vote for epoch {req.epoch} behind its own log's last epoch {req.last_epoch}")
            return self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        up_to_date = self._log_up_to_date(req.last_epoch, req.last_offset)
        if req.pre_vote:
            granted = r.grants_pre_vote(up_to_date, now, self.settings.fetch_timeout_ms) and not self.rejoining
            return self._send(src, corr, VoteResponse(Errors.NONE, r.epoch, r.leader_id, granted, True))
        if req.epoch > r.epoch:
            self._become_unattached(req.epoch, now)
            r = self.role
        granted = False
        if r.can_grant_vote(req.candidate_id) and up_to_date and not self.rejoining:
            granted = True
            self._become_unattached(r.epoch, now, voted_id=req.candidate_id)
        self._send(src, corr, VoteResponse(Errors.NONE, self.role.epoch, self.role.leader_id, granted, False))

    def _handle_vote_response(self, src: int, resp: VoteResponse, req: VoteRequest, now: int) -> None:
        r = self.role
        if resp.error is not Errors.NONE:
            self._backoff[(VoteRequest, src)] = now + self.settings.retry_backoff_ms
            return
        if src not in self.voters:
            return  # the voter set changed since we asked: only its voters count
        if r.counts(resp.pre_vote, req.epoch):  # only a campaign's own ballots (Prospective, Candidate)
            r.record(src, resp.granted)
            r.tally(self, now)

    def _after_pre_vote(self, r: Prospective, now: int) -> None:
        """A pre-vote ballot counted: back off if it cannot win any more, else see whether it has."""
        if r.cannot_win(len(self.voters), self._majority()):
            self._become_unattached(r.epoch, now, r.voted_id, lost_leader=r.lost_leader_id)
        else:
            self._maybe_win_prevote(r, now)

    def _refused_epoch_change(self, src: int, corr: int, req) -> bool:
        """Begin/EndQuorumEpoch must name a voter as leader (unless this node knows no voters yet: it
        joins with an empty log), not an old epoch, and not an epoch too far ahead; True if it was refused."""
        if self.voters and req.leader_id not in self.voters:
            self._reply_error(src, corr, req, Errors.INCONSISTENT_VOTER_SET)
            return True
        if req.epoch < self.role.epoch:
            self._reply_error(src, corr, req, Errors.FENCED_LEADER_EPOCH)
            return True
        return self._refuse_epoch_jump(src, corr, req)

    # ------------------------------------------------------------------ BeginQuorumEpoch
    def _handle_begin_quorum_epoch_request(self, src: int, corr: int, req: BeginQuorumEpochRequest, now: int) -> None:
        r = self.role
        if not self._meant_for_this_replica(req.voter_directory_id):
            return self._reply_error(src, corr, req, Errors.INVALID_VOTER_KEY)
        if self._refused_epoch_change(src, corr, req):
            return
        if req.epoch == r.epoch and r.led and req.leader_id != self.node_id:
            self._violation(src, f"BeginQuorumEpoch names node {req.leader_id} leader of epoch {r.epoch}, "
                                 f"which this node leads or led")
            return self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        if not (r.follows(req.leader_id) and r.epoch == req.epoch):
            self._become_follower(req.epoch, req.leader_id, now)
        self._send(src, corr, BeginQuorumEpochResponse(Errors.NONE, self.role.epoch, self.role.leader_id))

    def _handle_begin_quorum_epoch_response(self, src: int, resp: BeginQuorumEpochResponse,
                                         req: BeginQuorumEpochRequest, now: int) -> None:
        r = self._leading()
        if r is not None and resp.error is Errors.NONE and req.epoch == r.epoch:
            r.begin_epoch_unacked.discard(src)

    # ------------------------------------------------------------------ EndQuorumEpoch
    def _handle_end_quorum_epoch_request(self, src: int, corr: int, req: EndQuorumEpochRequest, now: int) -> None:
        r = self.role
        if self._refused_epoch_change(src, corr, req):
            return
        if req.epoch > r.epoch or r.follows(req.leader_id):
            # The leader stepped down: campaign soon, the most caught-up successor first.
            if self._campaigns:
                pos = self._successor_position(req)
                if pos == 0:
                    delay = 0
                elif pos > 0:
                    delay = min(self.settings.election_backoff_max_ms, self.settings.retry_backoff_ms << pos)
                else:
                    delay = self._election_deadline(now) - now
                voted = r.voted_id if r.epoch == req.epoch else None
                self._become_unattached(req.epoch, now, voted_id=voted, deadline=now + delay)
            else:
                self._become_unattached(req.epoch, now)
        self._send(src, corr, EndQuorumEpochResponse(Errors.NONE, self.role.epoch, self.role.leader_id))

    def _successor_position(self, req: EndQuorumEpochRequest) -> int:
        """Where this replica is in the resigning leader's preferred order; -1 if absent (or named
        under its node id with another directory: a hint for the disk it replaced)."""
        dirs = req.preferred_directory_ids
        for i, node in enumerate(req.preferred_successors):
            if node == self.node_id:
                theirs = dirs[i] if i < len(dirs) else None
                return i if theirs is None or theirs == self.key.directory_id else -1
        return -1

    def _handle_end_quorum_epoch_response(self, src: int, resp: EndQuorumEpochResponse,
                                       req: EndQuorumEpochRequest, now: int) -> None:
        self.role.end_epoch_acknowledged(src, req.epoch)

    def _meant_for_this_replica(self, directory_id: Optional[str]) -> bool:
        """A request naming this node's directory id names this replica (None: the sender does not know
        it, as in a static quorum); another id means a replica this node's disk no longer is."""
        return directory_id is None or self.key.directory_id is None or directory_id == self.key.directory_id

    @property
    def resignation_acknowledged(self) -> bool:
        """A resigned leader has told every voter it stepped down (safe to exit now)."""
        return self.role.handed_over
