"""docs/BENCHMARKS.md, regenerated from one ``bench all`` report.

Why generated: a hand-kept benchmarks page drifts — a figure gets updated in
one table and not in the summary, a target is quietly dropped when it is not
met, the machine it ran on is forgotten. Here every number on the page comes
from one report (``docs/benchmarks.json``), every target comes from
:mod:`gliding_actors.bench._targets` (declared once, for every suite), and
"met" is decided by one rule for all of them. A figure the run did not produce
is shown as *not measured*, a suite that could not run as *skipped* with its
reason, a suite that raised as *error* with the message — none of them is left
out, because leaving a target out is the dishonest way to meet it.

What a number cannot say — what the workload is, why a target is out of
reach, what earlier runs on quieter machines gave — lives in Markdown notes,
one per entry, in ``docs/benchmarks/notes/<entry>.md`` (``_intro.md`` opens
the page). They are files rather than strings in code because they are prose:
written and reviewed as Markdown, beside the page they feed, and changed
without touching the renderer. The page says, at its top, that it is generated
and where to edit.

``gliding-actors bench render REPORT.json [--docs PATH]`` rebuilds the page
from a saved report without rerunning anything.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gliding_actors.bench._all import ENTRIES, FORMAT, REPO_ROOT
from gliding_actors.bench._targets import FIGURES, SECTIONS, TARGETS, Figure, Target
from gliding_actors.errors import InvalidInput

__all__ = [
    "NOTES_DIR",
    "image_links",
    "judge",
    "load_report",
    "lookup",
    "render",
    "validate",
    "write_docs",
]

NOTES_DIR = REPO_ROOT / "docs" / "benchmarks" / "notes"
IMG_DIR = REPO_ROOT / "docs" / "img"

_MISSING = object()


# -- reading the report --------------------------------------------------------


def validate(report: object) -> dict[str, Any]:
    """The report as a plain JSON object, or ``InvalidInput`` saying what is wrong (nothing is written then)."""
    if not isinstance(report, dict):
        raise InvalidInput(f"a bench all report is a JSON object, not {type(report).__name__}")
    if report.get("format") != FORMAT:
        raise InvalidInput(f"report format {report.get('format')!r} is not {FORMAT} (made by another version?)")
    for key, kind in (("machine", dict), ("suites", dict), ("command", str), ("started_at", str)):
        if not isinstance(report.get(key), kind):
            raise InvalidInput(f"the report's {key!r} is missing or not a {kind.__name__}")
    for name, record in report["suites"].items():
        if not isinstance(record, dict) or sum(k in record for k in ("result", "error", "skipped")) != 1:
            raise InvalidInput(f"suite {name!r}: a record has exactly one of result, error, skipped")
    # one JSON round trip: the page is rendered from exactly what the JSON file holds
    # (an in-memory report may still have int keys, tuples, ...)
    plain: dict[str, Any] = json.loads(json.dumps(report, default=str))
    return plain


def load_report(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot read the report {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    return validate(data)


def lookup(result: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``a|b``: the first alternative present), or ``_MISSING``."""
    for alternative in path.split("|"):
        node = result
        for part in alternative.split("."):
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            else:
                node = _MISSING
                break
        if node is not _MISSING:
            return node
    return _MISSING


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def judge(target: Target, value: Any, result: Any) -> bool | None:
    """Met (True), not met (False), or not measured (None: no value, or no reference to compare with)."""
    if value is _MISSING or value is None:
        return None
    bound: Any = target.threshold
    if target.ref is not None:
        bound = lookup(result, target.ref)
        if bound is _MISSING or bound is None:
            return None
    if isinstance(bound, bool) or isinstance(value, bool):
        return (value is bound) if target.op == "==" else None
    v, b = _number(value), _number(bound)
    if v is None or b is None:
        return None
    if target.op == ">=":
        return v >= b
    if target.op == "<=":
        return v <= b
    return v == b


