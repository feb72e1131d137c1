"""The weaker promises of docs/design/consistency.md, checked as properties over a history.

Reads are not linearizable (Porcupine's model in tests/linearizability holds writes only), but
each read names the offset of the committed image it was answered from (its reply's
``committed_offset``), so each can be held to the log the quorum finally committed:

- **from the log**: what a read saw (a topic missing, or its ``retention.ms``) is exactly what the
  committed log holds at that offset: never a write that was not committed, never one that later
  vanished, never a state the log never had;
- **never ahead**: its offset is within the committed log;
- **monotonic**: one client's reads of one controller (a standby's, the active one's, across the
  controller's restarts) and one broker's images never go back to a lower offset.

``Readers`` are threads reading one controller each (``ControllerClient.read_from``: no redirect to
the active controller); ``BrokerObserver`` is a sparkraft broker's metadata client recording every
image it publishes. ``check_reads`` replays the committed log once (MetadataLogReader, from the
snapshot it starts at, if any) and raises AssertionError naming the kept file if a property fails.
"""
from __future__ import annotations

import json
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

KEPT = Path(os.environ.get("SPARKRAFT_HISTORIES", "/tmp/sparkraft-histories"))


@dataclass
class Reads:
    """Observations: (who, offset, call, return, {key: state}); a state is ``missing`` or
    ``=VALUE`` (``=`` when the topic exists without a ``retention.ms`` of its own)."""

    ops: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, who: str, offset: int, call: int, ret: int, states: dict[str, str]) -> None:
        with self._lock:
            self.ops.append({"who": who, "offset": offset, "call": call, "return": ret, "states": states})


def image_state(image, key: str) -> str:
    from quorum.metadata.configs import TOPIC, ConfigResource

    if image.topics.topic_by_name(key) is None:
        return "missing"
    return "=" + (image.configs.value(ConfigResource(TOPIC, key), "retention.ms") or "")


def _reply_state(reply) -> Optional[str]:
    from quorum.errors import Errors

    ((_, error, _, entries),) = reply
    if error is Errors.UNKNOWN_TOPIC_OR_PARTITION:
        return "missing"
    if error is not Errors.NONE:
        return None
    own = [e.value for e in entries if e.name == "retention.ms" and e.source == "DYNAMIC_TOPIC_CONFIG"]
    return "=" + ((own[0] or "") if own else "")


class Readers:
    """One thread per controller in ``targets``, each reading a random key's config from that
    controller alone, about ``rate`` times a second, into ``reads``."""

    def __init__(self, targets: Sequence[str], keys: Sequence[str], reads: Reads, rate: float = 20.0,
                 seed: int = 1, security=None):
        self.targets, self.keys, self.reads, self.rate, self.security = list(targets), list(keys), reads, rate, security
        self.stop = threading.Event()
        self.answered = self.refused = 0
        self._threads = [threading.Thread(target=self._run, args=(t, random.Random(seed * 31 + i)), daemon=True,
                                          name=f"reader-{t}") for i, t in enumerate(self.targets)]

    def __enter__(self) -> "Readers":
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(30)

    def _run(self, target: str, rng: random.Random) -> None:
        import grpc

        from quorum.controller import api
        from quorum.errors import SparkraftError
        from quorum.rpc.controller_client import ControllerClient

        client = ControllerClient(target, timeout=2, rpc_timeout=2.0, security=self.security)
        try:
            while not self.stop.wait(rng.uniform(0, 2 / self.rate)):
                key = rng.choice(self.keys)
                call = time.monotonic_ns()
                try:
                    reply, offset = client.read_from(target, api.DescribeConfigsRequest(
                        (api.ConfigResourceKey("TOPIC", key),)))
                except (SparkraftError, grpc.RpcError):  # down, restarting, still replaying: no answer
                    self.refused += 1
                    continue
                state = _reply_state(reply)
                if state is not None:
                    self.answered += 1
                    self.reads.record(f"controller {target}", offset, call, time.monotonic_ns(), {key: state})
        finally:
            client.close()


