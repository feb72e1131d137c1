"""Failpoints: named places in the write path where a test makes a real process fail on purpose, as
etcd's gofail does. Off unless the process is started with ``SPARKRAFT_FAILPOINTS`` in its
environment (no configuration key reaches them), and a process that has one armed says so in its
log at start.

``SPARKRAFT_FAILPOINTS="name=action[,name=action...]"``; the actions:

- ``crash``: the process dies there at once (SIGKILL to itself: nothing flushed, nothing closed);
- ``pause``: it stops there (SIGSTOP to itself) until a SIGCONT;
- ``on``: for a point that is a deliberate bug rather than a place (``ack-before-commit``: the active
  controller answers a write before its records are committed), with which the tests show that the
  linearizability checker catches what it must.

``hit(name)`` is called at each point: one dict lookup when nothing is armed.
"""
from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)

ACTIONS = ("crash", "pause", "on")
POINTS = {
    "ack-before-commit": "a deliberate bug: a write is answered before it is committed",
}


def _parse(text: str) -> dict[str, str]:
    armed = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, action = item.partition("=")
        if name not in POINTS or action not in ACTIONS:
            raise ValueError(f"SPARKRAFT_FAILPOINTS: {item!r} is not a known point=action "
                             f"(points: {', '.join(sorted(POINTS))}; actions: {', '.join(ACTIONS)})")
        armed[name] = action
    return armed


ARMED: dict[str, str] = _parse(os.environ.get("SPARKRAFT_FAILPOINTS", ""))


def announce() -> None:
    """One warning at a process's start when a failpoint is armed."""
    if ARMED:
        log.warning("Failpoints armed (SPARKRAFT_FAILPOINTS, for tests only): %s",
                    ", ".join(f"{n}={a}" for n, a in sorted(ARMED.items())))


def enabled(name: str) -> bool:
    """Whether the deliberate bug ``name`` is on."""
    return ARMED.get(name) == "on"


def hit(name: str) -> None:
    """The process reached point ``name``: crash or pause there if a test armed it so."""
    action = ARMED.get(name)
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "pause":
        os.kill(os.getpid(), signal.SIGSTOP)
