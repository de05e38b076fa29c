"""Scenario files (format v1): loading with positions, replay, expectations, invariants.

See docs/SCENARIO_FORMAT.md (the format reference, the contract) and docs/SCENARIOS.md
(what this build adds).
"""

from gliding_actors.scenario._loader import load_scenario, load_scenario_text
from gliding_actors.scenario._model import AgentSpec, OpStep, ParallelStep, Position, Scenario
from gliding_actors.scenario._replay import Failure, OpOutcome, RunResult, replay

__all__ = [
    "AgentSpec",
    "Failure",
    "OpOutcome",
    "OpStep",
    "ParallelStep",
    "Position",
    "RunResult",
    "Scenario",
    "load_scenario",
    "load_scenario_text",
    "replay",
]
