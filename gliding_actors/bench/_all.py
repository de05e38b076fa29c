"""``gliding-actors bench all``: every benchmark suite in one run, one JSON report.

Users judge the system as a whole, so the whole thing is measured in one
sitting, on one machine, and written down with that machine: the report says
how many cores the process could use, how much memory there was, what else was
running (load average at the start, after every suite and at the end), which
versions of the libraries did the work and which commit was measured. Figures
from different machines or different loads are not comparable; the report
makes it possible to tell.

A suite that raises does not end the run: its error (type, message, the end of
the traceback) is recorded in its place and the others go on; the command exits
1 at the end so a script notices. A suite that cannot run here (no Ray for
``scaling``; no ``--data FILE`` for ``context`` and ``context-hash``, since
LoCoMo is not shipped) is recorded as
``{"skipped": reason}``, the reason saying what is missing and where to get
it: a skip is not a failure, and it is never silent.

The report's shape (``docs/benchmarks.json`` is one)::

    {"format": 1, "command": "...", "started_at": "...", "finished_at": "...",
     "wall_s": ..., "quick": false, "only": null, "machine": {...},
     "suites": {"runtime": {"suite": "runtime", "quick": false, "options": {},
                            "wall_s": 3.1, "load_average_after": [...],
                            "result": {...}},
                "l0": {"error": "...", "traceback": "...", "wall_s": ...},
                "scaling": {"skipped": "..."}, ...},
     "errors": ["l0"]}

:mod:`gliding_actors.bench._report` turns it into docs/BENCHMARKS.md.
"""

from __future__ import annotations

import gc
import importlib
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gliding_actors.bench import SUITES, load_suite
from gliding_actors.errors import InvalidInput

__all__ = [
    "ENTRIES",
    "FORMAT",
    "REPO_ROOT",
    "Entry",
    "entry_names",
    "machine_info",
    "parse_only",
    "run_all",
]

#: version of the report's layout; the renderer refuses others
FORMAT = 1

#: the checkout this module lives in (git commit, default output paths)
REPO_ROOT = Path(__file__).resolve().parents[2]

#: packages outside our own requirements whose versions change figures
#: (an optional token counter, the benchmark-only baselines, the plots, Ray)
_OPTIONAL_PACKAGES = ("tiktoken", "gensim", "matplotlib", "prometheus-client", "ray")


@dataclass(frozen=True)
class Entry:
    """One line of the run: a suite with fixed options.

    ``always_quick`` is for a suite whose figures are defined at its
    ``--quick`` sizes (reliability: its full sizes take about 40 minutes, its
    run-time target is the five-minute run). ``skip_reason(options)`` — given the options the user
    passed, before the entry's own are added — returns why the entry cannot run
    on this machine, or ``None``; it is asked before the suite is imported.
    """

    name: str
    suite: str
    options: Mapping[str, Any] = field(default_factory=dict)
    always_quick: bool = False
    skip_reason: Callable[[Mapping[str, Any]], str | None] | None = None


def _context_data(options: Mapping[str, Any]) -> str | None:
    from gliding_actors.bench._context import LOCOMO_SOURCE

    data = options.get("data")
    if not data:
        return f"no LoCoMo data given (bench all --data FILE). {LOCOMO_SOURCE}."
    path = Path(data)
    if not path.is_file():
        return f"no LoCoMo data at {path} (bench all --data FILE). {LOCOMO_SOURCE}."
    return None


def _context_hash(options: Mapping[str, Any]) -> str | None:
    missing = _context_data(options)
    if missing is not None:
        return missing
    if options.get("embedder") == "hash":
        return "the context entry already runs with --embedder hash"
    return None


def _scaling(options: Mapping[str, Any]) -> str | None:
    if "scaling" not in SUITES:
        return "no 'scaling' suite is registered in gliding_actors.bench.SUITES (it comes with the Ray backend)"
    try:
        importlib.import_module("ray")
    except ImportError as exc:
        return f"import ray failed ({exc}): pip install 'gliding-actors[ray]'"
    return None


