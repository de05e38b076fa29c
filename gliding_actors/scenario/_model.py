"""The in-memory form of a scenario file (format v1), produced by the loader.

Every part keeps the position it came from so a failure can name
``FILE:LINE:COL``. Lines and columns are 1-based.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gliding_actors.config import Config

__all__ = ["AgentSpec", "OpStep", "ParallelStep", "Position", "Scenario", "Step"]

FORMAT_V1 = "gliding-actors/scenario@1"


@dataclasses.dataclass(frozen=True)
class Position:
    """Where something stands in its file (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    id: str
    role: str
    pos: Position


@dataclasses.dataclass(frozen=True)
class OpStep:
    """One op: ``{op: NAME, agent: ID, <args>, expect: {...}, as: LABEL}``.

    ``number`` is the step's 1-based index in ``steps`` (ops inside a parallel
    block share their block's number and have ``member`` set to their 1-based
    index in the block). ``args`` holds every key except ``op``, ``agent``,
    ``expect`` and ``as``.
    """

    op: str
    agent: str | None
    args: Mapping[str, Any]
    expect: Mapping[str, Any] | None
    label: str | None
    pos: Position
    number: int
    member: int | None = None

    @property
    def where(self) -> str:
        """``step N`` or ``step N.M`` for an op inside a parallel block."""
        return f"step {self.number}" if self.member is None else f"step {self.number}.{self.member}"


@dataclasses.dataclass(frozen=True)
class ParallelStep:
    """``{parallel: [op, op, ...]}``: issued at once, interleaved by the scheduler."""

    ops: tuple[OpStep, ...]
    pos: Position
    number: int


Step = OpStep | ParallelStep


@dataclasses.dataclass(frozen=True)
class Scenario:
    """A validated scenario file."""

    path: str
    name: str
    description: str | None
    seed: int
    config: Config
    config_data: Mapping[str, Any]
    agents: tuple[AgentSpec, ...]
    steps: tuple[Step, ...]
    #: ``final: {lines: {IRI: <inspect expectations>}, session: {AGENT: <session expectations>}}``
    final: Mapping[str, Any] | None
    final_pos: Position | None
