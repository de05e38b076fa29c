"""The team workload's plots (``docs/img/team_*.png``), drawn from ``bench team``'s figures.

Standard library and matplotlib only, on purpose: the figures are saved to
``docs/img/team.json`` by every ``bench team`` run, and this file redraws
the plots from them with any Python that has matplotlib, even one without
the library's own dependencies::

    python gliding_actors/bench/_team_plots.py docs/img/team.json

matplotlib is the ``bench`` extra (``pip install 'gliding-actors[bench]'``);
it is imported only when a plot is drawn. Without it :func:`write_plots`
raises ``ImportError`` naming what to install, and ``bench team`` still
reports its figures.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["IMG_DIR", "INSTALL_HINT", "PLOTS", "main", "pyplot", "write_plots"]

#: where the docs embed them from
IMG_DIR = Path(__file__).resolve().parents[2] / "docs" / "img"
#: the plots, written as IMG_DIR / f"team_{name}.png"
PLOTS: tuple[str, ...] = ("throughput", "latency", "messages", "memory")
INSTALL_HINT = "the team plots need matplotlib: pip install 'gliding-actors[bench]' (or pip install matplotlib)"


@contextmanager
def pyplot(hint: str = INSTALL_HINT) -> Iterator[Any]:
    """matplotlib's pyplot drawing to files only (Agg), every figure closed after; ImportError(``hint``)
    when matplotlib is missing."""
    try:  # by name: an optional extra, untyped to mypy when absent
        matplotlib = importlib.import_module("matplotlib")
        matplotlib.use("Agg")  # no display: files only
        plt = importlib.import_module("matplotlib.pyplot")
    except ImportError as exc:
        raise ImportError(hint) from exc
    try:
        yield plt
    finally:
        plt.close("all")


def write_plots(report: dict[str, Any], out_dir: str | Path = IMG_DIR) -> list[str]:
    """One PNG per entry of ``PLOTS`` from ``report["sizes"]``; the paths written."""
    sizes = report["sizes"]
    xs = [s["agents"] for s in sizes]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    with pyplot() as plt:

        def finish(fig: Any, ax: Any, name: str, ylabel: str, title: str) -> None:
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [str(x) for x in xs])
            ax.set_xlabel("agents (threads runtime, 2 cores)")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            path = out / f"team_{name}.png"
            fig.tight_layout()
            fig.savefig(path, dpi=110)
            written.append(str(path))

        fig, ax = plt.subplots(figsize=(6.4, 4))
        ax.plot(xs, [s["throughput_ops_s"] for s in sizes], marker="o")
        ax.set_ylim(bottom=0)
        finish(fig, ax, "throughput", "ops / s (all agents together)", "Team throughput")

        fig, ax = plt.subplots(figsize=(7.5, 4.8))
        ops = sorted({op for s in sizes for op in s["latency"]})
        palette = plt.get_cmap("tab20")  # eleven op types: the default cycle of ten would repeat a colour
        for k, op in enumerate(ops):
            points = [(s["agents"], s["latency"][op]) for s in sizes if op in s["latency"]]
            colour = palette((2 * k) % 20 if k < 10 else 2 * (k - 10) + 1)
            ax.plot([p[0] for p in points], [p[1]["p50_us"] / 1000 for p in points], marker="o", label=op,
                    color=colour)
            ax.plot([p[0] for p in points], [p[1]["p99_us"] / 1000 for p in points], linestyle=":", color=colour)
        ax.set_yscale("log")
        ax.legend(fontsize=7, ncol=3, title="p50 solid, p99 dotted", title_fontsize=7)
        finish(fig, ax, "latency", "latency (ms, log scale)", "Latency per op type")

        fig, ax = plt.subplots(figsize=(6.4, 4))
        ax.plot(xs, [s["messages_per_op"] for s in sizes], marker="o")
        ax.set_ylim(bottom=0)
        finish(fig, ax, "messages", "coherence protocol messages / op", "Protocol messages per op")

        fig, ax = plt.subplots(figsize=(6.4, 4))
        ax.plot(xs, [s["memory_per_agent_kib"] for s in sizes], marker="o", label="RSS delta / N")
        marginal = report.get("memory_marginal_kib_per_agent")
        if marginal is not None:
            ax.axhline(marginal, linestyle="--", color="grey", label=f"marginal (slope): {marginal:.0f} KiB")
        ax.set_yscale("log")
        ax.legend(fontsize=8)
        finish(fig, ax, "memory", "KiB per agent (log scale)", "Memory per agent")
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python gliding_actors/bench/_team_plots.py [FIGURES.json]``: redraw the plots beside the figures."""
    args = list(sys.argv[1:] if argv is None else argv)
    source = Path(args[0]) if args else IMG_DIR / "team.json"
    try:
        report = json.loads(source.read_text(encoding="utf-8"))
        paths = write_plots(report, source.parent)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        print(f"team plots: {exc}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