# -- formatting ----------------------------------------------------------------


def fmt(value: Any, unit: str = "") -> str:
    """A figure as a reader wants it: thousands separated, three significant digits, its unit."""
    if value is _MISSING or value is None:
        return "—"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = f"{value:,}"
    elif isinstance(value, float):
        if not math.isfinite(value):
            text = str(value)
        elif abs(value) >= 1000:
            text = f"{value:,.0f}"
        elif abs(value) >= 100:
            text = f"{value:.1f}".rstrip("0").rstrip(".")
        elif value == 0:
            text = "0"
        else:
            text = f"{value:.3g}"
    elif isinstance(value, list | tuple):
        text = " / ".join(fmt(v) for v in value)
    else:
        text = str(value)
    return f"{text} {unit}".strip() if unit and text != "—" else text


def _met_cell(verdict: bool | None) -> str:
    return "yes" if verdict is True else "**no**" if verdict is False else "not measured"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _seconds(value: Any) -> str:
    number = _number(value)
    if number is None:
        return "—"
    if number < 60:
        return f"{number:.1f} s"
    minutes, seconds = divmod(round(number), 60)
    return f"{minutes} min {seconds:02d} s"


# -- the page ------------------------------------------------------------------


def _target_of(entry: str, figure: Figure) -> tuple[str, Target] | None:
    targets = TARGETS.get(entry, {})
    for key in (figure.ratio, figure.key):
        if key is not None and key in targets:
            return key, targets[key]
    return None


def _figure_rows(entry: str, result: Any) -> list[list[str]]:
    rows: list[list[str]] = []
    for figure in FIGURES.get(entry, ()):
        value = lookup(result, figure.key)
        baseline = lookup(result, figure.baseline) if figure.baseline else _MISSING
        if not figure.show_ratio:
            ratio = _MISSING
        elif figure.ratio is not None:
            ratio = lookup(result, figure.ratio)
        else:
            v, b = _number(value), _number(baseline)
            ratio = round(v / b, 3) if v is not None and b is not None and b != 0.0 else _MISSING
        found = _target_of(entry, figure)
        if found is None:
            target_text, met = "—", "—"
        else:
            key, target = found
            target_text = target.text()
            met = _met_cell(judge(target, lookup(result, key), result))
        base_unit = figure.unit if figure.baseline_unit is None else figure.baseline_unit
        base_text = f"{figure.baseline_label}: {fmt(baseline, base_unit)}" if figure.baseline else "—"
        rows.append([figure.label, fmt(value, figure.unit), base_text, fmt(ratio, figure.ratio_unit), target_text, met])
    return rows


def _glance_label(figure: Figure, key: str) -> str:
    if key == figure.ratio and figure.baseline:
        return f"{figure.label}, ratio to {figure.baseline_label}"
    if key == figure.ratio:
        return f"{figure.label}, ratio"
    return figure.label


def _unit(entry: str, key: str) -> str:
    for figure in FIGURES.get(entry, ()):
        if key == figure.ratio:
            return figure.ratio_unit
        if key == figure.key:
            return figure.unit
    return ""


def _label(entry: str, key: str) -> str:
    return next((_glance_label(f, key) for f in FIGURES.get(entry, ()) if key in (f.key, f.ratio)), key)


