"""The benchmark suite: which benchmarks exist and what every one of them is given and returns.

A benchmark is a module with ``NAME``, ``TITLE``, ``REQUIRES`` (importable modules it needs beyond
sparkraft's own dependencies), ``run(ctx) -> dict`` (the ``results`` part of its JSON file),
``report(document) -> str`` (markdown) and ``plot(document, plots_dir) -> list[Path]``. Add a new
benchmark by writing such a module and listing it in ``BENCHMARKS``.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bench.harness.progress import Progress

# name -> module; ``python -m bench all`` runs them in this order.
BENCHMARKS: dict[str, str] = {
    "quorum": "bench.quorum_bench",
    "controller": "bench.controller_bench",
    "broker": "bench.broker_bench",
    "writes": "bench.writes_bench",
    "metadata_writes": "bench.metadata_writes_bench",
    "audit_cost": "bench.audit_cost_bench",
    "materialize": "bench.materialize_bench",
    "snapshot": "bench.snapshot_bench",
    "membership": "bench.membership_bench",
    "security": "bench.security_bench",
    "heartbeats": "bench.heartbeats_bench",
    "overload": "bench.overload_bench",
    "day2": "bench.day2_bench",
    "elections": "bench.elections_bench",
    "restore": "bench.restore_bench",
    "revert": "bench.revert_bench",
    "fleet": "bench.fleet_bench",
    "history": "bench.history_bench",
    "cluster": "bench.cluster_bench",
    "kafka": "bench.kafka_bench",
    "zk_migration": "bench.zk_migration_bench",
    "kafka_source": "bench.kafka_source_bench",
    "kafka_snapshot": "bench.kafka_snapshot_bench",
    "kafka_brokers": "bench.kafka_brokers_bench",
    "console": "bench.console_bench",
    "metrics": "bench.metrics_bench",
    "soak": "bench.soak_bench",
}

PLOT_REQUIRES = ("matplotlib",)
INSTALL_HINT = "pip install matplotlib pysyncobj"


@dataclass
class Context:
    quick: bool
    progress: Progress
    work_dir: Path  # scratch space (cluster storage, process logs); removed after a good run
    only_sizes: tuple[int, ...] = ()  # --sizes: the sizes a sized benchmark runs instead of its own

    @property
    def mode(self) -> str:
        return "quick" if self.quick else "full"

    def sizes(self, quick: tuple[int, ...], full: tuple[int, ...]) -> tuple[int, ...]:
        """The sizes (partitions) to run: ``--sizes`` if given, else the mode's."""
        return self.only_sizes or (quick if self.quick else full)


def load(name: str) -> ModuleType:
    return importlib.import_module(BENCHMARKS[name])


def missing_modules(modules: tuple[str, ...] | list[str]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]
