"""A class data sharing archive of the local Spark driver's classes (the JDK's dynamic AppCDS).

A local Spark driver loads and verifies some 14,000 classes from Spark's jars at every start: most
of the 6-10 CPU seconds a cold session costs before it does anything. The JDK can write the classes
a JVM loaded, already parsed and verified, to an archive at its exit (``-XX:ArchiveClassesAtExit``)
and map that archive into the next JVM of the same class path (``-XX:SharedArchiveFile``): measured
here, a local session's start 8.2-10.0 s -> 5.2-6.0 s, its CPU 9.7-11.6 -> 6.7-7.5 s.

The archive lives in the jars cache under a name holding what it was made for (the JDK, PySpark's
version, the driver's extra class path), so an upgrade makes a new one and never maps a stale one;
the JDK itself checks every jar of the class path again (size and time) and, should one differ,
starts without the archive (its warning is turned off with the rest of its CDS logging). Made by
``python -m delta_tables.jvm_archive_builder`` (a short representative session, 20-30 s; ``scripts/fetch_jars.py``
and ``.ci/run`` run it), else started at nice 19 beside the first local session that finds none
(which itself starts as before): one builder at a time (a lock file), its JVM dumping to a name of
its own that is renamed into place once that JVM has exited, so no JVM ever maps half an archive.
``SPARKRAFT_JVM_ARCHIVE=off`` starts drivers without it.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from delta_tables import local_fs

log = logging.getLogger(__name__)

FOLDER = "sparkraft-jvm-archive"  # under the jars cache (local_fs.jars_root)
QUIET = "-Xlog:cds*=off"  # the JDK's CDS messages (a mismatched archive's warning, the dump's) on stdout
STALE_LOCK_S = 600.0  # a builder that died without renaming (SIGKILL, os._exit) is given up on after this
dumping: Optional[Path] = None  # where this process's driver writes its classes (set by the builder only)


def _java() -> Optional[str]:
    """The java PySpark's launcher runs: $JAVA_HOME's, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java").resolve())
    found = shutil.which("java")
    return str(Path(found).resolve()) if found else None


def archive_path(extra_class_path: str = "", root: Optional[Path] = None) -> Optional[Path]:
    """Where the archive of a driver with this extra class path goes; None without a JDK."""
    java = _java()
    if java is None:
        return None
    import pyspark

    key = "\n".join([java, str(Path(java).stat().st_mtime_ns), pyspark.__version__, extra_class_path])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return (root or local_fs.jars_root()) / FOLDER / f"spark-driver-{digest}.jsa"


def _lock_is_fresh(lock: Path) -> bool:
    try:
        return time.time() - lock.stat().st_mtime < STALE_LOCK_S
    except FileNotFoundError:
        return False


def take_lock(lock: Path) -> bool:
    """Whether this process may build the archive: it made the lock file (or found a stale one)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return True
        except FileExistsError:
            if _lock_is_fresh(lock):
                return False
            lock.unlink(missing_ok=True)  # its builder died: try once more
    return False


def java_options(extra_class_path: str = "", root: Optional[Path] = None) -> str:
    """The driver JVM's options: map the archive where it exists (empty without a JDK, with
    ``SPARKRAFT_JVM_ARCHIVE=off``, or while it is not made yet: then a builder is started beside
    this process, at the lowest priority, unless one is at work)."""
    if os.environ.get("SPARKRAFT_JVM_ARCHIVE", "on") == "off":
        return ""
    path = archive_path(extra_class_path, root)
    if path is None:
        return ""
    if dumping is not None:
        return f"-XX:ArchiveClassesAtExit={dumping} {QUIET}"
    if path.exists():
        return f"-XX:SharedArchiveFile={path} {QUIET}"
    if not _lock_is_fresh(path.with_suffix(".building")):
        _start_builder()
    return ""


def _start_builder() -> None:
    """``python -m delta_tables.jvm_archive_builder`` in a session of its own at nice 19, its output nowhere:
    this process neither waits for it nor ends it."""
    try:
        subprocess.Popen([sys.executable, "-m", "delta_tables.jvm_archive_builder"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         preexec_fn=lambda: os.nice(19))
        log.info("making an archive of the Spark driver's classes in the background (once): later "
                 "sessions start in about half the time")
    except OSError as e:
        log.debug("no class archive builder (%s)", e)
