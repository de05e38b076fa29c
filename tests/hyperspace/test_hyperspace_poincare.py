"""Poincaré embeddings of the class hierarchy: geometry, training, incremental
updates, persistence, the L2 hierarchy extractor and the refusals.

Everything trains on small trees (tens of nodes, well under a second each) in
the default run; the 1,365-node reconstruction and the gensim comparison are
``slow``.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gliding_actors.bench._hyperspace_poincare import balanced_tree, run_poincare
from gliding_actors.errors import CorruptRecord, IncompatibleFormat, InvalidInput
from gliding_actors.hyperspace._poincare import (
    PoincareEmbedding,
    hierarchy_edges,
    poincare_distance,
    reconstruction_metrics,
    transitive_closure,
)
from gliding_actors.l2._graph import GraphStore
from gliding_actors.l2._jsonld import VOCAB

TREE = balanced_tree(3, 3)  # 40 nodes, root "n"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"


def _trained(seed: int = 0, **options: object) -> PoincareEmbedding:
    model = PoincareEmbedding(5, seed=seed, **options)  # type: ignore[arg-type]
    model.fit(TREE, epochs=40)
    return model


@pytest.fixture(scope="module")
def tree_model() -> PoincareEmbedding:
    return _trained()


def _branch(node: str) -> str:
    """The root's child a node descends from ('' for the root)."""
    parts = node.split(".")
    return parts[1] if len(parts) > 1 else ""


# --- geometry ------------------------------------------------------------------------------


@given(
    st.lists(st.floats(-0.7, 0.7), min_size=3, max_size=3),
    st.lists(st.floats(-0.7, 0.7), min_size=3, max_size=3),
)
def test_distance_matches_the_closed_form(xs: list[float], ys: list[float]) -> None:
    x, y = np.array(xs) / 1.3, np.array(ys) / 1.3  # norms < 1
    expected = math.acosh(
        1 + 2 * float(np.sum((x - y) ** 2)) / ((1 - float(x @ x)) * (1 - float(y @ y)))
    )
    assert float(poincare_distance(x, y)) == pytest.approx(expected, rel=1e-9, abs=1e-7)
    assert float(poincare_distance(y, x)) == pytest.approx(expected, rel=1e-9, abs=1e-7)


def test_model_distance_and_similarity_follow_the_points(tree_model: PoincareEmbedding) -> None:
    a, b = "n.0.1", "n.2.2.0"
    x, y = tree_model.vector(a), tree_model.vector(b)
    assert x is not None and y is not None
    closed = math.acosh(1 + 2 * float(np.sum((x - y) ** 2)) / ((1 - x @ x) * (1 - y @ y)))
    assert tree_model.distance(a, b) == pytest.approx(closed, rel=1e-9)
    assert tree_model.similarity(a, b) == pytest.approx(math.exp(-closed), rel=1e-9)
    assert 0 < tree_model.similarity(a, b) < 1
    assert tree_model.similarity(a, a) == 1.0
    row = tree_model.distances_from(a)
    assert row[tree_model.nodes().index(b)] == pytest.approx(closed, rel=1e-9)


def _pair_grads(x: Any, y: Any) -> tuple[Any, Any, Any]:
    """The paper's eq. 4 for one pair per row, the form the training step computes in batches."""
    xx = np.einsum("...i,...i->...", x, x)
    yy = np.einsum("...i,...i->...", y, y)
    xy = np.einsum("...i,...i->...", x, y)
    alpha = 1.0 - xx
    beta = 1.0 - yy
    sq = np.maximum(xx + yy - 2.0 * xy, 0.0)
    delta = 2.0 * sq / (alpha * beta)
    dist = np.log1p(delta + np.sqrt(delta * (delta + 2.0)))
    # γ² − 1 = δ(δ + 2)
    root = np.sqrt(np.maximum(delta * (delta + 2.0), 1e-30))
    scale_x = 4.0 / (beta * root)
    scale_y = 4.0 / (alpha * root)
    gx = scale_x[..., None] * (
        ((yy - 2.0 * xy + 1.0) / (alpha * alpha))[..., None] * x - (1.0 / alpha)[..., None] * y
    )
    gy = scale_y[..., None] * (
        ((xx - 2.0 * xy + 1.0) / (beta * beta))[..., None] * y - (1.0 / beta)[..., None] * x
    )
    return dist, gx, gy


