"""Test helpers for the processes a test starts (controllers, brokers, Kafka's JVMs)."""
from __future__ import annotations

import contextlib
import subprocess
from typing import IO, Callable, Iterable


def kill_all(procs: Iterable[subprocess.Popen], outputs: Iterable[IO] = (), wait_s: float = 10) -> None:
    """SIGKILL every process still running, reap each (all killed first, then waited for, so a slow
    one does not hold the others), and close the files their output went to."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass
    for out in outputs:
        out.close()


@contextlib.contextmanager
def watched(*dumps: Callable[[], str], closing: Iterable[Callable[[], None]] = ()):
    """Run the block; if it fails, print what each of ``dumps`` returns (the processes' logs) before
    the failure goes on; either way call each of ``closing``, in order."""
    try:
        yield
    except BaseException:
        for dump in dumps:
            print(dump())
        raise
    finally:
        for close in closing:
            close()
