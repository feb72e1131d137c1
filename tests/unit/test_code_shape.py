"""The code stays easy to see, held: no hand-written module of the product over 500 lines
(generated code, in gen/ folders, aside), and imports of the project's own modules inside
functions only where they are deliberate: the CLI (sparkraft/: a command imports what it runs
when it runs, so ``sparkraft --help`` stays fast), the Spark job's modules (streaming/, jobs/: the
driver imports the source, the writers and Spark as each step needs them, and the source's reads
run in Spark's Python workers), and the console's query child (console/sql_runner.py: what the
forked child alone needs). Anywhere else, an import inside a function hides a dependency from the
module's head and from the layers' check; a new one fails here."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("quorum", "sparkraft", "console", "streaming", "jobs", "delta_tables")
MAX_LINES = 500
LOCAL_IMPORTS_ALLOWED_IN = ("sparkraft/", "streaming/", "jobs/", "console/sql_runner.py")


def _modules():
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "/gen/" not in rel:
                yield rel, path


def _local_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PRODUCT:
                    found.append((node.lineno, node.module))
                elif isinstance(node, ast.Import):
                    found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in PRODUCT]
    return sorted(set(found))


def test_no_hand_written_module_is_over_500_lines():
    long = {rel: n for rel, path in _modules() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these by job (at most {MAX_LINES} lines each): {long}"


def test_no_import_of_our_own_inside_a_function_outside_the_allowed_places():
    found = [f"{rel}:{line} {module}" for rel, path in _modules() if not rel.startswith(LOCAL_IMPORTS_ALLOWED_IN)
             for line, module in _local_imports(ast.parse(path.read_text()))]
    assert not found, "import these at the module's head:\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for():
    tree = ast.parse("def f():\n    from quorum.errors import Errors\n    import delta_tables.cut\n    import json\n")
    assert [m for _, m in _local_imports(tree)] == ["quorum.errors", "delta_tables.cut"]
