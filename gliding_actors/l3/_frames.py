"""Frames: what each role sees of a task, as a SPARQL CONSTRUCT plus a JSON-LD frame.

A frame runs on a projection's **scratch store** (see ``_gather``): the
lines of the task's scope that the asking role may read, and their direct
neighbours, in the default graph; and, in graph ``l3:scope``, the markers
``?n a l3:Member`` (a line of the scope) and ``?n a l3:Root`` (the task, its
subtasks, the lines attached to it). Confinement is therefore done by what
the store holds — the dataset — never by editing query text, and the task is
bound as an RDF term when the scope is gathered, never spliced.

Each frame declares

* ``sparql`` — the CONSTRUCT selecting what the role needs;
* ``frame`` — a JSON-LD frame (pyld) shaping the result: which node types
  are the top level, which links stay references;
* ``priority`` — top-level types, most important first: the order nodes are
  listed in and (reversed) the order truncation drops them in;
* ``drop`` — properties truncation removes first, least important first.

Built-in frames are checked when this module is imported; user frames when
they are registered (:meth:`FrameRegistry.register`), and a frame that does
not parse is :class:`~gliding_actors.errors.InvalidInput`, nothing registered.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import pyoxigraph as ox

from gliding_actors.errors import InvalidInput, show
from gliding_actors.l2._graph import refuse_network
from gliding_actors.l2._jsonld import VOCAB
from gliding_actors.l3._ontology import L3, LINK_PROPERTIES
from gliding_actors.l3._shape import check_frame

__all__ = [
    "BUILTIN_FRAMES",
    "PREFIXES",
    "ROLE_FRAMES",
    "Frame",
    "FrameRegistry",
    "default_frame",
]

#: Prefixes every frame query may use without declaring them.
PREFIXES: dict[str, str] = {
    "ga": VOCAB,
    "l3": L3,
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
}

#: The frame each role gets when it names none (the Scheduler's table too).
ROLE_FRAMES: dict[str, str] = {
    "SA": "summary_only",
    "PA": "pa_init",
    "DA": "da_input",
    "CA": "ca_review",
    "AA": "aa_decision",
    "system": "summary_only",
}

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")


def default_frame(role: str) -> str:
    """The frame ``role`` gets when it names none."""
    try:
        return ROLE_FRAMES[role]
    except KeyError:
        raise InvalidInput(f"unknown role {show(role)}; roles are {', '.join(ROLE_FRAMES)}") from None


@dataclasses.dataclass(frozen=True)
class Frame:
    """One frame, checked. Build user frames with :meth:`FrameRegistry.register`."""

    name: str
    description: str
    sparql: str
    #: the JSON-LD frame without ``@context`` (the default context is added)
    frame: Mapping[str, Any]
    priority: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    #: reads live blackboard state (heartbeats, DAG statuses) that no line
    #: change announces: computed on every call, never cached
    live: bool = False
    builtin: bool = False


def _check_sparql(name: str, sparql: object) -> str:
    if not isinstance(sparql, str) or not sparql.strip():
        raise InvalidInput(f"frame {show(name)}: the SPARQL is a non-empty string", path=("sparql",))
    refuse_network(sparql, ("SERVICE",))
    try:
        result = ox.Store().query(sparql, prefixes=PREFIXES)
    except SyntaxError as exc:
        raise InvalidInput(f"frame {show(name)}: invalid SPARQL: {exc}", path=("sparql",)) from None
    except (RuntimeError, ValueError, TypeError, OSError) as exc:
        raise InvalidInput(f"frame {show(name)}: SPARQL refused: {exc}", path=("sparql",)) from None
    if type(result) is not ox.QueryTriples:
        raise InvalidInput(f"frame {show(name)}: the SPARQL must be a CONSTRUCT query", path=("sparql",))
    return sparql


def _names(value: object, what: str, frame: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidInput(f"frame {show(frame)}: {what} is a list of names, not {show(value)}", path=(what,))
    out = tuple(value)
    if not all(isinstance(v, str) and v for v in out):
        raise InvalidInput(f"frame {show(frame)}: {what} holds non-empty strings only", path=(what,))
    return out


def build_frame(
    name: object,
    sparql: object,
    frame: object,
    *,
    description: object = "",
    priority: object = (),
    drop: object = (),
    live: object = False,
    builtin: bool = False,
) -> Frame:
    """Check every part of a frame and return it; :class:`InvalidInput` naming the part otherwise."""
    if not isinstance(name, str) or _NAME.match(name) is None:
        raise InvalidInput(
            f"a frame name is 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit, "
            f"not {show(name)}",
            path=("name",),
        )
    if not isinstance(description, str):
        raise InvalidInput(f"frame {show(name)}: description is a string", path=("description",))
    if type(live) is not bool:
        raise InvalidInput(f"frame {show(name)}: live is true or false", path=("live",))
    checked_sparql = _check_sparql(name, sparql)
    checked_frame = check_frame(name, frame)
    return Frame(
        name=name,
        description=description,
        sparql=checked_sparql,
        frame=checked_frame,
        priority=_names(priority, "priority", name),
        drop=_names(drop, "drop", name),
        live=live,
        builtin=builtin,
    )


# --- the nine built-in frames ---------------------------------------------------------------
#
# Each WHERE starts from the scope markers and takes one property per UNION
# branch: a node with three summaries and two statuses gives five solutions,
# not six (OPTIONAL after OPTIONAL would multiply them).

_MEMBER = "GRAPH l3:scope { ?n a l3:Member }"
_ANY = "(l3:none|!l3:none)"  # any predicate: a path through nested (skolemised) objects


def _links_as_references(*extra: str) -> dict[str, Any]:
    """The frame part that keeps scope-internal links as ``{"@id"}`` references."""
    return {p: {"@embed": "@never", "@omitDefault": True} for p in (*LINK_PROPERTIES, *extra)}


def _typed(types: Iterable[str], **more: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"@type": list(types), "@embed": "@always"}
    out.update(_links_as_references())
    out.update(more)
    return out


_BUILTINS: list[dict[str, Any]] = [
    {
        "name": "summary_only",
        "description": "@id, @type, summary and status of every node of the task's scope (SA)",
        "sparql": f"""
