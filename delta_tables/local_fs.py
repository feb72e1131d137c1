"""Hadoop's local file system without a process for each file (delta_tables/jvm/NioLocalFileSystem.java).

Without Hadoop's native library (PySpark ships none), Hadoop's local file system runs the ``chmod``
program for every file it creates and ``readlink`` for every status it reads: about sixteen processes
a micro-batch for a streaming query's checkpoint (its offset and commit logs), 46 ms of each of the
two logs' writes on a quiet machine and far more beside a CPU burner, where starting a process waits
for a core. The class here does both through the JDK and is otherwise Hadoop's. Sessions this
process starts use it where it is built (``spark_confs``); a spark-submit names it itself
(docs/operate/deploy.md).

The jar is built from the source in the package, with the JDK's ``javac`` against PySpark's own
Hadoop jars, into the jars cache under a name holding the source's hash (so a changed source is a
new jar, never a stale one): by ``python scripts/fetch_jars.py`` before the tests, else at the
first session that finds a JDK. Without a JDK, sessions use Hadoop's own class, as before.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

SOURCE = Path(__file__).resolve().parent / "jvm" / "NioLocalFileSystem.java"
CLASS = "io.sparkraft.hadoop.NioLocalFileSystem"
FOLDER = "sparkraft-local-fs"  # under the jars cache (jars_root)


def jars_root() -> Path:
    """The jars cache: $SPARKRAFT_JARS, else ~/.cache/sparkraft/jars (scripts/fetch_jars.py fills it)."""
    return Path(os.environ.get("SPARKRAFT_JARS") or Path.home() / ".cache" / "sparkraft" / "jars")


def jar_path(root: Optional[Path] = None) -> Path:
    """Where the jar of this source goes: its name holds the source's hash."""
    root = root or jars_root()
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    return root / FOLDER / f"nio-local-fs-{digest}.jar"


def pyspark_jars() -> Path:
    """PySpark's own jars, Hadoop's among them: what the class is compiled against and runs with."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def build(root: Optional[Path] = None) -> Optional[Path]:
    """The jar, built now unless it already is; None (said once, at debug) without a JDK's javac
    and jar or where the build fails. Built in a folder of its own and renamed into place, so
    processes building at once each leave a whole jar."""
    target = jar_path(root)
    if target.exists():
        return target
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        log.debug("no JDK (javac, jar) here: Spark sessions use Hadoop's local file system as it is")
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        classes = Path(work) / "classes"
        try:
            subprocess.run([javac, "-nowarn", "-d", str(classes), "-cp", f"{pyspark_jars()}/*", str(SOURCE)],
                           check=True, capture_output=True, text=True, timeout=300)
            built = Path(work) / target.name
            subprocess.run([jar, "cf", str(built), "-C", str(classes), "."], check=True, capture_output=True,
                           text=True, timeout=120)
        except (subprocess.SubprocessError, OSError) as e:
            lines = (getattr(e, "stderr", None) or str(e)).strip().splitlines()  # javac's last line says why
            log.warning("Hadoop's local file system without chmod processes could not be built (%s): Spark "
                        "sessions use Hadoop's own", lines[-1] if lines else type(e).__name__)
            return None
        os.replace(built, target)
    return target


def spark_confs(root: Optional[Path] = None) -> dict[str, str]:
    """The Spark settings that make a session's driver use the class (its jar on the driver's class
    path, Hadoop's ``file:`` schemes for both of its APIs), or {} where it cannot be built. They
    take effect only where they start the driver's JVM. ``SPARKRAFT_LOCAL_FS=hadoop`` keeps Hadoop's own."""
    if os.environ.get("SPARKRAFT_LOCAL_FS", "nio") == "hadoop":  # the way back, should the class misbehave
        return {}
    jar = build(root)
    if jar is None:
        return {}
    return {"spark.driver.extraClassPath": str(jar),
            "spark.hadoop.fs.file.impl": CLASS,
            "spark.hadoop.fs.AbstractFileSystem.file.impl": f"{CLASS}$Fs"}


def spark_submit_flags() -> list[str]:
    """``spark_confs`` as spark-submit's flags: ``spark-submit $(python -m delta_tables.local_fs) ...``."""
    confs = spark_confs()
    flags = [f"--driver-class-path={confs.pop('spark.driver.extraClassPath')}"] if confs else []
    return flags + [f"--conf={key}={value}" for key, value in confs.items()]


if __name__ == "__main__":  # builds the jar (once) and prints the flags; prints nothing without a JDK
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    print(" ".join(spark_submit_flags()))
