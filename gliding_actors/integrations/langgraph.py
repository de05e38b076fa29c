"""``GlidingStore``: LangGraph's ``BaseStore`` over one agent's coherent memory.

Optional: needs the ``langgraph`` extra (``pip install 'gliding-actors[langgraph]'``).

**Bound to an agent.** A store is made from an :class:`~gliding_actors.agent.Agent`
(``GlidingStore(memory.agent("pa", "PA"))``): every operation is that agent's —
it reads through its cache, its writes invalidate the other agents' copies,
and its role's rights apply. A LangGraph node that should act as another role
gets its own store over its own agent.

**Mapping** (a contract: stored data depends on it):

* every item is a line in **one named graph**, ``graph=`` or by default the
  first graph the agent's role has every right in (the default table: PA
  ``plan``, DA ``execution``, CA ``review``, AA ``decision``, SA and
  ``system`` ``shared``), so a store works on the default configuration;
  other roles read it as the permission matrix says. A store whose role has
  no such graph must be given one; a refused action is
  :class:`~gliding_actors.errors.PermissionDenied` and nothing is sent.
* ``(namespace, key)`` → line IRI ``lgs:<l1>/.../<ln>/<key>``, each label and
  the key percent-encoded (``urllib.parse.quote(label, safe="")``, so ``/``,
  spaces and ``%`` cannot change the path): the last segment is always the
  key, so two items never share an IRI.
* the line's value: ``{"lgNamespace": "<l1>/.../<ln>" (encoded), "lgKey": key,
  "lgValue": <the item's value as canonical JSON text>, "lgCreatedAt",
  "lgUpdatedAt"}`` (seconds of the memory's injected clock), tagged
  ``lgns:<l1>``, ``lgns:<l1>/<l2>``, ... (each namespace prefix, encoded), so
  a search is confined to a prefix by the index itself. The value is kept as
  text (UTF-8, not escaped) so any JSON object round-trips unchanged (keys
  such as ``@id`` would otherwise mean something to JSON-LD); hybrid search
  indexes that text.

**Operations.** ``get`` is a coherent read (a hit costs no message). ``put`` is
a read then a ``cas`` on the version read, retried on a lost race, so
``created_at`` survives updates; :meth:`GlidingStore.put_if_version` exposes
the version check (``ConflictError`` when the item moved on) and
:meth:`GlidingStore.version` the current version (0: absent). ``put`` with
``None`` and ``delete`` write a tombstone (needs the ``delete`` right);
deleting a missing item does nothing. ``search`` finds every item under the
prefix the role may read, by SPARQL (coherent: dirty lines are recalled
first); with a ``query`` (an empty one is none) they are ranked by the
memory's hybrid search confined to that prefix (:meth:`Agent.search`), each
with a ``score`` in [0, 1] (the search's own: 1 is first by every ranking;
0 for an item the query does not match, ranked after the matches in
(namespace, key) order); without one they come in (namespace, key) order
with ``score`` None. Then ``filter`` (equality, or ``$eq $ne $gt $gte $lt
$lte`` on top-level keys) and ``offset``/``limit`` apply. A namespace prefix
or match path may be given as a list. ``list_namespaces`` lists namespaces holding at
least one live item.

**Time to live** (``supports_ttl`` is True): ``put(..., ttl=minutes)``, or the
store's ``ttl={"default_ttl": minutes}``, writes the item with the memory's
own time to live (:meth:`Agent.write`'s ``ttl_s``): once it runs out the item
reads as absent to every agent and search, and the memory deletes it (every
read sweeps what is due). When the config sets ``refresh_on_read``, a read
with ``refresh_ttl`` (LangGraph's default for ``get`` and ``search``) writes
the item again, unchanged, with a new expiry counted from the read: a new
version of the line (without ``refresh_on_read`` reads never refresh, as in
LangGraph's SQLite store). ``sweep_ttl()``
deletes what is due now and returns how many; ``start_ttl_sweeper()`` does
so every ``sweep_interval_minutes`` on a thread until ``stop_ttl_sweeper()``.

**LangGraph's ``index`` config** (``GlidingStore(agent, index={"embed": ...,
"fields": [...]})``) works as in LangGraph's own stores: ``embed`` is an
embedding function, a LangChain ``Embeddings``, a ``provider:model`` string,
or the name of one of this memory's embedders (``hash``, ``onnx``,
``openai``); at each put the ``fields`` (JSON paths, default ``$``: the whole
value) are embedded and kept with the item (``lgVectors``), a put with
``index=False`` is not embedded and ``index=[...]`` chooses its own fields;
a ``query`` is then scored by cosine to the item's best vector, items without
one after the scored ones. Without ``index``, a query ranks by the memory's
hybrid search, as above. ``python tools/langgraph_conformance.py`` runs
LangGraph's own store tests against this store and ``InMemoryStore``.

**Errors.** Every op of a ``batch`` is checked before any runs: a bad
namespace, key, value or filter is :class:`~gliding_actors.errors.InvalidInput`
(a ``ValueError``, like LangGraph's ``InvalidNamespaceError``) and the batch
changes nothing. The async variants run the blocking batch on the loop's
default executor (a bounded pool), so they never block the event loop.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any, Literal, cast
from urllib.parse import quote, unquote

from gliding_actors.agent import Agent
from gliding_actors.errors import ConflictError, GlidingError, InvalidInput, show
from gliding_actors.hyperspace import EMBEDDERS, build_embedder
from gliding_actors.l2._permissions import ACTIONS, DEFAULT_GRAPH, GRAPHS

try:
    from langchain_core.embeddings import Embeddings
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        ensure_embeddings,
        get_text_at_path,
        tokenize_path,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "gliding_actors.integrations.langgraph needs the 'langgraph' extra: pip install 'gliding-actors[langgraph]'"
    ) from exc

__all__ = ["GlidingStore", "item_iri", "namespace_tags", "own_graph"]

IRI_PREFIX = "lgs:"
#: An item's tags: this and each prefix of its encoded namespace (``lgns:a``, ``lgns:a/b``).
TAG_PREFIX = "lgns:"
_NS = "https://gliding-actors.dev/ns#"
_ITEMS_QUERY = (
    f"SELECT ?s ?ns ?key WHERE {{ ?s <{_NS}lgNamespace> ?ns ; <{_NS}lgKey> ?key }}"
)
_PUT_RETRIES = 8


def _ttl_seconds(minutes: object) -> float | None:
    """LangGraph's ``ttl`` (minutes, None: none) as the memory's ``ttl_s``; InvalidInput unless > 0."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes < math.inf:
        raise InvalidInput(f"ttl is a number of minutes > 0 (or None), not {show(minutes)}")
    return float(minutes) * 60


