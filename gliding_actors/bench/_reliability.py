"""``gliding-actors bench reliability``: kills, injected faults, fuzzing and load, in one run.

Four harnesses from the checkout's ``tools/reliability/`` (test rigs, not part
of the installed package: :mod:`gliding_actors.bench._tools` loads them), each
counting what it found rather than asserting, so every figure is printed even
when one fails:

* **kills** — a workload SIGKILLed at random points; ``lost_writes`` counts
  acknowledged write-through and flushed writes missing from L0 afterwards,
  ``reused_versions`` a (line, version) acknowledged with two values;
* **faults** — seeded simulator runs with crashes at random steps, delayed
  channels and process crashes; ``invariant_violations`` and ``hung_ops``;
* **fuzz** — generated bad input on every input surface; ``untyped_errors``
  (anything but a ``GlidingError``) and ``changed_on_refusal``;
* **load** — many agent threads of mixed ops, the history checked for
  linearizability per line; ``linearizable``.

``--quick`` sizes everything to finish within five minutes on two cores;
the full sizes are the ones docs/RELIABILITY.md reports. Every size is in the
output, so a figure is never read without the run that produced it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from gliding_actors.bench._tools import import_tool

__all__ = ["run"]

#: (quick, full) sizes
KILLS = (100, 200)
FAULT_SEEDS = (200, 1000)
FAULT_STEPS = (400, 1000)
FUZZ_EXAMPLES = (2000, 20000)
#: the load sizes (quick, full); None: the harness's own LOAD_QUICK and LOAD_FULL (the full one is
#: 64 agent threads x 10,000 ops on 1,000 lines, about 30 min here)
LOAD: tuple[dict[str, int], dict[str, int]] | None = None
SEED = 20261130


def run(quick: bool = False) -> dict[str, Any]:
    """Run the four harnesses; one flat report (``quick``: the five-minute sizes)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    run_faults = import_tool("reliability._faults").run_faults
    run_fuzz = import_tool("reliability._fuzz").run_fuzz
    run_kills = import_tool("reliability._kill").run_kills
    load_harness = import_tool("reliability._load")
    run_load = load_harness.run_load

    size = 0 if quick else 1
    started = time.perf_counter()
    report: dict[str, Any] = {"command": f"gliding-actors bench reliability{' --quick' if quick else ''} --json"}
    seconds: dict[str, float] = {}
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description:<8}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        kills_task = bar.add_task("kills", total=KILLS[size])
        faults_task = bar.add_task("faults", total=FAULT_SEEDS[size])
        fuzz_task = bar.add_task("fuzz", total=FUZZ_EXAMPLES[size])
        load_config = (LOAD or (load_harness.LOAD_QUICK, load_harness.LOAD_FULL))[size]
        load_task = bar.add_task("load", total=load_config["agents"] * load_config["ops_per_agent"])

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="ga-bench-kills-") as workdir:
            kills = run_kills(
                Path(workdir),
                kills=KILLS[size],
                seed=SEED,
                progress=lambda done: bar.update(kills_task, completed=done),
            )
        seconds["kills"] = time.perf_counter() - t0
        report.update(kills.as_json())

        t0 = time.perf_counter()
        faults = run_faults(
            seeds=range(SEED, SEED + FAULT_SEEDS[size]),
            steps=FAULT_STEPS[size],
            progress=lambda done: bar.update(faults_task, completed=done),
        )
        seconds["faults"] = time.perf_counter() - t0
        report.update({f"{k}" if k in _FAULT_TOP else f"faults_{k}": v for k, v in faults.items()})

        t0 = time.perf_counter()
        fuzz = run_fuzz(
            examples=FUZZ_EXAMPLES[size],
            seed=SEED,
            progress=lambda done: bar.update(fuzz_task, completed=done),
        )
        seconds["fuzz"] = time.perf_counter() - t0
        report.update({k if k in _FUZZ_TOP else f"fuzz_{k}": v for k, v in fuzz.items()})

        t0 = time.perf_counter()
        load = run_load(
            **load_config,
            seed=SEED,
            progress=lambda done: bar.update(load_task, completed=done),
        )
        seconds["load"] = time.perf_counter() - t0
        report.update({k if k in _LOAD_TOP else f"load_{k}": v for k, v in load.items()})

    report["seconds"] = {k: round(v, 1) for k, v in seconds.items()}
    report["total_s"] = round(time.perf_counter() - started, 1)
    report["ok"] = (
        report["lost_writes"] == 0
        and report["reused_versions"] == 0
        and report["disagreements"] == 0
        and report["not_serving"] == 0
        and report["invariant_violations"] == 0
        and report["hung_ops"] == 0
        and report["untyped_errors"] == 0
        and report.get("changed_on_refusal", 0) == 0
        and report["linearizable"] is True
    )
    return _ordered(report)


#: figures printed under their own name (the headline ones); the rest are prefixed by their harness
_FAULT_TOP = frozenset({"faults_injected", "invariant_violations", "hung_ops"})
_FUZZ_TOP = frozenset({"fuzz_inputs", "untyped_errors", "changed_on_refusal", "remote_fetches"})
_LOAD_TOP = frozenset({"linearizable"})

_HEADLINE = (
    "ok",
    "kills",
    "lost_writes",
    "reused_versions",
    "faults_injected",
    "invariant_violations",
    "hung_ops",
    "fuzz_inputs",
    "untyped_errors",
    "changed_on_refusal",
    "linearizable",
)


def _ordered(report: dict[str, Any]) -> dict[str, Any]:
    """The headline figures first (those with a target), then the details in the order they were measured."""
    head = {k: report[k] for k in _HEADLINE if k in report}
    return head | {k: v for k, v in report.items() if k not in head}
