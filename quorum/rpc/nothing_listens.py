"""The one rule for a client given addresses where nothing listens.

A client command (every ``sparkraft`` command but ``controller start`` and ``broker start``, which
wait for their quorum however long it takes to start) gives up once every address has refused the
connection for :data:`GIVE_UP_S` and none has ever answered, whatever protocol it speaks (gRPC,
the wire, Kafka's): ``NETWORK_EXCEPTION: nothing listens at ...``. Not sooner than 10 s: a
controller started in the background a moment before takes a few seconds to import and listen on
a busy machine (CI saw 1.5 s run out before three of them listened). The CLI turns the rule on
(:func:`apply`); library users and servers keep trying until their own timeout.
"""
from __future__ import annotations

import time
from typing import Iterable, Optional

from quorum.errors import Errors, SparkraftError

GIVE_UP_S = 10.0
give_up_s: Optional[float] = None  # None: the rule is off (servers, library use)


def apply() -> None:
    """Turn the rule on for this process (a client command)."""
    global give_up_s
    give_up_s = GIVE_UP_S


def error(servers: Iterable[str], seconds: float) -> SparkraftError:
    return SparkraftError(Errors.NETWORK_EXCEPTION,
                          f"nothing listens at {','.join(servers)}: every connection was refused for {seconds:.1f}s "
                          f"(is the controller running, and is this the address of its controller listener?)")


class RefusalClock:
    """Counts the refusals of one call's addresses; :meth:`check` raises once the rule says give up."""

    def __init__(self, servers: Iterable[str]):
        self.servers = list(servers)
        self.started = time.monotonic()
        self.refused: set[str] = set()
        self.answered = False

    def note_refused(self, server: str) -> None:
        self.refused.add(server)

    def note_answered(self) -> None:
        self.answered = True

    def check(self) -> None:
        waited = time.monotonic() - self.started
        if (give_up_s is not None and not self.answered and waited >= give_up_s
                and self.refused >= set(self.servers)):
            raise error(self.servers, waited)
