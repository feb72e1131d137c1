"""spark-submit entry point of the materialisation job (also runs under plain ``python``).

    spark-submit jobs/materialize.py --bootstrap-controller HOST:PORT --warehouse URI --checkpoint URI [--trigger S]
    python jobs/materialize.py ...   # the same, with a local Spark session

Thin on purpose: the arguments and behaviour are ``sparkraft materialize``'s (streaming/job.py).
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for spark-submit
    from sparkraft.cli import run

    run(["materialize", *sys.argv[1:]])
