"""What each role of the Raft core does when its time comes (``tick``, and after every input):
campaign, retry, fetch, check the quorum, expire requests; and when the next deadline is.

Part of :class:`~quorum.raft.core.RaftCore` (mixed in); ``_poll`` dispatches by role through
``_POLLS``, checked complete by tests/unit/test_dispatch_tables.py.
"""
from __future__ import annotations

from typing import Optional

from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Message,
    Outbound,
    VoteRequest,
)
from quorum.raft.roles import Candidate, Follower, Leader, Prospective, Resigned, Unattached
from quorum.raft.state import RaftState, part

NO_DEADLINE = 1 << 62  # "no timer set": later than any real time


class RolePolls(RaftState):
    # what this part uses of the core: RaftState's attributes it reads (a list or dict may change in
    # place) and assigns, and the other parts' methods it calls (tests/unit/test_raft_structure.py)
    PART = part(reads=("_backoff _inflight _outbox bootstrap cluster_id high_watermark key log node_id rng role "
                       "settings snapshots voter_history"),
                writes="_next_corr records_appended",
                calls=("_become_prospective _become_resigned _become_unattached _campaigns _complete_parked "
                       "_majority _resign_if_removed voters"))

    # ------------------------------------------------------------------ polling
    def _poll(self, now: int) -> None:
        """Fire whatever deadlines have passed and send whatever the role owes."""
        self._expire_requests(now)
        _POLLS[type(self.role)](self, now)

    def _next_deadline(self) -> int:
        times = [d for (_dest, _msg, d) in self._inflight.values()]
        times += list(self._backoff.values())
        # (an observer asking a voter for the leader waits for the answer, not its own timer)
        times += self.role.deadlines(self._majority(), self.settings.check_quorum_timeout_ms,
                                     lambda: not self._campaigns and self._fetch_in_flight())
        return min(times, default=NO_DEADLINE)

    def _expire_requests(self, now: int) -> None:
        for corr, (dest, msg, deadline) in list(self._inflight.items()):
            if now >= deadline:
                del self._inflight[corr]
                self._backoff[(type(msg), dest)] = now + self.settings.retry_backoff_ms
        for key, t in list(self._backoff.items()):
            if now >= t:
                del self._backoff[key]

    def _forget_ballots(self) -> None:
        """Drop the Vote requests of earlier campaigns (and their backoffs): a voter whose answer to
        one was lost would otherwise not be asked again until it timed out, a request timeout that
        outlasts a whole pre-vote round; every round then ran short of one ballot (the four-voter
        stall). A late answer to a dropped request is ignored, as any answer to a request given up on."""
        for corr, (_dest, msg, _deadline) in list(self._inflight.items()):
            if isinstance(msg, VoteRequest):
                del self._inflight[corr]
        for key in [k for k in self._backoff if k[0] is VoteRequest]:
            del self._backoff[key]

    def _can_send(self, kind: type, dest: int) -> bool:
        if (kind, dest) in self._backoff:
            return False
        return not any(d == dest and type(m) is kind for (d, m, _t) in self._inflight.values())

    def _request(self, dest: int, msg: Message, now: int, timeout_ms: Optional[int] = None) -> None:
        corr = self._next_corr
        self._next_corr += 1
        self._inflight[corr] = (dest, msg, now + (timeout_ms or self.settings.request_timeout_ms))
        self._outbox.append(Outbound(dest, corr, msg))

    def _send(self, dest: int, corr: int, msg: Message) -> None:
        self._outbox.append(Outbound(dest, corr, msg))

    def _poll_unattached(self, now: int) -> None:
        r = self.role
        if self._campaigns:
            if now >= r.election_deadline:
                self._become_prospective(now)
                self._poll(now)
        else:
            self._maybe_discover_leader(now)

    def _poll_prospective(self, now: int) -> None:
        r = self.role
        if now >= r.deadline:
            # Pre-vote lost or nobody answered: back off, try again later.
            self._become_unattached(r.epoch, now, r.voted_id, lost_leader=r.lost_leader_id)
            return
        for v in self.voters - r.granted - r.rejected - {self.node_id}:
            if self._can_send(VoteRequest, v):
                self._request(v, self._vote_request(r.epoch + 1, v, pre_vote=True), now)

    def _poll_candidate(self, now: int) -> None:
        r = self.role
        if now >= r.deadline:
            self._become_prospective(now)
            self._poll(now)
            return
        for v in self.voters - r.granted - r.rejected - {self.node_id}:
            if self._can_send(VoteRequest, v):
                self._request(v, self._vote_request(r.epoch, v, pre_vote=False), now)

    def _poll_leader(self, now: int) -> None:
        r = self.role
        if self._resign_if_removed(r, now):
            self._poll(now)
            return
        if not r.progress.has_quorum_since(now - self.settings.check_quorum_timeout_ms):
            self._become_resigned(r, now)  # check-quorum: we may be on the wrong side of a partition
            self._poll(now)
            return
        idle = self.high_watermark >= self.log.end_offset
        if r.accumulator.should_drain(now, idle):
            self._append_proposed(r, now)
            self._complete_parked(r, now, only_expired=False)
        for v in list(r.begin_epoch_unacked):
            if self._can_send(BeginQuorumEpochRequest, v):
                self._request(v, BeginQuorumEpochRequest(self.cluster_id, r.epoch, self.node_id,
                                                         self._directory_of(v)), now)
        self._complete_parked(r, now, only_expired=True)

    def _append_proposed(self, r: Leader, now: int) -> None:
        """The proposals waiting in the accumulator into the log, one batch each (counted: metrics)."""
        for records in r.accumulator.drain():
            self.log.append_as_leader(records, r.epoch, now)
            self.records_appended += len(records)

    def _poll_follower(self, now: int) -> None:
        r = self.role
        if now >= r.fetch_deadline:
            if self._campaigns:
                self._become_prospective(now)
            else:
                self._become_unattached(r.epoch, now)
            self._poll(now)
            return
        if r.snapshot is not None and (self.snapshots.download or (None,))[0] != r.snapshot:
            r.snapshot = None  # the download was dropped (a bad chunk): Fetch again
        if r.snapshot is not None:
            if self._can_send(FetchSnapshotRequest, r.leader_id):
                self._send_fetch_snapshot(r, now)
        elif self._can_send(FetchRequest, r.leader_id):
            self._send_fetch(r.leader_id, r.epoch, now)

    def _poll_resigned(self, now: int) -> None:
        r = self.role
        if now >= r.deadline:
            if self._campaigns:
                self._become_prospective(now)
            else:
                self._become_unattached(r.epoch, now)  # a leader that removed itself
            self._poll(now)
            return
        for v in list(r.unacked):
            if self._can_send(EndQuorumEpochRequest, v):
                self._request(v, EndQuorumEpochRequest(self.cluster_id, r.epoch, self.node_id,
                                                       r.preferred_successors, r.preferred_directory_ids), now)

    def _maybe_discover_leader(self, now: int) -> None:
        """An observer without a leader asks a voter; the answer names the leader."""
        r = self.role
        if now < r.election_deadline or self._fetch_in_flight():
            return
        ready = [v for v in sorted(self.voters or self.bootstrap)
                 if v != self.node_id and self._can_send(FetchRequest, v)]
        if ready:
            self._send_fetch(self.rng.choice(ready), r.epoch, now)
        r.election_deadline = now + self.settings.retry_backoff_ms

    def _vote_request(self, epoch: int, voter: int, pre_vote: bool) -> VoteRequest:
        return VoteRequest(self.cluster_id, epoch, self.node_id, self.log.last_epoch, self.log.end_offset,
                           pre_vote, self.key.directory_id, self._directory_of(voter))

    def _directory_of(self, voter: int) -> Optional[str]:
        """The directory id of ``voter`` in the latest voter set (None: static, or not a voter)."""
        v = self.voter_history.latest.get(voter)
        return None if v is None else v.key.directory_id

    def _fetch_in_flight(self) -> bool:
        return any(isinstance(m, FetchRequest) for (_d, m, _t) in self._inflight.values())

    def _send_fetch_snapshot(self, r: Follower, now: int) -> None:
        position = self.snapshots.download[1]
        self._request(r.leader_id, FetchSnapshotRequest(self.cluster_id, r.epoch, self.node_id, r.snapshot, position,
                                                        self.settings.fetch_max_bytes, self.key.directory_id), now)

    def _send_fetch(self, dest: int, epoch: int, now: int) -> None:
        s = self.settings
        self._request(dest, FetchRequest(self.cluster_id, epoch, self.node_id, self.log.end_offset,
                                         self.log.last_epoch, s.fetch_max_wait_ms, s.fetch_max_bytes,
                                         self.key.directory_id),
                      now, timeout_ms=s.fetch_max_wait_ms + s.request_timeout_ms)


_POLLS = {
    Unattached: RolePolls._poll_unattached,
    Prospective: RolePolls._poll_prospective,
    Candidate: RolePolls._poll_candidate,
    Leader: RolePolls._poll_leader,
    Follower: RolePolls._poll_follower,
    Resigned: RolePolls._poll_resigned,
}
