"""Reliability tooling: the harnesses behind ``gliding-actors bench reliability``.

Kill tests (SIGKILL a workload, check every promise), simulator fault
injection, fuzzing of every input surface, and a linearizability checker for
recorded histories. docs/RELIABILITY.md says what each one proves.
"""

from __future__ import annotations

__all__: list[str] = []
