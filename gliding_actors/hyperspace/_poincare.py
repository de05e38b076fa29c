"""Poincaré embeddings of the class hierarchy (Nickel & Kiela, 2017).

The text embedders place nodes by what they *say*; this module places them by
where they *sit* in the type hierarchy (``rdfs:subClassOf`` between classes,
``rdf:type`` from instances to classes), so that "checker agent" and "executor
agent" — far apart as text — are close as siblings under ``Agent``. A tree
grows exponentially with depth and so does the hyperbolic plane, which is why
ten dimensions of the Poincaré ball hold a hierarchy that Euclidean space
needs hundreds for: general classes settle near the origin, specific ones near
the boundary, and siblings end up near each other.

Written from the paper, numpy only:

* **Data.** Directed pairs ``(u, v)`` — "``u`` is a ``v``" (child, ancestor).
  By default (``transitive=True``) the model trains on the transitive closure
  of the edges it is given, as the paper does for the WordNet noun hierarchy:
  an instance of ``CheckerAgent`` is also an ``Agent``. ``N(u)`` is the set of
  ``v`` with ``(u, v)`` a training pair.
* **Loss.** For each pair, softmax over negative distances against ``k``
  sampled negatives ``v'`` (``v' ≠ u``, ``(u, v')`` not a pair)::

      L(u, v) = d(u, v) + log Σ_{w ∈ {v} ∪ negatives} exp(-d(u, w))

  with ``d`` the Poincaré distance
  ``arcosh(1 + 2‖u−v‖² / ((1−‖u‖²)(1−‖v‖²)))``.
* **Riemannian SGD.** The Euclidean gradient of ``d`` (the paper's closed
  form) is rescaled by the inverse of the ball's metric tensor,
  ``(1−‖θ‖²)²/4``, and a point that leaves the ball is projected back to norm
  ``1 − ε``. Updates are computed in mini-batches from one snapshot of the
  parameters and summed per node (a batch is ``batch_size`` SGD steps that do
  not see each other), which is what makes the numpy version fast: one batch
  is a dozen array operations whatever its size.
* **Burn-in.** ``burn_in`` epochs at ``burn_in_lr`` (default ``lr / 10``)
  before the ``epochs`` proper, with negatives drawn in proportion to node
  degree (so frequent, general nodes are pushed apart early and find the
  centre); afterwards negatives are uniform over the nodes.
* **Determinism.** Every random draw (initialisation, shuffling, negatives)
  comes from one ``numpy.random.Generator`` — ``default_rng(seed)`` unless one
  is injected — so the same edges, options and seed give bit-identical
  vectors. The generator's state is persisted with the model, so an
  :meth:`~PoincareEmbedding.update` after a reload draws what it would have
  drawn without one.

Incremental :meth:`~PoincareEmbedding.update`: a node is retrained only if it
is new or its set of ancestors changed; everything else stays exactly where it
is. New points start at their parent (or near their children) and a few
epochs over the pairs touching the retrained nodes settle them — the rest of
the ball is frozen, so search results for unrelated nodes do not drift.

Not thread-safe: the owner serialises calls (the hyperspace engine trains on
its own worker and publishes a new model, it never shares one being trained).
The ball's geometry lives in :mod:`._hyperbolic` and the edges in :mod:`._hierarchy`;
their public functions are re-exported here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Final, Self

import msgpack
import numpy as np
import numpy.typing as npt

from gliding_actors.errors import CorruptRecord, IncompatibleFormat, InvalidInput, show
from gliding_actors.hyperspace._hierarchy import _check_edges, hierarchy_edges, transitive_closure
from gliding_actors.hyperspace._hyperbolic import poincare_distance, reconstruction_metrics

__all__ = [
    "PoincareEmbedding",
    "hierarchy_edges",
    "poincare_distance",
    "reconstruction_metrics",
    "transitive_closure",
]

_FloatArray = npt.NDArray[np.float64]
_IntArray = npt.NDArray[np.int64]

#: msgpack layout version of :meth:`PoincareEmbedding.to_bytes`.
_FORMAT: Final = 1
_MAGIC: Final = "gliding_actors.poincare"
#: Bit generators whose state :meth:`PoincareEmbedding.from_bytes` restores.
_BIT_GENERATORS: Final = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
#: Epochs :meth:`PoincareEmbedding.fit` runs after the burn-in unless told otherwise.
DEFAULT_EPOCHS: Final = 50
#: Rounds of rejection sampling before a negative with no valid value is masked out.
_REJECTION_ROUNDS: Final = 32


# --- the model -----------------------------------------------------------------------------


def _check_int(name: str, value: object, low: int) -> int:
    if type(value) is not int or value < low:
        raise InvalidInput(f"{name} must be an int >= {low}, not {show(value)}", path=(name,))
    return value


def _check_float(name: str, value: object, *, low: float, high: float) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not low < value < high
    ):
        raise InvalidInput(
            f"{name} must be a number in ({low}, {high}), not {show(value)}", path=(name,)
        )
    return float(value)


class PoincareEmbedding:
    """Points in the ``dim``-dimensional Poincaré ball for the nodes of a
    hierarchy, trained with Riemannian SGD (see the module docstring).

    Options (all keyword-only): ``seed`` / ``rng`` (an injected
    ``numpy.random.Generator`` wins over ``seed``), ``lr`` (0.1),
    ``negatives`` per pair (10), ``burn_in`` epochs (10) at ``burn_in_lr``
    (``lr / 10``), ``batch_size`` pairs per update (10), ``transitive`` (train
    on the closure, default true), ``init_range`` (points start uniform in
    ``±init_range``, 1e-3), ``epsilon`` (projection margin: ``‖θ‖ ≤ 1 − ε``,
    1e-5), ``update_epochs`` (epochs an :meth:`update` runs, 30). The defaults
    are the paper's and gensim's.

    :meth:`similarity` maps a distance to ``exp(-d)`` ∈ (0, 1]: 1 for the same
    point, ``e⁻¹`` one unit apart — the same ``exp(-d)`` the training softmax
    uses as a node's unnormalised probability of being related, so a score can
    be read as "how strongly the model thinks these are related".
    """

    def __init__(
        self,
        dim: int = 10,
        *,
        seed: int = 0,
        rng: np.random.Generator | None = None,
        lr: float = 0.1,
        negatives: int = 10,
        burn_in: int = 10,
        burn_in_lr: float | None = None,
        batch_size: int = 10,
        transitive: bool = True,
        init_range: float = 1e-3,
        epsilon: float = 1e-5,
        update_epochs: int = 30,
    ) -> None:
        self._dim = _check_int("dim", dim, 2)
        self._seed = _check_int("seed", seed, 0)
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise InvalidInput("rng must be a numpy.random.Generator", path=("rng",))
        self._lr = _check_float("lr", lr, low=0.0, high=1e6)
        self._negatives = _check_int("negatives", negatives, 1)
        self._burn_in = _check_int("burn_in", burn_in, 0)
        self._burn_in_lr = (
            self._lr / 10.0
            if burn_in_lr is None
            else _check_float("burn_in_lr", burn_in_lr, low=0.0, high=1e6)
        )
        self._batch_size = _check_int("batch_size", batch_size, 1)
        if type(transitive) is not bool:
            raise InvalidInput("transitive must be a bool", path=("transitive",))
        self._transitive = transitive
        self._init_range = _check_float("init_range", init_range, low=0.0, high=0.1)
        self._epsilon = _check_float("epsilon", epsilon, low=0.0, high=0.1)
        self._update_epochs = _check_int("update_epochs", update_epochs, 0)
        self._rng = rng if rng is not None else np.random.default_rng(self._seed)
        self._reset()

    def _reset(self) -> None:
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._edges: list[tuple[str, str]] = []  # direct edges, first-seen order, no duplicates
        self._edge_set: set[tuple[str, str]] = set()
        self._vectors: _FloatArray = np.zeros((0, self._dim))
        self._pairs: _IntArray = np.zeros((0, 2), dtype=np.int64)  # training pairs (u, v)

    # -- read side ------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        return self._dim

    def options(self) -> dict[str, Any]:
        """The training options, as the benchmark reports them."""
        return {
            "dim": self._dim,
            "seed": self._seed,
            "lr": self._lr,
            "negatives": self._negatives,
            "burn_in": self._burn_in,
            "burn_in_lr": self._burn_in_lr,
            "batch_size": self._batch_size,
            "transitive": self._transitive,
            "init_range": self._init_range,
            "epsilon": self._epsilon,
            "update_epochs": self._update_epochs,
        }

    def nodes(self) -> list[str]:
        """Every embedded node, in the order it was first seen."""
        return list(self._names)

    def edges(self) -> list[tuple[str, str]]:
        """The direct ``(child, parent)`` edges trained on (closure not included)."""
        return list(self._edges)

    def training_pairs(self) -> list[tuple[str, str]]:
        """The pairs the loss runs over: the edges, or their closure."""
        names = self._names
        return [(names[u], names[v]) for u, v in self._pairs.tolist()]

    def __contains__(self, node: object) -> bool:
        return node in self._index

    def __len__(self) -> int:
        return len(self._names)

    def vector(self, node: str) -> _FloatArray | None:
        """A copy of ``node``'s point, or ``None`` if it is not embedded."""
        i = self._index.get(node) if type(node) is str else None
        return None if i is None else self._vectors[i].copy()

    def vectors(self) -> _FloatArray:
        """A copy of every point, rows in :meth:`nodes` order."""
        return self._vectors.copy()

    def _row(self, node: object, what: str) -> int:
        if type(node) is not str:
            raise InvalidInput(f"{what} must be a string, not {type(node).__name__}", path=(what,))
        i = self._index.get(node)
        if i is None:
            raise InvalidInput(f"{what} {show(node)} is not embedded", path=(what,))
        return i

    def distance(self, a: str, b: str) -> float:
        """Poincaré distance between two embedded nodes (:class:`InvalidInput`
        for an unknown one)."""
        i, j = self._row(a, "a"), self._row(b, "b")
        return float(poincare_distance(self._vectors[i], self._vectors[j]))

    def similarity(self, a: str, b: str) -> float:
        """``exp(-distance(a, b))`` ∈ (0, 1] (see the class docstring)."""
        return math.exp(-self.distance(a, b))

    def distances_from(self, node: str) -> _FloatArray:
        """Distances from ``node`` to every node, in :meth:`nodes` order: one
        vectorised pass, for ranking candidates by structure."""
        i = self._row(node, "node")
        return poincare_distance(self._vectors[i], self._vectors)

    # -- training -------------------------------------------------------------------------

    def fit(self, edges: Iterable[tuple[str, str]], epochs: int = DEFAULT_EPOCHS) -> None:
        """Train from scratch on ``(child, parent)`` edges: ``burn_in`` epochs
        then ``epochs`` epochs. Replaces whatever the model held; on bad input
        (:class:`InvalidInput`: no edges, a self-loop, a non-string node, a
        bad ``epochs``) nothing changes and no random number is drawn."""
        checked = _check_edges(edges, allow_empty=False)
        _check_int("epochs", epochs, 0)
        self._reset()
        self._add_edges(checked)
        rng = self._rng
        r = self._init_range
        self._vectors = rng.uniform(-r, r, size=(len(self._names), self._dim))
        self._pairs = self._build_pairs()
        everything = np.ones(len(self._names), dtype=bool)
        pairs = self._pairs
        if self._burn_in:
            self._train(pairs, self._burn_in, self._burn_in_lr, everything, by_degree=True)
        self._train(pairs, epochs, self._lr, everything, by_degree=False)

    def update(self, edges: Iterable[tuple[str, str]], epochs: int | None = None) -> None:
        """Add ``(child, parent)`` edges without retraining from scratch.

        Retrained: new nodes and existing nodes whose set of training partners
        ``N(u)`` grew (with ``transitive``: whose ancestors changed, e.g. a
        reparented subtree). Every other point stays exactly where it is. New
        points start at the mean of their (already placed) parents plus a
        little noise, or — a new superclass — at 0.9 × the mean of its
        children; then ``epochs`` (default ``update_epochs``) epochs run over
        the pairs touching a retrained node, updating only retrained nodes.

        Edges already known are ignored; an empty batch is a no-op; on an
        empty model this is :meth:`fit`. Removing edges needs a :meth:`fit`.
        Bad input: :class:`InvalidInput`, nothing changed.
        """
        checked = _check_edges(edges, allow_empty=True)
        if epochs is not None:
            _check_int("epochs", epochs, 0)
        if not self._names:
            if checked:
                self.fit(checked, DEFAULT_EPOCHS if epochs is None else epochs)
            return
        fresh = [e for e in dict.fromkeys(checked) if e not in self._edge_set]
        if not fresh:
            return
        old_count = len(self._names)
        old_pairs = self._pairs
        self._add_edges(fresh)
        self._pairs = self._build_pairs()
        self._place_new(old_count, fresh)
        trainable = np.zeros(len(self._names), dtype=bool)
        trainable[old_count:] = True
        trainable[self._partners_changed(old_pairs, self._pairs)] = True
        pairs = self._pairs
        touching = trainable[pairs[:, 0]] | trainable[pairs[:, 1]]
        self._train(
            pairs[touching],
            self._update_epochs if epochs is None else epochs,
            self._lr,
            trainable,
            by_degree=False,
        )

    def _add_edges(self, edges: Sequence[tuple[str, str]]) -> None:
        for edge in edges:
            if edge in self._edge_set:
                continue
            self._edge_set.add(edge)
            self._edges.append(edge)
            for name in edge:
                if name not in self._index:
                    self._index[name] = len(self._names)
                    self._names.append(name)

    def _build_pairs(self) -> _IntArray:
        pairs = transitive_closure(self._edges) if self._transitive else self._edges
        index = self._index
        if not pairs:
            return np.zeros((0, 2), dtype=np.int64)
        return np.array([(index[u], index[v]) for u, v in pairs], dtype=np.int64)

    def _partners_changed(self, before: _IntArray, after: _IntArray) -> _IntArray:
        """The nodes ``u`` whose training partners ``N(u)`` differ between two pair arrays: the ``u`` of
        every pair in one and not the other. Vectorised, as the pairs (a transitive closure) outgrow
        a Python loop over them on every update."""
        n = len(self._names)  # indices only grow: a node keeps its index, so codes compare across the two
        codes_before = before[:, 0] * n + before[:, 1]
        codes_after = after[:, 0] * n + after[:, 1]
        changed = np.setxor1d(codes_before, codes_after, assume_unique=False)
        return np.unique(changed // n)

    def _place_new(self, old_count: int, fresh: Sequence[tuple[str, str]]) -> None:
        """Initial points for nodes ``old_count…``: near their placed parents
        (a child sits just outside its parent), else inside their children,
        else where :meth:`fit` would start them."""
        n = len(self._names)
        vectors = np.zeros((n, self._dim))
        vectors[:old_count] = self._vectors
        placed = np.zeros(n, dtype=bool)
        placed[:old_count] = True
        parents: dict[int, list[int]] = {}
        children: dict[int, list[int]] = {}
        index = self._index
        for child, parent in self._edges:
            c, p = index[child], index[parent]
            parents.setdefault(c, []).append(p)
            children.setdefault(p, []).append(c)
        rng = self._rng
        r = self._init_range
        pending = list(range(old_count, n))
        while pending:
            left: list[int] = []
            for i in pending:
                above = [p for p in parents.get(i, ()) if placed[p]]
                below = [c for c in children.get(i, ()) if placed[c]]
                if above:
                    vectors[i] = vectors[above].mean(axis=0) + rng.uniform(-r, r, self._dim)
                elif below:
                    vectors[i] = 0.9 * vectors[below].mean(axis=0) + rng.uniform(-r, r, self._dim)
                else:
                    left.append(i)
                    continue
                placed[i] = True
            if len(left) == len(pending):  # a new component touching nothing placed
                for i in left:
                    vectors[i] = rng.uniform(-r, r, self._dim)
                break
            pending = left
        self._project(vectors, np.arange(old_count, n))
        self._vectors = vectors

    def _project(self, vectors: _FloatArray, rows: _IntArray) -> None:
        """Pull rows that reached the boundary back to norm ``1 − ε``."""
        limit = 1.0 - self._epsilon
        norms = np.linalg.norm(vectors[rows], axis=1)
        over = norms >= limit
        if over.any():
            hit = rows[over]
            vectors[hit] *= (limit / norms[over])[:, None]

    def _negatives_for(
        self, us: _IntArray, keys: _IntArray, probs: _FloatArray | None
    ) -> tuple[_IntArray, npt.NDArray[np.bool_]]:
        """``negatives`` draws per ``u``: nodes ``w ≠ u`` with ``(u, w)`` not a
        pair, uniform or by ``probs``; rejected draws are redrawn, and the few
        that find no valid value in time are masked out of the softmax."""
        rng = self._rng
        n = len(self._names)
        k = self._negatives
        shape = (len(us), k)

        def draw(size: int) -> _IntArray:
            if probs is None:
                return rng.integers(0, n, size=size, dtype=np.int64)
            return rng.choice(n, size=size, p=probs).astype(np.int64)

        negs = draw(len(us) * k).reshape(shape)
        u_col = np.broadcast_to(us[:, None], shape)

        def invalid(candidates: _IntArray, owners: _IntArray) -> npt.NDArray[np.bool_]:
            bad: npt.NDArray[np.bool_] = np.equal(candidates, owners)
            if len(keys):
                code = owners * n + candidates
                pos = np.searchsorted(keys, code)
                pos = np.minimum(pos, len(keys) - 1)
                bad |= keys[pos] == code
            return bad

        bad = invalid(negs, u_col)
        for _ in range(_REJECTION_ROUNDS):
            count = int(bad.sum())
            if not count:
                break
            fresh = draw(count)
            negs[bad] = fresh
            bad[bad] = invalid(fresh, u_col[bad])
        return negs, ~bad

    def _train(
        self,
        pairs: _IntArray,
        epochs: int,
        lr: float,
        trainable: npt.NDArray[np.bool_],
        *,
        by_degree: bool,
    ) -> None:
        """``epochs`` passes of Riemannian SGD over ``pairs``, moving only
        ``trainable`` rows. Negatives are checked against *all* pairs.

        Everything that does not depend on the points is done once per epoch
        for all batches (shuffle, negatives, each batch's distinct nodes and
        the scatter map), so a batch step is ~40 numpy calls on
        ``batch_size × (negatives + 2)`` rows."""
        if not len(pairs) or not epochs:
            return
        n = len(self._names)
        every = self._pairs
        keys = np.unique(every[:, 0] * n + every[:, 1])
        probs: _FloatArray | None = None
        if by_degree:
            degree = np.bincount(every.ravel(), minlength=n).astype(np.float64)
            probs = degree / degree.sum()
        theta = self._vectors
        rng = self._rng
        bs = self._batch_size
        width = self._negatives + 2  # u, the positive v, the negatives
        dim = self._dim
        lane = np.arange(dim)
        step = np.where(trainable, lr, 0.0)  # a frozen row gets a zero step
        limit = 1.0 - self._epsilon
        count = len(pairs)
        batch_of = np.arange(count) // bs
        n_batches = int(batch_of[-1]) + 1
        for _ in range(epochs):
            order = pairs[rng.permutation(count)]
            negs, valid = self._negatives_for(order[:, 0], keys, probs)
            nodes = np.concatenate((order, negs), axis=1)  # (count, width): u, v, negatives
            weight = (
                None
                if valid.all()
                else np.concatenate((np.ones((count, 1)), valid.astype(np.float64)), axis=1)
            )
            # each batch's distinct nodes, all batches in one sort
            tagged = (batch_of[:, None] * n + nodes).ravel()
            distinct, inverse = np.unique(tagged, return_inverse=True)
            bounds = np.searchsorted(distinct, np.arange(n_batches + 1) * n)
            local = inverse - bounds[:-1][np.repeat(batch_of, width)]
            rows_of = distinct - np.repeat(np.arange(n_batches) * n, np.diff(bounds))
            for b in range(n_batches):
                lo, hi = b * bs, min((b + 1) * bs, count)
                self._step(
                    theta,
                    nodes[lo:hi],
                    None if weight is None else weight[lo:hi],
                    rows_of[bounds[b] : bounds[b + 1]],
                    (local[lo * width : hi * width, None] * dim + lane).ravel(),
                    step,
                    limit,
                )

    @staticmethod
    def _step(
        theta: _FloatArray,
        nodes: _IntArray,
        weight: _FloatArray | None,
        rows: _IntArray,
        scatter: _IntArray,
        step: _FloatArray,
        limit: float,
    ) -> None:
        """One mini-batch: loss gradients of every pair from the same
        snapshot, summed per node, rescaled by the inverse metric, applied and
        projected. ``nodes`` is ``(B, width)`` (u, v, negatives); ``rows`` the
        batch's distinct nodes and ``scatter`` where each of ``nodes``' gradient
        coordinates lands in the ``(len(rows), dim)`` sum."""
        b, width = nodes.shape
        dim = theta.shape[1]
        pts = theta[nodes]  # (B, width, dim)
        x = pts[:, 0]  # u
        y = pts[:, 1:]  # v and the negatives
        xx = np.einsum("bd,bd->b", x, x)
        yy = np.einsum("bkd,bkd->bk", y, y)
        xy = np.einsum("bd,bkd->bk", x, y)
        alpha = (1.0 - xx)[:, None]
        beta = 1.0 - yy
        delta = 2.0 * np.maximum(xx[:, None] + yy - 2.0 * xy, 0.0) / (alpha * beta)
        root = np.sqrt(np.maximum(delta * (delta + 2.0), 1e-30))  # sqrt(γ² − 1)
        dist = np.log1p(delta + root)  # arcosh(1 + δ)
        # softmax over -d; dL/dd_j = [j is the positive] - p_j
        p = np.exp(dist.min(axis=1, keepdims=True) - dist)
        if weight is not None:
            p *= weight  # negatives with no valid draw take no part
        p /= p.sum(axis=1, keepdims=True)
        w = -p
        w[:, 0] += 1.0
        # ∂d/∂x = s·((‖y‖² − 2⟨x,y⟩ + 1)/α² · x − y/α),  s = 4/(β·sqrt(γ²−1));  ∂d/∂y alike
        ws = w * 4.0 / (beta * root)
        wt = w * 4.0 / (alpha * root)
        grads = np.empty((b, width, dim))
        grads[:, 0] = (ws * (yy - 2.0 * xy + 1.0)).sum(axis=1)[:, None] / (alpha * alpha) * x
        grads[:, 0] -= np.einsum("bk,bkd->bd", ws / alpha, y)
        grads[:, 1:] = (wt * (xx[:, None] - 2.0 * xy + 1.0) / (beta * beta))[..., None] * y
        grads[:, 1:] -= (wt / beta)[..., None] * x[:, None, :]
        total = np.bincount(scatter, weights=grads.ravel(), minlength=len(rows) * dim)
        old = theta[rows]
        factor = step[rows] * (1.0 - np.einsum("ij,ij->i", old, old)) ** 2 / 4.0
        new = old - factor[:, None] * total.reshape(len(rows), dim)
        norms = np.sqrt(np.einsum("ij,ij->i", new, new))
        scale = np.minimum(1.0, limit / np.maximum(norms, 1e-300))
        scale[factor == 0.0] = 1.0  # a frozen row is not even re-projected: bit-for-bit still
        theta[rows] = new * scale[:, None]

    # -- persistence ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The whole model as msgpack (no pickle): options, nodes, direct
        edges, the points (little-endian float64) and the random generator's
        state, so that training resumes exactly where it was."""
        state = self._rng.bit_generator.state
        blob = msgpack.packb(
            {
                "magic": _MAGIC,
                "format": _FORMAT,
                "options": self.options(),
                "nodes": self._names,
                "edges": [list(e) for e in self._edges],
                "vectors": self._vectors.astype("<f8").tobytes(),
                "rng": json.dumps(state, sort_keys=True),
            },
            use_bin_type=True,
        )
        assert isinstance(blob, bytes)
        return blob

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """A model from :meth:`to_bytes`. Not bytes: :class:`InvalidInput`;
        a newer format: :class:`IncompatibleFormat`; anything that does not
        decode to a consistent model: :class:`CorruptRecord`."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidInput("a Poincaré model is bytes", path=("data",))
        try:
            doc = msgpack.unpackb(bytes(data), raw=False)
        except (ValueError, msgpack.UnpackException) as exc:
            raise CorruptRecord(f"Poincaré model does not decode: {exc}") from None
        if not isinstance(doc, dict) or doc.get("magic") != _MAGIC:
            raise CorruptRecord("not a Poincaré model")
        version = doc.get("format")
        if type(version) is not int:
            raise CorruptRecord("Poincaré model without a format version")
        if version > _FORMAT:
            raise IncompatibleFormat(
                f"Poincaré model format {version} is newer than this build reads ({_FORMAT})"
            )
        try:
            options = dict(doc["options"])
            seed = options.pop("seed")
            dim = options.pop("dim")
            model = cls(dim, seed=seed, **options)
            names = doc["nodes"]
            edges = _check_edges([tuple(e) for e in doc["edges"]], allow_empty=True)
            vectors = np.frombuffer(doc["vectors"], dtype="<f8").astype(np.float64)
            state = json.loads(doc["rng"])
            bitgen_name = state["bit_generator"]
        except (KeyError, TypeError, ValueError, InvalidInput) as exc:
            raise CorruptRecord(f"Poincaré model is inconsistent: {exc}") from None
        if bitgen_name not in _BIT_GENERATORS:
            raise CorruptRecord(f"unknown bit generator {bitgen_name!r}")
        model._add_edges(edges)
        if model._names != names or vectors.size != len(names) * dim:
            raise CorruptRecord("Poincaré model: nodes, edges and vectors disagree")
        vectors = vectors.reshape(len(names), dim)
        if not np.isfinite(vectors).all() or (np.linalg.norm(vectors, axis=1) >= 1.0).any():
            raise CorruptRecord("Poincaré model: a point lies outside the unit ball")
        try:
            bitgen = getattr(np.random, bitgen_name)()
            bitgen.state = state
        except (TypeError, ValueError, KeyError) as exc:
            raise CorruptRecord(f"Poincaré model: bad generator state: {exc}") from None
        model._rng = np.random.Generator(bitgen)
        model._vectors = vectors
        model._pairs = model._build_pairs()
        return model
