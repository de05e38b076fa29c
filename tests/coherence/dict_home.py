"""An in-memory home for the coherence controllers' tests (the memory's own is ``LayeredHome``)."""

from __future__ import annotations

from gliding_actors.coherence._messages import Meta, Msg, Value


class DictHome:
    """An in-memory ``Home``: ``l2`` is what home holds, ``l0`` what is durable."""

    def __init__(self) -> None:
        self.l2: dict[str, tuple[Value, int]] = {}
        self.l0: dict[str, tuple[Value, int]] = {}
        self.meta: dict[str, Meta] = {}
        self.stores = 0

    def load(self, iri: str) -> tuple[Value, int]:
        return self.l2.get(iri, (None, 0))

    def meta_of(self, iri: str) -> Meta:
        return self.meta.get(iri)

    def store(self, iri: str, value: Value, version: int, durable: bool, meta: Meta) -> None:
        old = self.l2.get(iri, (None, 0))[1]
        if version < old:
            raise AssertionError(f"home version of {iri} would go back from {old} to {version}")
        self.l2[iri] = (value, version)
        self.meta[iri] = meta
        if durable:
            self.l0[iri] = (value, version)
        self.stores += 1

    def fence(self, iri: str) -> int:
        """No epochs here: the line keeps its version (the memory's ``LayeredHome`` fences)."""
        return self.load(iri)[1]

    def snapshot(self) -> Msg:
        """Canonical plain data of the contents (for the exhaustive checker)."""
        return {
            "l2": [[k, *self.l2[k]] for k in sorted(self.l2)],
            "l0": [[k, *self.l0[k]] for k in sorted(self.l0)],
            "meta": [[k, self.meta[k]] for k in sorted(self.meta)],
        }

    def restore(self, snap: Msg) -> None:
        self.l2 = {k: (v, n) for k, v, n in snap["l2"]}
        self.l0 = {k: (v, n) for k, v, n in snap["l0"]}
        self.meta = {k: meta for k, meta in snap["meta"]}
