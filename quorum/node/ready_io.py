"""How a real node carries out its core's Readies (the order is quorum/raft/ready.py's): quorum-state
written atomically and fsynced, the log fsynced, the proposals the new high watermark covers
answered, requests handed to the PeerClient with the core's timeout, answers handed to the
servicer calls waiting for them."""
from __future__ import annotations

import logging

from quorum import failpoints
from quorum.errors import Errors, SparkraftError
from quorum.log.election_state import ElectionState
from quorum.raft.messages import REQUEST_TYPES, FetchRequest, Outbound
from quorum.refusal_log import RefusalLog

log = logging.getLogger("quorum.node.raft_node")
REFUSALS = RefusalLog(log)


class NodeReadyIO:
    """A Ready's side effects on a real node: quorum-state written atomically, the log fsynced,
    committed proposals answered, requests sent through the PeerClient, answers handed to the
    servicer calls waiting for them."""

    def __init__(self, node):
        """``node``: the RaftNode whose Readies these are."""
        self.node = node

    def refused(self, peer: int, what: str) -> None:
        """Once per peer and kind of message every 30 s: an observer's id is the client's to choose."""
        REFUSALS.note(str(peer), what.split(" ", 1)[0], logging.WARNING,
                      "Node %d refused a message from node %d that breaks the Raft protocol: %s",
                      self.node.node_id, peer, what)

    def persist(self, state: ElectionState) -> None:
        self.node.store.write(state)

    def flush(self, after_send: bool) -> None:
        """fsync the log. A disk that fails it stops the node (KAFKA_STORAGE_ERROR): what it
        appended may or may not be on disk, and a node that went on would serve and acknowledge
        from a log it cannot trust (Kafka's controller stops too)."""
        log_ = self.node.log
        try:
            if log_.flushed_offset < log_.end_offset:
                failpoints.hit("log-before-fsync")
            log_.flush()
        except OSError as e:
            raise SparkraftError(Errors.KAFKA_STORAGE_ERROR, f"its log could not be fsynced ({e.strerror}): it stops "
                                 f"rather than go on with a log it cannot trust") from e
        failpoints.hit("log-after-fsync")

    def committed(self, high_watermark: int) -> None:
        node = self.node
        if node._proposals:
            node._proposals.settle(node.core, node.node_id, node._epoch_at)

    def send(self, out: Outbound, before_flush: bool) -> None:
        msg = out.message
        if isinstance(msg, REQUEST_TYPES):
            timeout = self.node.settings.request_timeout_ms
            if isinstance(msg, FetchRequest):
                timeout += msg.max_wait_ms
            self.node.peers.send(out.dest, out.corr, msg, timeout)
        else:
            future = self.node._waiting.pop(out.corr, None)
            if future is not None and not future.done():
                future.set_result(msg)

    def now_ms(self) -> int:
        return self.node.now_ms()

    def advanced(self) -> None:
        pass
