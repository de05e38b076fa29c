"""How important a node is now: the importance it was written with, grown by use, faded by idleness.

    effective = min(1, base + rise * ln(1 + uses)) * 0.5 ** (idle_s / half_life_s)

``base`` is the importance its writer gave (else the value's ``importance``
key, else 0.5); ``uses`` counts the searches that returned it since the
memory opened; ``idle_s`` is the time since it was last written or returned.
``rise`` (``hyperspace.importance_rise``) and ``half_life_s``
(``hyperspace.importance_half_life_s``; null: no fading) are configuration.
The logarithm makes the first uses count most, so a node read a thousand
times is not pinned at 1 by a burst; the half-life makes a node nobody has
touched in that long count half as much. Search filters (``min_importance``,
``max_importance``) and an empty-text listing use the effective value; L0
keeps the written one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ImportanceRule", "Use"]


@dataclass(frozen=True)
class ImportanceRule:
    """The formula above, with its two parameters."""

    rise: float = 0.05
    half_life_s: float | None = None

    def effective(self, base: float, uses: int, idle_s: float) -> float:
        grown = min(1.0, base + self.rise * math.log1p(uses))
        if self.half_life_s is None:
            return grown
        return grown * math.pow(0.5, max(0.0, idle_s) / self.half_life_s)


@dataclass
class Use:
    """A node's use since the memory opened: how many searches returned it, and when it was last used."""

    count: int
    last: float