class BrokerObserver:
    """A sparkraft broker's metadata client (quorum/broker) following the log from its start,
    recording the keys' states in every image it publishes."""

    def __init__(self, bootstrap: str, cluster_id: str, keys: Sequence[str], reads: Reads, name: str = "broker"):
        from quorum.broker.metadata_client import BrokerMetadataClient

        self.keys, self.reads, self.name = list(keys), reads, name
        self.client = BrokerMetadataClient(bootstrap, cluster_id, fetch_wait_ms=200)
        self.client.add_listener(self._update)

    def _update(self, update) -> None:
        now = time.monotonic_ns()
        image = update.image
        self.reads.record(self.name, image.offset, now, now, {k: image_state(image, k) for k in self.keys})

    def __enter__(self) -> "BrokerObserver":
        self.client.start()
        return self

    def __exit__(self, *exc) -> None:
        self.client.stop(save=False)


def committed_states(bootstrap: str, cluster_id: str, offsets: set[int], keys: Sequence[str],
                     timeout: float = 60.0) -> tuple[dict[int, dict[str, str]], int, int]:
    """The keys' states in the committed log after each offset in ``offsets`` that it holds:
    (states by offset, the first offset it can say (after the snapshot the log starts at), its end)."""
    from quorum.metadata.loader import MetadataLoader
    from quorum.rpc.log_reader import MetadataLogReader, SnapshotRequired

    reader = MetadataLogReader(bootstrap, cluster_id=cluster_id, timeout=timeout)
    loader, wanted, states = MetadataLoader(), sorted(offsets), {}
    try:
        end = reader.high_watermark()
        offset = first = 0
        try:
            reader.read(0, max_records=1)
        except SnapshotRequired as e:
            loader.reset(reader.load_snapshot(e.snapshot_id))
            offset = first = e.snapshot_id.offset
        i = next((n for n, o in enumerate(wanted) if o >= first - 1), len(wanted))
        while offset < end:
            chunk = reader.read(offset, wait_ms=0)
            for r in chunk.records:
                while i < len(wanted) and wanted[i] < r.offset:
                    image = loader.flush()
                    states[wanted[i]] = {k: image_state(image, k) for k in keys}
                    i += 1
                if not r.control:
                    loader.replay_frame(r.data, r.offset, r.epoch)
                offset = r.offset + 1
        image = loader.flush()
        while i < len(wanted) and wanted[i] < end:
            states[wanted[i]] = {k: image_state(image, k) for k in keys}
            i += 1
    finally:
        reader.close()
    return states, first, end


def check_reads(reads: Reads, name: str, bootstrap: str, cluster_id: str) -> str:
    """The three properties over ``reads`` against the committed log at ``bootstrap``; a one-line
    summary, or AssertionError naming the kept file that lists every violation."""
    keys = sorted({k for o in reads.ops for k in o["states"]})
    states, first, end = committed_states(bootstrap, cluster_id, {o["offset"] for o in reads.ops}, keys)
    violations, unchecked, last = [], 0, {}
    for o in sorted(reads.ops, key=lambda o: o["return"]):
        who, offset = o["who"], o["offset"]
        if offset < last.get(who, -1):
            violations.append(f"{who} went back from offset {last[who]} to {offset}")
        last[who] = max(offset, last.get(who, -1))
        if offset >= end:
            violations.append(f"{who} answered at offset {offset}, past the committed log's end {end}")
        elif offset < first - 1:
            unchecked += 1
        elif offset in states:
            for key, state in o["states"].items():
                if states[offset][key] != state:
                    violations.append(f"{who} saw {key} {state} at offset {offset}; the committed log "
                                      f"has {states[offset][key]} there")
    KEPT.mkdir(parents=True, exist_ok=True)
    summary = (f"{len(reads.ops)} reads by {len(last)} readers, offsets up to {end - 1}, "
               f"{unchecked} below the log's snapshot unchecked")
    verdict = "ok" if not violations else f"{len(violations)} violations"
    with open(KEPT / "checked.tsv", "a") as log:
        log.write(f"{name}-reads\t{len(reads.ops)}\t{verdict}\t\n")
    if not violations:
        return summary
    path = KEPT / f"{name}-reads-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in reads.ops) + "".join(
        json.dumps({"violation": v}) + "\n" for v in violations))
    raise AssertionError(f"{name}: {len(violations)} read violations, first: {violations[0]}; "
                         f"the reads are kept in {path}")