def _check_ttl_config(ttl: object) -> TTLConfig | None:
    """LangGraph's TTL config, checked: known keys, minutes > 0, a boolean ``refresh_on_read``."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise InvalidInput(f"ttl is LangGraph's TTL config (a mapping), not {show(ttl)}")
    known = {"default_ttl", "refresh_on_read", "sweep_interval_minutes", "omit_expired"}
    unknown = sorted(str(k) for k in ttl if k not in known)
    if unknown:
        raise InvalidInput(f"unknown TTL config key(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    for name in ("default_ttl", "sweep_interval_minutes"):
        _ttl_seconds(ttl.get(name))
    for name in ("refresh_on_read", "omit_expired"):
        if name in ttl and not isinstance(ttl[name], bool):
            raise InvalidInput(f"ttl.{name} is true or false, not {show(ttl[name])}")
    return cast(TTLConfig, dict(ttl))
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _enc(label: str) -> str:
    return quote(label, safe="")


def _check_namespace(namespace: object, *, allow_empty: bool = False) -> tuple[str, ...]:
    """LangGraph's rules for labels (non-empty strings, no ``.``, no NUL) as InvalidInput; a list is a tuple.

    The root label ``langgraph`` is refused by ``BaseStore.put`` itself, not
    here: a batch may hold it, as LangGraph's own stores allow.
    """
    if isinstance(namespace, list):
        namespace = tuple(namespace)
    if not isinstance(namespace, tuple):
        raise InvalidInput(f"a namespace is a tuple of strings, not {show(namespace)}")
    if not namespace and not allow_empty:
        raise InvalidInput("a namespace cannot be empty")
    for label in namespace:
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidInput(
                f"namespace label {show(label)} in {show(namespace)}: labels are non-empty strings without '.' or NUL"
            )
    return namespace


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key or "\x00" in key:
        raise InvalidInput(f"a key is a non-empty string without NUL, not {show(key)}")
    return key


def namespace_tags(namespace: tuple[str, ...]) -> list[str]:
    """An item's tags: ``lgns:`` and each prefix of its percent-encoded namespace."""
    labels = [_enc(label) for label in _check_namespace(namespace)]
    return [TAG_PREFIX + "/".join(labels[: n + 1]) for n in range(len(labels))]


