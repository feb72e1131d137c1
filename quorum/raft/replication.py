"""The replication RPCs of the Raft core: Fetch and FetchSnapshot, leader and follower sides, and
the high watermark they move.

Part of :class:`~quorum.raft.core.RaftCore` (which inherits these handlers and dispatches to them
through its tables); every handler runs after the core settled the epoch the message carries.
"""
from __future__ import annotations

from typing import Optional

from quorum.errors import Errors
from quorum.log.api import LogError
from quorum.log.batch import CorruptBatchError
from quorum.log.voter_set import ReplicaKey
from quorum.raft.errors import RaftSafetyError
from quorum.raft.messages import FetchRequest, FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse
from quorum.raft.roles import Follower, Leader
from quorum.raft.state import RaftState, part
from quorum.raft.voter_history import read_raft_state
from quorum.snapshot.api import SnapshotError


class ReplicationRpcs(RaftState):
    """Fetch and FetchSnapshot, requests and responses (mixed into RaftCore)."""

    # what this part uses of the core: RaftState's attributes it reads (a list or dict may change in
    # place) and assigns, and the other parts' methods it calls (tests/unit/test_raft_structure.py)
    PART = part(reads="_backoff log node_id role settings snapshots voter_history",
                writes=("first_leader_high_watermark high_watermark records_fetched snapshot_failures "
                        "snapshots_installed"),
                calls=("_fetch_deadline _following _leading _maybe_finish_rejoin _note_appended _reply_error _send "
                       "_violation"))

    def _refused_unless_leading(self, src: int, corr: int, req) -> bool:
        """A Fetch or FetchSnapshot must reach the leader of its own epoch; True if it was refused."""
        r = self.role
        if self._leading() is None:
            error = Errors.NOT_LEADER_OR_FOLLOWER if req.epoch >= r.epoch else Errors.FENCED_LEADER_EPOCH
        elif req.epoch != r.epoch:
            error = Errors.FENCED_LEADER_EPOCH if req.epoch < r.epoch else Errors.UNKNOWN_LEADER_EPOCH
        else:
            return False
        self._reply_error(src, corr, req, error)
        return True

    def _is_voter_replica(self, node_id: int, directory_id: Optional[str]) -> bool:
        """Is this replica a voter? Under a voter's node id, only the voter's own directory is."""
        return self.voter_history.latest.is_voter(ReplicaKey(node_id, directory_id))

    # ------------------------------------------------------------------ Fetch (leader side)
    def _handle_fetch_request(self, src: int, corr: int, req: FetchRequest, now: int) -> None:
        r = self.role
        if self._refused_unless_leading(src, corr, req):
            return
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0 or req.last_fetched_epoch > r.epoch:
            return self._reply_error(src, corr, req, Errors.INVALID_REQUEST)
        start = self.log.start_offset
        if start > 0 and (req.fetch_offset < start or req.last_fetched_epoch < self.log.start_epoch):
            # What the fetcher needs next is only in a snapshot now (or its log diverges below it).
            snapshot = self.snapshots.latest()
            if snapshot is None or snapshot.offset < start:
                raise RaftSafetyError(f"log starts at {start} but no snapshot reaches it (newest: {snapshot})")
            if self._is_voter_replica(src, req.replica_directory_id):
                r.begin_epoch_unacked.discard(src)
                r.progress.touch(src, now)
            return self._send(src, corr, FetchResponse(Errors.NONE, r.epoch, self.node_id, r.progress.high_watermark,
                                                       start, snapshot_id=snapshot))
        end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
        if end.epoch != req.last_fetched_epoch or end.offset < req.fetch_offset:
            # The fetcher's log has records this leader does not: tell it where to cut.
            return self._send(src, corr, FetchResponse(Errors.NONE, r.epoch, self.node_id, r.progress.high_watermark,
                                                       self.log.start_offset, diverging=end))
        voter = self._is_voter_replica(src, req.replica_directory_id)
        if voter:
            r.begin_epoch_unacked.discard(src)  # fetching in our epoch acknowledges it
        hw_moved = r.progress.update_replica(ReplicaKey(req.replica_id, req.replica_directory_id), voter,
                                             req.fetch_offset, self.log.end_offset, now)
        if hw_moved:
            self._on_leader_hw_moved(r, now)
        # A fetcher that knows an older high watermark than it could take (up to its fetch offset)
        # is answered at once (KIP-1166): its fetch crossed the move, which would otherwise not be
        # told until the next one. None: the fetcher did not say (the core's own followers).
        hw = r.progress.high_watermark  # None until this leader has committed in its epoch
        behind = req.high_watermark is not None and hw is not None and req.high_watermark < min(hw, req.fetch_offset)
        linger = self._hw_linger_ms(voter)
        if req.fetch_offset < self.log.end_offset or req.max_wait_ms <= 0 or (hw_moved or behind) and not linger:
            self._send(src, corr, self._fetch_response(r, req))
        elif hw_moved or behind:  # held briefly: the next records will carry the new high watermark
            r.parked[(src, corr)] = (req, now + min(req.max_wait_ms, linger))
        else:
            r.parked[(src, corr)] = (req, now + req.max_wait_ms)

    def _fetch_response(self, r: Leader, req: FetchRequest) -> FetchResponse:
        # at most fetch_max_bytes whatever the fetcher asks (Kafka's leader reads at most its 8 MiB
        # too): a Fetch of the whole log from 0 must not cost the leader the whole log in memory
        max_bytes = min(req.max_bytes, self.settings.fetch_max_bytes)
        data = self.log.read(req.fetch_offset, max_bytes) if req.fetch_offset < self.log.end_offset else b""
        return FetchResponse(Errors.NONE, r.epoch, self.node_id, r.progress.high_watermark,
                             self.log.start_offset, data)

    def _on_leader_hw_moved(self, r: Leader, now: int) -> None:
        """Followers and observers learn the new high watermark from answers to their parked
        fetches: within ``high_watermark_linger_ms``, or sooner with the next records.

        KRaft's leader answers them at once. At one writer that is four of the leader's messages
        per write (two answers carrying only the high watermark, two fetches right after), on the
        same cores as the next write; held 1 ms, the next write's records carry it instead, as
        etcd's leader sends its commit index with the next append (bench writes, one writer:
        p50 0.74-0.77 -> 0.58-0.66 ms in alternating runs). Idle, they learn it 1 ms later.
        Voters only: an observer (a broker) is answered at once, as its read-your-writes waits."""
        self._set_high_watermark(r.progress.high_watermark)
        if self.first_leader_high_watermark is None:
            self.first_leader_high_watermark = self.high_watermark
        for (src, corr), (req, deadline) in list(r.parked.items()):
            linger = self._hw_linger_ms(self._is_voter_replica(src, req.replica_directory_id))
            if linger:
                r.parked[(src, corr)] = (req, min(deadline, now + linger))
            else:
                del r.parked[(src, corr)]
                self._answer_parked(r, src, corr, req, now)

    def _hw_linger_ms(self, voter: bool) -> int:
        """How long a voter's parked fetch may wait to learn a moved high watermark (0: not at all)."""
        return max(0, self.settings.high_watermark_linger_ms) if voter else 0

    def _complete_parked(self, r: Leader, now: int, only_expired: bool) -> None:
        for (src, corr), (req, deadline) in list(r.parked.items()):
            if (only_expired and now >= deadline) or (not only_expired and req.fetch_offset < self.log.end_offset):
                del r.parked[(src, corr)]
                self._answer_parked(r, src, corr, req, now)

    def _answer_parked(self, r: Leader, src: int, corr: int, req: FetchRequest, now: int) -> None:
        """A parked fetch's answer. While it waited, a snapshot may have let the records it asks
        for go (the simulation found one held through a high watermark's linger): it is then
        answered as a new fetch would be, with the snapshot to take."""
        if req.fetch_offset < self.log.start_offset:
            self._handle_fetch_request(src, corr, req, now)
        else:
            self._send(src, corr, self._fetch_response(r, req))

    def _set_high_watermark(self, hw: Optional[int]) -> None:
        if hw is not None and hw > self.high_watermark:
            if hw > self.log.end_offset:
                raise RaftSafetyError(f"high watermark {hw} beyond log end {self.log.end_offset}")
            self.high_watermark = hw

    # ------------------------------------------------------------------ Fetch (follower side)
    def _handle_fetch_response(self, src: int, resp: FetchResponse, req: FetchRequest, now: int) -> None:
        r = self._following(src)
        if r is None:
            return
        r.fetch_failures = 0  # it answered: alive
        if resp.error is not Errors.NONE:
            self._backoff[(FetchRequest, src)] = now + self.settings.retry_backoff_ms
            return
        if req.fetch_offset != self.log.end_offset:
            return  # our log moved since we asked (truncated); ask again
        r.fetch_deadline = self._fetch_deadline(now)
        r.last_fetch_ok_ms = now
        if resp.diverging is not None:
            target = min(resp.diverging.offset, self.log.end_offset_for_epoch(resp.diverging.epoch).offset)
            if target < self.high_watermark:
                return self._violation(src, f"the leader asked to truncate to {target}, below the high "
                                            f"watermark {self.high_watermark} (committed records are never cut)")
            self.log.truncate_to(target)
            self.voter_history.truncate(self.log.end_offset)
            return
        if resp.snapshot_id is not None:
            # Either our log ends below the leader's log start, or it diverges from the leader's
            # below it (our last epoch is older than the start's): nothing we hold after what we
            # committed is of use, and the snapshot holds what we committed.
            if resp.snapshot_id.offset < self.high_watermark:
                return self._violation(src, f"the leader named snapshot {resp.snapshot_id}, below the high "
                                            f"watermark {self.high_watermark}")
            # Download from byte 0 from this leader: another node's file of the same snapshot may
            # differ byte for byte, so a download never resumes across leaders.
            r.snapshot = resp.snapshot_id  # the next poll sends FetchSnapshot
            self.snapshots.begin_download(resp.snapshot_id)
            return
        if resp.records:
            end = self.log.end_offset
            try:
                self.log.append_as_follower(resp.records)
            except (CorruptBatchError, LogError):
                self._backoff[(FetchRequest, src)] = now + self.settings.retry_backoff_ms
                return
            self.records_fetched += self.log.end_offset - end
            problem = self._note_appended(resp.records)
            if problem:
                self._violation(src, problem)
        if resp.high_watermark is not None:
            self._set_high_watermark(min(resp.high_watermark, self.log.end_offset))
        self._maybe_finish_rejoin(resp.high_watermark)

    # ------------------------------------------------------------------ FetchSnapshot (leader side)
    def _handle_fetch_snapshot_request(self, src: int, corr: int, req: FetchSnapshotRequest, now: int) -> None:
        r = self.role
        if self._refused_unless_leading(src, corr, req):
            return
        if self._is_voter_replica(src, req.replica_directory_id):
            r.begin_epoch_unacked.discard(src)
            r.progress.touch(src, now)
        size = self.snapshots.size(req.snapshot_id)
        if size is None:
            return self._reply_error(src, corr, req, Errors.SNAPSHOT_NOT_FOUND)
        if req.position < 0 or req.position > size or req.max_bytes <= 0:
            return self._reply_error(src, corr, req, Errors.POSITION_OUT_OF_RANGE)
        data = self.snapshots.read(req.snapshot_id, req.position, min(req.max_bytes, self.settings.fetch_max_bytes))
        if data is None:  # deleted since size() answered
            return self._reply_error(src, corr, req, Errors.SNAPSHOT_NOT_FOUND)
        self._send(src, corr, FetchSnapshotResponse(Errors.NONE, r.epoch, self.node_id, req.snapshot_id, size,
                                                    req.position, data))

    # ------------------------------------------------------------------ FetchSnapshot (follower side)
    def _handle_fetch_snapshot_response(self, src: int, resp: FetchSnapshotResponse, req: FetchSnapshotRequest,
                                      now: int) -> None:
        r = self._following(src)
        if r is None or r.snapshot != req.snapshot_id:
            return
        r.fetch_failures = 0
        if resp.error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
            # Deleted by retention meanwhile (or we lost our place): Fetch again for the newest one.
            self.snapshots.abort_download()
            r.snapshot = None
            return
        if resp.error is not Errors.NONE:
            self._backoff[(FetchSnapshotRequest, src)] = now + self.settings.retry_backoff_ms
            return
        download = self.snapshots.download
        if download is None or download != (req.snapshot_id, req.position) or resp.position != req.position:
            return  # an answer to a request from before a restarted download
        r.fetch_deadline = self._fetch_deadline(now)
        r.last_fetch_ok_ms = now
        received = self.snapshots.append_download(resp.data)
        if received < resp.size and resp.data:
            return  # the next poll asks for the next chunk
        if received != resp.size:
            self.snapshots.abort_download()
            r.snapshot = None
            self._backoff[(FetchRequest, src)] = now + self.settings.retry_backoff_ms
            return
        self._install_snapshot(r, src, now)

    def _install_snapshot(self, r: Follower, src: int, now: int) -> None:
        """The download is whole: verify it, make it our snapshot, and start the log after it."""
        r.snapshot = None
        try:
            snapshot = self.snapshots.finish_download()
        except SnapshotError:
            # Damaged on the way or on the leader's disk: refuse it and ask again.
            self.snapshot_failures += 1
            self._backoff[(FetchRequest, src)] = now + self.settings.fetch_timeout_ms // 4
            return
        if self._leading() is not None:
            raise RaftSafetyError("a leader never loads a snapshot")
        if snapshot.offset < self.high_watermark:
            raise RaftSafetyError(f"snapshot {snapshot} is below the high watermark {self.high_watermark}")
        self.log.reset_to(snapshot)
        self.voter_history.reset(snapshot.offset, *read_raft_state(self.snapshots, snapshot))
        self.snapshots_installed += 1
        self._set_high_watermark(snapshot.offset)
