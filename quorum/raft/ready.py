"""Ready: everything the outside world must do for a RaftCore, and the one sequence that does it.

The core sends nothing and writes nothing durable by itself (see core.py for what it does write):
``core.ready()`` returns a :class:`Ready` and ``process_readies`` carries it out in the only safe
order, through a :class:`ReadyIO` that the real node (quorum/node/raft_node.py) and the simulation
(quorum/sim/cluster.py) each implement. Writing the order once means a crash test of one driver is
a crash test of both::

    persist the election state  ->  flush the log  ->  commit  ->  send  ->  advance

A leader's Ready (``flush_after_send``) sends before it flushes: nothing it sends claims its own
records are durable, and the followers write them while it does (Raft thesis §10.2.1).

``committed`` comes before the sends so that a leader acknowledges its clients before it answers
the followers' Fetches with the new high watermark (at one writer, that is a commit's last hop).
It is safe before a leader's flush: the high watermark counts the leader's own records only once
flushed (progress.py), so whatever it covers is already on a majority's disks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from quorum.log.election_state import ElectionState
from quorum.raft.messages import Outbound, describe_message


@dataclass(frozen=True, slots=True)
class Ready:
    """What the driver must do, in this order, before calling ``advance``."""

    election_state: Optional[ElectionState]  # 1. persist atomically
    flush: bool  # 2. fsync the log
    high_watermark: Optional[int]  # 3. new committed end offset to expose, if it moved
    messages: tuple[Outbound, ...]  # 4. send
    flush_after_send: bool = False  # a leader's Ready: send before flushing (see the module doc)
    # (peer, what) for each message from a peer that broke the protocol, refused without effect:
    # the driver logs them.
    violations: tuple[tuple[int, str], ...] = ()


def describe_ready(rd: Ready) -> list[str]:
    """The canonical text form of a Ready, one line per duty in the order they are done (for logs
    and the scenario tests); an empty Ready is ``[]``."""
    lines = [f"refused from {peer}: {what}" for peer, what in rd.violations]
    st = rd.election_state
    if st is not None:
        lines.append(f"persist epoch={st.epoch} leader={_or_dash(st.leader_id)} voted={_or_dash(st.voted_id)}"
                     + (" rejoining" if st.rejoining else ""))
    if rd.flush and not rd.flush_after_send:
        lines.append("flush")
    if rd.high_watermark is not None:
        lines.append(f"high watermark {rd.high_watermark}")
    lines += [f"send {out.dest} corr={out.corr} {describe_message(out.message)}" for out in rd.messages]
    if rd.flush_after_send:
        lines.append("flush (after send)")
    return lines


def _or_dash(v: Optional[int]) -> str:
    return "-" if v is None else str(v)


class ReadyIO(Protocol):
    """The side effects of a Ready, as one driver performs them."""

    def refused(self, peer: int, what: str) -> None:
        """A message from ``peer`` broke the protocol and was refused (log it)."""

    def persist(self, state: ElectionState) -> None:
        """Write the election state atomically and durably."""

    def flush(self, after_send: bool) -> None:
        """fsync the log (``after_send``: a leader's, after its messages went out)."""

    def committed(self, high_watermark: int) -> None:
        """The high watermark moved to ``high_watermark``: expose it (settle what it covers)."""

    def send(self, out: Outbound, before_flush: bool) -> None:
        """Send a request to a peer or answer one (``before_flush``: the sender's log is not flushed)."""

    def now_ms(self) -> int:
        """The driver's clock, for ``advance``."""

    def advanced(self) -> None:
        """One Ready is done (the simulation checks and acknowledges here)."""


def process_readies(core, io: ReadyIO) -> None:
    """Carry out the core's Readies until it has none, each in the order persist, flush, commit,
    send, advance."""
    while core.has_ready():
        rd = core.ready()
        for peer, what in rd.violations:
            io.refused(peer, what)
        if rd.election_state is not None:
            io.persist(rd.election_state)
        if rd.flush and not rd.flush_after_send:
            io.flush(after_send=False)
        if rd.high_watermark is not None:
            io.committed(rd.high_watermark)
        for out in rd.messages:
            io.send(out, before_flush=rd.flush_after_send)
        if rd.flush_after_send:
            io.flush(after_send=True)
        core.advance(rd, io.now_ms())
        io.advanced()
