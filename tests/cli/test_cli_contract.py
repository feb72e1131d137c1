"""The command line's error contract, checked across commands: a malformed command line is one line
and exit 1; a command that waits for a controller says so on a terminal (and only there); every
command that talks to the controllers shows how long it waits in its ``--help``."""
from __future__ import annotations

import os
import pty
import subprocess

import pytest
from conftest import free_ports, read_pty, sparkraft_cmd


def sparkraft(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("args, expected", [
    (["topics", "create", "--topic", "x"], "ERROR: sparkraft topics create: the following arguments are required: "
                                           "--partitions, --replication-factor, --bootstrap-controller "
                                           "(see sparkraft topics create --help)"),
    (["topics", "create", "--topic", "x", "--partitions", "many", "--replication-factor", "1",
      "--bootstrap-controller", "h:1"], "ERROR: sparkraft topics create: argument --partitions: invalid int value: "
                                        "'many' (see sparkraft topics create --help)"),
    (["nonsense"], "ERROR: sparkraft: argument COMMAND: invalid choice: 'nonsense'"),
    ([], "ERROR: sparkraft: the following arguments are required: COMMAND (see sparkraft --help)"),
    (["brokers", "list", "--bootstrap-controller", "h:1", "--bogus"], "ERROR: sparkraft brokers list: unrecognized arguments: --bogus"),
])
def test_a_malformed_command_line_is_one_line_and_exit_1(args, expected):
    result = sparkraft(*args)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(expected), result.stderr
    assert result.stdout == ""


def test_a_command_waiting_for_a_controller_says_so_on_a_terminal_only():
    (port,) = free_ports(1)  # nothing listens there
    args = ["topics", "list", "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "3"]
    piped = sparkraft(*args)
    assert piped.returncode == 1
    assert piped.stderr.splitlines() == [
        f"NETWORK_EXCEPTION: no controller reachable at 127.0.0.1:{port} within 3s (127.0.0.1:{port}: "
        f"connection refused (is the controller running?))"]

    master, slave = pty.openpty()
    proc = subprocess.Popen(sparkraft_cmd(*args), stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        seen = read_pty(master, lambda out: False, timeout=30)  # until the command exits
        assert proc.wait(30) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    lines = seen.decode(errors="replace").splitlines()
    assert lines[0] == (f"waiting up to 3s (--timeout) for the active controller at 127.0.0.1:{port}: "
                        f"127.0.0.1:{port}: connection refused (is the controller running?)")
    assert lines[-1].startswith("NETWORK_EXCEPTION: no controller reachable")


@pytest.mark.parametrize("command", [["topics", "create"], ["topics", "list"], ["configs", "describe"],
                                     ["brokers", "list"], ["quorum", "describe"], ["shell"], ["materialize"]])
def test_every_controller_facing_command_shows_its_wait_in_help(command):
    result = sparkraft(*command, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "--timeout SECONDS" in text and "(default 15)" in text, result.stdout


def test_topics_create_help_says_what_minus_one_means():
    text = " ".join(sparkraft("topics", "create", "--help").stdout.split())
    assert "-1 takes the controller's default (num.partitions, 1)" in text
