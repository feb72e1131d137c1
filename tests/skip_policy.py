"""A skipped test nobody decided to skip fails the run.

A test that skips because a component is missing (Apache Kafka's jars, Prometheus, a browser) would
otherwise let a run go green while testing less. Every skip of a run is held against
``tests/allowed_skips.toml``: an entry names the tests (a glob over pytest's node id), the text the
skip's reason must contain, and why that skip is accepted. Any other skip makes the run exit 1 and
names the test and its reason. Registered by ``tests/conftest.py`` on the process that reports the
run (xdist's controller, or the only process).
"""
from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ALLOWED = Path(__file__).with_name("allowed_skips.toml")


@dataclass(frozen=True)
class AllowedSkip:
    test: str  # a glob over the node id, e.g. tests/integration/test_network_faults.py::*delay*
    when: str  # text the skip's reason contains
    why: str   # why nobody need act on it

    def covers(self, nodeid: str, reason: str) -> bool:
        return fnmatch.fnmatchcase(nodeid, self.test) and self.when in reason


def load_allowed(path: Path = ALLOWED) -> list[AllowedSkip]:
    """The entries of ``path``; one without a test, a reason to match or a why is refused."""
    entries = tomllib.loads(path.read_text()).get("skip", []) if path.exists() else []
    allowed = []
    for i, entry in enumerate(entries):
        missing = [k for k in ("test", "when", "why") if not str(entry.get(k, "")).strip()]
        if missing:
            raise pytest.UsageError(f"{path.name}: entry {i + 1} has no {', '.join(missing)}")
        allowed.append(AllowedSkip(entry["test"], entry["when"], entry["why"]))
    return allowed


def skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipPolicy:
    def __init__(self, allowed: list[AllowedSkip]):
        self.allowed = allowed
        self.unlisted: list[tuple[str, str]] = []
        self.accepted = 0

    def pytest_runtest_logreport(self, report) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = skip_reason(report)
        if any(a.covers(report.nodeid, reason) for a in self.allowed):
            self.accepted += 1
        else:
            self.unlisted.append((report.nodeid, reason))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.unlisted:
            return
        terminalreporter.section("skips nobody decided on", sep="=", red=True)
        for nodeid, reason in self.unlisted:
            terminalreporter.line(f"SKIPPED {nodeid}: {reason}")
        terminalreporter.line(f"{len(self.unlisted)} skipped test(s) are not in {ALLOWED.relative_to(ALLOWED.parents[1])}: "
                              "install what they need (.ci/run does), or list them there with the reason")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        if self.unlisted and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
