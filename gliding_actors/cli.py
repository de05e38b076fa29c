"""The ``gliding-actors`` command line: replay, convert, demo, bench, skill.

Exit codes of ``replay`` (a contract, see docs/SCENARIO_FORMAT.md): 0 when every
expectation and invariant held for every seed, 1 on a failure, 2 when a file is
invalid (printed as ``FILE:LINE:COL: what is wrong``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from gliding_actors import __version__
from gliding_actors.errors import GlidingError, InvalidInput, ScenarioFormatError, show

__all__ = ["main"]

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def _seeds(text: str) -> list[int]:
    """``A..B`` (inclusive) or a single integer."""
    try:
        if ".." in text:
            lo, hi = (int(part) for part in text.split("..", 1))
            if hi < lo:
                raise ValueError
            return list(range(lo, hi + 1))
        return [int(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are N or A..B with A <= B, not {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gliding-actors",
        description="A CPU-cache-style memory for teams of LLM agents, built on actors.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    rp = sub.add_parser("replay", help="replay scenario files and check their expectations")
    rp.add_argument("files", nargs="+", metavar="FILE")
    group = rp.add_mutually_exclusive_group()
    group.add_argument("--seed", type=int, help="scheduling seed (default: the file's own)")
    group.add_argument("--seeds", type=_seeds, metavar="A..B", help="replay once per seed, inclusive")
    rp.add_argument("--runtime", choices=("sim", "threads", "ray"), default="sim")
    rp.add_argument(
        "--ray-address",
        metavar="HOST:PORT",
        help="with --runtime ray: the cluster to join (default: start a one-node cluster on 127.0.0.1 for the run)",
    )
    rp.add_argument("--json", action="store_true", help="print one JSON report instead of text")
    rp.add_argument("--record", metavar="OUT.jsonl", help="write every op's args and result as JSON lines")
    rp.add_argument("--timeout", type=float, default=None, metavar="S", help="per-op wait limit")
    rp.add_argument(
        "--diagram",
        metavar="OUT.html",
        help="write a sequence diagram of the protocol messages (sim; one file, the first seed)",
    )

    rep = sub.add_parser(
        "repair",
        help="repair a damaged L0 (a lost CURRENT, records that do not decode) on a copy, and say what was kept",
        description=(
            "Runs LevelDB's repair, then drops the L0 records that do not decode and rebuilds every index from"
            " the nodes that remain, and verifies the result. PATH is a memory's folder (its l0 and every L0"
            " shard are repaired) or one L0 folder. Works on a copy beside each L0 folder (NAME.repaired)"
            " unless --in-place. Exit 0: repaired and verified; 1: problems remain; 2: nothing to repair."
        ),
    )
    rep.add_argument("path", metavar="PATH")
    rep.add_argument("--in-place", action="store_true", help="repair the folders themselves, not copies")
    rep.add_argument("--json", action="store_true", help="print one JSON object")

    cv = sub.add_parser("convert", help="turn a recorded trace (JSON lines) into a format-v1 scenario")
    cv.add_argument("trace", metavar="TRACE")
    cv.add_argument("-o", "--output", required=True, metavar="FILE.yaml", help="the scenario to write (.yaml or .json)")
    cv.add_argument("--name", default=None, help="the scenario's name (default: the trace file's stem)")
    cv.add_argument(
        "--time-resolution",
        type=float,
        default=1.0,
        metavar="S",
        help="system-clock traces: idle gaps of at least S seconds become advance steps",
    )

    demo = sub.add_parser("demo", help="replay the bundled demo scenario with a step-by-step report")
    demo.add_argument("--runtime", choices=("sim", "threads"), default="sim")
    demo.add_argument("--seed", type=int, default=None)
    demo.add_argument(
        "--team",
        action="store_true",
        help="run the example PDCA team (examples/pdca_team) live, record, convert and replay its trace"
        " (its files are kept: see --out)",
    )
    demo.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help=(
            f"with --team: write the recorded trace, the converted scenario and the sequence diagram"
            f" ({', '.join(_TEAM_FILES)}) into DIR, created if missing. An existing DIR is written into,"
            " but refused (exit 2, nothing written) if one of those files is already there. Default: a"
            " new folder gliding-team-YYYYMMDD-HHMMSS in the current directory (-2, -3, ... appended if"
            " taken). The team's memory itself is a scratch folder, deleted at exit"
        ),
    )

    bench = sub.add_parser("bench", help="run a benchmark suite (ratios against a same-run baseline)")
    bench.add_argument("suite", help="suite name; 'list' shows them; 'all' runs every one; 'render REPORT.json' rebuilds the docs")
    bench.add_argument("report", nargs="?", default=None, metavar="REPORT.json", help="render: the report of a bench all run")
    bench.add_argument("--out", default=None, metavar="REPORT.json", help="all: write the JSON report here; profile: the Markdown (docs/PROFILE.md)")
    bench.add_argument("--docs", default=None, metavar="PATH", help="all, render: write the benchmarks doc here")
    bench.add_argument("--only", default=None, metavar="A,B", help="all: run only these entries")
    bench.add_argument("--json", action="store_true", help="print one JSON object")
    bench.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    bench.add_argument(
        "--data",
        default=None,
        metavar="FILE",
        help=(
            "context and scale (required), all: a LoCoMo-format file. LoCoMo is not shipped (CC BY-NC 4.0, evaluation only):"
            " download data/locomo10.json from https://github.com/snap-research/locomo (Maharana et al., ACL 2024,"
            " arXiv:2402.17753); without it bench all skips the context entries. bench scale is not part of"
            " bench all: it fills memories of 1,000 and 50,000 lines and sessions of 100 and 10,000 turns"
            " (minutes; --quick: 200/2,000 lines, 50/500 turns)"
        ),
    )
    bench.add_argument("--agents", type=int, default=None, metavar="N", help="profile: agents of the team workload")
    bench.add_argument("--ops", type=int, default=None, metavar="N", help="profile: ops of the team workload")
    bench.add_argument(
        "--embedder",
        default=None,
        choices=("hash", "onnx", "openai"),
        help=(
            "text embedder of a suite that embeds (context, scale, replay, hyperspace's real corpus; default: the"
            " library's, onnx). hyperspace caches the corpus' vectors under $XDG_CACHE_HOME/gliding-actors"
            " (~/.cache/gliding-actors): the first full run embeds 60,000 passages (minutes), later runs reuse them"
        ),
    )

    from gliding_actors._window_cli import add_window_parsers
    from gliding_actors.skills._cli import add_skill_parser

    add_skill_parser(sub)  # skill import|sign|verify|list (docs/SKILLS.md)
    add_window_parsers(sub)  # inspect | export | import
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # bench all records the exact command
    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    if any("\x00" in arg for arg in args.argv):  # no shell can pass one; os calls would raise ValueError
        err.print("error: an argument contains a NUL character", markup=False)
        return EXIT_INVALID
    try:
        return _dispatch(args)
    except (OSError, UnicodeError, RecursionError) as exc:
        # An input the command could not even read (a path the system refuses, a name that is
        # not text, nesting too deep to parse): the user's input is invalid, not the program.
        err.print(f"error: cannot read the input: {type(exc).__name__}: {show(str(exc))}", markup=False)
        return EXIT_INVALID


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "skill":
        from gliding_actors.skills._cli import run_skill

        return run_skill(args)
    if args.command in ("inspect", "export", "import"):
        from gliding_actors._window_cli import run_window

        return run_window(args)
    commands = {"replay": _replay, "demo": _demo, "bench": _bench, "convert": _convert, "repair": _repair}
    return commands[args.command](args)  # argparse accepts no other command


# -- replay --------------------------------------------------------------------


@contextlib.contextmanager
def _ray_session(runtime: str, address: str | None) -> Iterator[None]:
    """One connection to Ray for every replay of the run (each opens its memory over it).

    Joins ``address``, or has Ray start a local one-node cluster on 127.0.0.1,
    stopped when the run ends; a process already connected is used as it is.
    """
    if runtime != "ray":
        yield
        return
    from gliding_actors.runtime._ray_connect import connect, import_ray

    if import_ray().is_initialized():
        yield
        return
    connection = connect(address)
    try:
        yield
    finally:
        connection.close()


def _record_file(path: str | None) -> contextlib.AbstractContextManager[IO[str] | None]:
    """Where ``--record`` writes (nothing without it), for the caller's ``with``."""
    return contextlib.nullcontext() if path is None else open(path, "w", encoding="utf-8")


