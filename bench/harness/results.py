"""Result files: ``bench/results/<name>.json``, one per benchmark, with the machine it ran on."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
PLOTS_DIR = Path(__file__).resolve().parents[2] / "docs" / "bench"


def _clean(value: Any) -> Any:
    """JSON has no NaN: store an unmeasured number as null."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_result(name: str, document: dict, results_dir: Path = RESULTS_DIR) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_clean(document), indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


def read_result(name: str, results_dir: Path = RESULTS_DIR) -> dict | None:
    path = results_dir / f"{name}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(v: Any) -> str:
        return "–" if v is None else str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt_number(value: float | None, digits: int = 0) -> str | None:
    """Thousands separators for rates, fixed digits for times; None (not measured) stays None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return f"{value:,.{digits}f}"


def measured_on(document: dict) -> str:
    """"Measured DATE on N × CPU, Python V, sparkraft REV (MODE mode)": how a report starts."""
    m = document["machine"]
    return (f"Measured {m['date']} on {m['cpu_count']} × {m['cpu_model']}, Python {m['python']}, sparkraft "
            f"{m.get('sparkraft_revision')} ({document['mode']} mode)")
