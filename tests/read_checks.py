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
image it publishes. ``check_reads`` replays the committed log once (``committed_images``, from the
snapshot it starts at, if any) and raises AssertionError naming the kept file if a property fails.
``check_cuts`` holds the Delta tables' cuts to the same log (tests/streaming).
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

from histories import KEPT  # where failing histories are kept, and checked.tsv


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


def committed_images(bootstrap: str, cluster_id: str, offsets: set[int],
                     timeout: float = 60.0) -> tuple[dict, int, int]:
    """The committed log's image after each offset in ``offsets`` that it holds: (images by offset,
    the first offset it can say (after the snapshot the log starts at), the log's end). One replay."""
    from quorum.metadata.loader import MetadataLoader
    from quorum.rpc.log_reader import MetadataLogReader, SnapshotRequired

    reader = MetadataLogReader(bootstrap, cluster_id=cluster_id, timeout=timeout)
    loader, wanted, images = MetadataLoader(), sorted(offsets), {}
    try:
        end = reader.high_watermark()
        offset = first = 0
        try:
            reader.read(0, max_records=1)
        except SnapshotRequired as e:
            loader.reset(reader.load_snapshot(e.snapshot_id))
            offset = first = e.snapshot_id.offset
        i = next((n for n, o in enumerate(wanted) if o >= first - 1), len(wanted))
        for r in reader.follow(offset, until=end, wait_ms=0):
            while i < len(wanted) and wanted[i] < r.offset:
                images[wanted[i]] = loader.flush()
                i += 1
            if not r.control:
                loader.replay_frame(r.data, r.offset, r.epoch)
        image = loader.flush()
        while i < len(wanted) and wanted[i] < end:
            images[wanted[i]] = image
            i += 1
    finally:
        reader.close()
    return images, first, end


def check_reads(reads: Reads, name: str, bootstrap: str, cluster_id: str) -> str:
    """The three properties over ``reads`` against the committed log at ``bootstrap``; a one-line
    summary, or AssertionError naming the kept file that lists every violation."""
    images, first, end = committed_images(bootstrap, cluster_id, {o["offset"] for o in reads.ops})
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
        elif offset in images:
            for key, state in o["states"].items():
                committed = image_state(images[offset], key)
                if committed != state:
                    violations.append(f"{who} saw {key} {state} at offset {offset}; the committed log "
                                      f"has {committed} there")
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


class CutWatcher:
    """Polls a warehouse's newest cut (every ``interval`` seconds) while a job writes it: the
    offsets it saw, in order, to show that cuts only move forward."""

    def __init__(self, warehouse: str, interval: float = 0.3):
        self.warehouse, self.interval, self.seen = warehouse, interval, []
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cut-watcher", daemon=True)

    def _run(self) -> None:
        from delta_tables.cut import latest_cut

        while not self.stop.wait(self.interval):
            try:
                offset = latest_cut(self.warehouse).offset
            except Exception:  # noqa: BLE001 - no cut yet (or a table mid-creation): nothing to see
                continue
            if not self.seen or self.seen[-1] != offset:
                self.seen.append(offset)

    def __enter__(self) -> "CutWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self._thread.join(30)


def check_cuts(warehouse: str, bootstrap: str, cluster_id: str, seen: Sequence[int], name: str,
               most: int = 25) -> str:
    """The Delta tables' promises (docs/design/consistency.md): every cut the snapshots table lists
    (``most`` of them, evenly spaced, and the newest) holds state tables equal to the committed log's
    image at its offset (so never an uncommitted write, never one that vanished), is inside the
    committed log, and the cuts and the newest cut a reader ``seen`` over time only move forward."""
    import sys

    from delta_tables.cut import cut_of_row, read_table, tables_at
    from delta_tables.schemas import SNAPSHOTS

    sys.path.insert(0, str(Path(__file__).parent / "streaming"))
    from test_materializer import assert_tables_equal_image

    cuts = sorted((cut_of_row(r) for r in read_table(tables_at(warehouse, None)[SNAPSHOTS]).to_pylist()),
                  key=lambda c: c.offset)
    offsets = [c.offset for c in cuts]
    assert len(offsets) == len(set(offsets)), f"{name}: an offset was cut twice: {offsets}"
    for older, newer in zip(cuts, cuts[1:]):  # a later cut never names an older version of a table
        back = [t for t, v in newer.versions.items() if v < older.versions.get(t, 0)]
        assert not back, f"{name}: the cut at {newer.offset} names older versions of {back} than the cut before"
    assert list(seen) == sorted(set(seen)), f"{name}: the newest cut went back in time: {list(seen)}"
    picked = cuts if len(cuts) <= most else [cuts[round(i * (len(cuts) - 1) / (most - 1))] for i in range(most)]
    images, first, end = committed_images(bootstrap, cluster_id, {c.offset for c in picked})
    assert offsets[-1] < end, f"{name}: the newest cut, at {offsets[-1]}, is past the committed log's end {end}"
    checked = 0
    for cut in picked:
        if cut.offset in images:
            assert_tables_equal_image(warehouse, images[cut.offset], cut)
            checked += 1
    with open(KEPT / "checked.tsv", "a") as log:
        log.write(f"{name}-cuts\t{checked}\tok\t\n")
    return f"{checked} of {len(cuts)} cuts equal to the committed log, {len(seen)} newest cuts seen in order"
