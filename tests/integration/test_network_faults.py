"""Real network faults between real processes: three controllers, a broker and a client, each a
host of its own in a network namespace this test makes (tests/netns.py), the faults dropped
packets in those hosts' kernels. A leader cut off with a broker steps down while the majority
elects another and fences the broker; healed, the broker is unfenced again and the old leader
follows; 5 % of every host's packets lost, the quorum keeps answering; 200 ms of delay too, where
the kernel has netem. Every acknowledged write is in the log at the end, on every voter, and the
history of four clients writing through the partition is linearizable (Porcupine: histories.py).

Skipped with one line where the machine cannot make namespaces (.ci/run installs iproute2 and
nftables; CI runs as root)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import histories
import pytest
from conftest import FAST_TIMEOUTS, wait_for
from netns import Network, netem_unsupported, unsupported

from quorum.log.meta_properties import format_storage, random_cluster_id

pytestmark = pytest.mark.slow

WHY_NOT = unsupported()
CONTROLLERS = (1, 2, 3)
BROKER = 101
SETTINGS = {**FAST_TIMEOUTS, "broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"}


class Cluster:
    """The processes, each on its own host of ``net``; the test asks from host ``client``."""

    def __init__(self, root: Path, net: Network):
        self.root, self.net = root, net
        self.address = {i: net.add_host(f"c{i}") for i in CONTROLLERS}
        self.address[BROKER] = net.add_host("b1")
        net.add_host("client")
        self.cluster_id = random_cluster_id()
        voters = ",".join(f"{i}@{self.address[i]}:9093" for i in CONTROLLERS)
        self.procs: dict[int, subprocess.Popen] = {}
        self._outs = []
        for i in (*CONTROLLERS, BROKER):
            controller = i in CONTROLLERS
            props = {"process.roles": "controller" if controller else "broker", "node.id": str(i),
                     "controller.quorum.voters": voters,
                     "listeners": f"CONTROLLER://{self.address[i]}:9093" if controller
                     else f"PLAINTEXT://{self.address[i]}:9092",
                     "controller.listener.names": "CONTROLLER", "metadata.log.dir": str(root / f"data-{i}"),
                     **SETTINGS}
            (root / f"{i}.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            format_storage(root / f"data-{i}", self.cluster_id, i)

    def host(self, i: int) -> str:
        return f"c{i}" if i in CONTROLLERS else "b1"

    def start(self, i: int) -> None:
        out = open(self.root / f"{i}.log", "ab")
        self._outs.append(out)
        role = "controller" if i in CONTROLLERS else "broker"
        self.procs[i] = subprocess.Popen(self.net.python(self.host(i), "-m", "sparkraft", role, "start", "--config",
                                                         str(self.root / f"{i}.properties")),
                                         stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log(self, i: int) -> str:
        return (self.root / f"{i}.log").read_text(errors="replace")

    def bootstrap(self, ids=CONTROLLERS) -> str:
        return ",".join(f"{self.address[i]}:9093" for i in ids)

    def cli(self, *args: str, ids=CONTROLLERS, timeout: float = 30) -> subprocess.CompletedProcess:
        """``sparkraft ARGS --bootstrap-controller`` (controllers ``ids``) run on the client host."""
        return subprocess.run(self.net.python("client", "-m", "sparkraft", *args, "--bootstrap-controller",
                                              self.bootstrap(ids), "--timeout", str(timeout)),
                              capture_output=True, text=True, timeout=timeout + 60, stdin=subprocess.DEVNULL)

    def status(self, ids=CONTROLLERS) -> dict | None:
        out = self.cli("quorum", "describe", "--status", "--json", ids=ids, timeout=5)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def fenced(self, ids=CONTROLLERS) -> bool | None:
        out = self.cli("brokers", "list", "--json", ids=ids, timeout=5)
        if out.returncode != 0:
            return None
        mine = [b for b in json.loads(out.stdout) if b["broker_id"] == BROKER]
        return mine[0]["fenced"] if mine else None

    def create(self, name: str, ids=CONTROLLERS) -> None:
        """A topic, acknowledged (the command exits 0 only once it is committed)."""
        out = self.cli("topics", "create", "--topic", name, "--partitions", "1", "--replication-factor", "1",
                       ids=ids, timeout=60)
        assert out.returncode == 0, f"create {name}: {out.stderr}"

    def set_retention(self, topic: str, ms: int, ids=CONTROLLERS) -> None:
        """A topic config, acknowledged (a write that needs no unfenced broker)."""
        out = self.cli("configs", "alter", "--entity-type", "topics", "--entity-name", topic, "--add-config",
                       f"retention.ms={ms}", ids=ids, timeout=60)
        assert out.returncode == 0, f"alter {topic}: {out.stderr}"

    def retention(self, topic: str) -> str | None:
        out = self.cli("configs", "describe", "--entity-type", "topics", "--entity-name", topic, "--json")
        assert out.returncode == 0, out.stderr
        return {e["name"]: e["value"] for e in json.loads(out.stdout)}.get("retention.ms")

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(10)
        for out in self._outs:
            out.close()

    def dump(self) -> str:
        return "\n".join(f"--- {i} ---\n{self.log(i)[-3000:]}" for i in self.procs)


@pytest.fixture
def cluster(tmp_path):
    if WHY_NOT:
        pytest.skip(f"no network namespaces: {WHY_NOT}")
    net = Network()
    c = None
    try:
        c = Cluster(tmp_path, net)
        for i in (*CONTROLLERS, BROKER):
            c.start(i)
        wait_for(lambda: c.status(), 60, "a leader")
        wait_for(lambda: c.fenced() is False, 60, "the broker unfenced")
        yield c
    except BaseException:
        if c is not None:
            print(c.dump())
        raise
    finally:
        if c is not None:
            c.close()
        net.close()


def _every_voter_holds(c: Cluster, names: list[str]) -> None:
    """Each acknowledged topic is in the active controller's image, and every voter's log has
    reached the leader's end (so each holds it)."""
    listed = c.cli("topics", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    missing = set(names) - set(json.loads(listed.stdout))
    assert not missing, f"acknowledged and lost: {sorted(missing)}"

    def caught_up():
        out = c.cli("quorum", "describe", "--replication", "--json", timeout=5)
        rows = json.loads(out.stdout) if out.returncode == 0 else []
        voters = [r for r in rows if r["Status"] in ("Leader", "Follower")]
        return len(voters) == 3 and all(r["Lag"] == 0 for r in voters)
    wait_for(caught_up, 60, "every voter at the leader's log end")


def test_a_partitioned_leader_steps_down_and_a_cut_off_broker_is_fenced_then_both_return(cluster, tmp_path):
    c, net = cluster, cluster.net
    # four clients on the client host write throughout; their history must be linearizable (histories.py)
    history, stop = tmp_path / "history.jsonl", tmp_path / "stop"
    workload = subprocess.Popen(net.python("client", str(Path(histories.__file__)), c.bootstrap(), str(history),
                                           str(stop)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    acked = [f"before-{i}" for i in range(3)]
    for name in acked:
        c.create(name)
    old = c.status()["LeaderId"]
    majority = tuple(i for i in CONTROLLERS if i != old)
    seen_at = len(c.log(old))

    net.partition([c.host(old), "b1"])  # the leader and the broker on the minority side
    new = wait_for(lambda: (s := c.status(majority)) and s["LeaderId"] in majority and s, 60,
                   "the majority electing a new leader")
    assert new["LeaderEpoch"] > 0 and new["LeaderId"] != old
    wait_for(lambda: c.fenced(majority) is True, 60, "the cut-off broker fenced by the new leader")
    # the old leader, unable to reach a majority, stops being leader (check quorum)
    wait_for(lambda: any(f"Node {old} is" in line and "Leader" not in line.split(f"Node {old} is", 1)[1][:12]
                         for line in c.log(old)[seen_at:].splitlines()), 60, f"node {old} stepping down")
    for i, name in enumerate(acked):  # the broker is fenced: writes that need none, acknowledged
        c.set_retention(name, 60_000 + i, ids=majority)

    net.heal()
    wait_for(lambda: c.fenced() is False, 60, "the broker unfenced again")
    back = c.status()
    assert back["LeaderId"] in majority or back["LeaderEpoch"] > new["LeaderEpoch"]
    acked.append("after")
    c.create("after")
    _every_voter_holds(c, acked)
    assert [c.retention(name) for name in acked[:3]] == ["60000", "60001", "60002"]
    stop.touch()
    assert workload.wait(120) == 0
    recorded = histories.load(history)
    assert recorded.counts().get("ok", 0) > 0, recorded.counts()
    assert histories.check(recorded, "linearizability-network-partition").startswith("linearizable")


def test_the_quorum_keeps_working_with_five_percent_of_packets_lost(cluster):
    c, net = cluster, cluster.net
    net.lose(5)
    acked = [f"lossy-{i}" for i in range(8)]
    for name in acked:
        c.create(name)
    assert c.fenced() is False
    net.heal()
    _every_voter_holds(c, acked)


def test_the_quorum_keeps_working_with_200_ms_of_delay(cluster):
    why = netem_unsupported()
    if why:
        pytest.skip(f"no packet delay on this machine: {why}")
    c, net = cluster, cluster.net
    net.delay(200)
    acked = [f"slow-{i}" for i in range(4)]
    for name in acked:
        c.create(name)
    net.heal()
    _every_voter_holds(c, acked)
