"""Resolve the JVM artifacts the tests run (scripts/maven/*.xml, each a pinned Maven project) into
a folder of jars each, with Maven: ``python scripts/fetch_jars.py [--into DIR] [NAME ...]``.

Run before the tests (.ci/run does), never during them: a test finds a folder with ``jars_for``
(tests/apache_kafka.py) and skips with one line if it is missing. A folder already resolved from
the same file is kept (its ``.resolved`` holds the file's SHA-256), so a second run costs nothing.
Default place: $SPARKRAFT_JARS, else ~/.cache/sparkraft/jars. With no NAME it also builds sparkraft's
own small jar (delta_tables/local_fs.py) there, and the Spark driver's class archive
(delta_tables/jvm_archive.py), where PySpark is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

MAVEN = Path(__file__).resolve().parent / "maven"
sys.path.insert(0, str(MAVEN.parents[1]))  # run before the project is installed (.ci/run): its own jar's module
from delta_tables import jvm_archive, local_fs  # noqa: E402  (standard library only)


def default_root() -> Path:
    return local_fs.jars_root()


def resolve(pom: Path, root: Path) -> Path:
    """The folder of ``pom``'s jars under ``root``, resolved now unless it already was."""
    into = root / pom.stem
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()
    marker = into / ".resolved"
    if marker.exists() and marker.read_text().strip() == digest:
        print(f"{pom.stem}: already resolved in {into}", flush=True)
        return into
    if shutil.which("mvn") is None:
        raise SystemExit("mvn is not installed (Debian's maven); .ci/run installs it")
    staging = into.with_name(into.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    started = time.monotonic()
    print(f"{pom.stem}: resolving with Maven into {into} ...", flush=True)
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "-Dstyle.color=never", "dependency:copy-dependencies",
                    f"-DoutputDirectory={staging}", "-Dmdep.useBaseVersion=true"], check=True)
    shutil.rmtree(into, ignore_errors=True)
    staging.rename(into)
    marker.write_text(digest + "\n")
    jars = list(into.glob("*.jar"))
    print(f"{pom.stem}: {len(jars)} jars, {sum(j.stat().st_size for j in jars) / 2**20:.0f} MiB "
          f"in {time.monotonic() - started:.0f}s", flush=True)
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--into", type=Path, default=None, help="where the folders go (default: $SPARKRAFT_JARS, "
                        "else ~/.cache/sparkraft/jars)")
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"only these (of {', '.join(p.stem for p in sorted(MAVEN.glob('*.xml')))}); default: all")
    args = parser.parse_args(argv)
    root = args.into or default_root()
    root.mkdir(parents=True, exist_ok=True)
    poms = {pom.stem: pom for pom in sorted(MAVEN.glob("*.xml"))}
    unknown = [n for n in args.names if n not in poms]
    if unknown:
        parser.error(f"no scripts/maven/{unknown[0]}.xml (there are: {', '.join(poms)})")
    for name in args.names or poms:
        resolve(poms[name], root)
    if not args.names:
        build_local_fs(root)
        build_jvm_archive(root)
    return 0


def _without_pyspark(folder: str) -> bool:
    """Whether PySpark is not installed yet (said once for ``folder``): a fetch run before pip
    installs the project leaves what is built for PySpark to the first Spark session."""
    try:
        local_fs.pyspark_jars()
        return False
    except ImportError:
        print(f"{folder}: PySpark is not installed yet; the first Spark session makes it", flush=True)
        return True


def build_local_fs(root: Path) -> None:
    """sparkraft's own jar (delta_tables/local_fs.py), built here so no test session waits for javac."""
    if _without_pyspark(local_fs.FOLDER):
        return
    started = time.monotonic()
    jar = local_fs.build(root)
    if jar is None:
        raise SystemExit("delta_tables/jvm/NioLocalFileSystem.java could not be built (is a JDK's javac here?)")
    print(f"{local_fs.FOLDER}: {jar.name} in {time.monotonic() - started:.0f}s", flush=True)


def build_jvm_archive(root: Path) -> None:
    """The Spark driver's class archive (delta_tables/jvm_archive.py), made here so that the tests'
    sessions start from it; in a process of its own, whose Spark session ends with it. Its failure
    is said and does not fail the fetch: sessions start without it."""
    if _without_pyspark(jvm_archive.FOLDER):
        return
    env = {**os.environ, "SPARKRAFT_JARS": str(root)}
    made = subprocess.run([sys.executable, "-m", "delta_tables.jvm_archive_builder"], cwd=MAVEN.parents[1], env=env,
                          capture_output=True, text=True, timeout=600)
    lines = (made.stdout.strip() or made.stderr.strip() or "no output").splitlines()
    if made.returncode != 0:  # an optimisation only: sessions start without it (and try again)
        print(f"{jvm_archive.FOLDER}: not made ({lines[-1]}); Spark sessions start without it", flush=True)
        return
    print(lines[-1], flush=True)


if __name__ == "__main__":
    sys.exit(main())
