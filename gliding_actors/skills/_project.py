"""Role projections of a skill: what each role is shown, within its token budget.

The seed design's three resolutions:

=====  ===========================================================  ======
level  shows                                                        budget
=====  ===========================================================  ======
SA     ``@id``, ``@type``, ``name``, ``what``, ``trigger``          200
PA     the above, the steps as a numbered overview (titles),         500
       parameter names (``*`` = required) and the links
DA     the above with every step in full (or one, ``step=N``)       1,500
       and the input schema itself
=====  ===========================================================  ======

Roles map to levels: SA, PA, DA to their own; CA and AA (reviewers and
arbiters, who judge the plan rather than run it) to PA; ``system`` to DA.
``level=`` overrides the role.

**Never over budget.** Tokens are counted on the compact JSON of the view (no
``@context``: like every L3 projection it is read with the default context)
by the library's counter (:func:`gliding_actors.l1.get_counter`). A view over
its budget degrades in steps, each tried only when the one before does not
fit:

1. ``full``;
2. ``truncated`` — prose (name, what, trigger, titles, instructions, schema
   descriptions) is cut to the longest common length that fits (``…`` marks
   a cut; found by binary search); when even 16 characters do not fit, the
   level's least important keys go first (PA: alternatives, parameters,
   prerequisites, parts; DA: alternatives, prerequisites, parts, the
   schema). Schema structure (types, enums, patterns) is never cut — a
   half-schema would mislead — it is dropped whole;
3. ``reference`` — ``{"@id", "name"}``, then ``{"@id"}``, then ``{}``.

The signature is never shown: it is for the guard, not for a prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l1._tokens import TokenCounter, default_counter
from gliding_actors.skills._model import Skill

__all__ = ["BUDGETS", "LEVELS", "ROLE_LEVELS", "project_skill"]

#: level → default token budget
BUDGETS: Final[dict[str, int]] = {"SA": 200, "PA": 500, "DA": 1500}
LEVELS: Final = tuple(BUDGETS)
#: role → level
ROLE_LEVELS: Final[dict[str, str]] = {"SA": "SA", "PA": "PA", "DA": "DA", "CA": "PA", "AA": "PA", "system": "DA"}
_DROP: Final[dict[str, tuple[str, ...]]] = {
    "SA": (),
    "PA": ("alternative", "parameters", "prerequisite", "composedOf"),
    "DA": ("alternative", "prerequisite", "composedOf", "inputSchema"),
}
#: keys whose string values are prose and may be cut
_PROSE: Final = frozenset(("name", "what", "trigger", "title", "instructions", "description", "steps"))
_MIN_CUT: Final = 16


def _json(view: Any) -> str:
    return json.dumps(view, ensure_ascii=False, separators=(",", ":"))


def _view(skill: Skill, level: str, step: int | None) -> dict[str, Any]:
    view: dict[str, Any] = {
        "@id": skill.iri,
        "@type": skill.node["@type"][1],
        "name": skill.name,
        "what": skill.what,
        "trigger": skill.trigger,
    }
    if level == "SA":
        return view
    if level == "PA":
        view["steps"] = [f"{s.order}. {s.title}" for s in skill.steps]
        properties = skill.input_schema.get("properties")
        if isinstance(properties, dict) and properties:
            required = skill.input_schema.get("required")
            needed = set(required) if isinstance(required, list) else set()
            view["parameters"] = [f"{name}*" if name in needed else str(name) for name in properties]
    else:
        chosen = skill.steps if step is None else [s for s in skill.steps if s.order == step]
        view["steps"] = [{"order": s.order, "title": s.title, "instructions": s.instructions} for s in chosen]
        if step is not None:
            view["stepCount"] = len(skill.steps)
        view["inputSchema"] = skill.input_schema
    for key, targets in (
        ("prerequisite", skill.prerequisites),
        ("alternative", skill.alternatives),
        ("composedOf", skill.components),
    ):
        if targets:
            view[key] = list(targets)
    return view


def _cut(value: Any, limit: int, mode: str = "top") -> Any:
    """``value`` with its prose strings longer than ``limit`` cut to ``limit`` characters (``…`` included).

    ``mode``: ``top`` (the view: a key decides), ``prose`` (every string),
    ``schema`` (only the text of ``description`` and ``title`` keywords: the
    rest of a schema is structure) or ``exact`` (nothing).
    """
    if isinstance(value, str):
        return value[: limit - 1] + "…" if mode == "prose" and len(value) > limit else value
    if isinstance(value, list):
        return [_cut(item, limit, mode) for item in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if mode == "top":
                sub = "schema" if key == "inputSchema" else "prose" if key in _PROSE else "exact"
            elif mode == "schema":
                sub = "prose" if key in ("description", "title") and isinstance(item, str) else "schema"
            else:
                sub = mode
            out[key] = _cut(item, limit, sub)
        return out
    return value


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return max((_longest(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_longest(v) for v in value.values()), default=0)
    return 0


def project_skill(
    node: dict[str, Any],
    role: str,
    *,
    max_tokens: int | None = None,
    level: str | None = None,
    step: int | None = None,
    counter: TokenCounter | None = None,
) -> dict[str, Any]:
    """What ``role`` is shown of the skill ``node`` (module docstring).

    Returns ``{"jsonld", "tokens", "counter", "mode", "level", "max_tokens",
    "full_tokens"}``; ``tokens <= max_tokens`` always (default: the level's
    budget). Bad arguments are :class:`InvalidInput`.
    """
    skill = Skill.from_node(node)
    if level is None:
        if role not in ROLE_LEVELS:
            raise InvalidInput(f"unknown role {show(role)}; roles are {', '.join(ROLE_LEVELS)}")
        level = ROLE_LEVELS[role]
    elif level not in BUDGETS:
        raise InvalidInput(f"a projection level is one of {', '.join(LEVELS)}, not {show(level)}")
    budget = BUDGETS[level] if max_tokens is None else max_tokens
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise InvalidInput(f"max_tokens is an integer >= 1, not {show(max_tokens)}")
    if step is not None and (
        level != "DA" or isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= len(skill.steps)
    ):
        raise InvalidInput(f"step is a DA projection's step number, 1..{len(skill.steps)}, not {show(step)}")
    counting = counter or default_counter()
    count = counting.count
    full = _view(skill, level, step)
    full_tokens = count(_json(full))
    view, mode = _fit(full, full_tokens, budget, _DROP[level], count)
    return {
        "jsonld": view,
        "tokens": count(_json(view)) if view is not full else full_tokens,
        "counter": counting.name,
        "mode": mode,
        "level": level,
        "max_tokens": budget,
        "full_tokens": full_tokens,
    }


def _fit(
    full: dict[str, Any], full_tokens: int, budget: int, drop: tuple[str, ...], count: Callable[[str], int]
) -> tuple[dict[str, Any], str]:
    if full_tokens <= budget:
        return full, "full"
    for dropped in range(len(drop) + 1):
        view = {k: v for k, v in full.items() if k not in drop[:dropped]}
        if count(_json(_cut(view, _MIN_CUT))) > budget:
            continue
        lo, hi = _MIN_CUT, max(_longest(view), _MIN_CUT)  # lo fits; find the largest cut that does
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(_json(_cut(view, mid))) <= budget:
                lo = mid
            else:
                hi = mid - 1
        cut: dict[str, Any] = _cut(view, lo)
        return cut, "truncated"
    for reference in (
        {"@id": full["@id"], "name": _cut(full["name"], _MIN_CUT, "prose")},
        {"@id": full["@id"]},
    ):
        if count(_json(reference)) <= budget:
            return reference, "reference"
    return {}, "reference"
