"""Benchmarks, run as ``gliding-actors bench SUITE [--json] [--quick]``.

Each suite is a module ``gliding_actors.bench._<suite>`` with a function
``run(quick: bool) -> dict[str, Any]`` returning one flat-ish JSON object whose
figures are measured against a baseline in the same process (ratios, medians).
``gliding-actors bench all`` runs them all into one report and regenerates
docs/BENCHMARKS.md from it (:mod:`gliding_actors.bench._all`, ``_report``,
targets in ``_targets``).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["SUITES", "load_suite", "suite_options"]

#: suite name -> module (imported lazily so one suite's dependencies do not
#: slow the others)
SUITES: dict[str, str] = {
    "runtime": "gliding_actors.bench._runtime",
    "coherence": "gliding_actors.bench._coherence",
    "l0": "gliding_actors.bench._l0",
    "l1": "gliding_actors.bench._l1",
    "l2": "gliding_actors.bench._l2",
    "l3": "gliding_actors.bench._l3",
    "hyperspace": "gliding_actors.bench._hyperspace",
    "context": "gliding_actors.bench._context",
    "reliability": "gliding_actors.bench._reliability",
    "tokens": "gliding_actors.bench._tokens",
    "replay": "gliding_actors.bench._replay",
    # needs LoCoMo text (--data FILE); minutes at full size: lines 1k and 50k, turns 100 and 10k
    "scale": "gliding_actors.bench._scale",
    "profile": "gliding_actors.bench._profile",
    # needs the ray extra: a two-node Ray cluster on 127.0.0.1 (docs/SCALING.md)
    "scaling": "gliding_actors.bench._scaling",
    "team": "gliding_actors.bench._team",
    "agents": "gliding_actors.bench._agents",
    # agent-coherence and LangGraph's stores beside this project (the bench extra installs them)
    "peers": "gliding_actors.bench._peers",
}


def load_suite(name: str) -> Callable[..., dict[str, Any]]:
    """The suite's ``run(quick, **options)`` (``context`` also takes ``data=FILE``)."""
    module = importlib.import_module(SUITES[name])
    run: Callable[..., dict[str, Any]] = module.run
    return run


def suite_options(run: Callable[..., dict[str, Any]]) -> set[str]:
    """The keyword options a suite's ``run`` takes besides ``quick`` (a flag it does not take is refused,
    not passed to fail as a ``TypeError``)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {name for name, p in inspect.signature(run).parameters.items() if p.kind in kinds and name != "quick"}