#: every entry of the report, in the order they run: cheap layers first, the long replay last but one
ENTRIES: tuple[Entry, ...] = (
    Entry("runtime", "runtime"),
    Entry("l0", "l0"),
    Entry("l1", "l1"),
    Entry("l2", "l2"),
    Entry("l3", "l3"),
    Entry("coherence", "coherence"),
    Entry("hyperspace", "hyperspace"),
    Entry("context", "context", skip_reason=_context_data),
    Entry("context-hash", "context", options={"embedder": "hash"}, skip_reason=_context_hash),
    Entry("reliability", "reliability", always_quick=True),
    Entry("tokens", "tokens"),
    Entry("team", "team"),
    Entry("agents", "agents"),
    Entry("replay", "replay"),
    Entry("scaling", "scaling", skip_reason=_scaling),
)

#: options of ``bench all`` that reach a suite, by suite
_SUITE_OPTIONS: Mapping[str, tuple[str, ...]] = {"context": ("data", "embedder")}


def entry_names() -> list[str]:
    return [entry.name for entry in ENTRIES]


def parse_only(text: str | None) -> list[str] | None:
    """``--only a,b`` as entry names in run order; an unknown name is refused before anything runs."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    known = entry_names()
    unknown = [name for name in names if name not in known]
    if not names or unknown:
        raise InvalidInput(
            f"--only takes a comma-separated list of {', '.join(known)}; "
            + (f"unknown: {', '.join(unknown)}" if unknown else "got nothing")
        )
    return [name for name in known if name in names]


# -- the machine ---------------------------------------------------------------


def _meminfo(path: Path) -> dict[str, float | None]:
    fields: dict[str, float | None] = {"memory_total_gib": None, "memory_available_gib": None}
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return fields
    for key, name in (("MemTotal", "memory_total_gib"), ("MemAvailable", "memory_available_gib")):
        found = re.search(rf"^{key}:\s+(\d+)\s+kB", text, re.MULTILINE)
        if found:
            fields[name] = round(int(found.group(1)) / (1024 * 1024), 2)
    return fields


def _cpu_model(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or "unknown"
    for key in ("model name", "Hardware", "cpu model", "Processor"):
        found = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if found:
            return found.group(1).strip()
    return platform.processor() or "unknown"


def _versions() -> dict[str, str | None]:
    """Our version and every requirement's (from our own metadata, so the list follows pyproject), then the optional ones."""
    names: list[str] = []
    try:
        requires = importlib.metadata.requires("gliding-actors") or []
        own: str | None = importlib.metadata.version("gliding-actors")
    except importlib.metadata.PackageNotFoundError:
        requires, own = [], None
    for requirement in requires:
        if "extra ==" in requirement:
            continue
        found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
        if found and found.group(0) not in names:
            names.append(found.group(0))
    names += [name for name in _OPTIONAL_PACKAGES if name not in names]
    versions: dict[str, str | None] = {"gliding-actors": own}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _git(root: Path) -> dict[str, Any]:
    """The commit measured, and how many files differed from it (other work in the tree shows here)."""
    if not (root / ".git").exists():
        return {"commit": None, "reason": f"{root} is not a git checkout"}
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"commit": None, "reason": f"git failed: {exc}"}
    changed = [line for line in status.splitlines() if line.strip()]
    return {"commit": commit, "modified_files": len(changed)}


def _affinity() -> int | None:
    getter = getattr(os, "sched_getaffinity", None)
    return len(getter(0)) if getter is not None else None


def machine_info(
    *,
    loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg,
    proc: Path = Path("/proc"),
    root: Path = REPO_ROOT,
) -> dict[str, Any]:
    """What a reader needs to judge the figures: cores, memory, CPU, Python, platform, load, versions, commit."""
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": _affinity(),
        "cpu_model": _cpu_model(proc / "cpuinfo"),
        **_meminfo(proc / "meminfo"),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "load_average_start": [round(x, 2) for x in loadavg()],
        "packages": _versions(),
        "git": _git(root),
    }
    return info


