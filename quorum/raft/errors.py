"""The Raft core's two errors, split as h11 splits its own: the caller's mistake, the core's bug.

Neither is ever a peer's doing: a peer's message that would break the protocol is refused without
effect and reported in ``Ready.violations`` for the driver to log.
"""
from __future__ import annotations


class RaftUsageError(ValueError):
    """The driver called the core wrongly (an empty proposal, a log start past the high watermark
    or at a snapshot it does not hold). The call changed nothing."""


class RaftSafetyError(AssertionError):
    """The core's own state would break Raft's guarantees (an epoch going back, a transition the
    table does not have, a high watermark past the log): a bug in the core, which stops here."""
