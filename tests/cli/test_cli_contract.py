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
    # an unknown flag before the command is named, not hidden behind the missing command
    (["--frobnicate"], "ERROR: sparkraft: unrecognized arguments: --frobnicate (see sparkraft --help)"),
    (["topics", "--frob=1"], "ERROR: sparkraft topics: unrecognized arguments: --frob=1 (see sparkraft topics --help)"),
])
def test_a_malformed_command_line_is_one_line_and_exit_1(args, expected):
    result = sparkraft(*args)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(expected), result.stderr
    assert result.stdout == ""


CLIENTS = {  # every kind of client command, each speaking its own protocol to the controllers
    "topics list (gRPC and the wire)": ["topics", "list"],
    "materialize": ["materialize", "--warehouse", "{tmp}/wh", "--checkpoint", "{tmp}/ck"],
    "materialize --source kafka (Kafka's protocol)": ["materialize", "--source", "kafka", "--warehouse", "{tmp}/wh",
                                                      "--checkpoint", "{tmp}/ck"],
}


@pytest.mark.slow  # 10 s each (the rule itself, without the wait: tests/unit/test_nothing_listens.py)
@pytest.mark.parametrize("command", list(CLIENTS.values()), ids=list(CLIENTS))
def test_an_address_where_nothing_listens_is_said_within_seconds(command, tmp_path):
    """One rule for every client command (quorum/rpc/nothing_listens.py): every connection refused
    and nothing ever answered, the command says so after 10 s of trying (a controller started a
    moment before has time to listen), not at --timeout."""
    (port,) = free_ports(1)  # nothing listens there
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    result = sparkraft(*args, "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "60")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == [
        f"NETWORK_EXCEPTION: nothing listens at 127.0.0.1:{port}: every connection was refused for "
        f"{result.stderr.split(' for ')[1].split('s ')[0]}s (is the controller running, and is this the address "
        f"of its controller listener?)"]
    waited = float(result.stderr.split(" for ")[1].split("s ")[0])
    assert 10 <= waited < 60


@pytest.mark.slow
def test_a_command_waiting_for_a_controller_says_so_on_a_terminal_only():
    """A server that takes the connection and never answers: the command waits for --timeout, and
    says what it waits for on a terminal only."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # connections queue, nothing is ever read or answered
    port = silent.getsockname()[1]
    args = ["topics", "list", "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "8"]
    try:
        piped = sparkraft(*args)
        assert piped.returncode == 1
        assert piped.stderr.splitlines() == [
            f"NETWORK_EXCEPTION: no controller reachable at 127.0.0.1:{port} within 8s (127.0.0.1:{port}: "
            f"no answer in time)"]

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
    finally:
        silent.close()
    lines = seen.decode(errors="replace").splitlines()
    assert lines[0] == (f"waiting up to 8s (--timeout) for the active controller at 127.0.0.1:{port}: "
                        f"127.0.0.1:{port}: no answer in time")
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
