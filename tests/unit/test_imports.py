"""The structure, held by tests: packages form layers, each imports only the ones it is allowed
(layout.toml), no two packages import each other (even through others, inside a function or under
TYPE_CHECKING), and the Raft core reaches no I/O at all. docs/design/layout.md is written from the
same rules (scripts/gen_docs.py; tests/unit/test_docs.py fails when it is stale)."""
import ast
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOPS = ("quorum", "streaming", "delta_tables", "jobs", "sparkraft", "console")

# Each package and what it may import of ours, lowest layer first: layout.toml, the one source of
# these rules (scripts/gen_docs.py writes docs/design/layout.md from it). A package under quorum/ is
# quorum.<name> (a module such as quorum/config.py counts as one). Generated code, quorum.gen,
# imports nothing of ours.
MAY_IMPORT: dict[str, set[str]] = {name: set(rule["may_import"]) for name, rule in
                                   tomllib.loads((ROOT / "layout.toml").read_text())["packages"].items()}

# The Raft core is sans-I/O: none of these anywhere in what it imports.
FORBIDDEN_IN_CORE = {"socket", "threading", "time", "os", "grpc", "asyncio", "select", "subprocess",
                     "concurrent", "io", "pathlib", "shutil", "tempfile", "signal", "datetime"}


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "quorum" and len(parts) > 1 else parts[0]


def _imports(path: pathlib.Path) -> set[str]:
    """Every module ``path`` imports, wherever the import statement is."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            if node.module in TOPS:  # from quorum import errors
                names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _sources():
    for top in TOPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] != ("quorum", "gen"):
                yield rel, path


def package_edges() -> dict[str, dict[str, str]]:
    """package -> {package it imports: one module that does}."""
    edges: dict[str, dict[str, str]] = {}
    for rel, path in _sources():
        me = package_of(".".join(rel.with_suffix("").parts))
        for name in _imports(path):
            if name.split(".")[0] in TOPS and name not in TOPS:
                other = package_of(name)
                if other != me:
                    edges.setdefault(me, {}).setdefault(other, str(rel))
    return edges


def test_every_package_has_a_place_in_the_layers():
    found = {package_of(".".join(rel.with_suffix("").parts)) for rel, _ in _sources()}
    found = found - {"quorum", "quorum.__init__"} | {top for top in TOPS if top != "quorum"}
    assert found <= set(MAY_IMPORT), f"add {sorted(found - set(MAY_IMPORT))} to layout.toml (then run scripts/gen_docs.py)"


def test_each_package_imports_only_what_it_may():
    wrong = {f"{a} -> {b} ({where})" for a, targets in package_edges().items()
             for b, where in targets.items() if b not in MAY_IMPORT.get(a, set())}
    assert not wrong, f"imports against the layers: {sorted(wrong)}"


def test_the_layers_have_no_cycle():
    """MAY_IMPORT is a partial order (so the real imports, a subset, have no cycle either)."""
    state: dict[str, str] = {}

    def visit(p: str, path: list[str]) -> None:
        if state.get(p) == "done":
            return
        assert state.get(p) != "open", f"cycle: {' -> '.join(path + [p])}"
        state[p] = "open"
        for q in MAY_IMPORT.get(p, ()):
            visit(q, path + [p])
        state[p] = "done"

    for p in MAY_IMPORT:
        visit(p, [])


def test_the_layout_page_names_every_package():
    section = (ROOT / "docs" / "design" / "layout.md").read_text()
    missing = [p for p in MAY_IMPORT
               if not any(p.replace(".", "/") + end in section for end in ("/", ".py"))]
    assert not missing, f"docs/design/layout.md does not describe {missing}"


def _core_closure() -> dict[str, set[str]]:
    """Every quorum module the core reaches, with what each imports."""
    seen: dict[str, set[str]] = {}
    todo = list((ROOT / "quorum" / "raft").glob("*.py"))
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
    bad = {f: sorted(n for n in names if n.split(".")[0] in FORBIDDEN_IN_CORE) for f, names in _core_closure().items()}
    bad = {f: n for f, n in bad.items() if n}
    assert not bad, f"the sans-I/O core reaches I/O modules: {bad}"


def test_closure_covers_the_log_interface():
    files = _core_closure()
    assert "quorum/log/api.py" in files and "quorum/log/batch.py" in files
    assert "quorum/log/file_log.py" not in files


def _module_name(rel: pathlib.Path) -> str:
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path: pathlib.Path) -> set[str]:
    """The modules of ours ``path`` imports, ``from quorum.controller import api`` naming the module
    quorum.controller.api (not the package), wherever the import statement is (TYPE_CHECKING too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                is_module = (ROOT / (sub.replace(".", "/") + ".py")).exists() or (ROOT / sub.replace(".", "/")).is_dir()
                names.add(sub if is_module else node.module)
    return {n for n in names if n.split(".")[0] in TOPS}


def module_graph(top: str = "quorum") -> dict[str, set[str]]:
    """Each module under ``top`` -> the modules under ``top`` it imports (a package counts as its
    __init__)."""
    graph = {}
    for rel, path in _sources():
        if rel.parts[0] == top:
            graph[_module_name(rel)] = _module_imports(path)
    return {m: {n for n in targets if n in graph and n != m} for m, targets in graph.items()}


def test_no_module_of_quorum_imports_one_that_imports_it_back():
    """No cycle between modules either, however long, TYPE_CHECKING and function-local imports
    included: each module can be read knowing only what it imports."""
    graph = module_graph()
    state: dict[str, str] = {}
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == "done":
            return
        if state.get(m) == "open":
            cycles.append(" -> ".join(path[path.index(m):] + [m]))
            return
        state[m] = "open"
        for n in sorted(graph[m]):
            visit(n, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])
    assert not cycles, "module cycles:\n" + "\n".join(cycles)


def test_the_request_handlers_know_the_controller_only_by_its_context():
    """quorum/controller/core.py imports every *_control module; none of them, nor any module core
    reaches, imports core back: they take a ControllerContext (context.py), whose members core has."""
    from quorum.controller import context
    from quorum.controller.core import ControllerCore

    graph = module_graph()
    reached, todo = set(), ["quorum.controller.core"]
    while todo:
        for n in graph[todo.pop()]:
            if n not in reached:
                reached.add(n)
                todo.append(n)
    assert "quorum.controller.core" not in reached
    importers = sorted(m for m, targets in graph.items() if m.startswith("quorum.controller.")
                       and "quorum.controller.core" in targets)
    assert importers == ["quorum.controller.local"], importers  # LocalController wraps a core: above it
    missing = [name for name in context.MEMBERS if not hasattr(ControllerCore, name)
               and name not in ControllerCore.__init__.__code__.co_names]
    assert not missing, f"ControllerCore lacks {missing} of ControllerContext"
    assert set(context.MEMBERS) == set(context.ControllerContext.__annotations__) | {
        n for n, v in vars(context.ControllerContext).items() if callable(v) or isinstance(v, property)} - {
        "__init__", "__subclasshook__", "_is_protocol", "__class_getitem__", "__init_subclass__"}
