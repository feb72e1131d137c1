"""``sparkraft shell`` driven as a user would: commands piped in, and typed at a pseudo-terminal;
over a checkpoint file and over a live quorum; bad paths and files."""
from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_pty, sparkraft_cmd

sys.path.insert(0, str(Path(__file__).parent.parent / "integration"))
from test_controller_node import cluster  # noqa: E402,F401  (fixture: 3 in-process ControllerNodes)

pytestmark = pytest.mark.slow


@pytest.fixture
def populated(cluster, tmp_path):
    from quorum.broker.metadata_client import BrokerMetadataClient
    from quorum.controller import api

    cluster.active()
    cluster.register_brokers()
    cluster.client.create_topic("orders", 3, 3, [("retention.ms", "1000")])
    cluster.client.alter_client_quotas([api.ClientQuotaAlteration((("user", "alice"),),
                                                                  (("producer_byte_rate", 1024.0),))])
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in cluster.nodes.values())
    client = BrokerMetadataClient(bootstrap, cluster.cluster_id, tmp_path / "broker")
    client.bootstrap()
    while not client.image.client_quotas.entities:
        client.poll(wait_ms=200)
    client.stop(save=True)
    return bootstrap, tmp_path / "broker" / "metadata-cache"


def shell(source: list[str], commands: str):
    return subprocess.run(sparkraft_cmd("shell", *source), input=commands, capture_output=True, text=True,
                          timeout=60)


def test_piped_commands_over_a_checkpoint_and_over_the_quorum(populated):
    bootstrap, cache = populated
    commands = ("ls\ncd topics/byName/orders\nls\ncat 0\npwd\ncat /image/configs/TOPIC/orders/retention.ms\n"
                "find /image/cluster\ntree /image/features\nls /image/clientQuotas\n")
    for source in (["--snapshot", str(cache)], ["--bootstrap-controller", bootstrap]):
        r = shell(source, commands)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert out.splitlines()[:10] == ["provenance", "features/", "cluster/", "controllers/", "topics/",
                                         "configs/", "clientQuotas/", "acls/", "scramCredentials/", "producerIds"]
        assert "id\nname\n0\n1\n2" in out and '"leader":' in out and "/image/topics/byName/orders" in out
        assert "\n1000\n" in out and "/image/cluster/101\n/image/cluster/102\n/image/cluster/103" in out
        assert "metadata.version: 33" in out and "alice" in out
        assert "sparkraft:" not in out  # no prompt in a pipe


def test_bad_paths_are_reported_and_the_shell_goes_on_then_exits_1(populated):
    _, cache = populated
    r = shell(["--snapshot", str(cache)], "cat /image/nope\ncd /image/provenance\nfrobnicate\nls cluster\n")
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["cat: /image/nope: no such file or directory",
                                     "cd: /image/provenance: not a directory",
                                     "frobnicate: unknown command (try help)"]
    assert r.stdout.splitlines() == ["101", "102", "103"]


def test_a_file_that_is_not_a_checkpoint_is_one_line(tmp_path):
    (tmp_path / "junk").write_bytes(b"\x00" * 100)
    for path, words in ((tmp_path / "junk", "not a checkpoint"), (tmp_path / "missing", "no such file")):
        r = shell(["--snapshot", str(path)], "ls\n")
        assert r.returncode == 1 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_typed_at_a_terminal_with_a_prompt_and_completion(populated):
    _, cache = populated
    master, slave = pty.openpty()
    proc = subprocess.Popen(sparkraft_cmd("shell", "--snapshot", str(cache)), stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    seen = b""

    def read_until(marker: bytes, timeout: float = 20) -> None:
        nonlocal seen
        seen += read_pty(master, lambda out: marker in seen + out, timeout)
        assert marker in seen, seen.decode(errors="replace")

    try:
        read_until(b"sparkraft:/image> ")
        os.write(master, b"cd top\t")  # completes to topics/
        os.write(master, b"\n")
        read_until(b"sparkraft:/image/topics> ")
        os.write(master, b"cat byName/orders/name\n")
        read_until(b"orders\r\n")
        os.write(master, b"cat nothing\n")
        read_until(b"no such file or directory")
        os.write(master, b"exit\n")
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
