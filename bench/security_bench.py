"""What security costs: durable writes over mutual TLS against plaintext, and one authorization
decision with 100,000 ACLs loaded.

- **tls**: the ``writes`` benchmark's load (3 ``controller start --raft-only`` members, fsync on,
  closed-loop writers in two client processes, one 100-byte record per write) against two quorums
  in one run, loaded in turn for three alternating rounds (the median is reported): PLAINTEXT
  listeners, and SSL listeners with ``ssl.client.auth=required``
  (every Raft connection between the members and every client connection is mutual TLS; a
  throwaway CA made by the benchmark). Goal: <= 15 % fewer writes/s at concurrency 64.
- **authorizer**: 100,000 ACL bindings (two thirds LITERAL on distinct topic names, one third
  PREFIXED of varied lengths, a few DENYs, 500 principals) in the StandardAuthorizer's index; then
  decisions for random (principal, topic) pairs, a third of them on names that exist. Reported: the
  median and p99 of one decision, the time to load the 100,000, and, for scale, a linear scan over
  every ACL deciding the same requests (what the index replaces). Goal: median <= 10 us.
- **snapshot**: a 2,000,000-partition controller image (the ``snapshot`` benchmark's, 20,000 in
  --quick) that also holds those 100,000 ACLs, created through CreateAcls; its snapshot written, then
  loaded in a fresh process as a restart loads it, and the authorizer's index built from the loaded
  ACLs (what a controller does before it answers). Goal: loaded within the snapshot goal (<= 5 s) with the index.
"""
from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.harness.plots import grouped_bar_chart
from bench.harness.results import fmt_number, markdown_table, measured_on
from bench.harness.stats import ratio
from bench.harness.workload import Load
from bench.sparkraft_cluster import SparkraftCluster
from bench.suite import Context

NAME = "security"
TITLE = "What security costs: writes over mutual TLS, and authorization with 100,000 ACLs"
REQUIRES: tuple[str, ...] = ()

CONCURRENCY = (1, 64)
RECORD_BYTES = 100
ACL_COUNT = 100_000
DECISIONS = 20_000
SCAN_DECISIONS = 200
ROUNDS = 3


