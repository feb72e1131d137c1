"""Histories of admin operations recorded against real controllers, checked for linearizability by
Porcupine (github.com/anishathalye/porcupine, a checker nobody here wrote) through the small Go
program in tests/linearizability/checker, which holds the sequential model.

A ``Workload`` runs a few clients, each a thread with its own ControllerClient, doing random
CreateTopics, DeleteTopics and IncrementalAlterConfigs (``retention.ms``) on a handful of topics,
and records each operation's call and return times (one monotonic clock, nanoseconds) and result:
``ok``, ``exists`` (TOPIC_ALREADY_EXISTS), ``missing`` (UNKNOWN_TOPIC_OR_PARTITION), ``failed`` (a
refusal that changed nothing: no broker to place a replica on), or ``unknown`` when the outcome
cannot be known (a timeout, a lost connection, a controller that lost its leadership after
appending the request): an unknown operation may have taken effect at any time after its call, or
never. The client retries a write whose answer was lost, so one call may be carried out more than
once (a topic created, deleted by another client, then created again by the retry): each attempt
whose answer was lost (``ControllerClient.lost_answers``) is recorded as an operation of its own,
unknown, beside the call's answered attempt. Reads are not in the model: a
controller answers them from its committed image, which is not linearizable
(docs/design/consistency.md says what is promised of them).

``check(history, name)`` writes the history as JSON lines, runs the checker, and keeps a failing
history (and Porcupine's HTML view of it) under ``$SPARKRAFT_HISTORIES`` (default
/tmp/sparkraft-histories), naming the file in the assertion so it can be replayed:
``cd tests/linearizability/checker && go run . FILE``. Every check appends a line to
``checked.tsv`` there: what was checked, how many operations, the verdict.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

CHECKER = Path(__file__).resolve().parent / "linearizability" / "checker"
KEPT = Path(os.environ.get("SPARKRAFT_HISTORIES", "/tmp/sparkraft-histories"))

_DEFINITE = {"TOPIC_ALREADY_EXISTS": "exists", "UNKNOWN_TOPIC_OR_PARTITION": "missing"}


@dataclass
class History:
    ops: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, client: int, op: str, key: str, value: str, call: int, ret: Optional[int], result: str) -> None:
        with self._lock:
            self.ops.append({"client": client, "op": op, "key": key, "value": value, "call": call,
                             "return": ret, "result": result})

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.ops:
            out[o["result"]] = out.get(o["result"], 0) + 1
        return out


# refusals that leave everything as it was: the request was judged and turned down
_REFUSED = {"INVALID_REPLICATION_FACTOR", "INVALID_REQUEST", "INVALID_CONFIG", "POLICY_VIOLATION",
            "INVALID_PARTITIONS", "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}


def _result_of(outcome) -> str:
    """An operation's result for the model, from the reply of its last attempt or the error it raised."""
    from quorum.errors import Errors, SparkraftError

    if isinstance(outcome, SparkraftError):
        name = outcome.error.name
    elif isinstance(outcome, BaseException):
        return "unknown"
    else:
        (item,) = outcome
        name = item.error.name
        if item.error is Errors.NONE:
            return "ok"
    if name in _DEFINITE:
        return _DEFINITE[name]
    return "failed" if name in _REFUSED else "unknown"


