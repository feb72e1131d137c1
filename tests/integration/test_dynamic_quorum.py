"""A dynamic controller quorum (KIP-853) with real processes and the real CLI: format one controller
--standalone, grow it to three with `quorum add-controller`, remove the active controller, replace a
voter's disk; writes keep committing and every acknowledged one is on every voter."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import sparkraft_cmd, wait_for

pytestmark = pytest.mark.slow


def sparkraft(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(sparkraft_cmd(*args), capture_output=True, text=True, timeout=timeout)


def status(cp, timeout: float = 15) -> dict:
    """``quorum describe --status --json``; {} if no leader answered within ``timeout``."""
    result = sparkraft("quorum", "describe", "--status", "--json", "--timeout", str(timeout),
                       "--bootstrap-controller", cp.bootstrap())
    return json.loads(result.stdout) if result.returncode == 0 else {}


def voters(cp) -> dict[int, str]:
    return {v["id"]: v["directoryId"] for v in status(cp).get("CurrentVoters", ())}


def add(cp, i: int) -> None:
    result = sparkraft("quorum", "add-controller", "--config", str(cp.config(i)),
                       "--bootstrap-controller", cp.bootstrap())
    assert result.returncode == 0, result.stderr + cp.dump_outputs()
    assert f"Added controller {i}" in result.stdout


def remove(cp, i: int, directory_id: str) -> subprocess.CompletedProcess:
    return sparkraft("quorum", "remove-controller", "--controller-id", str(i), "--controller-directory-id",
                     directory_id, "--bootstrap-controller", cp.bootstrap())


def test_grow_from_one_remove_the_leader_and_replace_a_disk(controller_processes):
    cp = controller_processes(voters=(1, 2, 3), raft_only=True, dynamic=True)
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
    cp.start()
    acked: list[tuple[int, int]] = []
    with cp.client(timeout=30) as c:
        def write(n: int) -> None:
            for k in range(n):
                acked.append(c.append([f"w{len(acked)}".encode()]))

        write(5)
        assert voters(cp) == {1: cp.directory_id(1)}
        wait_for(lambda: {o["id"] for o in status(cp).get("CurrentObservers", ())} >= {2, 3}, 30, "2 and 3 observing")
        add(cp, 2)
        write(5)
        add(cp, 3)
        write(5)
        current = status(cp)
        assert {v["id"]: v["directoryId"] for v in current["CurrentVoters"]} == {
            i: cp.directory_id(i) for i in (1, 2, 3)}
        assert all(v["endpoints"] == [f"CONTROLLER://127.0.0.1:{cp.ports[v['id']]}"] for v in current["CurrentVoters"])

        # refusals: one line with Kafka's error name, nothing changed
        result = sparkraft("quorum", "add-controller", "--config", str(cp.config(2)),
                           "--bootstrap-controller", cp.bootstrap())
        assert result.returncode == 1 and result.stderr.startswith("DUPLICATE_VOTER"), result.stderr
        result = remove(cp, 2, "AAAAAAAAAAAAAAAAAAAAAQ")
        assert result.returncode == 1 and result.stderr.startswith("VOTER_NOT_FOUND"), result.stderr
        assert len(voters(cp)) == 3

        # replace a disk (of a follower: two of three voters keep the quorum going): wipe it, format a
        # new replica, remove the old one, add the new
        victim = next(i for i in (1, 2, 3) if i != current["LeaderId"])
        old_dir = cp.directory_id(victim)
        cp.kill(victim)
        shutil.rmtree(cp.log_dir(victim))
        cp.format_dynamic({victim: ["--no-initial-controllers"]})
        assert cp.directory_id(victim) != old_dir
        cp.start([victim])
        assert remove(cp, victim, old_dir).returncode == 0
        wait_for(lambda: victim in {o["id"] for o in status(cp).get("CurrentObservers", ())}, 30,
                 "the new disk observing")
        add(cp, victim)
        write(5)
        assert voters(cp) == {v: cp.directory_id(v) for v in (1, 2, 3)}

        # remove the active controller: it leads until that commits, then hands over
        leader = status(cp)["LeaderId"]
        result = remove(cp, leader, cp.directory_id(leader))
        assert result.returncode == 0, result.stderr
        wait_for(lambda: status(cp, timeout=2).get("LeaderId") not in (leader, None), 30, "a new leader among the rest")
        write(5)
        rest = sorted({1, 2, 3} - {leader})
        assert voters(cp) == {v: cp.directory_id(v) for v in rest}

    # every acknowledged write is on every voter's disk, once the voters stop
    for i in rest:
        assert cp.stop(i) == 0
    from quorum.log.file_log import FileLog
    logs = {i: FileLog(cp.partition_dir(i)) for i in rest}
    try:
        for n, (base, last) in enumerate(acked):
            copies = {i: [r for b in log.batches(base, last + 1) for r in b.records
                          if base <= b.base_offset + b.records.index(r) <= last] for i, log in logs.items()}
            assert all(c == [f"w{n}".encode()] for c in copies.values()), (n, base, copies)
    finally:
        for log in logs.values():
            log.close()


def test_auto_join_makes_observers_voters_and_replaces_a_lost_disk(controller_processes):
    cp = controller_processes(voters=(1, 2, 3), raft_only=True, dynamic=True,
                              **{"controller.quorum.auto.join.enable": "true"})
    cp.format_dynamic({1: ["--standalone"], 2: ["--no-initial-controllers"], 3: ["--no-initial-controllers"]})
    cp.start()
    wait_for(lambda: voters(cp) == {i: cp.directory_id(i) for i in (1, 2, 3)}, 60, "2 and 3 to join by themselves")
    with cp.client(timeout=30) as c:
        c.append([b"before"])
    # node 3's disk is lost: formatted again and started, it removes its old replica and adds itself
    old = cp.directory_id(3)
    cp.kill(3)
    shutil.rmtree(cp.log_dir(3))
    cp.format_dynamic({3: ["--no-initial-controllers"]})
    cp.start([3])
    wait_for(lambda: voters(cp).get(3) == cp.directory_id(3) != old, 60, "the new disk of 3 to replace the old")
    assert sorted(voters(cp)) == [1, 2, 3]
    with cp.client(timeout=30) as c:
        c.append([b"after"])
    # an operator's removal of a running auto-joined voter sticks (KIP-1186: at most once per run)
    assert remove(cp, 2, cp.directory_id(2)).returncode == 0
    with cp.client(timeout=30) as c:
        c.append([b"later"])
    assert sorted(voters(cp)) == [1, 3]