def own_graph(role: str, allowed: Any) -> str | None:
    """The first graph ``role`` may create, read, update and delete in (``allowed(role, graph, action)``)."""
    for graph in GRAPHS if role != "system" else (DEFAULT_GRAPH,):  # GRAPHS ends with the shared one
        if all(allowed(role, graph, action) for action in ACTIONS):
            return graph
    return None


def item_iri(namespace: tuple[str, ...], key: str) -> str:
    """The line IRI of an item: ``lgs:`` + encoded labels + ``/`` + encoded key."""
    return IRI_PREFIX + "/".join(_enc(label) for label in _check_namespace(namespace)) + "/" + _enc(_check_key(key))


def _decode_namespace(text: str) -> tuple[str, ...]:
    return tuple(unquote(part) for part in text.split("/"))


def _when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def _check_filter(filter_: object) -> dict[str, Any] | None:
    if filter_ is None:
        return None
    if not isinstance(filter_, Mapping):
        raise InvalidInput(f"a search filter is a mapping, not {show(filter_)}")
    for key, cond in filter_.items():
        if not isinstance(key, str):
            raise InvalidInput(f"filter keys are strings, not {show(key)}")
        if isinstance(cond, Mapping):
            unknown = [op for op in cond if op not in _OPERATORS]
            if unknown or not cond:
                raise InvalidInput(f"filter {show(key)}: operators are {', '.join(_OPERATORS)}, not {unknown or '{}'}")
    return dict(filter_)


