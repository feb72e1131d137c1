"""One line per phase, stamped with the time since the run started, so a long run shows where it is."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Iterator, TextIO


class Progress:
    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self._stream = stream
        self._t0 = time.monotonic()
        self._scope = ""  # the running benchmark's name, printed before each line

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def scope(self, name: str) -> None:
        self._scope = name

    def line(self, text: str) -> None:
        prefix = f"{self._scope}: " if self._scope else ""
        print(f"[{self.elapsed:7.1f}s] {prefix}{text}", file=self._stream, flush=True)

    @contextmanager
    def phase(self, text: str) -> Iterator[None]:
        """Print ``text`` when the phase starts and how long it took when it ends (or failed)."""
        start = time.monotonic()
        self.line(f"{text} ...")
        try:
            yield
        except BaseException as e:
            self.line(f"{text} FAILED after {time.monotonic() - start:.1f}s: {type(e).__name__}: {e}")
            raise
        self.line(f"{text} done in {time.monotonic() - start:.1f}s")
