"""Prometheus /metrics from real `controller start` and `broker start` processes, and the text format."""
from __future__ import annotations

import subprocess
import urllib.error
import urllib.request

import pytest
from conftest import free_ports, sparkraft_cmd, wait_for

from quorum.metrics.registry import Registry, histogram

pytestmark = pytest.mark.slow


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=")
        text = resp.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_histograms_gauges_and_counters_render_in_prometheus_text_format():
    registry = Registry()
    registry.counter("z_total", "A counter.", lambda: 7)
    h = registry.histogram(histogram("x_seconds", "How long.", (0.1, 1.0)))
    registry.gauge("y", "A gauge.", lambda: 3)
    registry.gauge("broken", "Cannot answer now.", lambda: 1 / 0)
    for v in (0.05, 0.5, 5.0):
        h.observe(v)
    text = registry.render()
    assert "# TYPE x_seconds histogram" in text and "# HELP y A gauge." in text
    assert 'x_seconds_bucket{le="0.1"} 1.0\nx_seconds_bucket{le="1.0"} 2.0\nx_seconds_bucket{le="+Inf"} 3.0' in text
    assert "x_seconds_sum 5.55" in text and "x_seconds_count 3.0" in text and "\ny 3.0\n" in text
    assert "_created" not in text
    assert "\nbroken " not in text  # no sample rather than a made-up one
    assert "# TYPE z_total counter" in text and "\nz_total 7.0\n" in text
    assert registry.described()[0] == ("z_total", "counter", "A counter.", "")


def _scraped(port: int):
    """The metrics at ``port``, or None while nothing listens there yet."""
    try:
        return scrape(port)
    except (urllib.error.URLError, ConnectionError):
        return None


def test_controllers_and_a_broker_serve_their_metrics(controller_processes, tmp_path):
    cp = controller_processes(metrics=True)
    cp.format()
    cp.start()
    info = cp.wait_leader()
    leader_port = cp.metrics_ports[info.leader_id]
    # Active, and its first own records (the bootstrap features, NoOps) committed and timed.
    values = wait_for(lambda: (v := scrape(leader_port)) and v.get("sparkraft_controller_active_controller_count") == 1
                      and v.get("sparkraft_raft_commit_latency_seconds_count", 0) >= 1 and v, 15,
                      "the active controller's metrics")
    assert values["sparkraft_raft_current_state"] == 6  # Leader
    assert values["sparkraft_raft_current_leader"] == info.leader_id
    assert values["sparkraft_raft_current_epoch"] == info.leader_epoch
    assert 0 < values["sparkraft_raft_high_watermark"] <= values["sparkraft_raft_log_end_offset"]
    assert values["sparkraft_controller_new_active_controllers_total"] == 1
    assert values["sparkraft_raft_voters"] == 3 and values["sparkraft_raft_unknown_voter_connections"] == 0
    assert values["sparkraft_raft_appended_records_total"] >= values["sparkraft_controller_committed_records_total"] - 1
    assert values["sparkraft_raft_log_dir_free_bytes"] > 0
    for follower in (i for i in cp.voters if i != info.leader_id):
        # a follower may still be starting (its metrics listener opens as its process does), or not
        # yet have heard from the leader (Unattached, on a loaded machine): its metrics say so until it has
        wait_for(lambda f=follower: (v := _scraped(cp.metrics_ports[f])) and v["sparkraft_raft_current_state"] == 5
                 and v["sparkraft_raft_current_leader"] == info.leader_id, 30,
                 f"controller {follower}'s metrics showing it follows {info.leader_id}")

    broker_port, metrics_port = free_ports(2)
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in cp.ports.items())
    config = tmp_path / "broker.properties"
    config.write_text(f"process.roles=broker\nnode.id=101\ncontroller.quorum.voters={voters}\n"
                      f"listeners=PLAINTEXT://127.0.0.1:{broker_port}\nmetadata.log.dir={tmp_path / 'b'}\n"
                      f"metrics.listener=127.0.0.1:{metrics_port}\nbroker.heartbeat.interval.ms=300\n")
    broker = subprocess.Popen(sparkraft_cmd("broker", "start", "--config", str(config)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def broker_ready():
            try:
                v = scrape(metrics_port)
            except (urllib.error.URLError, ConnectionError):
                return None
            return v if v.get("sparkraft_broker_fenced") == 0 else None

        v = wait_for(broker_ready, 30, "the broker's metrics, unfenced")
        assert v["sparkraft_broker_last_applied_record_offset"] >= 0
        assert v["sparkraft_broker_bootstrapped_from_log"] == 1
        leader = wait_for(lambda: (s := scrape(leader_port)) and s["sparkraft_controller_active_broker_count"] == 1
                          and s, 10, "the controller to count the broker")
        assert leader["sparkraft_controller_fenced_broker_count"] == 0
        assert leader['sparkraft_controller_broker_registration_state{broker="101"}'] == 30  # Kafka's ACTIVE
        assert 0 <= leader['sparkraft_controller_broker_heartbeat_age_seconds{broker="101"}'] < 30
        # the quorum as its leader sees it: every voter caught up, none lagging for long
        wait_for(lambda: (s := scrape(leader_port)) and s["sparkraft_raft_voters_caught_up"] == 3, 15,
                 "three voters caught up")
        assert {k for k in leader if k.startswith("sparkraft_raft_voter_lag_records")} == {
            f'sparkraft_raft_voter_lag_records{{voter="{i}"}}' for i in cp.voters}
        follower = next(i for i in cp.voters if i != info.leader_id)
        followed = scrape(cp.metrics_ports[follower])
        assert "sparkraft_raft_voters_caught_up" not in followed  # only the leader knows: no made-up sample
        assert followed["sparkraft_raft_fetched_records_total"] > 0
        assert followed["sparkraft_controller_active_controller_count"] == 0
        assert v["sparkraft_broker_metadata_version"] == leader["sparkraft_controller_metadata_version"] >= 1
        assert v["sparkraft_broker_last_applied_record_lag_seconds"] >= 0
        assert v["sparkraft_broker_metadata_loader_idle_seconds_total"] > 0
    finally:
        broker.terminate()
        broker.wait(30)
