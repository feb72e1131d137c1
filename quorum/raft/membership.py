"""Changing the voter set while the quorum runs (KIP-853): AddRaftVoter, RemoveRaftVoter and
UpdateRaftVoter on the leader, one voter at a time, and the upgrade of a static quorum to
kraft.version 1.

Raft's single-server change: a KRAFT_VOTERS record takes effect on every node as soon as it is in
its log, committed or not, and the leader refuses a second change until the first is committed,
so any majority of the old set meets any majority of the new one. The leader also refuses before
it has committed a record of its own epoch (its LeaderChange): a change left uncommitted by an
earlier leader may otherwise be overtaken (Ongaro's fix to the single-server algorithm).

The upgrade writes KRAFT_VERSION 1 and the static voters as a KRAFT_VOTERS record, each voter
with the directory id it sent in its fetches (its own for the leader) and the endpoints of
``controller.quorum.voters``. A voter that has not fetched from this leader with a directory id
(not running, or a version without KIP-853) makes the leader refuse: a set with a directory id
guessed wrong would leave that voter outside its own quorum.

A leader that removes itself keeps leading until the removal commits (its own offset no longer
counts towards the high watermark), then resigns, and the rest elect a leader among themselves.

The voter set itself (the latest in the log, and the one before it while a change is uncommitted)
is read here too. Part of :class:`~quorum.raft.core.RaftCore` (mixed in).
"""
from __future__ import annotations

from typing import Optional

from quorum.errors import Errors, NotLeaderError, SparkraftError
from quorum.log import control_records
from quorum.log.batch import decode_one, scan
from quorum.log.voter_set import ReplicaKey, Voter, VoterSet, raft_state_records
from quorum.raft.roles import Leader
from quorum.raft.state import RaftState, part
from quorum.raft.voter_history import read_raft_state


class VoterChangeError(SparkraftError):
    """A voter change the leader refused, with Kafka's error for it; nothing was appended."""