def test_the_gradient_is_the_derivative_of_the_distance() -> None:
    """The training step's analytic gradient (the paper's eq. 4) against
    central differences of the distance."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-0.5, 0.5, (6, 4))
    y = rng.uniform(-0.5, 0.5, (6, 4))
    _, gx, gy = _pair_grads(x, y)
    h = 1e-6
    for i in range(4):
        e = np.zeros(4)
        e[i] = h
        num_x = (poincare_distance(x + e, y) - poincare_distance(x - e, y)) / (2 * h)
        num_y = (poincare_distance(x, y + e) - poincare_distance(x, y - e)) / (2 * h)
        np.testing.assert_allclose(gx[:, i], num_x, atol=1e-7)
        np.testing.assert_allclose(gy[:, i], num_y, atol=1e-7)


# --- training ------------------------------------------------------------------------------


def test_same_seed_same_points_other_seed_other_points() -> None:
    a, b, c = _trained(0), _trained(0), _trained(1)
    assert a.nodes() == b.nodes() == c.nodes()
    assert np.array_equal(a.vectors(), b.vectors())
    assert not np.allclose(a.vectors(), c.vectors())
    # an injected generator is the only source of randomness
    d = PoincareEmbedding(5, seed=99, rng=np.random.default_rng(0))
    d.fit(TREE, epochs=40)
    assert np.array_equal(a.vectors(), d.vectors())


def test_points_stay_inside_the_ball_even_with_a_huge_step() -> None:
    model = PoincareEmbedding(3, seed=0, lr=50.0, burn_in=0, epsilon=1e-5)
    model.fit(TREE, epochs=5)
    norms = np.linalg.norm(model.vectors(), axis=1)
    assert np.isfinite(norms).all()
    assert norms.max() <= 1 - 1e-5 + 1e-12
    assert norms.max() > 0.99  # the step really did reach the boundary


def test_a_small_tree_is_embedded_as_a_hierarchy(tree_model: PoincareEmbedding) -> None:
    names = tree_model.nodes()
    norms = np.linalg.norm(tree_model.vectors(), axis=1)
    assert names[int(norms.argmin())] == "n"  # the root is nearest the origin
    # general nodes sit closer to the origin than specific ones, on average
    depth = np.array([name.count(".") for name in names])
    means = [norms[depth == k].mean() for k in range(4)]
    assert means == sorted(means)
    # each node is nearer its parent than any node of another branch
    for child, parent in TREE:
        if child.count(".") < 2:
            continue
        unrelated = [x for x in names if _branch(x) not in ("", _branch(child))]
        nearest_unrelated = min(tree_model.distance(child, x) for x in unrelated)
        assert tree_model.distance(child, parent) < nearest_unrelated, child


def test_reconstruction_of_a_small_tree(tree_model: PoincareEmbedding) -> None:
    index = {name: i for i, name in enumerate(tree_model.nodes())}
    pairs = [(index[u], index[v]) for u, v in tree_model.training_pairs()]
    scores = reconstruction_metrics(tree_model.vectors(), pairs)
    assert scores["map"] > 0.5
    assert 1.0 <= scores["mean_rank"] < 5.0


def test_reconstruction_metrics_on_hand_made_points() -> None:
    # on a line: 0 at the origin, 1 and 2 to the right, 3 to the left
    points = np.array([[0.0, 0.0], [0.3, 0.0], [0.6, 0.0], [-0.7, 0.0]])
    perfect = reconstruction_metrics(points, [(0, 1)])
    assert perfect == {"mean_rank": 1.0, "map": 1.0}
    # 0's partners are 1 and 3; the non-partner 2 is closer than 3 → ranks 1, 2
    # (1 + one closer non-partner); AP = (1/1 + 2/3) / 2
    scores = reconstruction_metrics(points, [(0, 1), (0, 3)])
    assert scores["mean_rank"] == pytest.approx(1.5)
    assert scores["map"] == pytest.approx((1 + 2 / 3) / 2)
    with pytest.raises(InvalidInput):
        reconstruction_metrics(points, [])


def test_transitive_closure_handles_chains_and_cycles() -> None:
    assert transitive_closure([("c", "b"), ("b", "a")]) == [("b", "a"), ("c", "a"), ("c", "b")]
    # two classes declared subclasses of each other: ancestors of one another,
    # never of themselves
    assert transitive_closure([("x", "y"), ("y", "x"), ("z", "x")]) == [
        ("x", "y"),
        ("y", "x"),
        ("z", "x"),
        ("z", "y"),
    ]


def test_training_on_the_closure_by_default() -> None:
    model = PoincareEmbedding(4, seed=0)
    model.fit([("c", "b"), ("b", "a")], epochs=1)
    assert sorted(model.training_pairs()) == [("b", "a"), ("c", "a"), ("c", "b")]
    assert model.edges() == [("c", "b"), ("b", "a")]
    direct = PoincareEmbedding(4, seed=0, transitive=False)
    direct.fit([("c", "b"), ("b", "a")], epochs=1)
    assert sorted(direct.training_pairs()) == [("b", "a"), ("c", "b")]


# --- incremental update --------------------------------------------------------------------


def test_update_places_a_new_leaf_near_its_parent_and_leaves_the_rest() -> None:
    model = _trained()
    before = {name: model.vector(name) for name in model.nodes()}
    model.update([("n.1.2.new", "n.1.2")])
    assert "n.1.2.new" in model.nodes()
    # the new leaf's nearest old node is its parent; its six nearest are its
    # ancestors and its siblings
    old = [name for name in before if name != "n.1.2.new"]
    nearest = sorted(old, key=lambda x: model.distance("n.1.2.new", x))[:6]
    assert nearest[0] == "n.1.2"
    assert all("n.1.2".startswith(x) or x.startswith("n.1.2.") for x in nearest), nearest
    assert model.distance("n.1.2.new", "n.1.2") < min(
        model.distance("n.1.2.new", x) for x in old if _branch(x) not in ("", "1")
    )
    # nothing else moved: no existing node's ancestors changed
    for name, point in before.items():
        assert np.array_equal(model.vector(name), point), name


def test_update_retrains_a_reparented_subtree_only() -> None:
    model = _trained()
    before = {name: model.vector(name) for name in model.nodes()}

    def rank_of_new_parent() -> int:
        return sorted(model.nodes(), key=lambda x: model.distance("n.0.0", x)).index("n.2.1")

    distance, rank = model.distance("n.0.0", "n.2.1"), rank_of_new_parent()
    # n.0.0 (with its three leaves) also becomes a kind of n.2.1
    model.update([("n.0.0", "n.2.1")], epochs=100)
    moved = {name for name, p in before.items() if not np.array_equal(model.vector(name), p)}
    assert moved == {"n.0.0", "n.0.0.0", "n.0.0.1", "n.0.0.2"}  # their ancestors changed
    # pulled toward its new parent (between two branches: toward the origin)
    assert model.distance("n.0.0", "n.2.1") < distance - 1.0
    assert rank_of_new_parent() < rank


def test_update_with_known_or_no_edges_changes_nothing() -> None:
    model = _trained()
    blob = model.to_bytes()
    model.update([])
    model.update([TREE[0], TREE[5]])
    assert model.to_bytes() == blob


def test_update_on_an_empty_model_is_a_fit() -> None:
    a = PoincareEmbedding(5, seed=0)
    a.update(TREE, epochs=40)
    assert np.array_equal(a.vectors(), _trained().vectors())


def test_update_can_add_a_new_superclass_above_old_nodes() -> None:
    model = _trained()
    model.update([("n.0", "top"), ("n", "top")])
    top = model.vector("top")
    assert top is not None and np.linalg.norm(top) < 1
    assert model.distance("n.0", "top") < model.distance("n.0", "n.2.2.2")


# --- persistence ---------------------------------------------------------------------------


def test_round_trip_keeps_the_points_and_the_random_stream() -> None:
    model = _trained(lr=0.2, negatives=5)
    copy = PoincareEmbedding.from_bytes(model.to_bytes())
    assert copy.nodes() == model.nodes()
    assert copy.edges() == model.edges()
    assert copy.options() == model.options()
    assert np.array_equal(copy.vectors(), model.vectors())
    # training resumes identically after the reload
    model.update([("n.2.0.x", "n.2.0")])
    copy.update([("n.2.0.x", "n.2.0")])
    assert np.array_equal(copy.vectors(), model.vectors())
    assert copy.to_bytes() == model.to_bytes()


def test_corrupt_or_newer_bytes_are_refused() -> None:
    good = _trained().to_bytes()
    with pytest.raises(InvalidInput):
        PoincareEmbedding.from_bytes("not bytes")  # type: ignore[arg-type]
    with pytest.raises(CorruptRecord):
        PoincareEmbedding.from_bytes(good[: len(good) // 2])
    with pytest.raises(CorruptRecord):
        PoincareEmbedding.from_bytes(msgpack.packb({"magic": "other"}))
    doc = msgpack.unpackb(good)
    with pytest.raises(IncompatibleFormat):
        PoincareEmbedding.from_bytes(msgpack.packb({**doc, "format": doc["format"] + 1}))
    outside = np.full(len(doc["nodes"]) * 5, 0.9).astype("<f8").tobytes()
    with pytest.raises(CorruptRecord, match="outside"):
        PoincareEmbedding.from_bytes(msgpack.packb({**doc, "vectors": outside}))
    with pytest.raises(CorruptRecord):
        PoincareEmbedding.from_bytes(msgpack.packb({**doc, "nodes": doc["nodes"][:-1]}))


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edges",
    [
        [],
        [("a", "a")],
        [("b", "a"), ("c", "c")],
        [("a", 1)],
        [(None, "a")],
        [("a", "")],
        [("a", "b", "c")],
        ["ab"],
        "ab",
        None,
    ],
    ids=[
        "empty",
        "self-loop",
        "late-self-loop",
        "int",
        "none",
        "blank",
        "triple",
        "str-edge",
        "str",
        "none-edges",
    ],
)
def test_bad_edges_are_refused_and_change_nothing(edges: object) -> None:
    model = _trained()
    blob = model.to_bytes()
    with pytest.raises(InvalidInput):
        model.fit(edges, epochs=5)  # type: ignore[arg-type]
    assert model.to_bytes() == blob  # points, edges and the random stream untouched
    if edges == []:
        return  # an empty update is a no-op, not an error
    with pytest.raises(InvalidInput):
        model.update(edges)  # type: ignore[arg-type]
    assert model.to_bytes() == blob


def test_bad_options_and_queries_are_refused() -> None:
    for dim in (1, 0, -3, 2.5, True):
        with pytest.raises(InvalidInput):
            PoincareEmbedding(dim)  # type: ignore[arg-type]
    for bad in (
        {"lr": 0.0},
        {"lr": float("nan")},
        {"negatives": 0},
        {"batch_size": 0},
        {"seed": -1},
    ):
        with pytest.raises(InvalidInput):
            PoincareEmbedding(4, **bad)  # type: ignore[arg-type]
    model = _trained()
    blob = model.to_bytes()
    for epochs in (-1, 1.5, None):
        with pytest.raises(InvalidInput):
            model.fit(TREE, epochs=epochs)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        model.update([("new", "n")], epochs=-2)
    assert model.to_bytes() == blob
    assert model.vector("nope") is None
    assert model.vector(3) is None  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        model.distance("n", "nope")
    with pytest.raises(InvalidInput):
        model.similarity(1, "n")  # type: ignore[arg-type]


# --- the L2 graph --------------------------------------------------------------------------


def _ns(name: str) -> str:
    return VOCAB + name


@pytest.fixture
def hierarchy_store() -> GraphStore:
    store = GraphStore()
    context = {"rdfs": RDFS, "subClassOf": {"@id": "rdfs:subClassOf", "@type": "@vocab"}}
    version = 1
    classes = {
        "Agent": None,
        "CheckerAgent": "Agent",
        "ExecutorAgent": "Agent",
        "Task": None,
    }
    for name, parent in classes.items():
        value: dict[str, object] = {"@context": context, "@type": "rdfs:Class"}
        if parent is not None:
            value["subClassOf"] = parent
        store.put_node(_ns(name), value, "ontology", version)
    # a reflexive subClassOf (legal RDFS) is not an edge
    store.put_node(_ns("Task"), {"@context": context, "subClassOf": "Task"}, "ontology", 2)
    store.put_node("agent:checker-1", {"@type": "CheckerAgent", "name": "c1"}, "agents", 1)
    store.put_node("agent:exec-1", {"@type": ["ExecutorAgent"], "name": "e1"}, "agents", 1)
    # a typed nested object: skolemised, not a line, not embedded
    store.put_node(
        "task:a",
        {"@type": "Task", "owner": {"@type": "CheckerAgent", "name": "nested"}},
        "plan",
        1,
    )
    return store


def test_hierarchy_edges_from_a_real_graph_store(hierarchy_store: GraphStore) -> None:
    edges = hierarchy_edges(hierarchy_store)
    assert edges == sorted(
        [
            (_ns("CheckerAgent"), _ns("Agent")),
            (_ns("ExecutorAgent"), _ns("Agent")),
            ("agent:checker-1", _ns("CheckerAgent")),
            ("agent:exec-1", _ns("ExecutorAgent")),
            ("task:a", _ns("Task")),
        ]
    )
    # confined to some graphs: only what those graphs say
    assert hierarchy_edges(hierarchy_store, graphs=["agents"]) == [
        ("agent:checker-1", _ns("CheckerAgent")),
        ("agent:exec-1", _ns("ExecutorAgent")),
    ]
    # the edges train: an instance sits nearest its class, then its superclass
    model = PoincareEmbedding(4, seed=0)
    model.fit(edges, epochs=100)
    for instance, cls in (("agent:checker-1", "CheckerAgent"), ("agent:exec-1", "ExecutorAgent")):
        others = [x for x in model.nodes() if x != instance]
        ranked = sorted(others, key=lambda x: model.distance(instance, x))
        assert ranked[:2] == [_ns(cls), _ns("Agent")]


# --- 1,000+ nodes --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_thousand_node_tree_reconstructs_well() -> None:
    edges = balanced_tree(4, 5)  # 1,365 nodes, 6,372 closure pairs
    model = PoincareEmbedding(10, seed=0)
    model.fit(edges, epochs=50)
    assert len(model.nodes()) == 1365
    index = {name: i for i, name in enumerate(model.nodes())}
    pairs = [(index[u], index[v]) for u, v in model.training_pairs()]
    scores = reconstruction_metrics(model.vectors(), pairs)
    assert scores["map"] >= 0.6
    assert scores["mean_rank"] <= 6.0
    norms = np.linalg.norm(model.vectors(), axis=1)
    assert model.nodes()[int(norms.argmin())] == "n"


@pytest.mark.slow
def test_the_benchmark_reports_ours_and_gensims_figures() -> None:
    pytest.importorskip("gensim", reason="gensim is the bench extra: pip install '.[bench]'")
    report = run_poincare(quick=True)
    for key in ("poincare_map", "gensim_map"):
        assert 0 < report[key] <= 1
    for key in ("poincare_mean_rank", "gensim_mean_rank"):
        assert report[key] >= 1
    assert report["poincare_train_s"] > 0 and report["gensim_train_s"] > 0
    assert report["poincare_pairs"] == len(transitive_closure(balanced_tree(3, 4)))
    assert report["poincare_map_ge_gensim"] is (report["poincare_map"] >= report["gensim_map"])
