"""Entry point of ``sparkraft``: wires the command-group modules and owns the error contract.

Contract (DESIGN §8, §10): bad input exits 1 with exactly one line on stderr, starting with Kafka's
error name where there is one (``INVALID_REPLICATION_FACTOR: ...``), else ``ERROR: ...``. No
traceback unless ``--debug``. A malformed command line (an unknown flag, a missing argument) is
bad input too: one line naming the command and the problem, exit 1.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import sys
import traceback
from typing import NoReturn

from quorum.allocator import tune_allocator
from quorum.config import ConfigError
from quorum.errors import SparkraftError
from quorum.gc_tuning import tune_gc
from quorum.rpc import nothing_listens
from sparkraft.commands import apply_storage_options, common_options
from sparkraft.logging_setup import setup_logging

# Each name is a module in sparkraft.commands with register(subparsers); add new groups here.
COMMAND_GROUPS = ("storage", "controller", "broker", "quorum", "topics", "configs", "brokers", "materialize",
                  "sql", "catalog", "pipeline", "changes", "dump_log", "shell", "demo", "features", "acls", "leader_election", "cluster", "reassign_partitions",
                  "migrate", "console", "audit", "log_holds", "revert")

# Errors that mean "bad input or state", reported as one line without a traceback.
EXPECTED_ERRORS = (SparkraftError, ConfigError, ValueError, OSError)

class OneLineParser(argparse.ArgumentParser):
    """argparse with the CLI's error contract: one line and exit 1 instead of a usage block and 2.
    Subparsers are made of the same class, so every command behaves alike."""

    _seen: list[str] = []  # what this parser was last given (argparse hands subparsers their part)

    def parse_known_args(self, args=None, namespace=None):
        self._seen = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        if "required: COMMAND" in message:  # argparse names the missing command before a bad flag
            known = self._option_string_actions
            unknown = [a for a in self._seen if a.startswith("-") and a.split("=", 1)[0] not in known]
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        print(f"ERROR: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr, flush=True)
        exit_now(1)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="sparkraft", parents=[common_options()],
        description="A KRaft-style metadata quorum whose log Spark materialises into Delta tables.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_GROUPS:
        importlib.import_module(f"sparkraft.commands.{name}").register(subparsers)
    return parser


def error_line(error: BaseException) -> str:
    """The one stderr line for an error: ``NAME: message`` for Kafka errors, else ``ERROR: ...``; an
    error of a kind the CLI does not import (the streaming job's QueryFailed) says it is an expected
    one with a true ``one_line`` attribute."""
    if isinstance(error, SparkraftError):
        line = str(error)
    elif isinstance(error, EXPECTED_ERRORS) or getattr(error, "one_line", False):
        line = f"ERROR: {error}"
    else:
        line = f"ERROR: unexpected {type(error).__name__}: {error} (rerun with --debug for the traceback)"
    return " ".join(part.strip() for part in _ANSI.sub("", line).splitlines())


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # delta-rs colours the causes in its errors


def main(argv: list[str] | None = None) -> int:
    # delta-rs (Rust) logs through env_logger: its warnings (no cloud metadata service to ask for a
    # region, say) are not for a command's user, whose errors are one line
    os.environ.setdefault("RUST_LOG", "error")
    args, extra = build_parser().parse_known_args(argv)
    if extra:  # reported by the command they were given to, not by the top-level parser
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    debug = getattr(args, "debug", False)
    tune_gc()
    tune_allocator()
    try:
        setup_logging(getattr(args, "log_level", None), default=args.log_default)
        if not getattr(args, "waits_for_quorum", False):  # a client: quorum/rpc/nothing_listens.py's rule
            nothing_listens.apply()
        if args.log_default == "WARNING" and sys.stderr.isatty():  # a one-shot command run by a person
            say_what_we_wait_for()
        apply_storage_options(args)
        return args.run(args) or 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # the one place errors become output
        if debug:
            traceback.print_exc()
            if getattr(e, "report", ""):  # a failed streaming query: Spark's whole report (streaming/job.py)
                print(e.report, file=sys.stderr)
        print(error_line(e), file=sys.stderr)
        return 1


def say_what_we_wait_for() -> None:
    """A one-shot command run by a person says on stderr what it waits for when a controller is slow
    to answer (scripts and pipes get only the final line)."""
    from quorum.rpc.leader_client import LeaderFollowingClient

    LeaderFollowingClient.notify_waiting = lambda line: print(line, file=sys.stderr, flush=True)


def run(argv: list[str] | None = None) -> NoReturn:
    """The ``sparkraft`` command: ``main``, then :func:`exit_now`."""
    exit_now(main(argv))


def exit_now(code: int) -> NoReturn:
    """Exit with ``code`` as soon as the output is flushed, skipping interpreter finalization.

    Native libraries may still have worker threads winding down when a short command returns
    (Arrow's C++ thread pool, delta-rs' runtime); tearing them down during finalization sometimes
    aborted the process (exit 134, "terminate called without an active exception") after the
    command had finished and reported its result: a few percent of ``sparkraft sql`` errors on a
    busy machine. By the time a command returns every file is closed, every server stopped and
    every commit made, so nothing is lost by skipping finalization.
    """
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # a reader that went away, or a closed stream
            pass
    os._exit(code)