class Membership(RaftState):
    # what this part uses of the core: RaftState's attributes it reads (a list or dict may change in
    # place) and assigns, and the other parts' methods it calls (tests/unit/test_raft_structure.py)
    PART = part(reads="high_watermark key log node_id role settings snapshots voter_history",
                writes="",
                calls="_append_proposed _become_resigned _complete_parked _leading _poll")

    # ------------------------------------------------------------------ the voter set
    @property
    def voters(self) -> frozenset[int]:
        """Node ids of the latest voter set in this node's log."""
        return self.voter_history.latest.ids

    @property
    def is_voter(self) -> bool:
        return self.voter_history.latest.is_voter(self.key)

    def _recent_voter_sets(self) -> tuple[VoterSet, ...]:
        """The latest voter set and, while it is not committed (as far as this node knows), the one
        before it. A node of either may still be needed to elect a leader that commits the change
        (Raft thesis §4.2.2: a leader that removed itself and crashed, whose removal only it holds),
        so it campaigns and votes under both; votes are counted under the latest set only."""
        h = self.voter_history
        at = h.latest_offset
        if at is None or at < self.high_watermark:
            return (h.latest,)
        return h.latest, h.at(at - 1)

    def _in_recent_voter_sets(self, key: ReplicaKey) -> bool:
        return any(v.is_voter(key) for v in self._recent_voter_sets())

    def _load_voter_history(self) -> None:
        """At start: the voter set of the snapshot the log starts from, then every voter record in the log."""
        below = [s for s in self.snapshots.ids() if s.offset <= self.log.start_offset]
        if below:
            self.voter_history.reset(below[-1].offset, *read_raft_state(self.snapshots, below[-1]))
        for batch in self.log.control_batches():
            self.voter_history.note_batch(batch)

    # ------------------------------------------------------------------ public inputs
    def add_voter(self, voter: Voter, now_ms: int) -> int:
        """Append the voter set with ``voter`` added; the offset of that record (the change is done
        once it commits). ``voter`` must be an observer that is caught up."""
        r = self._voter_change_leader()
        voters = self.voter_history.latest
        if voter.key.id in voters:
            raise VoterChangeError(Errors.DUPLICATE_VOTER, f"node {voter.key.id} is already a voter "
                                                           f"({voters[voter.key.id].key}); remove it first")
        if voter.key.directory_id is None:
            raise VoterChangeError(Errors.INVALID_REQUEST, f"voter {voter.key.id} needs a directory id")
        if not r.progress.caught_up(voter.key, now_ms, self.settings.fetch_timeout_ms):
            raise VoterChangeError(Errors.REQUEST_TIMED_OUT, f"replica {voter.key} is not a caught-up observer "
                                                             f"of this leader: start it and let it fetch first")
        return self._append_voters(r, voters.with_voter(voter), now_ms)

    def remove_voter(self, key: ReplicaKey, now_ms: int) -> int:
        """Append the voter set without ``key``; the offset of that record."""
        r = self._voter_change_leader()
        voters = self.voter_history.latest
        if not voters.is_voter(key):
            raise VoterChangeError(Errors.VOTER_NOT_FOUND, f"{key} is not a voter; the voters are "
                                                           f"{', '.join(map(str, voters.replica_keys))}")
        if len(voters) == 1:
            raise VoterChangeError(Errors.INVALID_REQUEST, f"{key} is the last voter: a quorum needs one")
        return self._append_voters(r, voters.without_voter(key), now_ms)

    def update_voter(self, voter: Voter, now_ms: int) -> int:
        """UpdateRaftVoter: a voter announces its endpoints. Append the voter set with them; the offset
        of that record, or of this leader's first record if the set has them already."""
        r = self._voter_change_leader()
        voters = self.voter_history.latest
        if not voters.is_voter(voter.key):
            raise VoterChangeError(Errors.VOTER_NOT_FOUND, f"{voter.key} is not a voter; the voters are "
                                                           f"{', '.join(map(str, voters.replica_keys))}")
        if not voter.endpoints:
            raise VoterChangeError(Errors.INVALID_REQUEST, f"voter {voter.key} announced no endpoint")
        if voters[voter.key.id] == voter:
            return r.epoch_start_offset
        return self._append_voters(r, VoterSet(voter if i == voter.key.id else voters[i] for i in voters), now_ms)

    def upgrade_kraft_version(self, level: int, now_ms: int, validate_only: bool = False) -> int:
        """UpdateFeatures kraft.version: write the static voter set into the log (see the module
        docstring). The offset of that record, or of this leader's first record if there is nothing
        to write (already at ``level``, or ``validate_only``)."""
        r = self._leader_with_first_commit()
        h = self.voter_history
        bad = Errors.INVALID_UPDATE_VERSION
        if level < h.kraft_version:
            raise VoterChangeError(bad, f"Invalid update version {level} for feature kraft.version: it is "
                                        f"{h.kraft_version}, and the voter set cannot go back into the config")
        if level > 1:
            raise VoterChangeError(bad, f"Invalid update version {level} for feature kraft.version. Local "
                                        f"controller {self.node_id} supports only versions 0-1")
        if level == h.kraft_version:
            return r.epoch_start_offset
        voters = []
        for i in h.static:
            directory = self.key.directory_id if i == self.node_id else r.progress.directory_id_of(i)
            if directory is None:
                raise VoterChangeError(bad, f"Invalid update version {level} for feature kraft.version: voter "
                                            f"{i} has not fetched from the leader with its directory id (is it "
                                            f"running a version with dynamic quorums?)")
            voters.append(Voter(ReplicaKey(i, directory), h.static[i].endpoints))
        if validate_only:
            return r.epoch_start_offset
        return self._append_voters(r, VoterSet(voters), now_ms, kraft_version=level)

    def snapshot_raft_records(self, end_offset: int) -> list[bytes]:
        """The control records a snapshot of the state below ``end_offset`` must begin with (the voter
        set and kraft.version then; none for a static quorum)."""
        h = self.voter_history
        voters = h.at(end_offset - 1)
        return raft_state_records(None if voters is h.static else voters, h.kraft_version_at(end_offset - 1))

    @property
    def voter_change_pending(self) -> bool:
        """Is the latest voter record not committed yet?"""
        at = self.voter_history.latest_offset
        return at is not None and at >= self.high_watermark

    # ------------------------------------------------------------------ inside
    def _leader_with_first_commit(self) -> Leader:
        r = self._leading()
        if r is None:
            raise NotLeaderError(self.role.leader_id, self.role.epoch)
        if r.progress.high_watermark is None:
            raise VoterChangeError(Errors.REQUEST_TIMED_OUT, f"the leader of epoch {r.epoch} has not committed "
                                                             f"its first record yet; try again")
        return r

    def _voter_change_leader(self) -> Leader:
        if self._leading() is not None and self.voter_history.kraft_version < 1:
            raise VoterChangeError(Errors.UNSUPPORTED_VERSION, "the voter set is static (kraft.version 0): "
                                                               "upgrade to kraft.version 1 first")
        r = self._leader_with_first_commit()
        if self.voter_change_pending:
            raise VoterChangeError(Errors.REQUEST_TIMED_OUT, f"the voter change at offset "
                                                             f"{self.voter_history.latest_offset} is not committed "
                                                             f"yet; one change at a time")
        return r

    def _append_voters(self, r: Leader, voters: VoterSet, now: int, kraft_version: Optional[int] = None) -> int:
        """Append ``voters`` (after a KRAFT_VERSION record if ``kraft_version`` is given) as the leader,
        after every record proposed before it, and use it at once; the offset of the voters record."""
        self._append_proposed(r, now)
        head = [] if kraft_version is None else [control_records.kraft_version(kraft_version)]
        batch = self.log.append_as_leader([*head, voters.encode()], r.epoch, now, control=True)
        r.accumulator.next_offset = self.log.end_offset
        self.voter_history.note_batch(batch)
        r.progress.set_voters(voters, now)
        # Fetches parked at the log end get the change now, as a drained batch's records do
        # (polls.py); else it waited for their long poll to expire, up to max_wait_ms (500 ms).
        self._complete_parked(r, now, only_expired=False)
        self._poll(now)
        return batch.base_offset + len(head)

    def _resign_if_removed(self, r: Leader, now: int) -> bool:
        """A leader outside the voter set resigns once that set is committed; True if it did."""
        if self.is_voter or self.voter_change_pending:
            return False
        self._become_resigned(r, now)
        return True

    def _note_appended(self, data: bytes) -> Optional[str]:
        """Batches fetched from the leader were appended: keep their voter records. An error message
        if one does not decode (the batches stay: they passed their CRC; the leader wrote them)."""
        try:
            for h in scan(data, verify=False):
                if h.control:
                    self.voter_history.note_batch(decode_one(data, h))
        except ValueError as e:
            return f"a control record it sent does not decode: {e}"
        return None

