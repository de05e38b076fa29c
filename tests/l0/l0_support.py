"""Helpers shared by the L0 tests and the kill-test child process.

Kept free of pytest so that ``l0_kill_child.py`` can import it.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from gliding_actors.l0 import L0Entry, L0Store

#: Fields that change on reads (written down in batches), left out of state
#: comparisons of writes.
ACCESS_FIELDS = ("access_count", "last_accessed")
INDEX_NAMESPACES = (b"t:", b"g:", b"y:", b"i:")


def node_state(store: L0Store) -> dict[str, tuple[Any, ...]]:
    """Every live node (full scan, no index), without its access statistics."""
    keep = [i for i, name in enumerate(L0Entry._fields) if name not in ACCESS_FIELDS]
    return {e.iri: tuple(e[i] for i in keep) for e in store.query()}


def index_keys(store: L0Store) -> set[bytes]:
    return {k for k, _ in store.raw_items() if k.startswith(INDEX_NAMESPACES)}


def versions(store: L0Store, iris: list[str]) -> dict[str, int]:
    """The current version of each IRI: its node's, its tombstone's, or 0."""
    return {iri: store.retrieve_version(iri) for iri in iris}


def brute_force(
    entries: list[L0Entry],
    *,
    tags: list[str] | None = None,
    graph: str | None = None,
    node_type: str | None = None,
    prefix: str | None = None,
    min_importance: float | None = None,
    max_importance: float | None = None,
) -> list[str]:
    """The IRIs a query must return, computed by filtering every live node."""
    out = []
    for e in entries:
        if tags and not set(tags) <= set(e.tags):
            continue
        if graph is not None and e.named_graph != graph:
            continue
        if node_type is not None and node_type not in e.jsonld_types:
            continue
        if prefix is not None and not e.iri.startswith(prefix):
            continue
        if min_importance is not None and e.importance < min_importance:
            continue
        if max_importance is not None and e.importance > max_importance:
            continue
        out.append(e.iri)
    return sorted(out)


# -- the kill-test workload ------------------------------------------------------

KILL_TAGS = ["user_intent", "confirmed_fact", "emphasis", "plan", "risk"]
KILL_GRAPHS = ["plan", "execution", "review"]
KILL_IRIS = [f"memory:session-{n % 7:03d}/block-{n:03d}" for n in range(120)]


def kill_ops(seed: int) -> Iterator[dict[str, Any]]:
    """An endless, deterministic stream of L0 operations (same seed, same ops)."""
    rng = random.Random(seed)
    i = 0
    while True:
        i += 1
        n = rng.randrange(120)
        iri = f"memory:session-{n % 7:03d}/block-{n:03d}"
        roll = rng.random()
        if roll < 0.62:
            yield {
                "op": "store",
                "iri": iri,
                "content": {
                    "@type": rng.choice(["Memory", "Artifact", "Decision"]),
                    "summary": "x" * rng.randrange(1, 400),
                    "step": i,
                },
                "tags": rng.sample(KILL_TAGS, rng.randrange(0, 3)),
                "graph": rng.choice([None, *KILL_GRAPHS]),
                "importance": rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]),
                "merge": rng.random() < 0.7,
                "sync": rng.random() < 0.3,
            }
        elif roll < 0.72:
            # half of them at an explicit version (the coherence layer's), two
            # above the current one
            bump = rng.choice([0, 2])
            yield {"op": "delete", "iri": iri, "sync": rng.random() < 0.3, "bump": bump}
        elif roll < 0.74:
            yield {"op": "delete_graph", "graph": rng.choice(KILL_GRAPHS), "sync": True}
        elif roll < 0.78:
            yield {"op": "annotate", "iri": iri, "vector_id": rng.randrange(1000), "sync": False}
        else:
            yield {"op": "read", "iri": iri}


def apply_op(store: L0Store, op: dict[str, Any]) -> Any:
    kind = op["op"]
    if kind == "store":
        entry = L0Entry(
            iri=op["iri"],
            content=op["content"],
            tags=op["tags"],
            named_graph=op["graph"],
            importance=op["importance"],
        )
        return store.store(entry, merge=op["merge"], sync=op["sync"]).version
    if kind == "delete":
        version = store.retrieve_version(op["iri"]) + op["bump"] if op["bump"] else None
        return store.delete(op["iri"], sync=op["sync"], version=version)
    if kind == "delete_graph":
        return store.delete_graph(op["graph"], sync=op["sync"])
    if kind == "annotate":
        return store.annotate(op["iri"], vector_id=op["vector_id"], sync=op["sync"]) is not None
    return store.retrieve(op["iri"]) is not None
