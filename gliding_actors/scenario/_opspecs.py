"""The scenario-format op table (format v1) as data.

The spec's op table is the contract between hand-written scenario files and the
replay engine, so it lives in exactly one place and everything else is derived
from it: the loader's JSON Schema (:mod:`._schema`) builds each op's argument and
``expect`` rules from here, and the replay engine looks up an op's result keys and
its "main list" (the list ``contains``/``excludes``/``count`` talk about) here.

The spec allows adding ops, so the table is a registry: :func:`register_op_spec`
adds one, and the schema is rebuilt from the registry the next time a file loads.

Every fragment below is a plain JSON Schema (Draft 2020-12) mapping. Treat them as
read-only; the schema builder copies them.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterable, Mapping
from typing import Any

from gliding_actors.roles import ROLES

__all__ = [
    "CONTROL_OPS",
    "CRASH_TARGET_PATTERN",
    "EXPECTATION_FORMS",
    "HEARTBEAT_STATUSES",
    "LINE_STATES",
    "LOCK_MODES",
    "RESERVED_STEP_KEYS",
    "ROLES",
    "TASK_STATUSES",
    "OpSpec",
    "get_op_spec",
    "op_names",
    "op_specs",
    "register_op_spec",
    "registry_key",
]

#: ``lock`` modes.
LOCK_MODES: tuple[str, ...] = ("read", "write", "exclusive")
#: ``heartbeat`` statuses.
HEARTBEAT_STATUSES: tuple[str, ...] = ("idle", "working", "waiting", "completed", "error")
#: ``task.complete`` statuses.
TASK_STATUSES: tuple[str, ...] = ("completed", "failed")
#: Stable MESI states of one agent's copy of a line (``read``/``write``/``evict`` ``state``).
LINE_STATES: tuple[str, ...] = ("I", "S", "E", "M")
#: ``crash`` targets: ``agent:ID``, ``l1:ID`` (an agent's session actor) or one of the named components.
CRASH_TARGET_PATTERN = r"^(agent:.+|l1:.+|directory|dir:[0-9]+|l0|l2|l3|bus|blackboard|hyperspace|context|supervisor|process)$"
#: The ``expect`` forms besides exact result keys (spec "Expectations"); a result
#: key may never take one of these names.
EXPECTATION_FORMS: tuple[str, ...] = (
    "error",
    "value_in",
    "state_in",
    "contains",
    "excludes",
    "max_tokens",
    "count",
    "at_least",
    "same_as",
)
#: Keys of an op step that are not op arguments (see ``OpStep.args``).
RESERVED_STEP_KEYS: tuple[str, ...] = ("op", "agent", "expect", "as")


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """One op of the scenario format.

    ``args_schema`` is a JSON Schema object fragment for the op's arguments only
    (``properties`` with types, ``required``, ``additionalProperties: false``); the
    step keys ``op``, ``agent``, ``expect`` and ``as`` are added by the schema
    builder, not listed here. ``results`` maps each result key to a schema for an
    exact expected value of that key (so ``expect: {version: "one"}`` is caught at
    load time). ``main_list`` is the result key that ``contains``, ``excludes`` and
    ``count`` refer to, or ``None`` when the op has no list result.

    ``control`` ops drive the replay itself (clock, delivery, invariant checks);
    they take no agent and may not appear inside ``parallel``.
    """

    name: str
    takes_agent: bool
    args_schema: Mapping[str, Any]
    results: Mapping[str, Mapping[str, Any]]
    main_list: str | None = None
    control: bool = False
    summary: str = ""

    @property
    def arg_names(self) -> tuple[str, ...]:
        """Every argument the op accepts, in table order."""
        return tuple(self.args_schema.get("properties", {}))

    @property
    def required_args(self) -> tuple[str, ...]:
        """The arguments a step must give."""
        return tuple(self.args_schema.get("required", ()))

    @property
    def result_keys(self) -> tuple[str, ...]:
        """Keys of the op's result, i.e. the exact-value keys allowed in ``expect``."""
        return tuple(self.results)

    def check(self) -> None:
        """Raise ``ValueError`` when the spec contradicts itself.

        Registration calls this so that a bad extension fails where it is
        declared, not later as a baffling schema error on some user's file.
        """
        props = self.args_schema.get("properties", {})
        if self.args_schema.get("type") != "object" or not isinstance(props, Mapping):
            raise ValueError(
                f"op {self.name!r}: args_schema must be an object schema with properties"
            )
        if self.args_schema.get("additionalProperties") is not False:
            raise ValueError(f"op {self.name!r}: args_schema must set additionalProperties: false")
        missing = [r for r in self.required_args if r not in props]
        if missing:
            raise ValueError(f"op {self.name!r}: required args {missing} are not in properties")
        clash = [a for a in props if a in RESERVED_STEP_KEYS]
        if clash:
            raise ValueError(
                f"op {self.name!r}: args {clash} clash with step keys {RESERVED_STEP_KEYS}"
            )
        if self.main_list is not None and self.main_list not in self.results:
            raise ValueError(f"op {self.name!r}: main list {self.main_list!r} is not a result key")
        if self.control and self.takes_agent:
            raise ValueError(f"op {self.name!r}: a control op takes no agent")
        clash = [k for k in self.results if k in EXPECTATION_FORMS]
        if clash:
            raise ValueError(f"op {self.name!r}: result keys {clash} clash with expectation forms")


