"""The shipped alert rules and dashboard against Prometheus itself (Debian's ``prometheus`` and
``promtool``; .ci/run installs them): promtool checks the rules and runs their unit tests; the
dashboard and the rules use only metrics some process exports; and a real Prometheus scraping three
controllers, two brokers, the streaming job and the console sees each fault's alert fire, then
resolve once the fault is mended."""
from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from conftest import BrokerProcesses, free_ports, sparkraft_cmd, wait_for

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "conf" / "prometheus" / "sparkraft-alerts.yml"
RULE_TESTS = ROOT / "conf" / "prometheus" / "sparkraft-alerts.test.yml"
PROMETHEUS_CONFIG = ROOT / "conf" / "prometheus" / "prometheus.yml"
DASHBOARD = ROOT / "conf" / "grafana" / "sparkraft.json"

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian's prometheus (promtool)")


def _alert_rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]


def _dashboard_exprs() -> list[str]:
    return [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", ())]


def _exported_series() -> set[str]:
    """Every series name some process exports (a histogram's _bucket, _sum and _count)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from gen_docs import metric_registries

    names = set()
    for registry in metric_registries().values():
        for name, kind, _help, _kafka in registry.described():
            name = name.split("{")[0]
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bsparkraft_[a-z_]+\b", expr))


@needs_promtool
def test_promtool_checks_the_rules_and_config_and_every_alert_has_unit_tests_that_pass():
    for args in (["check", "rules", str(RULES)], ["check", "config", str(PROMETHEUS_CONFIG)],
                 ["test", "rules", str(RULE_TESTS)]):
        run = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, f"promtool {' '.join(args)}:\n{run.stdout}{run.stderr}"
    fired, quiet = set(), set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", ()):
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = {r["alert"] for r in _alert_rules()}
    assert alerts - fired == set(), "alerts no unit test sees firing"
    assert alerts - quiet == set(), "alerts no unit test sees quiet on healthy series"
    docs = (ROOT / "docs" / "operate" / "alerts.md").read_text()
    for rule in _alert_rules():
        assert rule["annotations"]["runbook_url"] == f"docs/operate/alerts.md#{rule['alert'].lower()}"
        assert f"## {rule['alert']}\n" in docs, f"{rule['alert']} has no runbook in docs/operate/alerts.md"


@needs_promtool
def test_the_dashboard_and_the_rules_use_only_exported_metrics_in_valid_promql(tmp_path):
    exported = _exported_series()
    exprs = _dashboard_exprs()
    assert len(exprs) >= 30
    for expr in [*exprs, *(r["expr"] for r in _alert_rules())]:
        unknown = _metric_names(expr) - exported
        assert not unknown, f"{expr}: no process exports {sorted(unknown)}"
    # promtool parses each panel's query (as a recording rule)
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"panel_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    (tmp_path / "dashboard-rules.yml").write_text(yaml.safe_dump(rules))
    run = subprocess.run(["promtool", "check", "rules", str(tmp_path / "dashboard-rules.yml")], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    used = set().union(*map(_metric_names, exprs))
    watched = {"sparkraft_controller_active_controller_count", "sparkraft_controller_offline_partitions_count",
               "sparkraft_raft_commit_latency_seconds_bucket", "sparkraft_materializer_freshness_seconds_bucket",
               "sparkraft_snapshot_lag_records", "sparkraft_broker_metadata_lag"}
    assert watched <= used, f"the dashboard lacks {sorted(watched - used)}"


# ---------------------------------------------------------------------------------------------
# A real Prometheus, real processes, real faults

class Prometheus:
    """Debian's prometheus on 127.0.0.1, scraping every second with the shipped rules, whose ``for:``
    durations are cut to 2 s (the durations themselves are what promtool's unit tests check)."""

    def __init__(self, root: Path, targets: dict[str, list[str]]):
        self.port, = free_ports(1)
        rules = re.sub(r"(?m)^(\s+for: )\S+$", r"\g<1>2s", RULES.read_text())
        (root / "sparkraft-alerts.yml").write_text(rules)
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                  "rule_files": ["sparkraft-alerts.yml"],
                  "scrape_configs": [{"job_name": job, "static_configs": [{"targets": t}]}
                                     for job, t in targets.items()]}
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = open(root / "prometheus.log", "wb")
        self.proc = subprocess.Popen(["prometheus", f"--config.file={root / 'prometheus.yml'}",
                                      f"--storage.tsdb.path={root / 'tsdb'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def api(self, path: str, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def firing(self) -> set[tuple]:
        """(alertname, the label that says which: instance, voter or nothing) of each firing alert."""
        return {(a["labels"]["alertname"], a["labels"].get("instance") or a["labels"].get("voter") or "")
                for a in self.api("alerts")["alerts"] if a["state"] == "firing"}

    def targets_up(self) -> dict[str, bool]:
        return {t["scrapeUrl"]: t["health"] == "up" for t in self.api("targets")["activeTargets"]}

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _wait_firing(prom: Prometheus, alert: tuple, timeout: float = 90) -> None:
    wait_for(lambda: alert in prom.firing(), timeout, f"{alert} firing (firing now: {sorted(prom.firing())})")


def _wait_resolved(prom: Prometheus, alert: tuple, timeout: float = 120) -> None:
    wait_for(lambda: alert not in prom.firing(), timeout, f"{alert} resolved (firing now: {sorted(prom.firing())})")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("prometheus") is None, reason="Debian's prometheus")
def test_each_fault_fires_its_alert_in_a_real_prometheus_and_resolves_after_recovery(controller_processes, tmp_path):
    cp = controller_processes(metrics=True)
    cp.format()
    cp.start()
    cp.wait_leader()
    broker_metrics = dict(zip((101, 102), free_ports(2)))
    brokers = BrokerProcesses(tmp_path, cp, {101: None, 102: None}, {"broker.heartbeat.interval.ms": 300,
                                                                      "broker.session.timeout.ms": 2000})
    for b, port in broker_metrics.items():  # each broker its own metrics listener
        path = tmp_path / f"broker-{b}.properties"
        path.write_text(path.read_text() + f"metrics.listener=127.0.0.1:{port}\n")
        brokers.start(b)
    job_port, console_port = free_ports(2)
    job_args = ["materialize", "--bootstrap-controller", cp.bootstrap(), "--warehouse", str(tmp_path / "wh"),
                "--checkpoint", str(tmp_path / "ck"), "--trigger", "0.5", "--metrics-listener", f"127.0.0.1:{job_port}"]
    outputs = []

    def start_job() -> subprocess.Popen:
        out = open(tmp_path / "job.log", "ab")
        outputs.append(out)
        return subprocess.Popen(sparkraft_cmd(*job_args), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    job = start_job()
    wait_for(lambda: (tmp_path / "wh" / "snapshots" / "_delta_log").is_dir(), 120, "the job to make the warehouse")
    console = subprocess.Popen(sparkraft_cmd("console", "--warehouse", str(tmp_path / "wh"), "--listen",
                                             f"127.0.0.1:{console_port}"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    controllers = {i: f"127.0.0.1:{p}" for i, p in cp.metrics_ports.items()}
    prom = Prometheus(tmp_path, {
        "sparkraft-controller": list(controllers.values()),
        "sparkraft-broker": [f"127.0.0.1:{p}" for p in broker_metrics.values()],
        "sparkraft-materializer": [f"127.0.0.1:{job_port}"],
        "sparkraft-console": [f"127.0.0.1:{console_port}"]})
    try:
        wait_for(prom.ready, 60, "Prometheus ready")
        wait_for(lambda: (up := prom.targets_up()) and len(up) == 7 and all(up.values()), 180,
                 "every process scraped")
        wait_for(lambda: not {a for a in prom.firing() if a[0].startswith("Sparkraft")}, 120,
                 "a healthy cluster with no alert firing")
        # every panel's query runs against the real series
        for expr in _dashboard_exprs():
            prom.api("query", query=expr)
        expected = {"sparkraft_controller_active_controller_count", "sparkraft_raft_voter_caught_up_age_seconds",
                    "sparkraft_controller_broker_registration_state", "sparkraft_broker_metadata_lag",
                    "sparkraft_materializer_last_cut_timestamp_seconds", "sparkraft_console_newest_cut_offset"}
        series = lambda: {m["__name__"] for m in prom.api("series", **{"match[]": '{__name__=~"sparkraft_.+"}'})}  # noqa: E731
        wait_for(lambda: expected <= series(), 30, f"series of {sorted(expected - series())}")

        # SIGSTOP a follower: its scrapes time out, and the leader sees it fall behind
        paused = next(i for i in cp.voters if i != cp.wait_leader().leader_id)
        cp.send(paused, signal.SIGSTOP)
        try:
            _wait_firing(prom, ("SparkraftControllerDown", controllers[paused]))
            _wait_firing(prom, ("SparkraftVoterNotCaughtUp", str(paused)))
        finally:
            cp.send(paused, signal.SIGCONT)
        _wait_resolved(prom, ("SparkraftControllerDown", controllers[paused]))
        _wait_resolved(prom, ("SparkraftVoterNotCaughtUp", str(paused)))

        # SIGKILL the active controller: another takes over; the dead one is down and behind
        leader = cp.wait_leader().leader_id
        cp.kill(leader)
        _wait_firing(prom, ("SparkraftControllerDown", controllers[leader]))
        _wait_firing(prom, ("SparkraftVoterNotCaughtUp", str(leader)))
        def one_active_other_than_the_killed() -> bool:
            active = prom.api("query", query="sparkraft_controller_active_controller_count == 1")["result"]
            return [r["metric"]["instance"] for r in active] not in ([], [controllers[leader]])
        wait_for(one_active_other_than_the_killed, 60, "Prometheus to see another controller active")
        cp.start([leader])
        _wait_resolved(prom, ("SparkraftControllerDown", controllers[leader]))
        _wait_resolved(prom, ("SparkraftVoterNotCaughtUp", str(leader)))

        # SIGKILL a broker: it is down, and fenced once its session times out
        brokers.procs[102].kill()
        brokers.procs[102].wait(10)
        _wait_firing(prom, ("SparkraftBrokerDown", f"127.0.0.1:{broker_metrics[102]}"))
        _wait_firing(prom, ("SparkraftFencedBrokers", ""))
        brokers.start(102)
        _wait_resolved(prom, ("SparkraftBrokerDown", f"127.0.0.1:{broker_metrics[102]}"))
        _wait_resolved(prom, ("SparkraftFencedBrokers", ""))

        # stop the streaming job (as a service manager does): the lakehouse stops following
        job.send_signal(signal.SIGTERM)
        assert job.wait(120) == 0
        _wait_firing(prom, ("SparkraftMaterializerDown", f"127.0.0.1:{job_port}"))
        job = start_job()
        _wait_resolved(prom, ("SparkraftMaterializerDown", f"127.0.0.1:{job_port}"), timeout=240)
    except BaseException:
        print(cp.dump_outputs(), brokers.dump(), (tmp_path / "job.log").read_text(errors="replace")[-3000:],
              (tmp_path / "prometheus.log").read_text(errors="replace")[-3000:], sep="\n")
        raise
    finally:
        prom.close()
        for p in (job, console):
            p.kill()
            p.wait(30)
        for out in outputs:
            out.close()
        brokers.close()
