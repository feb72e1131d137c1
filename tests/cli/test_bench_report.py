"""The published benchmark tables are what ``python -m bench report`` makes of the stored JSON."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def test_published_tables_are_reproduced_from_the_json(tmp_path):
    names = sorted(p.stem for p in RESULTS.glob("*.json"))
    assert names, "no stored benchmark results"
    for name in names:
        shutil.copy(RESULTS / f"{name}.json", tmp_path)
    done = subprocess.run([sys.executable, "-m", "bench", "report", "--no-plots", "--results-dir", str(tmp_path)],
                          cwd=RESULTS.parents[1], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for name in names:
        assert (tmp_path / f"{name}.md").read_text() == (RESULTS / f"{name}.md").read_text(), name


@pytest.mark.parametrize("name", ["quorum", "controller", "broker", "snapshot", "materialize", "writes", "membership", "security", "heartbeats", "overload", "day2", "history"])
def test_every_benchmark_has_published_results(name):
    assert (RESULTS / f"{name}.json").exists() and (RESULTS / f"{name}.md").exists()
