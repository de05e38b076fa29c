"""L0Actor: hosts an :class:`L0Store` on the actor runtime as its single writer.

Thin on purpose: it checks the shape of each message, calls the store and
returns plain data. Every rule lives in the store, so the simulator and the
Pykka host run the same code.

Messages (``type`` plus fields; optional fields in brackets) and replies:

==================  =====================================================  ==========================
type                fields                                                  reply
==================  =====================================================  ==========================
``l0.put``          entry (L0Entry.to_dict() shape), [merge] [sync]         the stored entry (dict)
                    [expect_version]
``l0.put_node``     node (JSON-LD with @id), [importance] [tags] [graph]    the stored entry (dict)
                    [metadata] [merge] [sync] [expect_version]
``l0.put_many``     entries (list), [merge] [sync]                          list of entries (dicts)
``l0.get``          iri, [touch]                                            entry dict or None
``l0.get_node``     iri, [touch]                                            the node (dict) or None
``l0.delete``       iri, [sync] [version]                                   bool (it existed)
``l0.version``      iri                                                     int (0: never written)
``l0.annotate``     iri, [vector_id] [mesi_state] [sync]                    entry dict or None
``l0.query``        [tags] [graph] [node_type] [prefix] [min_importance]    list of entry dicts, or
                    [max_importance] [limit] [iris_only]                    of IRIs with iris_only
``l0.graphs``       —                                                       sorted graph names
``l0.delete_graph`` graph, [sync]                                           number of nodes deleted
``l0.flush``        [sync]                                                  access counters written
``l0.count``        —                                                       number of nodes
``l0.verify``       —                                                       list of problems
==================  =====================================================  ==========================

A malformed message is :class:`~gliding_actors.errors.InvalidInput`; store
refusals (ConflictError, StorageError...) pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gliding_actors.errors import InvalidInput
from gliding_actors.l0._entry import L0Entry
from gliding_actors.l0._store import UNSET, L0Store
from gliding_actors.runtime._interface import Context

__all__ = ["L0Actor"]

_Handler = Callable[["L0Actor", Mapping[str, Any]], Any]


class L0Actor:
    """A Behaviour hosting one store. ``close_on_stop`` closes the store when the
    actor stops (else it only writes access counts down: the owner closes it)."""

    def __init__(self, store: L0Store, *, close_on_stop: bool = False) -> None:
        self.store = store
        self._close_on_stop = close_on_stop

    def receive(self, message: Any, ctx: Context) -> Any:
        if not isinstance(message, Mapping):
            raise InvalidInput(f"an L0 message must be a mapping, not {type(message).__name__}")
        kind = message.get("type")
        if not isinstance(kind, str) or kind not in _HANDLERS:
            raise InvalidInput(
                f"unknown L0 message type {kind!r} (known: {', '.join(sorted(_HANDLERS))})"
            )
        allowed = _FIELDS[kind]
        extra = [k for k in message if k != "type" and k not in allowed]
        if extra:
            raise InvalidInput(
                f"{kind}: unknown field(s) {', '.join(map(repr, extra))}", path=(str(extra[0]),)
            )
        return _HANDLERS[kind](self, message)

    def on_stop(self) -> None:
        if self.store.closed:
            return
        if self._close_on_stop:
            self.store.close()
        else:
            self.store.flush()

    # -- handlers ------------------------------------------------------------

    def _put(self, m: Mapping[str, Any]) -> dict[str, Any]:
        entry = L0Entry.from_dict(_required(m, "entry", Mapping))
        return self.store.store(
            entry,
            merge=_opt_bool(m, "merge", True),
            sync=_opt(m, "sync", bool),
            expect_version=_opt(m, "expect_version", int),
        ).to_dict()

    def _put_node(self, m: Mapping[str, Any]) -> dict[str, Any]:
        return self.store.store_jsonld_node(
            _required(m, "node", dict),
            importance=m.get("importance", 0.5),
            tags=_opt(m, "tags", (list, tuple)) or (),
            named_graph=_opt(m, "graph", str),
            metadata=_opt(m, "metadata", Mapping),
            merge=_opt_bool(m, "merge", True),
            sync=_opt(m, "sync", bool),
            expect_version=_opt(m, "expect_version", int),
        ).to_dict()

    def _put_many(self, m: Mapping[str, Any]) -> list[dict[str, Any]]:
        raw = _required(m, "entries", (list, tuple))
        entries = [L0Entry.from_dict(e) for e in raw]
        stored = self.store.store_many(
            entries, merge=_opt_bool(m, "merge", True), sync=_opt(m, "sync", bool)
        )
        return [e.to_dict() for e in stored]

    def _get(self, m: Mapping[str, Any]) -> dict[str, Any] | None:
        entry = self.store.retrieve(_required(m, "iri", str), touch=_opt_bool(m, "touch", True))
        return None if entry is None else entry.to_dict()

    def _get_node(self, m: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.store.retrieve_jsonld_node(
            _required(m, "iri", str), touch=_opt_bool(m, "touch", True)
        )

    def _delete(self, m: Mapping[str, Any]) -> bool:
        return self.store.delete(
            _required(m, "iri", str), sync=_opt(m, "sync", bool), version=_opt(m, "version", int)
        )

    def _version(self, m: Mapping[str, Any]) -> int:
        return self.store.retrieve_version(_required(m, "iri", str))

    def _annotate(self, m: Mapping[str, Any]) -> dict[str, Any] | None:
        entry = self.store.annotate(
            _required(m, "iri", str),
            vector_id=m.get("vector_id", UNSET),
            mesi_state=m.get("mesi_state", UNSET),
            sync=_opt(m, "sync", bool),
        )
        return None if entry is None else entry.to_dict()

    def _query(self, m: Mapping[str, Any]) -> list[Any]:
        filters: dict[str, Any] = {
            "tags": _opt(m, "tags", (list, tuple)),
            "graph": _opt(m, "graph", str),
            "node_type": _opt(m, "node_type", str),
            "prefix": _opt(m, "prefix", str),
            "min_importance": m.get("min_importance"),
            "max_importance": m.get("max_importance"),
            "limit": _opt(m, "limit", int),
        }
        if _opt_bool(m, "iris_only", False):
            return self.store.query_iris(**filters)
        return [e.to_dict() for e in self.store.query(**filters)]

    def _graphs(self, m: Mapping[str, Any]) -> list[str]:
        return self.store.list_graphs()

    def _delete_graph(self, m: Mapping[str, Any]) -> int:
        return self.store.delete_graph(_required(m, "graph", str), sync=_opt(m, "sync", bool))

    def _flush(self, m: Mapping[str, Any]) -> int:
        return self.store.flush(sync=_opt_bool(m, "sync", False))

    def _count(self, m: Mapping[str, Any]) -> int:
        return self.store.count()

    def _verify(self, m: Mapping[str, Any]) -> list[str]:
        return self.store.verify()


_HANDLERS: dict[str, _Handler] = {
    "l0.put": L0Actor._put,
    "l0.put_node": L0Actor._put_node,
    "l0.put_many": L0Actor._put_many,
    "l0.get": L0Actor._get,
    "l0.get_node": L0Actor._get_node,
    "l0.delete": L0Actor._delete,
    "l0.version": L0Actor._version,
    "l0.annotate": L0Actor._annotate,
    "l0.query": L0Actor._query,
    "l0.graphs": L0Actor._graphs,
    "l0.delete_graph": L0Actor._delete_graph,
    "l0.flush": L0Actor._flush,
    "l0.count": L0Actor._count,
    "l0.verify": L0Actor._verify,
}

_FIELDS: dict[str, frozenset[str]] = {
    "l0.put": frozenset({"entry", "merge", "sync", "expect_version"}),
    "l0.put_node": frozenset(
        {"node", "importance", "tags", "graph", "metadata", "merge", "sync", "expect_version"}
    ),
    "l0.put_many": frozenset({"entries", "merge", "sync"}),
    "l0.get": frozenset({"iri", "touch"}),
    "l0.get_node": frozenset({"iri", "touch"}),
    "l0.delete": frozenset({"iri", "sync", "version"}),
    "l0.version": frozenset({"iri"}),
    "l0.annotate": frozenset({"iri", "vector_id", "mesi_state", "sync"}),
    "l0.query": frozenset(
        {
            "tags",
            "graph",
            "node_type",
            "prefix",
            "min_importance",
            "max_importance",
            "limit",
            "iris_only",
        }
    ),
    "l0.graphs": frozenset(),
    "l0.delete_graph": frozenset({"graph", "sync"}),
    "l0.flush": frozenset({"sync"}),
    "l0.count": frozenset(),
    "l0.verify": frozenset(),
}


def _required(m: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in m:
        raise InvalidInput(f"{m.get('type')}: missing field {key!r}", path=(key,))
    value = m[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        name = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InvalidInput(
            f"{m.get('type')}: field {key!r} must be a {name}, not {value!r}", path=(key,)
        )
    return value


def _opt(m: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if m.get(key) is None:
        return None
    return _required(m, key, kind)


def _opt_bool(m: Mapping[str, Any], key: str, default: bool) -> bool:
    value = _opt(m, key, bool)
    return default if value is None else bool(value)
