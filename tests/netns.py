"""Hosts of a test's own, in Linux network namespaces it creates: a switch namespace holding a
bridge, each host a namespace joined to it by a veth pair, with an address on 10.213.<net>.0/24.
Faults are real packets dropped by the hosts' kernels: partitions by nftables rules between
groups of hosts, loss by nftables' random drop, delay by netem where the kernel has it.

Everything is undone by deleting the namespaces (``close``). ``unsupported()`` says in one line why
a machine cannot do this (not root, no ``ip`` or ``nft``, namespaces refused), for a skip.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Optional, Sequence


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {out.stderr.strip()}")
    return out


def unsupported() -> Optional[str]:
    """Why this machine cannot make the test's hosts, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (Debian's {package}; .ci/run installs it)"
    probe = f"srprobe{os.getpid()}"
    made = _run("ip", "netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"this machine cannot make network namespaces: {made.stderr.strip()}"
    try:
        nft = _run("ip", "netns", "exec", probe, "nft", "add", "table", "inet", "probe", check=False)
        if nft.returncode != 0:
            return f"nftables does not work in a namespace here: {nft.stderr.strip()}"
    finally:
        _run("ip", "netns", "del", probe, check=False)
    return None


def netem_unsupported() -> Optional[str]:
    """Why this kernel cannot delay packets (tc netem), or None."""
    probe = f"srnetem{os.getpid()}"
    _run("ip", "netns", "add", probe)
    try:
        _run("ip", "-n", probe, "link", "set", "lo", "up")
        out = _run("ip", "netns", "exec", probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                   check=False)
        return None if out.returncode == 0 else f"tc netem: {out.stderr.strip()} (no sch_netem in this kernel)"
    finally:
        _run("ip", "netns", "del", probe, check=False)


class Network:
    def __init__(self, net: int = 213):
        tag = f"{os.getpid() % 100000}"
        self.prefix = f"sr{tag}"
        self.subnet = f"10.213.{net % 256}"
        self.switch = f"{self.prefix}sw"
        self.hosts: dict[str, str] = {}  # name -> address
        _run("ip", "netns", "add", self.switch)
        _run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", self.switch, "link", "set", "br0", "up")

    def ns(self, host: str) -> str:
        return f"{self.prefix}{host}"

    def add_host(self, host: str) -> str:
        """A new host joined to the switch; its address."""
        n = len(self.hosts) + 1
        ns, address = self.ns(host), f"{self.subnet}.{n}"
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", f"{self.prefix}h{n}", "type", "veth", "peer", "name", f"{self.prefix}s{n}")
        _run("ip", "link", "set", f"{self.prefix}h{n}", "netns", ns)
        _run("ip", "link", "set", f"{self.prefix}s{n}", "netns", self.switch)
        _run("ip", "-n", ns, "link", "set", f"{self.prefix}h{n}", "name", "eth0")
        _run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", self.switch, "link", "set", f"{self.prefix}s{n}", "master", "br0")
        _run("ip", "-n", self.switch, "link", "set", f"{self.prefix}s{n}", "up")
        _run("ip", "netns", "exec", ns, "nft", "add", "table", "inet", "faults")
        for hook in ("input", "output"):
            _run("ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "faults", hook,
                 f"{{ type filter hook {hook} priority 0; }}")
        self.hosts[host] = address
        return address

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run on ``host``."""
        return ["ip", "netns", "exec", self.ns(host), *argv]

    def python(self, host: str, *args: str) -> list[str]:
        return self.command(host, [sys.executable, *args])

    def partition(self, side: Sequence[str]) -> None:
        """Cut the hosts in ``side`` off from every other host (each side still reaches its own)."""
        others = [h for h in self.hosts if h not in side]
        for group, away in ((side, others), (others, side)):
            addresses = ", ".join(self.hosts[h] for h in away)
            for host in group:
                self._nft(host, "add", "rule", "inet", "faults", "output", "ip", "daddr", f"{{ {addresses} }}", "drop")
                self._nft(host, "add", "rule", "inet", "faults", "input", "ip", "saddr", f"{{ {addresses} }}", "drop")

    def lose(self, percent: int) -> None:
        """Every host drops ``percent`` % of the packets it sends, at random."""
        for host in self.hosts:
            self._nft(host, "add", "rule", "inet", "faults", "output", "numgen", "random", "mod", "100", "<",
                      str(percent), "drop")

    def delay(self, ms: int) -> None:
        """Every host delays what it sends by ``ms`` (tc netem; see netem_unsupported)."""
        for host in self.hosts:
            _run(*self.command(host, ["tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", f"{ms}ms"]))

    def heal(self) -> None:
        """No partition, no loss, no delay."""
        for host in self.hosts:
            self._nft(host, "flush", "chain", "inet", "faults", "input")
            self._nft(host, "flush", "chain", "inet", "faults", "output")
            _run(*self.command(host, ["tc", "qdisc", "del", "dev", "eth0", "root"]), check=False)

    def _nft(self, host: str, *args: str) -> None:
        _run(*self.command(host, ["nft", *args]))

    def close(self) -> None:
        for host in list(self.hosts):
            _run("ip", "netns", "del", self.ns(host), check=False)
        _run("ip", "netns", "del", self.switch, check=False)