def _glance_rows(report: Mapping[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    suites: Mapping[str, Any] = report["suites"]
    for entry in _entry_order(report):
        for key, target in TARGETS.get(entry, {}).items():
            record = suites.get(entry)
            label = _label(entry, key)
            if record is None:
                value, met = "—", "not measured (not in this run)"
            elif "skipped" in record:
                value, met = "—", "not measured (skipped)"
            elif "error" in record:
                value, met = "—", "not measured (error)"
            else:
                found = lookup(record["result"], key)
                value = fmt(found, _unit(entry, key))
                met = _met_cell(judge(target, found, record["result"]))
            rows.append([entry, f"{label} (`{key}`)", value, target.text(), met])
    return rows


def _entry_order(report: Mapping[str, Any]) -> list[str]:
    known = [entry.name for entry in ENTRIES]
    return known + [name for name in report["suites"] if name not in known]


def _header(report: Mapping[str, Any], report_path: Path | None, docs_path: Path) -> list[str]:
    machine: Mapping[str, Any] = report["machine"]
    git: Mapping[str, Any] = machine.get("git") or {}
    packages: Mapping[str, Any] = machine.get("packages") or {}
    source = _display(report_path) if report_path is not None else "REPORT.json"
    commit = git.get("commit")
    end: Mapping[str, Any] = machine.get("git_end") or {}
    commit_text = (
        f"`{commit[:12]}`"
        + (f" with {git['modified_files']} modified files in the tree" if git.get("modified_files") else "")
        + (
            f"; at the end `{str(end['commit'])[:12]}` with {end.get('modified_files', 0)} modified files"
            if end.get("commit") and (end["commit"], end.get("modified_files")) != (commit, git.get("modified_files"))
            else ""
        )
        if commit else f"unknown ({git.get('reason', 'no git')})"
    )
    affinity = machine.get("cpu_affinity")
    cores = f"{machine.get('cpu_count')} cores" + (f" ({affinity} usable by the process)" if affinity is not None else "")
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `gliding-actors bench render` from " + source + ". Do not edit by hand:"
        " prose lives in docs/benchmarks/notes/*.md, targets in gliding_actors/bench/_targets.py. -->",
        "",
        (f"*Generated from `{source}` — rebuild with `gliding-actors bench render {source}`;"
        " rerun everything with `gliding-actors bench all --json --out docs/benchmarks.json`.*"),
        "",
    ]
    lines += _notes("_intro")
    lines += [
        "## This run",
        "",
        f"- **Command:** `{report['command']}`" + (" (quick sizes)" if report.get("quick") else ""),
        f"- **When:** {report['started_at']} → {report.get('finished_at', '?')}, {_seconds(report.get('wall_s'))} wall",
        (f"- **Machine:** {machine.get('cpu_model', '?')}; {cores};"
        f" {fmt(machine.get('memory_total_gib'), 'GiB')} memory ({fmt(machine.get('memory_available_gib'), 'GiB')}"
        " available at the start)"),
        f"- **Python:** {machine.get('python_implementation', '')} {machine.get('python', '?')} on {machine.get('platform', '?')}",
        (f"- **Load average (1/5/15 min):** {fmt(machine.get('load_average_start'))} at the start,"
        f" {fmt(machine.get('load_average_end'))} at the end — the machine is shared; ratios against a"
        " same-run baseline move much less than absolute figures"),
        f"- **Commit:** {commit_text}",
        "- **Packages:** " + ", ".join(f"{name} {version}" for name, version in packages.items() if version)
        + (
            "; not installed: " + ", ".join(name for name, version in packages.items() if not version)
            if any(not version for version in packages.values()) else ""
        ),
        "",
    ]
    status_rows = []
    for entry in _entry_order(report):
        record = report["suites"].get(entry)
        if record is None:
            status_rows.append([entry, "skipped: not in this run", "—", "—"])
        elif "skipped" in record:
            status_rows.append([entry, f"skipped: {record['skipped']}", "—", "—"])
        else:
            status = "ran" if "result" in record else f"**error**: {record['error']}"
            mode = "quick" if record.get("quick") else "full"
            status_rows.append([entry, status, mode, _seconds(record.get("wall_s"))])
    lines += _table(["suite", "status", "sizes", "wall time"], status_rows)
    lines += [
        "",
        "## Targets at a glance",
        "",
        ("Every target set for a benchmark figure (declared in gliding_actors/bench/_targets.py), judged on this"
        " run's value. Details, baselines and the reasons behind each **no** are in the suite's section below."),
        "",
    ]
    lines += _table(["suite", "figure", "value", "target", "met"], _glance_rows(report))
    lines.append("")
    return lines


def _notes(entry: str, notes_dir: Path | None = None) -> list[str]:
    path = (notes_dir or NOTES_DIR) / f"{entry}.md"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return []
    return [text, ""] if text else []


def _display(path: Path) -> str:
    """A path as a command run from the checkout would take it: relative to the repository when inside it."""
    resolved = path.resolve()
    return resolved.relative_to(REPO_ROOT).as_posix() if resolved.is_relative_to(REPO_ROOT) else resolved.as_posix()


def _relative(target: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(target.resolve(), base.resolve())).as_posix()
    except ValueError:  # another drive
        return target.resolve().as_posix()


def _section(entry: str, record: Mapping[str, Any] | None, docs_path: Path, notes_dir: Path | None) -> list[str]:
    section = SECTIONS.get(entry)
    title = section.title if section else entry
    lines = [f"## {title} — `{section.command if section else 'gliding-actors bench ' + entry + ' --json'}`", ""]
    if record is None:
        lines += ["*Skipped: not in this run.*", ""]
    elif "skipped" in record:
        lines += [f"*Skipped: {record['skipped']}*", ""]
    elif "error" in record:
        lines += [
            f"**Error** after {_seconds(record.get('wall_s'))}: `{_cell(str(record['error']))}`",
            "",
            "```",
            str(record.get("traceback", "")).rstrip(),
            "```",
            "",
        ]
    else:
        mode = "Quick sizes" if record.get("quick") else "Full sizes"
        options = record.get("options") or {}
        opts = "".join(f", {k} = `{v}`" for k, v in options.items())
        lines += [
            (f"{mode}{opts}; {_seconds(record.get('wall_s'))} wall;"
            f" load average after it {fmt(record.get('load_average_after'))}."),
            "",
        ]
    result = record.get("result") if record is not None else None
    if result is not None and FIGURES.get(entry):
        lines += _table(["figure", "value", "baseline (same run unless marked)", "ratio", "target", "met"], _figure_rows(entry, result))
        lines.append("")
    elif result is None and TARGETS.get(entry):
        rows = [
            [_label(entry, key), "—", target.text(), "not measured"]
            for key, target in TARGETS[entry].items()
        ]
        lines += _table(["figure", "value", "target", "met"], rows)
        lines.append("")
    if result is not None:
        extra = _EXTRAS.get(entry)
        if extra is not None:
            lines += extra(result, docs_path)
        elif not FIGURES.get(entry):
            lines += _scalars(result)
    lines += _notes(entry, notes_dir)
    return lines


def _scalars(result: Any) -> list[str]:
    """A suite without declared figures (scaling, a new one): its top-level numbers, as they came."""
    if not isinstance(result, Mapping):
        return [f"Result: `{_cell(json.dumps(result))[:500]}`", ""]
    rows = [[key, fmt(value)] for key, value in result.items() if isinstance(value, int | float | str | bool)]
    return [*_table(["figure", "value"], rows), ""] if rows else []


# -- suite-specific tables -----------------------------------------------------


def _context_extra(result: Any, _docs: Path) -> list[str]:
    budgets: Mapping[str, Any] = result.get("budgets") or {}
    rows = []
    for budget, at in budgets.items():
        bm25, fusion = at["baselines"]["bm25"], at["baselines"]["fusion"]
        bold = "**" if budget == "1000" else ""
        rows.append([
            f"{bold}{int(budget):,}{bold}", fmt(at["any"]), fmt(at["all"]),
            f"{fmt(bm25['any'])} / {fmt(bm25['all'])}", f"{fmt(fusion['any'])} / {fmt(fusion['all'])}",
            f"{100 * at['margin_any']:+.1f} / {100 * at['margin_all']:+.1f}",
            f"{fmt(at['tokens_mean'])} ({100 * at['share_of_history']:.1f} %)",
            f"{fmt(at['latency_p50_ms'])} / {fmt(at['latency_p95_ms'])}",
        ])
    lines = [
        (f"{fmt(result.get('questions'))} questions from {fmt(result.get('conversations'))} conversations;"
        f" embedder `{result.get('embedder')}`, counter `{result.get('counter')}`; full history"
        f" {fmt(result.get('full_history_tokens_mean'))} tokens on average."),
        "",
        *_table(["B", "any", "all", "BM25 any / all", "BM25+dense RRF any / all", "margin any / all (points)",
                 "tokens mean (share of history)", "p50 / p95 ms"], rows),
        "",
    ]
    categories = (budgets.get("1000") or {}).get("by_category") or {}
    names = {"1": "multi-hop", "2": "temporal", "3": "open-domain", "4": "single-hop"}
    if categories:
        parts = [
            f"{names.get(cat, cat)} {fmt(c['any'])} / {fmt(c['all'])} (BM25 any {fmt(c['bm25_any'])})"
            for cat, c in categories.items()
        ]
        lines += ["At B = 1,000 by category (any / all): " + "; ".join(parts) + ".", ""]
    return lines


def _tokens_extra(result: Any, _docs: Path) -> list[str]:
    rows = []
    for name in ("planning", "reviewing", "high_churn"):
        w = result.get(name)
        if not isinstance(w, Mapping):
            continue
        rows.append([
            name.replace("_", " "), fmt(w.get("agents")), f"{w.get('reads_per_round')} : {w.get('writes_per_round')}",
            fmt(w.get("reads")), f"{fmt(w.get('hits'))} / {fmt(w.get('misses'))}", fmt(w.get("baseline_tokens"), "tokens"),
            fmt(w.get("ours_tokens")), f"**{fmt(w.get('saved_pct'))} %**", f"{fmt(w.get('published_pct'))} %",
            fmt(w.get("consistent")),
        ])
    first: Mapping[str, Any] = next((result[n] for n in ("planning", "reviewing", "high_churn") if isinstance(result.get(n), Mapping)), {})
    return [
        (f"{fmt(first.get('rounds'))} rounds each, seed {result.get('seed')}, `{result.get('runtime')}` runtime,"
        f" counter `{first.get('counter')}`."),
        "",
        *_table(["workload", "agents", "reads : writes per round", "reads", "hits / misses", "re-send every read",
                 "ours", "saved", "agent-coherence (published)", "consistent"], rows),
        "",
    ]


def _team_extra(result: Any, docs_path: Path) -> list[str]:
    from gliding_actors.bench._team_plots import PLOTS

    def lat(size: Mapping[str, Any], op: str) -> str:
        o = (size.get("latency") or {}).get(op)
        return f"{fmt(o['p50_us'] / 1000)} / {fmt(o['p99_us'] / 1000)}" if o else "—"

    rows = []
    for size in result.get("sizes") or []:
        roles = size.get("roles") or {}
        hit = size.get("hit_rate")
        rows.append([
            str(size.get("agents")), "/".join(str(roles.get(r, 0)) for r in ("DA", "CA", "PA", "AA", "SA")),
            fmt(size.get("ops")), fmt(size.get("throughput_ops_s")), fmt(size.get("messages_per_op")),
            fmt(hit) if roles.get("CA") or roles.get("AA") or roles.get("PA") or roles.get("SA") else "—",
            lat(size, "context"), lat(size, "write"), lat(size, "read"), lat(size, "turn"),
            fmt(size.get("memory_per_agent_kib"), "KiB"),
        ])
    lines = [
        *_table(["agents", "DA/CA/PA/AA/SA", "ops", "ops/s", "msgs/op", "read hit rate", "context p50 / p99 ms",
                 "write p50 / p99 ms", "read p50 / p99 ms", "turn p50 / p99 ms", "RSS Δ / N"], rows),
        "",
        (f"Load average when the team suite finished: {fmt(result.get('load_average'))}; every op type's p50 and p99"
        " at every size are in the report."),
        "",
    ]
    if result.get("plots_missing"):
        lines += [
            (f"This run drew no plots ({result['plots_missing']}); the images below are drawn from"
            " `docs/img/team.json`, which the run wrote, by"
            " `python gliding_actors/bench/_team_plots.py docs/img/team.json` with a Python that has matplotlib —"
            " rerun that if they predate the run."),
            "",
        ]
    titles = {"throughput": "Team throughput", "latency": "Latency per op type", "messages": "Protocol messages per op",
              "memory": "Memory per agent"}
    for name in PLOTS:
        path = IMG_DIR / f"team_{name}.png"
        if path.is_file():
            lines.append(f"![{titles.get(name, name)}]({_relative(path, docs_path.parent)})")
        else:
            lines.append(f"*(plot {path.name} missing: run `gliding-actors bench team` with matplotlib installed)*")
    lines.append("")
    return lines


def _range(values: Any) -> str:
    return "–".join(fmt(v) for v in values) if isinstance(values, list) and len(values) == 2 else fmt(values)


def _replay_extra(result: Any, _docs: Path) -> list[str]:
    sim, threads = result.get("sim") or {}, result.get("threads") or {}
    where = result.get("where_time_goes_sim") or {}
    shares = where.get("share_of_time") or {}
    lines = [
        (f"Trace: {fmt(result.get('trace_events'))} ops ({fmt(result.get('scenario_steps'))} steps with the"
        f" `advance`s), recorded in {_seconds(result.get('record_s'))}, converted in"
        f" {_seconds(result.get('convert_s'))}. Events/s: median of {fmt(sim.get('repeats'))} runs on sim"
        f" (range {_range(sim.get('events_per_s_range'))}), {fmt(threads.get('repeats'))} on threads"
        f" (range {_range(threads.get('events_per_s_range'))}); {fmt(sim.get('protocol_messages'))} protocol messages"
        " on sim."),
        "",
    ]
    if shares:
        lines += [
            f"Where a profiled sim replay's {_seconds(where.get('profiled_s'))} went (shares of `replay()`,"
            " overlapping): " + ", ".join(f"{k.replace('_', ' ')} {100 * v:.0f} %" for k, v in shares.items()) + ".",
            "",
        ]
    return lines


def _reliability_extra(result: Any, _docs: Path) -> list[str]:
    seconds = result.get("seconds") or {}
    if not seconds:
        return []
    return ["Time per harness: " + ", ".join(f"{k} {_seconds(v)}" for k, v in seconds.items())
            + f"; `ok` = {fmt(result.get('ok'))}.", ""]


_EXTRAS = {
    "context": _context_extra,
    "context-hash": _context_extra,
    "tokens": _tokens_extra,
    "team": _team_extra,
    "replay": _replay_extra,
    "reliability": _reliability_extra,
}


def render(
    report: Mapping[str, Any], *, docs_path: Path, report_path: Path | None = None, notes_dir: Path | None = None
) -> str:
    """The whole page as Markdown (``docs_path`` only places relative links; nothing is written)."""
    plain = validate(report)
    lines = _header(plain, report_path, docs_path)
    for entry in _entry_order(plain):
        lines += _section(entry, plain["suites"].get(entry), docs_path, notes_dir)
    return "\n".join(lines).rstrip() + "\n"


def write_docs(
    report: Mapping[str, Any], docs_path: Path, *, report_path: Path | None = None, notes_dir: Path | None = None
) -> Path:
    """Render, then replace ``docs_path`` in one step; a refused report leaves the old page as it was."""
    text = render(report, docs_path=docs_path, report_path=report_path, notes_dir=notes_dir)
    docs_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = docs_path.with_name(docs_path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(docs_path)
    return docs_path


def image_links(markdown: str) -> list[str]:
    """The targets of every ``![alt](target)`` in a page (the test checks each is a real PNG)."""
    import re

    return re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", markdown)