CONSTRUCT {{ ?n a ?type ; ga:summary ?summary ; ga:status ?status }}
WHERE {{
  {_MEMBER}
  {{ ?n a ?type }} UNION {{ ?n ga:summary ?summary }} UNION {{ ?n ga:status ?status }}
}}""",
        "frame": {"@embed": "@never"},
        "priority": ("Task", "Step", "Decision", "Review", "Artifact", "Error"),
        "drop": ("status", "summary"),
    },
    {
        "name": "pa_init",
        "description": (
            "tasks with goal, constraints, resources, relevant skills and domain entities (each "
            "with its summary), earlier decisions with their reasons; no code bodies (PA)"
        ),
        "sparql": f"""
CONSTRUCT {{
  ?n a ?type ; ga:summary ?summary ; ga:status ?status ; ga:goal ?goal ;
     ga:constraints ?constraints ; ga:resources ?link ; ga:skills ?skill ; ga:entities ?entity ;
     ga:decision ?decision ; ga:reason ?reason ; ga:parent ?parent .
  ?link a ?linkType ; ga:summary ?linkSummary .
  ?skill a ?skillType ; ga:summary ?skillSummary .
  ?entity a ?entityType ; ga:summary ?entitySummary .
}}
WHERE {{
  {_MEMBER}
  ?n a ?type .
  FILTER(?type IN (ga:Task, ga:Decision, ga:Skill, ga:Entity, ga:Resource))
  {{ ?n ga:summary ?summary }} UNION {{ ?n ga:status ?status }} UNION {{ ?n ga:goal ?goal }}
  UNION {{ ?n ga:constraints ?constraints }} UNION {{ ?n ga:decision ?decision }}
  UNION {{ ?n ga:reason ?reason }} UNION {{ ?n ga:parent ?parent }}
  UNION {{ ?n ga:resources ?link . OPTIONAL {{ ?link a ?linkType }} OPTIONAL {{ ?link ga:summary ?linkSummary }} }}
  UNION {{ ?n ga:skills ?skill . OPTIONAL {{ ?skill a ?skillType }} OPTIONAL {{ ?skill ga:summary ?skillSummary }} }}
  UNION {{ ?n ga:entities ?entity . OPTIONAL {{ ?entity a ?entityType }} OPTIONAL {{ ?entity ga:summary ?entitySummary }} }}
}}""",
        "frame": _typed(("Task", "Decision", "Skill", "Entity", "Resource")),
        "priority": ("Task", "Decision", "Skill", "Entity", "Resource"),
        "drop": ("status", "reason", "resources", "entities", "skills", "summary"),
    },
    {
        "name": "da_input",
        "description": (
            "plan steps: instructions, parameters with their schemas (nested), dependencies, "
            "language, order, summary, status and the step's code: the doer sees it all (DA)"
        ),
        "sparql": f"""