def _writes(ctx: Context, seconds: float, warmup: float) -> dict:
    """Both quorums run side by side (the idle one costs little) and are loaded in turn, ROUNDS
    times, alternating, so a noisy neighbour or a slow disk moment hits both alike; per point the
    median round is reported, and every round is kept."""
    clusters = {}
    try:
        for mode, tls in (("plaintext", False), ("mtls", True)):
            with ctx.progress.phase(f"{mode}: start 3 members"):
                clusters[mode] = SparkraftCluster(ctx.work_dir / mode, tls=tls).__enter__()
        rounds: dict = {mode: {str(c): [] for c in CONCURRENCY} for mode in clusters}
        for r in range(ROUNDS):
            for c in CONCURRENCY:
                for mode, cluster in clusters.items():
                    with ctx.progress.phase(f"round {r + 1}/{ROUNDS}: {mode}, {c} concurrent writers, {seconds:g} s"):
                        got = cluster.throughput(Load(c, 1, RECORD_BYTES), seconds, warmup)
                    rounds[mode][str(c)].append({"writes_per_s": got["records_per_s"],
                                                 "latency_ms": got["append_latency_ms"], "errors": got["errors"],
                                                 "cpu_percent": got.get("cpu_percent")})
                    ctx.progress.line(f"  {got['records_per_s']:,.0f} writes/s, p50 "
                                      f"{got['append_latency_ms'].get('p50', float('nan')):.2f} ms")
    finally:
        for cluster in clusters.values():
            cluster.__exit__(None, None, None)
    out: dict = {}
    for mode, by_c in rounds.items():
        for c, runs in by_c.items():
            median = sorted(runs, key=lambda x: x["writes_per_s"])[len(runs) // 2]
            out.setdefault(mode, {})[c] = {**median, "rounds": [x["writes_per_s"] for x in runs]}
    return out


def _acls(rng: random.Random):
    from quorum.controller import api
    from quorum.controller.acls_control import to_entry

    entries, names = [], []
    for i in range(ACL_COUNT):
        name = f"team{rng.randrange(2000)}.{'svc' * rng.randrange(1, 4)}-{i}"
        names.append(name)
        if i % 3 == 0:
            binding = api.AclBinding("TOPIC", name[:rng.randrange(6, len(name) + 1)], "PREFIXED",
                                     f"User:u{rng.randrange(500)}", "*", "READ", "ALLOW")
        else:
            binding = api.AclBinding("TOPIC", name, "LITERAL", f"User:u{rng.randrange(500)}", "*",
                                     rng.choice(("READ", "WRITE", "DESCRIBE")), "DENY" if i % 97 == 0 else "ALLOW")
        entries.append(to_entry(str(i), binding))
    return entries, names


def _scan_decide(entries, principal: str, host: str, operation: int, name: str) -> bool:
    """The same rules, looking at every ACL (what a prefix tree replaces); no ACL found: denied."""
    from quorum.gen.sparkraft.v1 import metadata_pb2 as pb
    from quorum.security.authorizer import _applies

    allowed = False
    for acl in entries:
        if acl.pattern_type == pb.PatternType.LITERAL:
            if acl.resource_name not in (name, "*"):
                continue
        elif not name.startswith(acl.resource_name):
            continue
        if _applies(acl, operation, principal, host):
            if acl.permission_type == pb.AclPermissionType.DENY:
                return False
            allowed = True
    return allowed


def _authorizer(ctx: Context) -> dict:
    from quorum.security.authorizer import Authorizer, topic_action

    rng = random.Random(11)
    with ctx.progress.phase(f"make {ACL_COUNT:,} ACL bindings"):
        entries, names = _acls(rng)
    authorizer = Authorizer()
    t0 = time.perf_counter()
    authorizer.apply(entries)
    load_s = time.perf_counter() - t0
    requests = []
    for i in range(DECISIONS):
        name = rng.choice(names) if i % 3 == 0 else f"team{rng.randrange(2000)}.svc-x{rng.randrange(10 ** 6)}"
        requests.append((f"User:u{rng.randrange(500)}", topic_action(rng.choice(("READ", "DESCRIBE")), name)))
    samples, allowed = [], 0
    with ctx.progress.phase(f"{DECISIONS:,} decisions"):
        for principal, action in requests:
            t = time.perf_counter()
            ok = authorizer.authorize(principal, "10.0.0.1", action)
            samples.append(time.perf_counter() - t)
            allowed += ok
    scan = []
    with ctx.progress.phase(f"{SCAN_DECISIONS} decisions by a linear scan"):
        for principal, action in requests[:SCAN_DECISIONS]:
            t = time.perf_counter()
            _scan_decide(entries, principal, "10.0.0.1", action.operation, action.resource_name)
            scan.append(time.perf_counter() - t)
    samples.sort()
    result = {"acls": ACL_COUNT, "decisions": DECISIONS, "allowed": allowed, "load_s": load_s,
              "median_us": statistics.median(samples) * 1e6, "p99_us": samples[int(len(samples) * 0.99)] * 1e6,
              "scan_median_us": statistics.median(scan) * 1e6}
    ctx.progress.line(f"  median {result['median_us']:.2f} us, p99 {result['p99_us']:.2f} us "
                      f"(a scan: {result['scan_median_us']:,.0f} us); loaded in {load_s:.2f} s")
    return result


# What a restarting controller does with its snapshot, timed in a process of its own.
_RESTART = """
import json, sys, time
from quorum.gc_tuning import tune_gc
from quorum.security.authorizer import Authorizer
from pathlib import Path
from quorum.snapshot.files import load_latest
tune_gc()
t0 = time.perf_counter()
_, image = load_latest(Path(sys.argv[1]), sys.argv[2])
load_s = time.perf_counter() - t0
t0 = time.perf_counter()
Authorizer().follow(image.acls)
index_s = time.perf_counter() - t0
print(json.dumps({"load_s": load_s, "index_s": index_s, "acls": len(image.acls.acls),
                  "topics": len(image.topics.by_id)}))
"""


def _snapshot_with_acls(ctx: Context) -> dict:
    from bench.snapshot_bench import build_image
    from quorum.controller import api
    from quorum.controller.acls_control import to_binding
    from quorum.snapshot.files import SnapshotId, write_snapshot

    partitions = 20_000 if ctx.quick else 2_000_000
    with ctx.progress.phase(f"build a {partitions:,}-partition image"):
        c = build_image(partitions, ctx)
    bindings = [to_binding(e) for e in _acls(random.Random(12))[0]]
    with ctx.progress.phase(f"create {len(bindings):,} ACLs through CreateAcls"):
        for i in range(0, len(bindings), 5000):
            c.request(api.CreateAclsRequest(tuple(bindings[i:i + 5000])))
    image, cluster_id = c.core.image, c.cluster_id
    directory = ctx.work_dir / "snapshot-with-acls"
    directory.mkdir()
    with ctx.progress.phase("write the snapshot"):
        t0 = time.perf_counter()
        size = write_snapshot(directory, image, SnapshotId(c.end_offset, 1), c.cluster_id)
        write_s = time.perf_counter() - t0
    acls, topics = len(image.acls.acls), len(image.topics.by_id)
    del c, image  # the restart below is a process of its own, as a controller's is
    with ctx.progress.phase("load it in a fresh process, then index its ACLs"):
        out = subprocess.run([sys.executable, "-c", _RESTART, str(directory), cluster_id], capture_output=True,
                             text=True, timeout=600, check=True)
        loaded = json.loads(out.stdout)
    assert (loaded["acls"], loaded["topics"]) == (acls, topics), loaded
    load_s, index_s = loaded["load_s"], loaded["index_s"]
    result = {"partitions": partitions, "acls": acls, "write_s": write_s, "load_s": load_s,
              "index_s": index_s, "bytes": size}
    ctx.progress.line(f"  write {write_s:.2f} s, load {load_s:.2f} s + index {index_s:.2f} s, {size / 2**20:.1f} MiB")
    return result


def run(ctx: Context) -> dict:
    seconds, warmup = (4, 1) if ctx.quick else (15, 3)
    return {"settings": {"seconds": seconds, "warmup": warmup, "record_bytes": RECORD_BYTES,
                         "concurrency": list(CONCURRENCY)},
            "authorizer": _authorizer(ctx), "snapshot": _snapshot_with_acls(ctx),
            "writes": _writes(ctx, seconds, warmup)}


def _w(results: dict, mode: str, c: int, *path):
    value = results["writes"].get(mode, {}).get(str(c))
    for p in path:
        value = None if value is None else value.get(p)
    return value


def report(document: dict) -> str:
    results = document["results"]
    a = results["authorizer"]
    rows = [[c, fmt_number(_w(results, "plaintext", c, "writes_per_s")),
             fmt_number(_w(results, "plaintext", c, "latency_ms", "p50"), 2),
             fmt_number(_w(results, "mtls", c, "writes_per_s")), fmt_number(_w(results, "mtls", c, "latency_ms", "p50"), 2),
             fmt_number(ratio(_w(results, "mtls", c, "writes_per_s"), _w(results, "plaintext", c, "writes_per_s")), 2)]
            for c in results["settings"]["concurrency"]]
    return "\n".join([
        f"{measured_on(document)}; one {RECORD_BYTES}-byte record per write, fsync on, "
        f"{results['settings']['seconds']:g} s per point, the median of {ROUNDS} alternating rounds "
        f"(all rounds in the JSON).",
        "",
        markdown_table(["concurrency", "plaintext writes/s", "p50 ms", "mutual TLS writes/s", "p50 ms",
                        "mTLS ÷ plaintext"], rows),
        "",
        markdown_table(["ACLs", "decision median", "p99", "a linear scan (median)", "load the ACLs"],
                       [[f"{a['acls']:,}", f"{a['median_us']:.2f} µs", f"{a['p99_us']:.2f} µs",
                         f"{a['scan_median_us']:,.0f} µs", f"{a['load_s']:.2f} s"]]),
        *_snapshot_table(results.get("snapshot")),
    ])


def _snapshot_table(s) -> list[str]:
    if not s:  # a result from before this part existed
        return []
    return ["", markdown_table(
        ["partitions", "ACLs", "snapshot write", "load", "+ authorizer index", "load + index", "size"],
        [[f"{s['partitions']:,}", f"{s['acls']:,}", f"{s['write_s']:.2f} s", f"{s['load_s']:.2f} s",
          f"{s['index_s']:.2f} s", f"**{s['load_s'] + s['index_s']:.2f} s**", f"{s['bytes'] / 2**20:.1f} MiB"]])]


def plot(document: dict, plots_dir: Path) -> list[Path]:
    results, machine = document["results"], document["machine"]
    where = f"{machine['cpu_count']} CPUs, {machine['date'][:10]}, {document['mode']} mode"
    groups = [f"concurrency {c}" for c in results["settings"]["concurrency"]]
    series = {label: [_w(results, mode, c, "writes_per_s") for c in results["settings"]["concurrency"]]
              for mode, label in (("plaintext", "plaintext"), ("mtls", "mutual TLS"))}
    return [grouped_bar_chart(plots_dir / "security-writes.png", "Durable writes/s: plaintext vs mutual TLS",
                              groups, series, "writes/s", subtitle=where, value_format="{:,.0f}")]
