"""Every ``sh`` block of the README, then of the docs' pages in the site's order, runs as pasted, in
one shell, as a newcomer would run it.

The first block is the fresh-machine pair (install and demo; the tests): ``.ci/run`` runs exactly
those commands and ``test_quorum_cli`` runs the demo, so here it is only checked to be that pair.
Every other block runs, unchanged, in one ``bash`` (the docs' pages after the README's walkthrough,
in ``mkdocs.yml``'s order: a page may use what the walkthrough started) (jobs started with ``&`` in one block are stopped
with ``kill %N`` in a later one, as in a terminal), with ``-e -o pipefail`` so that any failing
command fails the test. The walkthrough uses the fixed ports of ``conf/`` (9092-9095, 9193-9195, 7071-7073,
7171, 8080; Prometheus on 9090; the docs pages' Kafka listeners and brokers, secured controllers,
Spark master and worker, the deploy rehearsal's cluster, the migration's ZooKeeper, Kafka 3.9 broker
and controllers: FIXED_PORTS) and ``/tmp/sparkraft``, which it clears: the test refuses to start while those ports are taken.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent.parent
FIXED_PORTS = (9092, 9093, 9094, 9095, 7071, 7072, 7073, 7171, 9193, 9194, 9195, 8080, 9090,  # + conf/dynamic/
               9292, 9293,  # docs/use/kafka-brokers.md's Kafka brokers
               9294, 9295,  # docs/operate/secure.md's controllers (9293-9295, conf/secure/)
               7077, 8090, 8091,  # docs/use/spark-clusters.md's Spark master and worker
               9392, 9393, 9394, 9395, 7391, 7392, 7393, 7394,  # docs/operate/deploy.md's rehearsal
               2181, 9492, 9493, 9494, 9495)  # docs/operate/migrate.md's ZooKeeper, Kafka 3.9 broker, controllers


def shell_blocks(markdown: str) -> list[str]:
    """The bodies of the fenced blocks tagged ``sh``, in order."""
    return [m.group(1) for m in re.finditer(r"^```sh\n(.*?)^```$", markdown, re.S | re.M)]


def docs_pages_in_order() -> list[Path]:
    """The site's pages in its navigation's order (``mkdocs.yml``)."""
    return [ROOT / "docs" / page for page in re.findall(r":\s*([\w/.-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)]


def every_block_in_order() -> list[str]:
    """The README's blocks, then every docs page's, as the test runs them."""
    return shell_blocks((ROOT / "README.md").read_text()) + [
        block for page in docs_pages_in_order() for block in shell_blocks(page.read_text())]


def test_the_docs_pages_are_read_in_the_sites_order():
    pages = docs_pages_in_order()
    assert len(pages) >= 30 and all(p.exists() for p in pages)
    assert any(shell_blocks(p.read_text()) for p in pages), "no docs page has an sh block: is the pattern stale?"


def test_the_first_block_is_the_fresh_machine_pair_that_ci_runs():
    first = shell_blocks((ROOT / "README.md").read_text())[0]
    commands = [line.split("#")[0].strip() for line in first.strip().splitlines()]
    assert commands == ["pip install -e . && sparkraft demo", "pip install -e '.[test]' && python -m pytest -q -n 3"]
    # .ci/run runs the line that ends in "# run the tests", as the README writes it
    assert first.strip().splitlines()[1].endswith("# run the tests")
    ci = (ROOT / ".ci" / "run").read_text()
    assert r'''test_command="$(sed -n 's/^\(.*pytest.*\)# run the tests$/\1/p' README.md | head -1)"''' in ci
    assert '\neval "$test_command"\n' in ci


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


BLOCK_S = 600  # one block's ceiling: the longest takes about a minute on idle cores
TOTAL_S = 2400  # the walkthrough's: about 2.5 minutes idle, 10+ beside CPU burners and a second worker


def _output_unless_a_block_stalls(proc: subprocess.Popen) -> tuple[str, str]:
    """The walkthrough's output, and why it was stopped ("" when it finished): a block that runs past
    BLOCK_S, or the whole past TOTAL_S. A ceiling per block, not one for the whole, so a machine
    that is merely slow (every block slower) still passes and one that hangs is caught early."""
    lines: list[str] = []
    marks: "queue.Queue[tuple[float, str]]" = queue.Queue()  # (when, which) each block started

    def read():
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("### block "):
                marks.put((time.monotonic(), line.strip()))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    start = block_start = time.monotonic()
    block = "the first block"
    while proc.poll() is None:
        try:
            block_start, block = marks.get(timeout=1)
        except queue.Empty:
            pass
        now = time.monotonic()
        if now - block_start > BLOCK_S or now - start > TOTAL_S:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            reader.join(10)
            what = f"{block} ran past {BLOCK_S} s" if now - block_start > BLOCK_S else \
                f"the blocks ran past {TOTAL_S} s in all"
            return "".join(lines), what
    reader.join(30)
    return "".join(lines), ""


PORTS_WAIT_S = 600  # `sparkraft demo` (test_quorum_cli, on the other worker) takes 9092-9094 while free


def test_every_other_block_runs_as_pasted_in_order(tmp_path, fixed_ports):
    deadline = time.monotonic() + PORTS_WAIT_S
    while (taken := [p for p in FIXED_PORTS if _port_taken(p)]) and time.monotonic() < deadline:
        time.sleep(1)  # a demo's brokers listen on 9092-9094 when free: it ends within minutes
    assert not taken, f"ports {taken} are in use: the README walkthrough needs them (is a walkthrough running?)"
    blocks = every_block_in_order()[1:]
    assert len(blocks) >= 5, "the walkthrough went missing"
    script = tmp_path / "readme.sh"
    # Each block is announced, then pasted unchanged.
    script.write_text("set -e -o pipefail\n" + "".join(
        f"echo '### block {i}' >&2\n{block}" for i, block in enumerate(blocks, 1)))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("SPARKRAFT_LOG_LEVEL", None)
    proc = subprocess.Popen(["bash", str(script)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, stalled = _output_unless_a_block_stalls(proc)
        if stalled:
            pytest.fail(f"{stalled}:\n" + out[-6000:])
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever a failed block left running
        except ProcessLookupError:
            pass
    logs = "".join(f"\n--- {p.name} ---\n{p.read_text(errors='replace')[-3000:]}"
                   for p in sorted(Path("/tmp/sparkraft").glob("*.log")))
    assert proc.returncode == 0, out[-8000:] + logs
    # what each part of the walkthrough shows
    assert "LeaderId:" in out and "HighWatermark:" in out  # quorum describe --status
    assert "Created topic orders." in out and '"name": "orders"' in out
    assert "\n/image/topics/byName/orders\n" in out  # the shell's find -name
    assert "(1 row)" in out  # topics after the job caught up
    # what changed since the first cut: the topic created after it, two partitions (its rows say so)
    changes = out.split("\npartitions:\n", 1)[1].split("row", 1)[0]  # up to its "(N rows)" line
    assert sum(1 for line in changes.splitlines() if "payments" in line and "insert" in line) == 2, changes
    materialize_log = Path("/tmp/sparkraft/materialize.log").read_text()
    assert "Stopped (SIGTERM): the tables hold the log up to offset" in materialize_log, materialize_log[-3000:]
    assert "Traceback" not in materialize_log and "FOREACH_BATCH" not in materialize_log
    assert "Broker 101 is unfenced" in Path("/tmp/sparkraft/broker-101.log").read_text()
    # docs/use/kafka-brokers.md: Apache Kafka's brokers on the controllers serve a consumer group
    assert "consumed by group readers: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in out
    # docs/operate/secure.md: a secured quorum answers its admin; a stranger and a guest are refused
    # docs/use/spark-clusters.md: the job on a standalone master and worker wrote the quorum's topics
    assert any("on the cluster:" in line and "payments" in line for line in out.splitlines()), out[-6000:]
    # docs/operate/upgrade.md: each controller rolled, the leader last, and the levels shown
    assert all(f"controller {n} rolled" in out for n in (1, 2, 3)), out[-6000:]
    # docs/operate/restore.md: a new quorum formatted from the walkthrough's warehouse has its topics
    assert "restored: orders" in out and "restored: payments" in out, out[-6000:]
    assert out.count("refused, exit 1") == 2, out[-6000:]
    # docs/operate/deploy.md: the rehearsal's job wrote the topic its broker's cluster was given
    assert any(line.split() == ["deployed", "3"] for line in out.splitlines()), out[-6000:]
    assert "metric samples from controller 1: " in out and "SUCCESS" in out, out[-6000:]
    # docs/operate/migrate.md: Kafka 3.9's topic and config imported from ZooKeeper, a config changed
    # in the quorum mirrored to ZooKeeper, then finalized
    assert "retention.ms=86400000" in out and '"retention.ms":"3600000"' in out, out[-6000:]
    assert '"state": "POST_MIGRATION"' in out, out[-6000:]
    assert "SSL_HANDSHAKE_FAILED" in out and "AUTHORIZATION_FAILED" in out and "User:guest" in out, out[-6000:]
