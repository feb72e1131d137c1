"""Run the simulation over many seeds: ``python -m quorum.sim --seeds 5000``.

A failing seed is printed with the command that replays it alone (with a trace).
"""
from __future__ import annotations

import argparse
import sys
import time

from quorum.sim import cluster
from quorum.sim.scenarios import MEMBERSHIP_SCENARIOS, SCENARIOS, chaos, membership_chaos, upgrade_chaos

RUNS = {**SCENARIOS, "chaos": chaos, **MEMBERSHIP_SCENARIOS, "membership_chaos": membership_chaos,
        "upgrade_chaos": upgrade_chaos}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m quorum.sim", description=__doc__)
    p.add_argument("--seeds", type=int, default=1000, help="how many seeds per scenario (default 1000)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--scenario", choices=list(RUNS), action="append",
                   help="run only these (default: all: the named scenarios, chaos, the dynamic quorum's "
                        "scenarios, membership_chaos and upgrade_chaos)")
    p.add_argument("--trace", action="store_true", help="print every delivered message (for one seed)")
    args = p.parse_args(argv)
    names = args.scenario or list(RUNS)
    failures = 0
    start = time.monotonic()
    for name in names:
        fn = RUNS[name]
        t0, events = time.monotonic(), 0
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            try:
                if args.trace:
                    cluster.DEFAULT_TRACE = print
                events += fn(seed).events
            except AssertionError as e:
                failures += 1
                print(f"FAIL {name} seed {seed}: {e}", flush=True)
                print(f"  replay: python -m quorum.sim --scenario {name} --first-seed {seed} --seeds 1 --trace",
                      flush=True)
            done = seed - args.first_seed + 1
            if done % 100 == 0 or done == args.seeds:
                print(f"\r{name}: {done}/{args.seeds} seeds, {events:,} events, "
                      f"{time.monotonic() - t0:.1f}s", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
    print(f"{failures} failed in {time.monotonic() - start:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
