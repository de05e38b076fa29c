"""``gliding-actors bench all`` and ``gliding-actors bench render``: the command-line half of the benchmarks report.

Kept out of :mod:`gliding_actors.cli` so that file only dispatches. Exit codes
follow the rest of the CLI: 0 when every entry ran (or was skipped with a
reason), 1 when a suite raised (its error is in the report, the others ran),
2 when the input is refused (an unknown ``--only`` name, a report that is not
one) — and then nothing is written.

Where files go: a full run (no ``--only``, no ``--quick``) regenerates the
docs' own files, ``docs/benchmarks.json`` and ``docs/BENCHMARKS.md``, unless
``--out`` / ``--docs`` say otherwise; a partial or quick run's figures are not
the docs', so it writes only the files it is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gliding_actors.bench._all import REPO_ROOT, command_line, parse_only, run_all
from gliding_actors.errors import GlidingError

__all__ = ["DEFAULT_DOCS", "DEFAULT_REPORT", "bench_all", "bench_render"]

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

DEFAULT_REPORT = REPO_ROOT / "docs" / "benchmarks.json"
DEFAULT_DOCS = REPO_ROOT / "docs" / "BENCHMARKS.md"


def _write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report


def bench_all(args: argparse.Namespace) -> int:
    from gliding_actors.bench._report import write_docs

    err = Console(stderr=True, highlight=False)
    if args.report is not None:
        err.print(f"gliding-actors bench all: unexpected argument {args.report!r}")
        return EXIT_INVALID
    try:
        only = parse_only(args.only)
    except GlidingError as exc:
        err.print(f"gliding-actors bench all: {exc}")
        return EXIT_INVALID
    full = only is None and not args.quick
    out = Path(args.out) if args.out is not None else (DEFAULT_REPORT if full else None)
    docs = Path(args.docs) if args.docs is not None else (DEFAULT_DOCS if full else None)
    report = run_all(
        quick=args.quick,
        only=only,
        options={"data": args.data, "embedder": args.embedder},
        command=command_line(getattr(args, "argv", None)),
        say=err.print,
    )
    if out is not None:
        _write_json(out, report)
        err.print(f"report: {out}")
    if docs is not None:
        write_docs(report, docs, report_path=out)
        err.print(f"docs: {docs}")
    if out is None and docs is None and not args.json:
        err.print("a partial or quick run writes no file unless given --out / --docs")
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        table = Table(title="bench all")
        for column in ("entry", "status", "wall s"):
            table.add_column(column)
        for name, record in report["suites"].items():
            status = "skipped: " + record["skipped"] if "skipped" in record else record.get("error", "ok")
            table.add_row(name, status, f"{record['wall_s']:.1f}" if "wall_s" in record else "—")
        Console().print(table)
    if report["errors"]:
        err.print(f"[bold red]failed:[/] {', '.join(report['errors'])} (errors recorded in the report)")
        return EXIT_FAILED
    return EXIT_OK


def bench_render(args: argparse.Namespace) -> int:
    from gliding_actors.bench._report import load_report, write_docs

    err = Console(stderr=True, highlight=False)
    if args.report is None:
        err.print("gliding-actors bench render: give the report, e.g. bench render docs/benchmarks.json")
        return EXIT_INVALID
    try:
        report = load_report(Path(args.report))
        docs = Path(args.docs) if args.docs is not None else DEFAULT_DOCS
        write_docs(report, docs, report_path=Path(args.report))
    except GlidingError as exc:
        print(f"gliding-actors bench render: {exc}", file=sys.stderr)
        return EXIT_INVALID
    err.print(f"docs: {docs}")
    return EXIT_OK
