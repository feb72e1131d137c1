"""The Raft core is sans-I/O: no sockets, threads, clocks, files or gRPC anywhere in its imports."""
import ast
import pathlib

FORBIDDEN = {"socket", "threading", "time", "os", "grpc", "asyncio", "select", "subprocess",
             "concurrent", "io", "pathlib", "shutil", "tempfile", "signal", "datetime"}
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _closure() -> dict[str, set[str]]:
    """Every quorum module the core reaches, with what each imports."""
    seen: dict[str, set[str]] = {}
    todo = [p for p in (ROOT / "quorum" / "raft").glob("*.py")]
    while todo:
        p = todo.pop()
        key = str(p.relative_to(ROOT))
        if key in seen:
            continue
        seen[key] = _imports(p)
        for name in seen[key]:
            if name.startswith("quorum."):
                target = ROOT / (name.replace(".", "/") + ".py")
                if target.exists():
                    todo.append(target)
    return seen


def test_core_imports_no_io():
    bad = {f: sorted(n for n in names if n.split(".")[0] in FORBIDDEN) for f, names in _closure().items()}
    bad = {f: n for f, n in bad.items() if n}
    assert not bad, f"the sans-I/O core reaches I/O modules: {bad}"


def test_closure_covers_the_log_interface():
    files = _closure()
    assert "quorum/log/api.py" in files and "quorum/log/batch.py" in files
    assert "quorum/log/file_log.py" not in files
