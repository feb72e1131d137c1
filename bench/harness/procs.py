"""Child processes of a benchmark: free ports, start/kill with logs kept, and CPU time per process."""
from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

_CLK_TCK = os.sysconf("SC_CLK_TCK")
REPO = Path(__file__).resolve().parents[2]  # children run here, so ``python -m bench...`` resolves


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that were free a moment ago (bound together, so they differ)."""
    sockets = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def python_module_command(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


class ChildProcess:
    """A child whose output goes to ``log_path``; kept so a failure can show its tail.

    With ``json_control`` the child is driven by JSON lines instead: :meth:`call` writes one to its
    stdin and returns the line it answers on stdout; only its stderr goes to the log.
    """

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, cwd: str | None = None,
                 env: dict[str, str] | None = None, json_control: bool = False) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._cwd = cwd or str(REPO)
        self._env = env
        self._json_control = json_control
        self._answers: queue.Queue[str | None] = queue.Queue()
        self.popen: subprocess.Popen | None = None

    def start(self) -> "ChildProcess":
        log = open(self.log_path, "ab")
        try:
            if self._json_control:
                self.popen = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=log, cwd=self._cwd, env=self._env, text=True)
                threading.Thread(target=self._read_answers, args=(self.popen.stdout,), daemon=True,
                                 name=f"{self.name}-stdout").start()
            else:
                self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, cwd=self._cwd, env=self._env)
        finally:
            log.close()
        return self

    def _read_answers(self, stdout) -> None:
        for line in stdout:
            self._answers.put(line)
        self._answers.put(None)  # the child closed stdout: it exited

    def send(self, command: dict) -> None:
        """Write one JSON command to the child's stdin (answer it with :meth:`receive`)."""
        assert self.popen is not None and self.popen.stdin is not None
        self.popen.stdin.write(json.dumps(command) + "\n")
        self.popen.stdin.flush()

    def receive(self, timeout: float, what: str = "a command") -> dict:
        """The child's next one-line JSON answer; raises if it does not come or reports a failure."""
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.name} did not answer {what} in {timeout:.0f}s") from None
        if line is None:
            raise RuntimeError(f"{self.name} exited while running {what}:\n{self.log_tail()}")
        answer = json.loads(line)
        if not answer.pop("ok", False):
            raise RuntimeError(f"{self.name} failed {what}: {answer.get('error')}")
        return answer

    def call(self, command: dict, timeout: float) -> dict:
        """Send one JSON command and wait up to ``timeout`` seconds for its answer."""
        self.send(command)
        return self.receive(timeout, repr(command["cmd"]))

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL and reap: the crash a failover measurement starts from."""
        if self.alive():
            self.popen.send_signal(signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (a clean stop), then SIGKILL if it does not exit in time."""
        if not self.alive():
            return
        if self._json_control:
            self.popen.stdin.close()  # a controlled child exits when its commands end
            try:
                self.popen.wait(timeout / 2)
                return
            except subprocess.TimeoutExpired:
                pass
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def wait_for_port(self, host: str, port: int, timeout: float) -> None:
        """Until the child listens on ``host:port``; fails at once, with its log, if it exits."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((host, port), timeout=0.2):
                    return
            except OSError:
                pass
            if not self.alive():
                raise RuntimeError(f"{self.name} exited (code {self.popen.returncode}) before listening "
                                   f"on {host}:{port}; its log ends:\n{self.log_tail(5)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name} does not listen on {host}:{port} after {timeout:.0f}s")
            time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a live process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime


class CpuMeter:
    """CPU use of named processes over a window, as a percentage of one core each."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = dict(pids)
        self._start_cpu = {name: cpu_seconds(pid) for name, pid in self._pids.items()}
        self._start = time.monotonic()

    def percent(self) -> dict[str, float]:
        wall = max(time.monotonic() - self._start, 1e-9)
        return {name: round(100 * (cpu_seconds(pid) - self._start_cpu[name]) / wall, 1)
                for name, pid in self._pids.items()}


def wait_quiet(pids: dict[str, int], timeout: float, busy_percent: float = 15.0, window: float = 1.0) -> float:
    """Until every process in ``pids`` uses less than ``busy_percent`` of a core over ``window``
    seconds (steady state: nothing is still replaying); the seconds waited. TimeoutError after
    ``timeout`` naming the busy ones."""
    started = time.monotonic()
    while True:
        meter = CpuMeter(pids)
        time.sleep(window)
        busy = {name: p for name, p in meter.percent().items() if p >= busy_percent}
        if not busy:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"still busy after {timeout:.0f}s: {busy} (% of a core)")


def cpu_during(pids: dict[str, int], start_in: float, seconds: float, run) -> tuple[object, dict[str, float]]:
    """Call ``run()`` (blocking) and measure the CPU of ``pids`` from ``start_in`` s after the call
    begins, for ``seconds``: the measured window of a benchmark that warms up first.

    Returns ``(run's result, {name: percent of one core})``.
    """
    outcome: dict[str, object] = {}

    def target() -> None:
        try:
            outcome["result"] = run()
        except BaseException as e:  # re-raised in the caller's thread
            outcome["error"] = e

    thread = threading.Thread(target=target, name="bench-run", daemon=True)
    thread.start()
    thread.join(start_in)
    meter = CpuMeter(pids)
    thread.join(seconds)
    cpu = meter.percent()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"], cpu