def _replay(args: argparse.Namespace) -> int:
    from gliding_actors.scenario import load_scenario

    out = Console(highlight=False, soft_wrap=True, emoji=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    scenarios = []
    invalid: list[str] = []
    for file in args.files:
        try:
            scenarios.append(load_scenario(file))
        except ScenarioFormatError as exc:
            invalid.append(str(exc))
    if invalid:
        if args.json:
            print(json.dumps({"ok": False, "invalid": invalid, "runs": []}, indent=2))
        for line in invalid:
            print(line, file=sys.stderr)
        return EXIT_INVALID

    seeds: list[int | None] = [args.seed] if args.seeds is None else list(args.seeds)
    if args.diagram is not None and args.runtime != "sim":
        print("gliding-actors replay: --diagram needs --runtime sim (only the simulator logs every message)", file=sys.stderr)
        return EXIT_INVALID
    if args.ray_address is not None and args.runtime != "ray":
        print("gliding-actors replay: --ray-address needs --runtime ray", file=sys.stderr)
        return EXIT_INVALID
    runs: list[Any] = []
    total = len(scenarios) * len(seeds)
    try:
        with _ray_session(args.runtime, args.ray_address):
            # each replay's own errors are reported inside: only Ray's start and stop get here
            return _replay_all(args, scenarios, seeds, runs, total, out, err)
    except GlidingError as exc:
        print(f"gliding-actors replay: {exc}", file=sys.stderr)
        return EXIT_INVALID


def _replay_all(
    args: argparse.Namespace,
    scenarios: list[Any],
    seeds: list[int | None],
    runs: list[Any],
    total: int,
    out: Console,
    err: Console,
) -> int:
    from gliding_actors.scenario import replay

    with _record_file(args.record) as record, Progress(console=err, transient=True, disable=total < 4) as bar:
        task = bar.add_task("replaying", total=total)
        for scenario in scenarios:
            for seed in seeds:
                try:
                    want_log = args.diagram is not None and not runs
                    run = replay(
                        scenario,
                        seed=seed,
                        runtime=args.runtime,
                        record=record,
                        op_timeout_s=args.timeout,
                        keep_log=want_log,
                    )
                    if want_log:
                        _write_diagram(args.diagram, run)
                except GlidingError as exc:
                    err.print(f"{scenario.path}: cannot replay: {type(exc).__name__}: {exc}", markup=False)
                    return EXIT_FAILED
                runs.append(run)
                bar.advance(task)
                if not args.json:
                    _print_run(out, run)
    ok = all(run.ok for run in runs)
    if args.json:
        print(json.dumps({"ok": ok, "invalid": [], "runs": [run.to_json() for run in runs]}, indent=2))
    else:
        passed = sum(run.ok for run in runs)
        out.print(f"{passed} passed, {len(runs) - passed} failed", markup=False)
    return EXIT_OK if ok else EXIT_FAILED


def _write_diagram(path: str, run: Any) -> None:
    from gliding_actors.scenario._diagram import diagram_data, render_html

    title = f"{run.name} (seed {run.seed})"
    data = diagram_data(run.protocol_log, run.step_marks, title)
    Path(path).write_text(render_html(data), encoding="utf-8")


# -- convert -------------------------------------------------------------------


def _l0_folders(path: Path) -> list[Path]:
    """The L0 folders under ``path``: a memory's l0 and its shards, or ``path`` itself."""
    from gliding_actors.l0 import SHARDS_DIR

    found = [path / "l0"] if (path / "l0").is_dir() else []
    shards = path / SHARDS_DIR
    if shards.is_dir():
        found += sorted(p for p in shards.iterdir() if p.is_dir() and not p.name.endswith(".repaired"))
    return found or [path]


def _repair(args: argparse.Namespace) -> int:
    from gliding_actors.l0._repair import repair_l0

    out = Console(highlight=False, soft_wrap=True, emoji=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    reports = []
    for folder in _l0_folders(Path(args.path)):
        try:
            reports.append(repair_l0(folder, in_place=args.in_place))
        except GlidingError as exc:
            err.print(f"error: {exc}", markup=False)
            return EXIT_INVALID
    if args.json:
        out.print(json.dumps({"reports": reports}, indent=2), markup=False)
    else:
        for report in reports:
            plural = "" if report["nodes"] == 1 else "s"
            out.print(
                f"{report['source']}: {report['nodes']} node{plural} and {report['tombstones']} tombstones kept,"
                f" {len(report['dropped'])} records dropped, {report['index_keys']} index keys rebuilt,"
                f" {report['lost_synced_batches']} acknowledged synced write batches missing;"
                f" the repaired database is {report['repaired']}",
                markup=False,
            )
            for key in report["dropped"]:
                out.print(f"  dropped (did not decode): {key}", markup=False)
            for problem in report["problems"]:
                out.print(f"  still wrong: {problem}", markup=False)
        if not args.in_place:
            out.print(
                "The originals are untouched. To use a repaired copy, move the original folder aside and give the"
                " copy its name, or run again with --in-place.",
                markup=False,
            )
    return EXIT_OK if all(not r["problems"] for r in reports) else EXIT_FAILED


def _convert(args: argparse.Namespace) -> int:
    """Trace → scenario; exit 2 when the trace is unreadable, 1 when the result would not load."""
    from gliding_actors.scenario import load_scenario_text
    from gliding_actors.scenario._convert import (
        ConvertOptions,
        convert_trace,
        read_trace,
        scenario_yaml,
    )

    try:
        header, lines = read_trace(args.trace)
        options = ConvertOptions(name=args.name or Path(args.trace).stem, time_resolution=args.time_resolution)
        scenario = convert_trace(header, lines, options)
    except GlidingError as exc:
        print(f"gliding-actors convert: {exc}", file=sys.stderr)
        return EXIT_INVALID
    out = Path(args.output)
    text = json.dumps(scenario, indent=2) + "\n" if out.suffix.lower() == ".json" else scenario_yaml(scenario)
    try:
        load_scenario_text(text, str(out))  # never write a file replay would refuse
    except ScenarioFormatError as exc:
        print(f"gliding-actors convert: the converted scenario does not load: {exc}", file=sys.stderr)
        return EXIT_FAILED
    out.write_text(text, encoding="utf-8")
    steps = scenario["steps"]
    print(f"wrote {out}: {len(scenario['agents'])} agents, {len(steps)} steps")
    return EXIT_OK


def _print_run(out: Console, run: Any) -> None:
    label = f"{run.file} seed={run.seed} runtime={run.runtime}"
    if run.ok:
        extra = f" hash={run.log_hash[:12]}" if run.log_hash else ""
        out.print(
            f"[green]PASS[/] {label} ({run.steps_run} steps, {len(run.outcomes)} ops, {run.messages} messages{extra})"
        )
        return
    failure = run.failure
    out.print(f"[red]FAIL[/] {label}")
    out.print(
        f"  {failure.file}:{failure.pos.line}: {failure.where}, seed {failure.seed}: {failure.what}", markup=False
    )
    if failure.expected is not None or failure.actual is not None:
        out.print(f"  expected: {json.dumps(failure.expected, default=repr)}", markup=False)
        out.print(f"  actual:   {json.dumps(failure.actual, default=repr)}", markup=False)
    if failure.recent:
        out.print("  last protocol messages:")
        for line in failure.recent:
            out.print(f"    {line}", markup=False)


# -- demo ----------------------------------------------------------------------


def _demo_files() -> list[Path]:
    here = Path(__file__).resolve().parent.parent / "scenarios" / "demo"
    return sorted(here.glob("*.yaml"))


def _demo(args: argparse.Namespace) -> int:
    from gliding_actors.scenario import load_scenario, replay
    from gliding_actors.scenario._model import OpStep, ParallelStep, Step
    from gliding_actors.scenario._replay import OpOutcome

    if args.team:
        return _demo_team(args)
    if args.out is not None:
        print(
            "gliding-actors demo: --out needs --team"
            " (the plain demo replays the bundled scenarios and writes no files)",
            file=sys.stderr,
        )
        return EXIT_INVALID
    out = Console(highlight=False, emoji=False)
    files = _demo_files()
    if not files:
        print(
            "gliding-actors demo: no bundled scenarios found beside the package (scenarios/demo/);"
            " run it from a source checkout installed with 'pip install -e .'",
            file=sys.stderr,
        )
        return EXIT_INVALID
    summary = Table(title="demo summary")
    for column in ("scenario", "seed", "steps", "ops", "messages", "result"):
        summary.add_column(column)
    all_ok = True
    for file in files:
        scenario = load_scenario(file)
        out.rule(f"{scenario.name}")
        if scenario.description:
            out.print(scenario.description.strip(), markup=False)
        table = Table(show_lines=False)
        for column in ("step", "agent", "op", "args", "result", ""):
            table.add_column(column, overflow="fold")

        def show(step: Step, outcomes: list[OpOutcome], table: Table = table) -> None:
            if isinstance(step, OpStep) and not outcomes:
                table.add_row(str(step.number), "", step.op, _brief(step.args), "", "[green]ok[/]")
            for outcome in outcomes:
                where = outcome.step.where.removeprefix("step ")
                if isinstance(step, ParallelStep):
                    where += " ∥"
                shown = (
                    f"{type(outcome.error).__name__}: {outcome.error}"
                    if outcome.error is not None
                    else _brief(outcome.result)
                )
                mark = "[green]ok[/]" if outcome.ok else "[red]FAIL[/]"
                table.add_row(where, outcome.step.agent or "", outcome.step.op, _brief(outcome.step.args), shown, mark)

        run = replay(scenario, seed=args.seed, runtime=args.runtime, on_step=show)
        out.print(table)
        if run.failure is not None:
            all_ok = False
            _print_run(out, run)
        summary.add_row(
            scenario.name,
            str(run.seed),
            str(run.steps_run),
            str(len(run.outcomes)),
            str(run.messages) if run.runtime == "sim" else "-",
            "[green]passed[/]" if run.ok else "[red]failed[/]",
        )
    out.print(summary)
    return EXIT_OK if all_ok else EXIT_FAILED


_TEAM_FILES = ("team.jsonl", "team.yaml", "team.html")  # demo --team: trace, scenario, diagram


class _OutDir:
    """Where ``demo --team`` keeps its files: checked before the team runs, undone if the run breaks.

    ``given`` and ``default`` refuse bad input (``InvalidInput``) before creating
    anything; the folders they create are remembered so ``undo`` can remove them
    (and the files written into them) when the team run fails with an exception,
    leaving no half-made folder behind.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.created: list[Path] = []  # folders made by us, outermost first

    @classmethod
    def default(cls, stamp: str) -> _OutDir:
        """A new folder ``./gliding-team-STAMP`` (``-2``, ``-3``, … when taken); never an existing one."""
        base = Path.cwd() / f"gliding-team-{stamp}"
        for n in range(1, 1000):
            path = base if n == 1 else base.with_name(f"{base.name}-{n}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            except OSError as exc:
                raise InvalidInput(f"cannot create {path} ({exc.strerror or exc}); pass --out DIR") from None
            out = cls(path)
            out.created.append(path)
            return out
        raise InvalidInput(f"{base}-N: no free name; pass --out DIR")

    @classmethod
    def given(cls, text: str) -> _OutDir:
        """``--out DIR``: an existing folder without our files, or a new one under a writable folder."""
        if not text.strip():
            raise InvalidInput("--out needs a folder name")
        path = Path(text).absolute()
        out = cls(path)
        if path.exists():
            if not path.is_dir():
                raise InvalidInput(f"--out {text}: {path} is not a folder")
            if not os.access(path, os.W_OK | os.X_OK):
                raise InvalidInput(f"--out {text}: {path} is not writable")
            taken = [name for name in _TEAM_FILES if os.path.lexists(path / name)]
            if taken:
                raise InvalidInput(
                    f"--out {text}: {path} already holds {', '.join(taken)}; "
                    "remove them or pass another folder (nothing was written)"
                )
            return out
        missing = [path]
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            missing.append(parent)
            parent = parent.parent
        if not parent.is_dir():
            raise InvalidInput(f"--out {text}: {parent} is not a folder")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise InvalidInput(f"--out {text}: cannot create a folder in {parent} (not writable)")
        for folder in reversed(missing):  # outermost first
            try:
                folder.mkdir()
            except OSError as exc:
                out.undo()
                raise InvalidInput(f"--out {text}: cannot create {folder} ({exc.strerror or exc})") from None
            out.created.append(folder)
        return out

    def undo(self) -> None:
        """Remove the files this run wrote and the folders it created (only if they are then empty)."""
        for name in _TEAM_FILES:
            with contextlib.suppress(OSError):
                (self.path / name).unlink()
        for folder in reversed(self.created):
            with contextlib.suppress(OSError):
                folder.rmdir()


def _demo_team(args: argparse.Namespace) -> int:
    """The example team on threads (recording), its trace converted, the scenario replayed on sim.

    The trace, the scenario and the diagram of the first seed's replay are kept
    in ``--out DIR`` (default: a new ``./gliding-team-STAMP``); every path printed
    exists after the command returns.
    """
    import importlib.util
    import tempfile
    import time

    from gliding_actors import MemorySystem, VirtualClock

    team_py = Path(__file__).resolve().parent.parent / "examples" / "pdca_team" / "team.py"
    spec = importlib.util.spec_from_file_location("pdca_team_example", team_py)
    if not team_py.exists() or spec is None or spec.loader is None:
        print(f"gliding-actors demo --team: {team_py} not found; run it from a source checkout", file=sys.stderr)
        return EXIT_INVALID
    try:
        if args.out is not None:
            out = _OutDir.given(args.out)
        else:
            out = _OutDir.default(time.strftime("%Y%m%d-%H%M%S"))
    except InvalidInput as exc:
        print(f"gliding-actors demo --team: {exc}", file=sys.stderr)
        return EXIT_INVALID
    trace, scenario, diagram = (out.path / name for name in _TEAM_FILES)
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
        with tempfile.TemporaryDirectory(prefix="gliding-actors-team-") as tmp:  # the memory: scratch
            with MemorySystem.open(Path(tmp) / "memory", record=trace, clock=VirtualClock()) as memory:
                report = module.run_team(memory)
    except BaseException:
        out.undo()  # a broken run leaves no half-made folder behind
        raise
    print(f"team: {report.rounds} PDCA rounds, verdicts {report.verdicts}, decisions {report.decisions}")
    convert = argparse.Namespace(trace=str(trace), output=str(scenario), name="pdca_team", time_resolution=1.0)
    code = _convert(convert)
    if code == EXIT_OK:
        seeds = "0..4" if args.seed is None else str(args.seed)
        code = main(["replay", str(scenario), "--seeds", seeds, "--diagram", str(diagram)])
    else:
        code = EXIT_FAILED
    print(f"kept in {out.path}:")
    for what, path in (("trace", trace), ("scenario", scenario), ("diagram", diagram)):
        if path.exists():
            print(f"  {what:<8}  {path}")
    if scenario.exists():
        print(f"replay it: gliding-actors replay {scenario}")
    return code


def _brief(value: Any, limit: int = 60) -> str:
    """One compact line for a report cell: ``key=value`` pairs, long values cut."""
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if key == "events":  # inbox: the messages column says it already
                continue
            shown = item if isinstance(item, str) else json.dumps(item, default=repr, separators=(",", ":"))
            parts.append(f"{key}={shown}")
        text = " ".join(parts)
    else:
        text = json.dumps(value, default=repr, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- bench ---------------------------------------------------------------------


def _bench(args: argparse.Namespace) -> int:
    from gliding_actors.bench import SUITES, load_suite, suite_options

    if args.suite == "list":
        for name in SUITES:
            print(name)
        return EXIT_OK
    if args.suite in ("all", "render"):  # bench all / bench render (docs/BENCHMARKS.md)
        from gliding_actors.bench._cli import bench_all, bench_render

        return bench_all(args) if args.suite == "all" else bench_render(args)
    if args.report is not None:
        print(f"gliding-actors bench {args.suite}: unexpected argument {args.report!r}", file=sys.stderr)
        return EXIT_INVALID
    if args.suite not in SUITES:
        print(f"gliding-actors bench: unknown suite {args.suite!r}; suites: {', '.join(SUITES)}", file=sys.stderr)
        return EXIT_INVALID
    run = load_suite(args.suite)
    options = {k: v for k, v in (("data", args.data), ("embedder", args.embedder)) if v is not None}
    if args.suite == "profile":  # bench profile --agents N --ops N --out docs/PROFILE.md
        options.update({k: v for k, v in (("agents", args.agents), ("ops", args.ops), ("out", args.out)) if v is not None})
    refused = sorted(set(options) - suite_options(run))
    if refused:
        flags = ", ".join(f"--{name}" for name in refused)
        print(f"gliding-actors bench {args.suite}: this suite takes no {flags}", file=sys.stderr)
        return EXIT_INVALID
    try:
        report = run(args.quick, **options)
    except GlidingError as exc:  # e.g. bench context without its data file
        print(f"gliding-actors bench {args.suite}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=False))
        return EXIT_OK
    table = Table(title=f"bench {args.suite}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in report.items():
        table.add_row(key, json.dumps(value) if not isinstance(value, str) else value)
    Console().print(table)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