CONSTRUCT {{
  ?n a ga:Step ; ga:summary ?summary ; ga:status ?status ; ga:instructions ?instructions ;
     ga:language ?language ; ga:order ?order ; ga:dependsOn ?dep ; ga:parameters ?param ;
     ga:code ?code .
  ?sub ?sp ?sv .
}}
WHERE {{
  {_MEMBER}
  ?n a ga:Step .
  {{ ?n ga:summary ?summary }} UNION {{ ?n ga:status ?status }}
  UNION {{ ?n ga:instructions ?instructions }} UNION {{ ?n ga:language ?language }}
  UNION {{ ?n ga:order ?order }} UNION {{ ?n ga:dependsOn ?dep }} UNION {{ ?n ga:code ?code }}
  UNION {{ ?n ga:parameters ?param . ?param {_ANY}* ?sub . ?sub ?sp ?sv }}
}}""",
        "frame": _typed(("Step",)),
        "priority": ("Step",),
        # under a tight budget the code goes first (the doer can read the line itself), then the rest
        "drop": ("code", "status", "summary", "order", "dependsOn", "language", "description"),
    },
    {
        "name": "ca_review",
        "description": (
            "the tasks (always named, with their goals and acceptance criteria), artifacts with "
            "their summaries and paths (no bodies), earlier review verdicts and severities (CA)"
        ),
        "sparql": f"""
CONSTRUCT {{
  ?n a ?type ; ga:summary ?summary ; ga:status ?status ; ga:acceptanceCriteria ?criteria ;
     ga:goal ?goal ; ga:path ?path ; ga:verdict ?verdict ; ga:severity ?severity ;
     ga:reviews ?reviewed ; ga:step ?step .
}}
WHERE {{
  {_MEMBER}
  ?n a ?type .
  FILTER(?type IN (ga:Task, ga:Artifact, ga:Review))
  {{ }} UNION {{ ?n ga:summary ?summary }} UNION {{ ?n ga:status ?status }}
  UNION {{ ?n a ga:Task ; ga:goal ?goal }}
  UNION {{ ?n ga:acceptanceCriteria ?criteria }} UNION {{ ?n ga:path ?path }}
  UNION {{ ?n ga:verdict ?verdict }} UNION {{ ?n ga:severity ?severity }}
  UNION {{ ?n ga:reviews ?reviewed }} UNION {{ ?n ga:step ?step }}
}}""",
        "frame": _typed(("Task", "Artifact", "Review")),
        "priority": ("Task", "Artifact", "Review"),
        "drop": ("status", "step", "path", "reviews", "severity", "goal", "summary"),
    },
    {
        "name": "aa_decision",
        "description": (
            "review verdicts, severities and suggestions; decisions with their options and "
            "risks (nested or linked, each with its summary) (AA)"
        ),
        "sparql": f"""