def _cosine(a: list[float], b: list[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norms == 0 else sum(x * y for x, y in zip(a, b, strict=False)) / norms


def _own_embedder(name: str, config: Any) -> Any:
    """One of this memory's embedders (``hash``, ``onnx``, ``openai``) as an embedding function."""
    embedder = build_embedder(name, config)

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in embedder.embed(list(texts))]

    return embed


def _matches(value: Mapping[str, Any], filter_: Mapping[str, Any] | None) -> bool:
    if not filter_:
        return True
    for key, cond in filter_.items():
        present = key in value
        actual = value.get(key)
        conds = cond.items() if isinstance(cond, Mapping) else [("$eq", cond)]
        for op, want in conds:
            if op == "$eq":
                ok = present and actual == want
            elif op == "$ne":
                ok = actual != want
            else:
                try:
                    ok = present and {
                        "$gt": actual > want, "$gte": actual >= want, "$lt": actual < want, "$lte": actual <= want
                    }[op]
                except TypeError:  # incomparable types never match
                    ok = False
            if not ok:
                return False
    return True


class GlidingStore(BaseStore):
    """LangGraph long-term memory over one agent of a ``MemorySystem`` (mapping in the module docstring)."""

    supports_ttl = True

    def __init__(
        self,
        agent: Agent,
        *,
        graph: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        timeout: float | None = None,
    ) -> None:
        if not isinstance(agent, Agent):
            raise InvalidInput(f"GlidingStore is bound to an Agent, not {type(agent).__name__}")
        self.agent = agent
        #: LangGraph's TTL config (``default_ttl`` and ``sweep_interval_minutes`` in minutes, ``refresh_on_read``)
        self.ttl_config: TTLConfig | None = _check_ttl_config(ttl)
        #: reads refresh a time to live only when the config turns this on (as LangGraph's SQLite store does)
        self._refresh_on_read = bool((self.ttl_config or {}).get("refresh_on_read", False))
        self._sweeper: threading.Thread | None = None
        self._stop_sweeping = threading.Event()
        #: LangGraph's ``index`` config: items embedded at put, a query scored by cosine (None: hybrid search)
        self.index_config: IndexConfig | None = None
        self.embeddings: Embeddings | None = None
        self._fields: list[tuple[str, Any]] = []
        if index is not None:
            self._set_index(index)
        permissions = agent.system.permissions
        chosen = graph if graph is not None else own_graph(agent.role, permissions.allowed)
        if chosen is None:
            raise InvalidInput(
                f"role {agent.role} has no graph it may create, read, update and delete in: pass graph= "
                "(and give the role those rights there in the permissions config)"
            )
        if not isinstance(chosen, str) or not chosen:
            raise InvalidInput(f"graph is a graph name, not {show(chosen)}")
        #: the named graph every item of this store is written in
        self.graph = chosen
        self.timeout = timeout

    def _set_index(self, index: IndexConfig) -> None:
        if not isinstance(index, Mapping):
            raise InvalidInput(f"index is LangGraph's index config (a mapping), not {show(index)}")
        embed = index.get("embed")
        if isinstance(embed, str) and embed in EMBEDDERS:  # one of this memory's own embedders, by name
            embed = _own_embedder(embed, self.agent.system.config.hyperspace)
        try:
            self.embeddings = ensure_embeddings(embed)
        except (ValueError, TypeError, ImportError) as exc:
            raise InvalidInput(f"index.embed: {exc}") from None
        self.index_config = cast(IndexConfig, dict(index))
        fields = index.get("fields") or ["$"]
        self._fields = [(path, path if path == "$" else tokenize_path(path)) for path in fields]

    def _texts(self, value: Mapping[str, Any], index: Literal[False] | list[str] | None) -> list[tuple[str, str]]:
        """``(path, text)`` to embed for an item, as LangGraph's stores choose them (``index`` per put)."""
        if self.embeddings is None or index is False:
            return []
        fields = self._fields if index is None else [(p, p if p == "$" else tokenize_path(p)) for p in index]
        found: list[tuple[str, str]] = []
        for path, tokens in fields:
            texts = get_text_at_path(dict(value), tokens)
            if len(texts) == 1:
                found.append((path, texts[0]))
            else:
                found.extend((f"{path}.{n}", text) for n, text in enumerate(texts))
        return found

    # -- checks ----------------------------------------------------------------
    def _check(self, op: object) -> None:
        if isinstance(op, GetOp):
            item_iri(op.namespace, op.key)
        elif isinstance(op, PutOp):
            item_iri(op.namespace, op.key)
            if op.value is not None:
                if not isinstance(op.value, Mapping):
                    raise InvalidInput(f"an item's value is a mapping (or None to delete), not {show(op.value)}")
                try:
                    json.dumps(dict(op.value), allow_nan=False)
                except (TypeError, ValueError) as exc:
                    raise InvalidInput(f"an item's value must be JSON: {exc}") from exc
            _ttl_seconds(op.ttl)
        elif isinstance(op, SearchOp):
            _check_namespace(op.namespace_prefix, allow_empty=True)
            _check_filter(op.filter)
            for name, n in (("limit", op.limit), ("offset", op.offset)):
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise InvalidInput(f"search {name} is an integer >= 0, not {show(n)}")
            if op.query is not None and not isinstance(op.query, str):
                raise InvalidInput(f"a search query is a string or None, not {show(op.query)}")
        elif isinstance(op, ListNamespacesOp):
            for cond in op.match_conditions or ():
                if cond.match_type not in ("prefix", "suffix"):
                    raise InvalidInput(f"match type is 'prefix' or 'suffix', not {show(cond.match_type)}")
                if not isinstance(cond.path, (tuple, list)) or not all(isinstance(p, str) and p for p in cond.path):
                    raise InvalidInput(f"a match path is a tuple of non-empty strings ('*' matches any), not {show(cond.path)}")
            if op.max_depth is not None and (isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int)
                                             or op.max_depth < 1):
                raise InvalidInput(f"max_depth is an integer >= 1 or None, not {show(op.max_depth)}")
            for name, n in (("limit", op.limit), ("offset", op.offset)):
                if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                    raise InvalidInput(f"list_namespaces {name} is an integer >= 0, not {show(n)}")
        else:
            raise InvalidInput(f"not a store op: {show(op)}")

    # -- batch -----------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; every op is checked first, so a bad one changes nothing."""
        checked = list(ops)
        for op in checked:
            self._check(op)
        results: list[Result] = []
        for op in checked:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key, refresh=op.refresh_ttl and self._refresh_on_read))
            elif isinstance(op, PutOp):
                self._put(tuple(op.namespace), op.key, op.value, op.index, _ttl_seconds(op.ttl))
                results.append(None)
            elif isinstance(op, SearchOp):
                found = self._search(op)
                if op.refresh_ttl and self._refresh_on_read:
                    for hit in found:
                        self._get(hit.namespace, hit.key, refresh=True)
                results.append(found)
            else:
                assert isinstance(op, ListNamespacesOp)
                results.append(self._list_namespaces(op))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on the loop's default executor: the loop is never blocked."""
        checked = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, checked)

    # -- the ops -----------------------------------------------------------------
    def _item(self, namespace: tuple[str, ...], key: str, node: Mapping[str, Any]) -> Item:
        return Item(
            value=json.loads(node["lgValue"]),
            key=key,
            namespace=namespace,
            created_at=_when(float(node["lgCreatedAt"])),
            updated_at=_when(float(node["lgUpdatedAt"])),
        )

    def _get(self, namespace: tuple[str, ...], key: str, *, refresh: bool = False) -> Item | None:
        iri = item_iri(namespace, key)
        current = self.agent.read(iri, timeout=self.timeout)
        node = current["value"]
        if node is None:
            return None
        if refresh:
            self._refresh(iri, int(current["version"]), node, namespace)
        return self._item(namespace, key, node)

    def _refresh(self, iri: str, version: int, node: Mapping[str, Any], namespace: tuple[str, ...]) -> None:
        """Count an item's time to live again from now: the same node written again with its TTL.

        An item without one is left alone; a lost race means another write already set the expiry."""
        ttl_s = node.get("lgTtlS")
        if not isinstance(ttl_s, (int, float)):
            return
        try:
            self.agent.cas(iri, version, dict(node), graph=self.graph, tags=namespace_tags(namespace),
                           ttl_s=float(ttl_s), timeout=self.timeout)
        except ConflictError:
            pass

    # -- time to live (SqliteStore's sweeper API) ------------------------------------------
    def sweep_ttl(self) -> int:
        """Delete every item (every line of the memory) whose time to live ran out; returns how many."""
        return self.agent.system.expiry.sweep()

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` on the loop's default executor."""
        return await asyncio.get_running_loop().run_in_executor(None, self.sweep_ttl)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's, else 5) on a daemon thread."""
        interval = sweep_interval_minutes
        if interval is None:
            interval = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not 0 < interval < math.inf:
            raise InvalidInput(f"sweep_interval_minutes is a number of minutes > 0, not {show(interval)}")
        if self._sweeper is not None and self._sweeper.is_alive():
            return
        self._stop_sweeping.clear()
        seconds = float(interval) * 60

        def sweep_until_stopped() -> None:
            while not self._stop_sweeping.wait(seconds):
                try:
                    self.sweep_ttl()
                except GlidingError:  # the memory closed or an agent's op timed out: try again next time
                    continue

        self._sweeper = threading.Thread(target=sweep_until_stopped, name="gliding-store-ttl-sweeper", daemon=True)
        self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True once it ended (within ``timeout`` seconds)."""
        self._stop_sweeping.set()
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        sweeper.join(timeout)
        return not sweeper.is_alive()

    def version(self, namespace: tuple[str, ...], key: str) -> int:
        """The item's line version (0 when it was never written): what :meth:`put_if_version` compares."""
        return int(self.agent.read(item_iri(namespace, key), timeout=self.timeout)["version"])

    def _node(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        created: float | None,
        vectors: Mapping[str, list[float]] | None = None,
        ttl_s: float | None = None,
    ) -> dict[str, Any]:
        now = self.agent.system.clock.now()
        extra: dict[str, Any] = {"lgVectors": json.dumps(vectors, separators=(",", ":"))} if vectors else {}
        if ttl_s is not None:
            extra["lgTtlS"] = ttl_s  # so a read can count the same time to live again
        return extra | {
            "lgNamespace": "/".join(_enc(label) for label in namespace),
            "lgKey": key,
            "lgValue": json.dumps(dict(value), sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False),
            "lgCreatedAt": now if created is None else created,
            "lgUpdatedAt": now,
        }

    def put_if_version(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], version: int) -> int:
        """Write only if the item is still at ``version`` (0: absent); returns the new version.

        :class:`~gliding_actors.errors.ConflictError` when another writer got there first.
        """
        self._check(PutOp(namespace, key, value))
        iri = item_iri(namespace, key)
        current = self.agent.read(iri, timeout=self.timeout)
        if int(current["version"]) != version:
            raise ConflictError(f"{iri} is at version {current['version']}, not {version}")
        node = current["value"]
        created = None if node is None else float(node["lgCreatedAt"])
        result = self.agent.cas(iri, version, self._node(namespace, key, value, created),
                                graph=self.graph, tags=namespace_tags(namespace), timeout=self.timeout)
        return int(result["version"])

    def _vectors(self, value: Mapping[str, Any] | None, index: Literal[False] | list[str] | None) -> dict[str, list[float]]:
        texts = [] if value is None else self._texts(value, index)
        if not texts:
            return {}
        assert self.embeddings is not None
        rows = self.embeddings.embed_documents([text for _path, text in texts])
        return {path: [float(x) for x in row] for (path, _text), row in zip(texts, rows, strict=True)}

    def _put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any] | None,
        index: Literal[False] | list[str] | None = None,
        ttl_s: float | None = None,
    ) -> None:
        iri = item_iri(namespace, key)
        vectors = self._vectors(value, index)
        for _attempt in range(_PUT_RETRIES):
            current = self.agent.read(iri, timeout=self.timeout)
            node = current["value"]
            if value is None:
                if node is not None:
                    self.agent.delete(iri, timeout=self.timeout)
                return
            created = None if node is None else float(node["lgCreatedAt"])
            try:
                self.agent.cas(iri, int(current["version"]), self._node(namespace, key, value, created, vectors, ttl_s),
                               graph=self.graph, tags=namespace_tags(namespace), ttl_s=ttl_s, timeout=self.timeout)
                return
            except ConflictError:
                continue  # another agent wrote in between: read again, keep its created_at
        raise ConflictError(f"put of {iri} lost {_PUT_RETRIES} races in a row")

    def _live_items(self, prefix: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], str]]:
        """(iri, namespace, key) of every live item under ``prefix`` the role may read, by namespace and key."""
        rows = self.agent.query(_ITEMS_QUERY, timeout=self.timeout)["rows"]
        found = []
        for row in rows:
            if not str(row["s"]).startswith(IRI_PREFIX):
                continue
            namespace = _decode_namespace(str(row["ns"]))
            if namespace[: len(prefix)] == prefix:
                found.append((str(row["s"]), namespace, str(row["key"])))
        return sorted(found, key=lambda r: (r[1], r[2]))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = _check_namespace(op.namespace_prefix, allow_empty=True)
        candidates = {iri: (ns, key) for iri, ns, key in self._live_items(prefix)}
        wanted = op.offset + op.limit
        if self.embeddings is not None and op.query and candidates:
            return self._vector_search(op, candidates)
        if not op.query or not op.query.strip() or not candidates:
            ranked: list[tuple[str, float | None]] = [(iri, None) for iri in candidates]
        else:
            confine = {"tags": [namespace_tags(prefix)[-1]]} if prefix else None
            hits = self.agent.search(op.query, k=min(10_000, len(candidates)), filters=confine, timeout=self.timeout)
            ranked = [  # search scores lie in [0, 1] already
                (iri, float(score)) for iri, score in zip(hits["iris"], hits["scores"]) if iri in candidates
            ]
            found = {iri for iri, _score in ranked}
            ranked += [(iri, 0.0) for iri in candidates if iri not in found]
        out: list[SearchItem] = []
        for iri, score in ranked:
            ns, key = candidates[iri]
            node = self.agent.read(iri, timeout=self.timeout)["value"]
            if node is None:
                continue
            item = self._item(ns, key, node)
            if _matches(item.value, op.filter):
                out.append(SearchItem(ns, key, item.value, item.created_at, item.updated_at, score))
            if len(out) >= wanted:
                break
        return out[op.offset : wanted]

    def _vector_search(self, op: SearchOp, candidates: Mapping[str, tuple[tuple[str, ...], str]]) -> list[SearchItem]:
        """With an ``index`` config, as LangGraph's stores do: cosine to the query, an item's best vector counts."""
        assert self.embeddings is not None and op.query is not None
        query = self.embeddings.embed_query(op.query)
        scored: list[tuple[float, int, SearchItem]] = []
        scoreless: list[SearchItem] = []
        for n, (iri, (ns, key)) in enumerate(candidates.items()):
            node = self.agent.read(iri, timeout=self.timeout)["value"]
            if node is None:
                continue
            item = self._item(ns, key, node)
            if not _matches(item.value, op.filter):
                continue
            vectors = json.loads(node.get("lgVectors") or "{}")
            hit = SearchItem(ns, key, item.value, item.created_at, item.updated_at, None)
            if not vectors:
                scoreless.append(hit)
                continue
            best = max(_cosine(query, vector) for vector in vectors.values())
            scored.append((best, n, SearchItem(ns, key, item.value, item.created_at, item.updated_at, best)))
        scored.sort(key=lambda entry: (-entry[0], entry[1]))
        ranked = [hit for _score, _n, hit in scored] + scoreless
        return ranked[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        spaces = sorted({ns for _iri, ns, _key in self._live_items(())})
        for cond in op.match_conditions or ():
            path = tuple(cond.path)
            if cond.match_type == "prefix":
                spaces = [ns for ns in spaces if len(ns) >= len(path)
                          and all(p in ("*", n) for p, n in zip(path, ns[: len(path)]))]
            else:
                spaces = [ns for ns in spaces if len(ns) >= len(path)
                          and all(p in ("*", n) for p, n in zip(path, ns[len(ns) - len(path):]))]
        if op.max_depth is not None:
            spaces = sorted({ns[: op.max_depth] for ns in spaces})
        return spaces[op.offset : op.offset + op.limit]
