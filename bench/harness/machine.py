"""Facts about the machine and the code a result was measured on, stored with every result."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import tempfile
import time
from importlib import metadata
from pathlib import Path

from bench.harness.stats import percentile

REPO = Path(__file__).resolve().parents[2]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _git_revision() -> str | None:
    try:
        rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{rev}{'+dirty' if dirty else ''}" if rev else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def fsync_probe_ms(directory: str | None = None, writes: int = 50) -> dict[str, float]:
    """Median and p99 time of write(4 KiB) + fsync in ``directory``: what one durable append costs here."""
    times = []
    with tempfile.NamedTemporaryFile(dir=directory) as f:
        block = b"x" * 4096
        for _ in range(writes):
            start = time.perf_counter()
            os.write(f.fileno(), block)
            os.fsync(f.fileno())
            times.append((time.perf_counter() - start) * 1000)
    return {"p50": percentile(times, 50), "p99": percentile(times, 99)}


def cpu_busy_percent(seconds: float = 1.0) -> float | None:
    """How busy all CPUs are right now (Linux /proc/stat, sampled over ``seconds``): other work."""
    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    total = total1 - total0
    return round(100 * (1 - (idle1 - idle0) / total), 1) if total else None


def machine_info(work_dir: str | None = None) -> dict:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_usable": usable,
        "cpu_model": _cpu_model(),
        "mem_total_gib": _mem_total_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "sparkraft_revision": _git_revision(),
        "packages": {p: _version(p) for p in ("grpcio", "protobuf", "pysyncobj", "matplotlib")},
        "fsync_4k_ms": fsync_probe_ms(work_dir),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpu_busy_percent_at_start": cpu_busy_percent(),  # other work competing for the CPUs
    }


def busy_warning(machine: dict) -> str | None:
    """A warning when other work already loads the machine: figures taken now will be low."""
    busy = machine.get("cpu_busy_percent_at_start")
    if busy is not None and busy > 15:
        return (f"the machine is busy ({busy:.0f} % of its {machine['cpu_usable']} CPUs in use before "
                "the benchmark started): figures will be lower and noisier than on an idle machine")
    return None