CONSTRUCT {{
  ?n a ?type ; ga:summary ?summary ; ga:verdict ?verdict ; ga:severity ?severity ;
     ga:suggestions ?suggestion ; ga:reviews ?reviewed ; ga:decision ?decision ;
     ga:reason ?reason ; ga:options ?option ; ga:risks ?risk .
  ?sub ?sp ?sv .
}}
WHERE {{
  {_MEMBER}
  ?n a ?type .
  FILTER(?type IN (ga:Review, ga:Decision, ga:Option, ga:Risk))
  {{ ?n ga:summary ?summary }} UNION {{ ?n ga:verdict ?verdict }}
  UNION {{ ?n ga:severity ?severity }} UNION {{ ?n ga:suggestions ?suggestion }}
  UNION {{ ?n ga:reviews ?reviewed }} UNION {{ ?n ga:decision ?decision }}
  UNION {{ ?n ga:reason ?reason }}
  UNION {{ ?n ga:options ?option . ?option {_ANY}* ?sub . ?sub ?sp ?sv }}
  UNION {{ ?n ga:risks ?risk . ?risk {_ANY}* ?sub . ?sub ?sp ?sv }}
}}""",
        "frame": _typed(("Review", "Decision", "Option", "Risk")),
        "priority": ("Decision", "Review", "Option", "Risk"),
        "drop": ("reviews", "reason", "summary", "suggestions"),
    },
    {
        "name": "health_check",
        "description": (
            "agents' status, staleness and heartbeats (live, from the blackboard), reported error "
            "counts and held locks, lock holders, the task DAG's statuses and errors counted per "
            "task (live: never cached)"
        ),
        "sparql": f"""
CONSTRUCT {{
  ?n a ?type ; ga:status ?status ; ga:heartbeat ?heartbeat ; ga:errorCount ?errors ;
     ga:holder ?holder ; ga:resource ?resource ; ga:taskStatus ?taskStatus ; ga:stale ?stale ;
     ga:role ?role .
  ?root ga:errorCount ?counted .
}}
WHERE {{
  {{
    {_MEMBER}
    ?n a ?type .
    FILTER(?type IN (ga:AgentStatus, ga:Lock, ga:Task))
    {{ ?n ga:status ?status }} UNION {{ ?n ga:heartbeat ?heartbeat }}
    UNION {{ ?n ga:errorCount ?errors }} UNION {{ ?n ga:holder ?holder }}
    UNION {{ ?n ga:resource ?resource }} UNION {{ ?n ga:taskStatus ?taskStatus }}
    UNION {{ ?n ga:stale ?stale }} UNION {{ ?n ga:role ?role }}
  }} UNION {{
    SELECT ?root (COUNT(DISTINCT ?error) AS ?counted) WHERE {{
      GRAPH l3:scope {{ ?root a l3:Root . ?error a l3:Member }}
      ?error a ga:Error ; {_ANY}+ ?root .
    }} GROUP BY ?root
  }}
}}""",
        "frame": _typed(("AgentStatus", "Lock", "Task")),
        "priority": ("AgentStatus", "Task", "Lock"),
        "drop": ("role", "heartbeat", "resource", "holder"),
        "live": True,
    },
    {
        "name": "error_analysis",
        "description": (
            "errors with type, message, time and the failing step (embedded: summary and "
            "instructions), and the recent changes in scope with who, when and what (CA, AA)"
        ),
        "sparql": f"""
