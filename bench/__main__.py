"""``python -m bench``: run the benchmark suite, write JSON results and PNG plots, print tables.

    python -m bench all [--quick]         every benchmark
    python -m bench quorum [--quick]      one (or several) by name
    python -m bench list                  what exists
    python -m bench report [NAME...]      tables and plots again from the stored JSON

Full runs write bench/results/<name>.json and docs/bench/<name>-*.png; ``--quick`` runs (minutes)
write bench/results/quick/ and docs/bench/quick/ so they never overwrite the full runs' figures;
both are committed: a figure the docs quote keeps its raw result in git, quick or full.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench import suite
from bench.harness.machine import busy_warning, machine_info
from bench.harness.progress import Progress
from bench.harness.results import PLOTS_DIR, RESULTS_DIR, read_result, write_result
from quorum.gc_tuning import tune_gc


def _dirs(args: argparse.Namespace) -> tuple[Path, Path]:
    results = args.results_dir or (RESULTS_DIR / "quick" if args.quick else RESULTS_DIR)
    plots = args.plots_dir or (PLOTS_DIR / "quick" if args.quick else PLOTS_DIR)
    return results, plots


def _check_requirements(names: list[str], plots: bool) -> None:
    needed = [m for name in names for m in suite.load(name).REQUIRES]
    if plots:
        needed += suite.PLOT_REQUIRES
    missing = suite.missing_modules(sorted(set(needed)))
    if missing:
        sys.exit(f"bench: missing Python packages: {', '.join(missing)}\n"
                 f"install the benchmark extras with: {suite.INSTALL_HINT}"
                 + ("" if "matplotlib" not in missing else "  (or run with --no-plots)"))


def _publish(name: str, document: dict, results_dir: Path, plots_dir: Path, plots: bool) -> None:
    module = suite.load(name)
    markdown = module.report(document)
    (results_dir / f"{name}.md").write_text(f"## {module.TITLE}\n\n{markdown}\n")
    if plots:
        for path in module.plot(document, plots_dir):
            print(f"bench: wrote {path}", file=sys.stderr)
    print(f"\n## {module.TITLE}\n\n{markdown}\n")


def run(names: list[str], args: argparse.Namespace) -> int:
    results_dir, plots_dir = _dirs(args)
    progress = Progress()
    failed = False
    for name in names:
        module = suite.load(name)
        progress.scope(name)
        work_dir = Path(tempfile.mkdtemp(prefix=f"sparkraft-bench-{name}-"))
        ctx = suite.Context(quick=args.quick, progress=progress, work_dir=work_dir, only_sizes=tuple(args.sizes or ()))
        progress.line(f"{module.TITLE} ({ctx.mode} mode); scratch space {work_dir}")
        started = time.monotonic()
        with progress.phase("machine facts"):
            machine = machine_info(str(work_dir))
        if warning := busy_warning(machine):
            progress.line(f"WARNING: {warning}")
        results = module.run(ctx)
        document = {"benchmark": name, "title": module.TITLE, "mode": ctx.mode, "machine": machine,
                    "duration_s": round(time.monotonic() - started, 1), "results": results}
        path = write_result(name, document, results_dir)
        progress.line(f"wrote {path}")
        _publish(name, document, results_dir, plots_dir, not args.no_plots)
        errors = [e for s in results.get("systems", {}).values() for e in s.get("errors", [])]
        if errors or args.keep:
            progress.line(f"logs kept in {work_dir}")
            failed |= bool(errors)
        else:
            shutil.rmtree(work_dir, ignore_errors=True)
    progress.scope("")
    progress.line("finished" + (" with errors (see above)" if failed else ""))
    return 1 if failed else 0


def report(names: list[str], args: argparse.Namespace) -> int:
    results_dir, plots_dir = _dirs(args)
    found = False
    for name in names:
        document = read_result(name, results_dir)
        if document is None:
            print(f"bench: no results for {name} in {results_dir}", file=sys.stderr)
            continue
        found = True
        _publish(name, document, results_dir, plots_dir, not args.no_plots)
    return 0 if found else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="benchmarks: " + ", ".join(suite.BENCHMARKS))
    parser.add_argument("what", nargs="+", metavar="all|list|report|NAME",
                        help="'all', one or more benchmark names, 'list', or 'report [NAME...]'")
    parser.add_argument("--quick", action="store_true",
                        help="a pass of a few minutes (shorter phases, fewer repetitions)")
    parser.add_argument("--sizes", type=lambda text: [int(n.replace("_", "")) for n in text.split(",")],
                        metavar="N[,N...]", help="partition counts a sized benchmark runs instead of its own "
                                                 "(for example --sizes 2_000_000 --results-dir DIR)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots (no matplotlib needed)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (storage, logs)")
    parser.add_argument("--results-dir", type=Path, help="where JSON results go (default bench/results)")
    parser.add_argument("--plots-dir", type=Path, help="where PNG plots go (default docs/bench)")
    args = parser.parse_args(argv)
    tune_gc()  # as the sparkraft processes do: brokers measured in this process hold big images

    command, *rest = args.what
    if command == "list":
        for name in suite.BENCHMARKS:
            print(f"{name:12} {suite.load(name).TITLE}")
        return 0
    names = rest if command == "report" else (list(suite.BENCHMARKS) if command == "all" else args.what)
    if command == "report" and not names:
        names = list(suite.BENCHMARKS)
    unknown = [n for n in names if n not in suite.BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; known: {', '.join(suite.BENCHMARKS)}")
    if command == "report":
        _check_requirements([], plots=not args.no_plots)
        return report(names, args)
    _check_requirements(names, plots=not args.no_plots)
    return run(names, args)


if __name__ == "__main__":
    sys.exit(main())
