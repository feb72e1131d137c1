"""One logging format for every sparkraft process; level from --log-level or SPARKRAFT_LOG_LEVEL."""
from __future__ import annotations

import logging
import os

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: str | None = None, default: str = "WARNING") -> None:
    """Log to stderr. The flag wins over the environment, which wins over ``default``.

    One-shot commands keep WARNING so their stderr stays one clear line; long-running ones
    (controller, broker) pass ``default="INFO"``.
    """
    chosen = (level or os.environ.get("SPARKRAFT_LOG_LEVEL") or default).upper()
    if chosen not in LEVELS:
        raise ValueError(f"log level {chosen!r} is not one of {', '.join(LEVELS)}")
    logging.basicConfig(level=chosen, format=FORMAT, force=True)
