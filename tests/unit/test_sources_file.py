"""A fleet's sources file (streaming/sources_file.py): clusters with their settings read, and
everything wrong with the file refused in one line naming where: not YAML, no list, a name twice
or malformed, a missing bootstrap, an unknown key, a secret in the file, an unset variable, a
number out of range, a command-config that is not a file."""
from __future__ import annotations

import pytest

from streaming.sources_file import ClusterSource, SourcesError, read_sources


def _file(tmp_path, text: str) -> str:
    path = tmp_path / "sources.yaml"
    path.write_text(text)
    return str(path)


def test_the_clusters_and_their_settings_are_read(tmp_path, monkeypatch):
    monkeypatch.setenv("STAGING_CONTROLLERS", "10.0.0.9:9093")
    config = tmp_path / "payments.properties"
    config.write_text("security.protocol=SSL\n")
    path = _file(tmp_path, f"""
sources:
  - name: payments-prod
    bootstrap-controller: 10.0.0.1:9093,10.0.0.2:9093
    source: kafka
    command-config: {config}
    trigger: 0.5
    max-records-per-trigger: 1000
  - name: staging
    bootstrap-controller: ${{STAGING_CONTROLLERS}}
    warehouse: /lake/staging
""")
    assert read_sources(path) == [
        ClusterSource("payments-prod", "10.0.0.1:9093,10.0.0.2:9093", "kafka", str(config), 0.5, None, 1000),
        ClusterSource("staging", "10.0.0.9:9093", warehouse="/lake/staging")]


@pytest.mark.parametrize("text, says", [
    ("sources: [", "not YAML"),
    ("clusters: []", "needs a list of clusters under 'sources:'"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n  - name: a\n    bootstrap-controller: h:2",
     "cluster 'a' is listed twice"),
    ("sources:\n  - name: 'a b'\n    bootstrap-controller: h:1", "'name' must be 1 to 64 letters"),
    ("sources:\n  - name: a", "cluster 'a' needs 'bootstrap-controller'"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n    colour: red", "unknown key 'colour'"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n    stall-timeout: 60", "unknown key 'stall-timeout'"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n    sasl-password: hunter2", "looks like a secret"),
    ("sources:\n  - name: a\n    bootstrap-controller: ${NOT_SET_ANYWHERE}", "${NOT_SET_ANYWHERE}"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n    trigger: -1", "trigger must be at least 0"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n    source: zookeeper", "sparkraft or kafka"),
    ("sources:\n  - name: a\n    bootstrap-controller: h:1\n    command-config: /no/such/file", "is not a file"),
])
def test_a_bad_file_is_one_line_naming_where(tmp_path, text, says):
    with pytest.raises(SourcesError) as refused:
        read_sources(_file(tmp_path, text))
    assert says in str(refused.value) and "\n" not in str(refused.value)
    assert "hunter2" not in str(refused.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(SourcesError, match="No such file"):
        read_sources(str(tmp_path / "nope.yaml"))


def test_an_available_now_fleet_gives_up_on_a_failing_cluster_so_that_it_ends(monkeypatch):
    """A cluster that keeps failing is retried for as long as the fleet runs; in an available-now
    run it gets the one-cluster job's number of tries, then it is given up, still ``failing`` with
    its error (run_fleet then exits 1 naming it), rather than holding the run open for ever."""
    from streaming import fleet_member
    from streaming.job import RESTARTS

    monkeypatch.setattr(fleet_member, "BACKOFF_S", (0.001, 0.001))
    tries = []

    def unreachable(self):
        tries.append(1)
        raise ConnectionError("nothing listens at 127.0.0.1:1")

    monkeypatch.setattr(fleet_member.Member, "_open", unreachable)
    source = ClusterSource("lost", "127.0.0.1:1")
    once = fleet_member.Member(source, "/tmp/fleet", "/tmp/ck", available_now=True).start()
    once._thread.join(10)
    assert once.given_up and once.settled and once.state == "failing" and "nothing listens" in once.error
    assert len(tries) == RESTARTS
    running = fleet_member.Member(source, "/tmp/fleet", "/tmp/ck", available_now=False).start()
    running._thread.join(0.5)
    assert running._thread.is_alive() and not running.settled and len(tries) > 2 * RESTARTS  # it goes on trying
    running.stop()
    assert not running._thread.is_alive()


def test_a_cluster_names_no_checkpoint_of_its_own(tmp_path):
    """The fleet has one checkpoint; a cluster's progress is its tables, so ``checkpoint:`` is refused."""
    path = tmp_path / "sources.yaml"
    path.write_text("sources:\n  - name: east\n    bootstrap-controller: h:1\n    checkpoint: /ck/east\n")
    with pytest.raises(SourcesError, match="'checkpoint' is the fleet's own"):
        read_sources(str(path))
