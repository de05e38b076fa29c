"""The agent roles, defined once (a leaf module every layer may import).

SA schedules and watches, PA plans, DA does, CA checks, AA decides; ``system``
may do anything (administration, SPARQL UPDATE).
"""

from __future__ import annotations

__all__ = ["ROLES"]

ROLES: tuple[str, ...] = ("SA", "PA", "DA", "CA", "AA", "system")
