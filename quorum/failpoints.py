"""Failpoints: named places in the write path where a test makes a real process fail on purpose, as
etcd's gofail does. Off unless the process is started with ``SPARKRAFT_FAILPOINTS`` in its
environment (no configuration key reaches them), and a process that has one armed says so in its
log at start.

``SPARKRAFT_FAILPOINTS="name=action[,name=action...]"``; the actions:

- ``crash``: the process dies there at once (SIGKILL to itself: nothing flushed, nothing closed);
- ``pause``: it stops there (SIGSTOP to itself) until a SIGCONT;
- ``eio``, ``enospc``: the disk fails there (OSError EIO or ENOSPC), as a failing disk or a full one;
- ``on``: for a point that is a deliberate bug rather than a place (``ack-before-commit``: the active
  controller answers a write before its records are committed), with which the tests show that the
  linearizability checker catches what it must; ``stale-read``: a controller answers every read from
  the image it had at its first read while naming its current offset, with which the read checks
  show the same.

The points, in the write path's order: ``log-before-fsync`` (records appended to the log, not yet
fsynced), ``log-after-fsync`` (fsynced, the high watermark not yet moved on it),
``voter-change-appended`` (the leader took a voter's addition or removal, not yet committed),
``snapshot-half-written`` (half of a snapshot's temporary file written), ``controller-before-answer``
(a write committed and replayed, its client not yet answered); in the streaming job,
``delta-before-cut`` (the state tables committed to Delta, the cut that names their versions not yet)
and ``source-latest-offset`` (the source asked where the log ends, in PySpark's source runner).
``SPARKRAFT_FAILPOINTS_ONCE=DIR`` makes each point fire once across the processes sharing DIR.

``hit(name)`` is called at each point: one dict lookup when nothing is armed.
"""
from __future__ import annotations

import errno
import logging
import os
import signal

log = logging.getLogger(__name__)

ACTIONS = ("crash", "pause", "eio", "enospc", "on")
POINTS = {
    "log-before-fsync": "records appended to the log, not yet fsynced",
    "log-after-fsync": "the log fsynced, the high watermark not yet moved on it",
    "voter-change-appended": "a voter's addition or removal taken by the leader, not yet committed",
    "snapshot-half-written": "half of a snapshot's temporary file written",
    "controller-before-answer": "a write committed and replayed, its client not yet answered",
    "delta-before-cut": "the materialiser's state tables committed to Delta, the cut naming them not yet",
    "source-latest-offset": "the streaming source asked for the log's end (in the process serving the source)",
    "ack-before-commit": "a deliberate bug: a write is answered before it is committed",
    "stale-read": "a deliberate bug: reads answered from an old image, said to be the current one",
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


def armed(name: str) -> bool:
    return name in ARMED


ONCE_DIR = os.environ.get("SPARKRAFT_FAILPOINTS_ONCE", "")


def _first_time(name: str) -> bool:
    """With ``SPARKRAFT_FAILPOINTS_ONCE=DIR``, a point fires once across every process sharing DIR (a
    job's restarted query starts a new process that would otherwise stop at the same place again)."""
    if not ONCE_DIR:
        return True
    try:
        os.close(os.open(os.path.join(ONCE_DIR, name), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def hit(name: str) -> None:
    """The process reached point ``name``: crash, pause or fail the disk there if a test armed it so."""
    action = ARMED.get(name)
    if action is None or not _first_time(name):
        return
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "pause":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action in ("eio", "enospc"):
        code = errno.EIO if action == "eio" else errno.ENOSPC
        raise OSError(code, f"{os.strerror(code)} (failpoint {name})")