# --------------------------------------------------------------------------- helpers
# Small schema builders keep the table below readable as a table.

_STR: dict[str, Any] = {"type": "string"}
_NONEMPTY_STR: dict[str, Any] = {"type": "string", "minLength": 1}
_BOOL: dict[str, Any] = {"type": "boolean"}
_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_NUMBER_GE0: dict[str, Any] = {"type": "number", "minimum": 0}
_OBJECT: dict[str, Any] = {"type": "object"}
_OBJECT_OR_NULL: dict[str, Any] = {"type": ["object", "null"]}
_ANY: dict[str, Any] = {}


def _list_of(item: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": dict(item)}


def _enum(values: Iterable[str]) -> dict[str, Any]:
    return {"type": "string", "enum": list(values)}


def _args(
    required: Mapping[str, Any] | None = None, optional: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    required = dict(required or {})
    optional = dict(optional or {})
    return {
        "type": "object",
        "properties": {**required, **optional},
        "required": list(required),
        "additionalProperties": False,
    }


_IRI = _NONEMPTY_STR
_TAGS = _list_of(_STR)
_VERSION = _COUNT
_STATE = _enum(LINE_STATES)
_POLICY = _enum(("write_through", "write_back"))
_LINE_SNAPSHOT: dict[str, Any] = {
    # l2 / l0 in inspect: {value, version} or null; compared key by key.
    "type": ["object", "null"],
    "properties": {"value": _OBJECT_OR_NULL, "version": _VERSION},
    "additionalProperties": False,
}
_WRITE_RESULTS: dict[str, Any] = {
    "version": _VERSION,
    "state": _STATE,
    "messages": _COUNT,
    "policy": _POLICY,
}
#: write's and cas's optional arguments (Agent.write's keywords)
_WRITE_OPTIONS: dict[str, Any] = {
    "tags": _TAGS,
    "graph": _STR,
    "importance": {"type": "number", "minimum": 0, "maximum": 1},
    "ttl_s": {"type": "number", "exclusiveMinimum": 0},
}
_AGENT_STATUS: dict[str, Any] = {
    "type": "object",
    "properties": {"role": _STR, "status": _STR, "stale": _BOOL},
    "additionalProperties": False,
}


def _spec(
    name: str,
    *,
    agent: bool = True,
    args: Mapping[str, Any] | None = None,
    results: Mapping[str, Any] | None = None,
    main_list: str | None = None,
    control: bool = False,
    summary: str = "",
) -> OpSpec:
    return OpSpec(
        name=name,
        takes_agent=agent,
        args_schema=args if args is not None else _args(),
        results=dict(results or {}),
        main_list=main_list,
        control=control,
        summary=summary,
    )


# --------------------------------------------------------------------------- v1 table

_V1: tuple[OpSpec, ...] = (
    _spec(
        "read",
        args=_args({"iri": _IRI}),
        results={
            "value": _OBJECT_OR_NULL,
            "version": _VERSION,
            "state": _STATE,
            "messages": _COUNT,
        },
        summary="read a line through the agent's cache",
    ),
    _spec(
        "write",
        args=_args({"iri": _IRI, "value": _OBJECT}, _WRITE_OPTIONS),
        results=_WRITE_RESULTS,
        summary="write a line; critical tags make it write-through; ttl_s makes it expire",
    ),
    _spec(
        "cas",
        # The spec lists tags and graph without "(opt)"; they are optional as in write.
        args=_args({"iri": _IRI, "version": _VERSION, "value": _OBJECT}, _WRITE_OPTIONS),
        results=_WRITE_RESULTS,
        summary="compare-and-set; ConflictError when the version moved",
    ),
    _spec(
        "modify",
        # Added: Agent.modify with a declared edit (a scenario file holds no functions).
        args={
            **_args(
                {"iri": _IRI},
                {
                    "set": _OBJECT,
                    "increment": {"type": "object", "additionalProperties": {"type": "number"}},
                    "remove": _list_of(_NONEMPTY_STR),
                    "tags": _TAGS,
                    "graph": _STR,
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                },
            ),
            "anyOf": [{"required": ["set"]}, {"required": ["increment"]}, {"required": ["remove"]}],
        },
        results={**_WRITE_RESULTS, "value": _OBJECT},
        summary="atomic read-modify-write at the owner: set, increment and remove fields of the current value",
    ),
    _spec(
        "delete",
        args=_args({"iri": _IRI}, {"version": _VERSION}),
        results={"version": _VERSION},
        summary="write a tombstone; with version, only if the line is still at it",
    ),
    _spec("evict", args=_args({"iri": _IRI}), results={"state": _STATE}),
    _spec(
        "inspect",
        agent=False,
        args=_args({"iri": _IRI}),
        results={
            "directory": _STR,
            "owner": {"type": ["string", "null"]},
            "sharers": _list_of(_STR),
            "caches": {"type": "object", "additionalProperties": _STR},
            "l2": _LINE_SNAPSHOT,
            "l0": _LINE_SNAPSHOT,
        },
        summary="the directory's and every layer's view of one line",
    ),
    _spec("flush", agent=False, results={"flushed": _COUNT}),
    _spec("sweep", agent=False, results={"swept": _COUNT}, summary="delete every line whose time to live ran out"),
    _spec(
        "turn",
        # The spec's own example omits supplement and relevance, so they are optional.
        args=_args(
            {"role": _STR, "summary": _STR, "thought": _STR, "content": _STR},
            {
                "supplement": _BOOL,
                "relevance": {"type": "number", "minimum": 0, "maximum": 1},
                "tokens": _COUNT,
                # Added to v1: line IRIs the turn relied on (a later write marks it stale).
                "cites": _list_of(_IRI),
            },
        ),
        results={"archive_iri": _STR, "evicted": _list_of(_STR), "tokens": _COUNT},
        main_list="evicted",
    ),
    _spec(
        "consolidate",
        args=_args(optional={"keep": _COUNT}),
        results={"fact": {"type": ["string", "null"]}, "folded": _list_of(_STR), "tokens": _COUNT},
        main_list="folded",
        summary="fold the chain's older turns into one fact turn (default summary: their first sentences)",
    ),
    _spec(
        "fold",
        args=_args({"iris": _list_of(_NONEMPTY_STR), "summary": _NONEMPTY_STR}, {"thought": _STR, "content": _STR}),
        results={"fact": _STR, "folded": _list_of(_STR), "tokens": _COUNT},
        main_list="folded",
        summary="replace the named chain turns by one fact turn with this summary",
    ),
    _spec(
        "session",
        results={
            "turns": _list_of(_OBJECT),
            "summaries": _list_of(_STR),
            "tokens": _COUNT,
            "weak_refs": _list_of(_STR),
        },
        main_list="turns",
    ),
    _spec(
        "context",
        args=_args({"max_tokens": _COUNT}, {"query": _STR, "task": _STR}),
        results={"tokens": _COUNT, "iris": _list_of(_STR), "text": _STR},
        main_list="iris",
    ),
    _spec(
        "project",
        args=_args({"frame": _NONEMPTY_STR}, {"task": _STR, "max_tokens": _COUNT}),
        results={
            "tokens": _COUNT,
            "iris": _list_of(_STR),
            "jsonld": _ANY,
            "cached": _BOOL,
            "mode": _enum(("full", "truncated", "reference")),
        },
        main_list="iris",
    ),
    _spec(
        "search",
        args=_args(
            {"text": _STR, "k": {"type": "integer", "minimum": 1, "maximum": 10_000}},
            {
                "filters": {
                    "type": "object",
                    "properties": {
                        "tags": _TAGS,
                        "types": _list_of(_STR),
                        "graph": _STR,
                        "min_importance": {"type": "number"},
                        "max_importance": {"type": "number"},
                    },
                    "additionalProperties": False,
                }
            },
        ),
        results={"iris": _list_of(_STR), "scores": _list_of({"type": "number"})},
        main_list="iris",
    ),
    _spec(
        "query",
        args=_args({"sparql": _NONEMPTY_STR}),
        results={"rows": _list_of(_OBJECT), "boolean": _BOOL, "jsonld": _ANY},
        main_list="rows",
    ),
    _spec(
        "update",
        args=_args({"sparql": _NONEMPTY_STR}),
        results={
            "created": _list_of(_STR),
            "changed": _list_of(_STR),
            "deleted": _list_of(_STR),
            "versions": {"type": "object", "additionalProperties": _VERSION},
        },
        main_list="changed",
        summary="change lines with SPARQL update, through coherence, within the role's rights",
    ),
    _spec(
        "task.create",
        args=_args(
            {"task": _NONEMPTY_STR},
            {"parent": _NONEMPTY_STR, "depends_on": _list_of(_NONEMPTY_STR)},
        ),
        results={"task": _STR},
    ),
    _spec("task.depend", args=_args({"task": _NONEMPTY_STR, "on": _NONEMPTY_STR})),
    _spec(
        "task.complete",
        args=_args({"task": _NONEMPTY_STR, "status": _enum(TASK_STATUSES)}),
        results={"flushed": _COUNT},
    ),
    _spec(
        "task.release",
        args=_args({"task": _NONEMPTY_STR}),
        results={"released": _list_of(_STR)},
        main_list="released",
    ),
    _spec(
        "task.layers",
        args=_args({"task": _NONEMPTY_STR}),
        results={"layers": _list_of(_list_of(_STR))},
        main_list="layers",
    ),
    _spec(
        "lock",
        args=_args(
            {"resource": _NONEMPTY_STR, "mode": _enum(LOCK_MODES)}, {"timeout_s": _NUMBER_GE0}
        ),
        results={"granted": _BOOL},
    ),
    _spec("unlock", args=_args({"resource": _NONEMPTY_STR})),
    _spec(
        "heartbeat", args=_args(optional={"status": _enum(HEARTBEAT_STATUSES), "operation": _STR})
    ),
    _spec(
        "agents",
        agent=False,
        results={"agents": {"type": "object", "additionalProperties": _AGENT_STATUS}},
    ),
    # Added to v1: publish answers its place in the global order and how many
    # subscribers got it; inbox adds the full events; unsubscribe is new.
    _spec("publish", args=_args({"topic": _NONEMPTY_STR, "message": _OBJECT}), results={"seq": _COUNT, "delivered": _COUNT}),
    _spec("subscribe", args=_args({"topic": _NONEMPTY_STR})),
    _spec("unsubscribe", args=_args({"topic": _NONEMPTY_STR})),
    _spec("inbox", results={"messages": _list_of(_ANY), "events": _list_of(_ANY)}, main_list="messages"),
    _spec(
        "intent",
        args=_args({"entities": _list_of(_NONEMPTY_STR)}),
        results={"prefetched": _list_of(_STR)},
        main_list="prefetched",
    ),
    _spec(
        "crash",
        agent=False,
        args=_args(
            {
                "target": {
                    "type": "string",
                    "pattern": CRASH_TARGET_PATTERN,
                    "description": "agent:ID, directory (every shard) or dir:N (one), l0, l2, l3 or process;"
                    " added: l1:ID, bus, blackboard, hyperspace, context, supervisor",
                }
            }
        ),
        # Added to v1: the lines whose newest write died in the crash.
        results={"lost": _list_of(_STR)},
    ),
    _spec(
        "advance",
        agent=False,
        control=True,
        args=_args({"seconds": _NUMBER_GE0}),
        summary="move the virtual clock",
    ),
    _spec("quiesce", agent=False, control=True, summary="deliver every in-flight message"),
    _spec("check", agent=False, control=True, summary="run every invariant now"),
)

#: Names of the control ops of format v1 (never inside ``parallel``).
CONTROL_OPS: tuple[str, ...] = tuple(s.name for s in _V1 if s.control)

_REGISTRY: dict[str, OpSpec] = {s.name: s for s in _V1}


def register_op_spec(spec: OpSpec, *, replace: bool = False) -> None:
    """Add an op to the format (the spec allows new ops; never rename v1 ones).

    Refuses to overwrite an existing op unless ``replace`` is true, so two
    extensions cannot silently fight over a name. Files loaded afterwards are
    validated against the extended table.
    """
    spec.check()
    if spec.name in _REGISTRY and not replace:
        raise ValueError(f"op {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec


def get_op_spec(name: str) -> OpSpec:
    """The spec of op ``name``; ``KeyError`` when there is no such op."""
    return _REGISTRY[name]


def op_specs() -> Mapping[str, OpSpec]:
    """A read-only live view of the registry, in registration order."""
    return types.MappingProxyType(_REGISTRY)


def op_names() -> tuple[str, ...]:
    """Every registered op name, in registration order."""
    return tuple(_REGISTRY)


def registry_key() -> tuple[tuple[str, OpSpec], ...]:
    """The registry's current content, compared by value by the schema cache.

    A snapshot rather than a counter, so that any change (including a test
    putting the registry back as it was) is seen, and an equal table reuses the
    cached schema.
    """
    return tuple(_REGISTRY.items())