# -- the run -------------------------------------------------------------------


def _error(exc: BaseException) -> dict[str, Any]:
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": tail[-4000:]}


def run_all(
    *,
    quick: bool = False,
    only: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
    command: str = "gliding-actors bench all",
    say: Callable[[str], None] = lambda _line: None,
    timer: Callable[[], float] = time.perf_counter,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg,
    entries: Sequence[Entry] | None = None,
) -> dict[str, Any]:
    """Run the chosen entries one after another and return the report (module docstring).

    ``say`` gets one line per entry as it starts and as it ends (the CLI prints
    them with rich); ``timer``, ``now`` and ``loadavg`` are injected so a test
    can pin what the report records. ``only`` names entries (see
    :func:`parse_only`); ``options`` are ``data`` and ``embedder``, passed to
    the suites that take them; ``entries`` defaults to :data:`ENTRIES`.
    """
    chosen = [entry for entry in (ENTRIES if entries is None else entries) if only is None or entry.name in only]
    given = {k: v for k, v in (options or {}).items() if v is not None}
    started_at = now()
    start = timer()
    report: dict[str, Any] = {
        "format": FORMAT,
        "command": command,
        "started_at": started_at.isoformat(timespec="seconds"),
        "quick": quick,
        "only": list(only) if only is not None else None,
        "machine": machine_info(loadavg=loadavg),
        "suites": {},
    }
    suites: dict[str, Any] = report["suites"]
    width = len(str(len(chosen)))
    for number, entry in enumerate(chosen, 1):
        tag = f"[{number:>{width}}/{len(chosen)}] {entry.name}"
        suite_quick = quick or entry.always_quick
        asked = {k: v for k, v in given.items() if k in _SUITE_OPTIONS.get(entry.suite, ())}
        reason = entry.skip_reason(asked) if entry.skip_reason is not None else None
        suite_options = {**asked, **entry.options}
        if reason is None and entry.suite not in SUITES:
            reason = f"no suite {entry.suite!r} is registered in gliding_actors.bench.SUITES"
        if reason is not None:
            suites[entry.name] = {"skipped": reason}
            say(f"{tag}  skipped: {reason}")
            continue
        mode = "quick" if suite_quick else "full"
        say(f"{tag}  running ({mode}{', always quick' if entry.always_quick and not quick else ''}) …")
        t0 = timer()
        record: dict[str, Any] = {"suite": entry.suite, "quick": suite_quick, "options": dict(suite_options)}
        try:
            result = load_suite(entry.suite)(suite_quick, **suite_options)
        except Exception as exc:  # noqa: BLE001 - a suite's failure is a finding of the run, recorded
            record.update(_error(exc))
        else:
            record["result"] = result
        record["wall_s"] = round(timer() - t0, 2)
        record["load_average_after"] = [round(x, 2) for x in loadavg()]
        suites[entry.name] = record
        if "error" in record:
            say(f"{tag}  ERROR after {record['wall_s']:.1f} s: {record['error']}")
        else:
            say(f"{tag}  done in {record['wall_s']:.1f} s")
        gc.collect()  # one suite's garbage is not the next one's pause
    report["machine"]["load_average_end"] = [round(x, 2) for x in loadavg()]
    # the tree may change under a long run (other work in the same checkout): say so
    report["machine"]["git_end"] = _git(REPO_ROOT)
    report["finished_at"] = now().isoformat(timespec="seconds")
    report["wall_s"] = round(timer() - start, 2)
    report["errors"] = [name for name, record in suites.items() if "error" in record]
    return report


def command_line(argv: Sequence[str] | None) -> str:
    """The exact command, as the header of the docs shows it."""
    import shlex

    words = list(argv) if argv is not None else sys.argv[1:]
    return shlex.join(["gliding-actors", *words])