class Workload:
    """``clients`` threads doing random admin writes on ``keys`` topics through ``bootstrap`` until stopped."""

    def __init__(self, bootstrap: str, clients: int = 4, keys: int = 5, seed: int = 1, prefix: str = "lin",
                 security=None):
        self.bootstrap, self.clients, self.security = bootstrap, clients, security
        self.keys = [f"{prefix}-{k}" for k in range(keys)]
        self.history = History()
        self.stop = threading.Event()
        self._rng = random.Random(seed)
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> "Workload":
        for c in range(self.clients):
            t = threading.Thread(target=self._run, args=(c, random.Random(self._rng.random())), daemon=True,
                                 name=f"workload-{c}")
            t.start()
            self._threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(60)

    def wait_for(self, completed: int, timeout: float) -> None:
        """Until at least ``completed`` operations have a definite result."""
        deadline = time.monotonic() + timeout
        while sum(o["result"] != "unknown" for o in list(self.history.ops)) < completed:
            if time.monotonic() > deadline:
                raise AssertionError(f"the workload completed fewer than {completed} operations in {timeout}s: "
                                     f"{self.history.counts()}")
            time.sleep(0.1)

    def _run(self, client: int, rng: random.Random) -> None:
        from quorum.controller import api
        from quorum.rpc.controller_client import ControllerClient

        admin = ControllerClient(self.bootstrap, timeout=5, rpc_timeout=2.0, security=self.security)
        try:
            n = 0
            while not self.stop.is_set():
                key = rng.choice(self.keys)
                kind = rng.choice(("create", "delete", "set", "set"))
                value = f"{client}{n:05d}" if kind == "set" else ""
                n += 1
                if kind == "create":
                    request = api.CreateTopicsRequest((api.CreatableTopic(key, 1, 1),))
                elif kind == "delete":
                    request = api.DeleteTopicsRequest((key,))
                else:
                    request = api.IncrementalAlterConfigsRequest(((api.ConfigResourceKey("TOPIC", key), (
                        api.AlterableConfig("retention.ms", "SET", value),)),))
                call = time.monotonic_ns()
                try:
                    outcome = admin.call(request)
                except BaseException as e:  # noqa: BLE001 - every failure is an outcome to record
                    outcome = e
                ret = time.monotonic_ns()
                result = _result_of(outcome)
                self.history.record(client, kind, key, value, call, None if result == "unknown" else ret, result)
                for _ in range(admin.lost_answers):  # earlier attempts, each maybe carried out too
                    self.history.record(client, kind, key, value, call, None, "unknown")
                time.sleep(rng.uniform(0, 0.02))
        finally:
            admin.close()


CHECK_BUDGET = "240s"


def _checker_binary() -> Path:
    """The checker, built once per source (``go build``, offline: .ci/run fetched Porcupine before)."""
    if shutil.which("go") is None:
        raise AssertionError("Go is not installed: .ci/run installs it (the linearizability checker is Go)")
    source = b"".join((CHECKER / name).read_bytes() for name in ("main.go", "go.mod", "go.sum"))
    binary = Path(os.environ.get("TMPDIR", "/tmp")) / f"sparkraft-checker-{hashlib.sha256(source).hexdigest()[:16]}"
    if not binary.exists():
        partial = binary.with_suffix(f".{os.getpid()}")
        env = {**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}
        out = subprocess.run(["go", "build", "-o", str(partial), "."], cwd=CHECKER, capture_output=True, text=True,
                             timeout=600, env=env)
        assert out.returncode == 0, f"go build of the checker failed (has .ci/run fetched its module?): {out.stderr}"
        partial.replace(binary)
    return binary


def check(history: History, name: str) -> str:
    """Porcupine's verdict on ``history`` (AssertionError, naming the kept file, if not linearizable)."""
    KEPT.mkdir(parents=True, exist_ok=True)
    path = KEPT / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in history.ops))
    html = path.with_suffix(".html")
    # the search is CPU-bound and grows with the operations whose outcome is unknown (a history of
    # 289 with 42 unknown took 31 s on a quiet machine): a loaded one gets CHECK_BUDGET, not Porcupine's 60 s
    out = subprocess.run([str(_checker_binary()), "-timeout", CHECK_BUDGET, "-html", str(html), str(path)],
                         capture_output=True, text=True, timeout=330)
    verdict = {0: "linearizable", 1: "NOT linearizable", 3: "timed out"}.get(out.returncode, "unreadable")
    with open(KEPT / "checked.tsv", "a") as log:
        log.write(f"{name}\t{len(history.ops)}\t{verdict}\t{path}\n")
    if out.returncode == 0:
        path.unlink()
        return out.stdout.strip()
    raise AssertionError(f"{name}: {out.stdout.strip()} {out.stderr.strip()}; the history is kept in {path} "
                         f"(replay: cd {CHECKER} && go run . {path}; Porcupine's view: {html})")


def load(path: Path) -> History:
    """A history written by ``python tests/histories.py`` (below)."""
    h = History()
    h.ops = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return h


def main(argv: list[str]) -> int:
    """``python tests/histories.py BOOTSTRAP OUT STOP [SEED]``: run a Workload against BOOTSTRAP
    until the file STOP exists, then write its history to OUT (JSON lines). For tests whose clients
    must run elsewhere than the test (a network namespace of its own)."""
    bootstrap, out, stop = argv[1], Path(argv[2]), Path(argv[3])
    with Workload(bootstrap, seed=int(argv[4]) if len(argv) > 4 else 1) as w:
        while not stop.exists():
            time.sleep(0.1)
    partial = out.with_suffix(".partial")
    partial.write_text("".join(json.dumps(o) + "\n" for o in w.history.ops))
    partial.replace(out)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
