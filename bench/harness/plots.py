"""PNG charts for docs/bench/, drawn the same way for every benchmark (matplotlib, no display)."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Mapping, Sequence


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _finish(fig, ax, path: Path, title: str, subtitle: str | None) -> Path:
    ax.set_title(title if not subtitle else f"{title}\n{subtitle}", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def largest_size(document: dict) -> tuple[dict | None, str]:
    """The last size a benchmark measured (its largest) and the subtitle naming it and the
    machine; (None, "") if it measured none."""
    sizes = document["results"]["sizes"]
    if not sizes:
        return None, ""
    s = sizes[-1]
    machine = document["machine"]
    return s, (f"{s['partitions']:,} partitions, {machine['cpu_count']} CPUs, {machine['date'][:10]}, "
               f"{document['mode']} mode")


def bar_chart(path: Path, title: str, labels: Sequence[str], values: Sequence[float | None],
              ylabel: str, subtitle: str | None = None, goal: float | None = None,
              value_format: str = "{:,.0f}", colors: Sequence[str] | None = None) -> Path:
    """One bar per system; unmeasured values (None) are left blank; ``goal`` draws a dashed line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    heights = [v or 0 for v in values]
    bars = ax.bar(labels, heights, color=colors)
    for bar, v in zip(bars, values):
        if v is not None:
            ax.annotate(value_format.format(v), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=8)
    if goal is not None:
        ax.axhline(goal, linestyle="--", color="grey", linewidth=1)
        ax.annotate(f"goal {value_format.format(goal)}", (0, goal), xycoords=("axes fraction", "data"),
                    va="bottom", fontsize=8, color="grey")
    ax.set_ylabel(ylabel)
    ax.yaxis.set_major_formatter(_pyplot().FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.tick_params(axis="x", labelsize=8)
    return _finish(fig, ax, path, title, subtitle)


def grouped_bar_chart(path: Path, title: str, groups: Sequence[str],
                      series: Mapping[str, Sequence[float | None]], ylabel: str,
                      subtitle: str | None = None, log_scale: bool = False,
                      goal: float | None = None, value_format: str = "{:.1f}") -> Path:
    """Bars grouped by system (``groups``), one bar per series in each group (e.g. p50 and p99)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, [v or 0 for v in values], width, label=name)
        for bar, v in zip(bars, values):
            if v is not None:
                ax.annotate(value_format.format(v), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
    if goal is not None:
        ax.axhline(goal, linestyle="--", color="grey", linewidth=1, label=f"goal {value_format.format(goal)}")
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
    ax.set_ylabel(ylabel)
    if log_scale:
        ax.set_yscale("log")
    ax.legend(fontsize=8)
    return _finish(fig, ax, path, title, subtitle)


def cdf_chart(path: Path, title: str, series: Mapping[str, Sequence[float]], xlabel: str,
              subtitle: str | None = None, log_x: bool = True) -> Path:
    """Empirical CDF per system: how often a request finished within x."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in series.items():
        if not values:
            continue
        ordered = sorted(values)
        n = len(ordered)
        ax.step(ordered, [(i + 1) / n for i in range(n)], where="post", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of requests")
    if log_x:
        ax.set_xscale("log")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3, which="both")
    return _finish(fig, ax, path, title, subtitle)


def points_chart(path: Path, title: str, series: Mapping[str, Sequence[float]], ylabel: str,
                 subtitle: str | None = None, goal: float | None = None) -> Path:
    """Every repetition as a dot, one column per system (failover times)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(series)
    for i, name in enumerate(names):
        values = series[name]
        ax.scatter([i] * len(values), values, alpha=0.7)
        if values:
            ax.hlines(statistics.median(values), i - 0.25, i + 0.25, color="black", linewidth=1)
    if goal is not None:
        ax.axhline(goal, linestyle="--", color="grey", linewidth=1)
        ax.annotate(f"goal {goal:g}", (0, goal), xycoords=("axes fraction", "data"), va="bottom",
                    fontsize=8, color="grey")
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_xlim(-0.6, len(names) - 0.4)
    ax.set_ylim(bottom=0)
    ax.set_ylabel(ylabel)
    return _finish(fig, ax, path, title, subtitle)


def line_chart(path: Path, title: str, series: Mapping[str, Sequence[tuple[float, float]]],
               xlabel: str, ylabel: str, subtitle: str | None = None, log_x: bool = True,
               log_y: bool = True, references: Mapping[str, float] | None = None) -> Path:
    """One line of (x, y) points per system (e.g. throughput against batch size); ``references``
    are drawn as dashed horizontal lines (a peer's published figure, a goal)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.5, 4) if references else (7, 4))
    for name, points in series.items():
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=name)
    for (name, y), colour in zip((references or {}).items(), ("black", "grey", "dimgrey", "silver")):
        ax.axhline(y, linestyle="--", linewidth=1, color=colour, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log_x:
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    # With references there are many entries: beside the plot, not over its lines.
    ax.legend(fontsize=8, **({"loc": "center left", "bbox_to_anchor": (1.01, 0.5)} if references else {}))
    return _finish(fig, ax, path, title, subtitle)