CONSTRUCT {{
  ?n a ?type ; ga:summary ?summary ; ga:errorType ?errorType ; ga:message ?message ;
     ga:at ?at ; ga:step ?step ; ga:agent ?agent ; ga:changed ?changed .
  ?step a ?stepType ; ga:summary ?stepSummary ; ga:instructions ?stepInstructions .
}}
WHERE {{
  {_MEMBER}
  ?n a ?type .
  FILTER(?type IN (ga:Error, ga:Change))
  {{ ?n ga:summary ?summary }} UNION {{ ?n ga:errorType ?errorType }}
  UNION {{ ?n ga:message ?message }} UNION {{ ?n ga:at ?at }} UNION {{ ?n ga:agent ?agent }}
  UNION {{ ?n ga:changed ?changed }}
  UNION {{ ?n ga:step ?step . OPTIONAL {{ ?step a ?stepType }} OPTIONAL {{ ?step ga:summary ?stepSummary }}
           OPTIONAL {{ ?step ga:instructions ?stepInstructions }} }}
}}""",
        # the failing step is embedded (it is why the error matters), unlike other links
        "frame": _typed(("Error", "Change"), step={"@embed": "@always", "@omitDefault": True}),
        "priority": ("Error", "Change"),
        "drop": ("agent", "changed", "summary", "step", "at"),
    },
    {
        "name": "reference_only",
        "description": "@id and @type of every node of the scope (rdfs:Resource when it has none)",
        "sparql": f"""
CONSTRUCT {{ ?n a ?type }}
WHERE {{
  {_MEMBER}
  OPTIONAL {{ ?n a ?declared }}
  BIND(COALESCE(?declared, rdfs:Resource) AS ?type)
}}""",
        "frame": {"@embed": "@never"},
        "priority": ("Task", "Step", "Decision", "Review", "Artifact"),
        "drop": (),
    },
    {
        "name": "5w2h_summary",
        "description": "what, why, who, when, where, how and how much of every node that states any",
        "sparql": f"""
CONSTRUCT {{
  ?n a ?type ; ga:what ?what ; ga:why ?why ; ga:who ?who ; ga:when ?when ; ga:where ?where ;
     ga:how ?how ; ga:howMuch ?howMuch .
}}
WHERE {{
  {_MEMBER}
  {{ ?n ga:what ?what }} UNION {{ ?n ga:why ?why }} UNION {{ ?n ga:who ?who }}
  UNION {{ ?n ga:when ?when }} UNION {{ ?n ga:where ?where }} UNION {{ ?n ga:how ?how }}
  UNION {{ ?n ga:howMuch ?howMuch }}
  UNION {{ ?n ga:what|ga:why|ga:who|ga:when|ga:where|ga:how|ga:howMuch ?any . ?n a ?type }}
}}""",
        "frame": {"@embed": "@never"},
        "priority": ("Task", "Step", "Decision"),
        "drop": ("howMuch", "where", "when", "who", "how", "why"),
    },
]


#: The nine built-in frames, checked at import.
BUILTIN_FRAMES: dict[str, Frame] = {spec["name"]: build_frame(builtin=True, **spec) for spec in _BUILTINS}


class FrameRegistry:
    """The built-in frames plus those a user registers (thread-safe)."""

    def __init__(self) -> None:
        self._frames: dict[str, Frame] = dict(BUILTIN_FRAMES)
        self._lock = threading.Lock()

    def get(self, name: object) -> Frame:
        """The frame called ``name``; :class:`InvalidInput` naming the known ones otherwise."""
        frame = self._frames.get(name) if isinstance(name, str) else None
        if frame is None:
            raise InvalidInput(f"unknown frame {show(name)}; frames are {', '.join(sorted(self._frames))}")
        return frame

    def names(self) -> list[str]:
        return sorted(self._frames)

    def register(
        self,
        name: str,
        sparql: str,
        frame: Mapping[str, Any],
        *,
        description: str = "",
        priority: Iterable[str] = (),
        drop: Iterable[str] = (),
        live: bool = False,
    ) -> Frame:
        """Check and add a user frame; nothing is registered unless every part is valid.

        ``sparql`` is a CONSTRUCT run on the scratch store (see the module
        docstring: members are ``GRAPH l3:scope { ?n a l3:Member }``);
        ``frame`` a JSON-LD frame (no remote context: nothing is fetched).
        A built-in name or one already registered is :class:`InvalidInput`.
        """
        built = build_frame(
            name, sparql, frame, description=description, priority=priority, drop=drop, live=live
        )
        with self._lock:
            if built.name in self._frames:
                raise InvalidInput(f"a frame called {show(built.name)} exists already", path=("name",))
            self._frames[built.name] = built
        return built
