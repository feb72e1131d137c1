"""A run with a skip nobody listed exits 1 and names it; a listed skip, with its reason, passes."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from skip_policy import ALLOWED, load_allowed

TESTS = Path(__file__).resolve().parents[1]


def run_pytest(tmp_path: Path, allowed: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "allowed.toml").write_text(allowed)
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import sys
        from pathlib import Path
        sys.path.insert(0, {str(TESTS)!r})
        from skip_policy import SkipPolicy, load_allowed

        def pytest_configure(config):
            if not hasattr(config, "workerinput"):
                config.pluginmanager.register(SkipPolicy(load_allowed(Path(__file__).with_name("allowed.toml"))))
        """))
    (tmp_path / "test_some.py").write_text(textwrap.dedent("""
        import pytest

        def test_runs():
            assert True

        def test_needs_netem():
            pytest.skip("tc netem: Error (no sch_netem in this kernel)")

        def test_needs_kafka():
            pytest.skip("Apache Kafka's jars are not resolved")
        """))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)


NETEM = '[[skip]]\ntest = "test_some.py::test_needs_netem"\nwhen = "no sch_netem"\nwhy = "the kernel has none"\n'
KAFKA = '[[skip]]\ntest = "test_some.py::*kafka*"\nwhen = "jars are not resolved"\nwhy = "(a test of the policy)"\n'


@pytest.mark.parametrize("args", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_an_unlisted_skip_fails_the_run_and_is_named(tmp_path, args):
    out = run_pytest(tmp_path, NETEM, *args)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "SKIPPED test_some.py::test_needs_kafka: Apache Kafka's jars are not resolved" in out.stdout
    assert "test_needs_netem:" not in out.stdout.split("skips nobody decided on")[1]
    assert "1 passed, 2 skipped" in out.stdout


def test_listed_skips_with_their_reasons_pass(tmp_path):
    out = run_pytest(tmp_path, NETEM + KAFKA)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "skips nobody decided on" not in out.stdout


def test_a_listed_test_skipped_for_another_reason_fails(tmp_path):
    other = NETEM.replace("no sch_netem", "no iproute2") + KAFKA
    out = run_pytest(tmp_path, other)
    assert out.returncode == 1
    assert "SKIPPED test_some.py::test_needs_netem" in out.stdout


def test_an_entry_without_its_why_is_refused(tmp_path):
    (tmp_path / "a.toml").write_text('[[skip]]\ntest = "x"\nwhen = "y"\n')
    with pytest.raises(pytest.UsageError, match="entry 1 has no why"):
        load_allowed(tmp_path / "a.toml")


def test_the_repositorys_list_is_short_and_every_entry_says_why():
    allowed = load_allowed(ALLOWED)
    assert 0 < len(allowed) <= 10
    assert all(len(a.why) > 20 for a in allowed)
