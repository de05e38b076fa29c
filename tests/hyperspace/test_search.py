"""Search through a MemorySystem: coherence, filters, permissions, archives, persistence, projection, the op."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors._heap import trim_heap
from gliding_actors.errors import InvalidInput
from gliding_actors.hyperspace import SearchFilters, parse_filters
from gliding_actors.scenario._replay import load_and_replay
from gliding_actors.system import MemorySystem

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["sim", "threads"])
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    m = MemorySystem.open(runtime=request.param)
    yield m
    m.close(flush=False)


def _team(m: MemorySystem) -> None:
    pa, ca = m.agent("pa", "PA"), m.agent("ca", "CA")
    aa = m.agent("aa", "AA")
    pa.write("task:auth", {"@type": "Task", "summary": "switch authentication to JWT tokens", "importance": 0.9},
             tags=["auth"], graph="plan")
    pa.write("task:ui", {"@type": "Task", "summary": "redesign the dashboard colours", "importance": 0.2},
             tags=["ui"], graph="plan")
    pa.write("step:jwt", {"@type": "Step", "summary": "validate JWT signatures in the middleware"},
             tags=["auth", "code"], graph="plan")
    ca.write("review:jwt", {"@type": "Review", "summary": "JWT middleware review: rotate keys"},
             tags=["auth"], graph="review")
    aa.write("decision:ship", {"@type": "Decision", "summary": "ship the JWT change"}, tags=["auth"],
             graph="decision")


def test_search_sees_a_write_back_write_still_in_the_writers_cache(memory: MemorySystem) -> None:
    pa, da = memory.agent("pa", "PA"), memory.agent("da", "DA")
    pa.write("task:auth", {"@type": "Task", "summary": "switch authentication to JWT tokens"}, graph="plan")
    assert memory.inspect("task:auth")["caches"]["pa"] == "M"  # not home, not in L0
    assert da.search("JWT authentication", 5)["iris"] == ["task:auth"]
    pa.write("task:auth", {"@type": "Task", "summary": "plan the lunch menu"})  # changed: the old text is gone
    assert da.search("JWT authentication", 5, {"types": ["Task"]})["iris"] in ([], ["task:auth"])
    assert da.search("lunch menu", 1)["iris"] == ["task:auth"]
    pa.delete("task:auth")
    assert da.search("lunch menu", 5)["iris"] == []


def test_filters_tags_types_graph_importance(memory: MemorySystem) -> None:
    _team(memory)
    aa = memory.agent("aa", "AA")
    everything = aa.search("JWT", 10)["iris"]
    assert set(everything) == {"task:auth", "step:jwt", "review:jwt", "decision:ship"}
    assert aa.search("JWT", 10, {"tags": ["auth", "code"]})["iris"] == ["step:jwt"]
    assert set(aa.search("JWT", 10, {"tags": {"must": ["auth"], "not": ["code"]}})["iris"]) == {
        "task:auth", "review:jwt", "decision:ship"}
    assert set(aa.search("JWT", 10, {"types": ["Task", "Decision"]})["iris"]) == {"task:auth", "decision:ship"}
    assert set(aa.search("JWT", 10, {"types": ["https://gliding-actors.dev/ns#Review"]})["iris"]) == {"review:jwt"}
    assert set(aa.search("", 10, {"graph": "plan"})["iris"]) == {"task:auth", "task:ui", "step:jwt"}
    assert aa.search("", 10, {"graph": "plan", "min_importance": 0.8})["iris"] == ["task:auth"]
    assert aa.search("", 10, {"graph": "plan", "max_importance": 0.3})["iris"] == ["task:ui"]
    should = aa.search("JWT", 10, {"tags": {"should": ["code"]}})["iris"]
    assert should[0] == "step:jwt"  # preferred, never required
    assert aa.search("JWT", 2)["scores"] == sorted(aa.search("JWT", 2)["scores"], reverse=True)
    with pytest.raises(InvalidInput, match=r"\[1, 10000\]"):
        aa.search("JWT", 0)


def test_scores_lie_in_zero_one_on_every_path(memory: MemorySystem) -> None:
    """A search's scores and a listing's share one scale: 1 is first by every ranking, or full importance."""
    _team(memory)
    aa = memory.agent("aa", "AA")
    listing = aa.search("", 10, {"graph": "plan"})
    assert listing["scores"] == [0.9, 0.5, 0.2]  # importances (as written: nothing was used yet)
    best = aa.search("switch authentication to JWT tokens", 3)
    assert best["iris"][0] == "task:auth" and best["scores"][0] == 1.0  # first by meaning, words and type
    assert all(0.0 < s < 1.0 for s in best["scores"][1:])
    preferred = aa.search("JWT", 10, {"tags": {"should": ["code"]}})
    assert all(0.0 < s <= 1.0 for s in preferred["scores"])
    again = aa.search("", 10, {"graph": "plan"})
    assert all(0.0 < s <= 1.0 for s in again["scores"])  # grown by those uses, still within [0, 1]
    assert again["scores"][0] > 0.9


def test_a_text_that_matches_nothing_finds_nothing(memory: MemorySystem) -> None:
    """No filler: a query with no lexical or semantic match answers [], not every node at a default score."""
    _team(memory)
    aa = memory.agent("aa", "AA")
    assert aa.search("zebra crossing", 10) == {"iris": [], "scores": [], "embedders": []}
    assert aa.search("JWT zebra", 10)["iris"]  # one matching word still finds
    # no text at all still lists the (filtered) nodes: that is a listing, not a search
    assert set(aa.search("", 10, {"graph": "plan"})["iris"]) == {"task:auth", "task:ui", "step:jwt"}


def test_no_result_from_a_graph_the_role_may_not_read(memory: MemorySystem) -> None:
    _team(memory)
    # PA reads plan, knowledge, shared; not review, not decision
    pa_sees = memory.agent("pa", "PA").search("JWT review decision", 10)["iris"]
    assert set(pa_sees) == {"task:auth", "step:jwt"}
    ca_sees = memory.agent("ca", "CA").search("JWT", 10, {"graph": "decision"})["iris"]
    assert ca_sees == []


@settings(max_examples=15)
@given(
    lines=st.lists(
        st.tuples(
            st.sampled_from(["plan", "execution", "review", "decision", "knowledge", "shared"]),
            st.sampled_from(["jwt key rotation", "dashboard colours", "token cache", "jwt middleware"]),
        ),
        min_size=1,
        max_size=8,
    ),
    role=st.sampled_from(["SA", "PA", "DA", "CA", "AA"]),
    query=st.sampled_from(["jwt", "dashboard", "token cache", ""]),
)
def test_property_search_never_shows_an_unreadable_line(
    lines: list[tuple[str, str]], role: str, query: str
) -> None:
    with MemorySystem.open(runtime="sim") as m:
        writer = m.agent("w", "system")
        for n, (graph, text) in enumerate(lines):
            writer.write(f"node:{n}", {"summary": text}, graph=graph)
        reader = m.agent("r", role)
        found = reader.search(query, 20)["iris"]
        readable = set(m.readable_graphs(role))
        for iri in found:
            assert m.line_graphs.graph_of(iri) in readable and m.may_read(role, iri)
        if query == "":
            expected = {f"node:{n}" for n, (g, _) in enumerate(lines) if g in readable}
            assert set(found) == expected  # and nothing readable is hidden


def test_bad_search_input_is_refused_before_anything_is_sent(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.write("task:a", {"summary": "alpha"})
    before = memory.hyperspace.stats()
    for args in [
        (42, 3, None),
        ("x", -1, None),
        ("x", True, None),
        ("x", 3, {"tags": "auth"}),
        ("x", 3, {"color": "red"}),
        ("x", 3, {"tags": {"maybe": ["a"]}}),
        ("x", 3, {"min_importance": 0.9, "max_importance": 0.1}),
        ("x", 3, {"graph": ""}),
        ("x", 3, ["tags"]),
    ]:
        with pytest.raises(InvalidInput):
            pa.submit_search(*args)  # type: ignore[arg-type]
    assert memory.hyperspace.stats() == before


def test_parse_filters_forms() -> None:
    assert parse_filters(None) == SearchFilters()
    f = parse_filters({"tags": {"must": ["b", "a"], "should": ["c"], "not": ["d"]}, "types": ["Task"], "graph": "plan",
                       "min_importance": 0, "max_importance": 1})
    assert f == SearchFilters(("a", "b"), ("c",), ("d",), ("Task",), "plan", 0.0, 1.0)


def test_archived_turns_are_searchable(memory: MemorySystem) -> None:
    da = memory.agent("da", "DA")
    turn = da.turn("decided to cache JWT public keys", thought="keys rotate hourly", content="cache for 5 minutes")
    hits = memory.agent("pa", "PA").search("JWT public keys cache", 3)
    assert hits["iris"][0] == turn["archive_iri"]
    assert memory.agent("pa", "PA").search("keys", 5, {"graph": "sessions"})["iris"] == [turn["archive_iri"]]


def test_a_search_learns_of_new_archives_from_l0_without_listing_them(tmp_path: Path) -> None:
    """L0 tells the index of each archived turn (also of one written by another path than a session);
    a catch-up never lists every archive, which made a search cost as much as the session was long."""
    from gliding_actors.l1._archive import SessionArchive

    with MemorySystem.open(tmp_path, runtime="sim") as memory:
        listed: list[str] = []
        query_iris = memory.l0.query_iris
        memory.l0.query_iris = lambda *a, **kw: listed.append(kw.get("prefix", "")) or query_iris(*a, **kw)  # type: ignore[method-assign]
        da = memory.agent("da", "DA")
        for n in range(5):
            da.turn(f"turn {n} about the JWT keys", content=f"details {n}")
        written = SessionArchive(memory.l0, "importer").write_block({"content": "imported note on key rotation"})
        found = da.search("imported key rotation", 3)["iris"]
        assert found[0] == written
        assert da.search("turn 4 JWT keys", 1)["iris"] != []
        assert "memory:session-" not in listed  # a session reads its own numbering; nobody lists them all


def test_archives_are_indexed_as_they_are_written_not_by_the_next_search() -> None:
    """A session's archived turns reach the index without a search asking: the first search after a
    long session must not index the whole session before it can rank."""
    import time

    with MemorySystem.open(runtime="threads") as memory:
        da = memory.agent("da", "DA")
        archives = {da.turn(f"turn {n} about the JWT keys", content=f"details {n}")["archive_iri"] for n in range(40)}
        service = memory.hyperspace
        deadline = time.monotonic() + 30.0
        while not archives <= set(service.engine.docs) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert archives <= set(service.engine.docs)
        assert service.searches == 0 and service.stats()["pending"] == 0
        assert da.search("turn 39 JWT keys", 1)["iris"] != []


def test_the_engine_is_saved_on_close_and_reconciled_with_l0_on_open(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "m", runtime="threads") as m:
        pa = m.agent("pa", "PA")
        pa.write("task:a", {"summary": "rotate the signing keys"})
        pa.write("task:b", {"summary": "dashboard colours"})
        assert pa.search("signing keys", 1)["iris"] == ["task:a"]
    assert (tmp_path / "m" / "hyperspace" / "docs.msgpack").is_file()
    with MemorySystem.open(tmp_path / "m", runtime="threads") as m:
        service = m.hyperspace
        assert set(service.engine.docs) == {"task:a", "task:b"} and service.pending == {}
        assert service.stats()["keyword_index"] == "reused"  # the words were not tokenised again
        pa = m.agent("pa", "PA")
        assert pa.search("signing keys", 1)["iris"] == ["task:a"]
        assert service.engine.embedded == 0  # no node was embedded again (queries are not counted)
        pa.write("task:b", {"summary": "signing keys for the dashboard"}, tags=["user_intent"])  # write-through
    # a crash: the save is stale, L0 is the truth
    m = MemorySystem.open(tmp_path / "m", runtime="threads")
    m.agent("pa", "PA").write("task:c", {"summary": "signing ceremony"}, tags=["user_intent"])
    reopened = m.crash_process()
    try:
        assert {"task:a", "task:b", "task:c"} <= set(reopened.hyperspace.pending) | set(reopened.hyperspace.engine.docs)
        found = reopened.agent("pa", "PA").search("signing", 3)["iris"]
        assert set(found) == {"task:a", "task:b", "task:c"}
    finally:
        reopened.close()


def test_new_vectors_enter_the_graph_on_the_index_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gliding_actors.hyperspace._service as service_module

    trims: list[bool] = []  # the heap pages the workers freed go back once enough went in

    def spy() -> bool:
        trims.append(trim_heap())
        return trims[-1]

    monkeypatch.setattr(service_module, "trim_heap", spy)
    monkeypatch.setattr(service_module, "_TRIM_AFTER", 20)
    config = {"hyperspace": {"index_after": 20, "embedder": "hash", "hash_dim": 32}}
    with MemorySystem.open(tmp_path / "m", config=config, runtime="threads") as m:
        pa = m.agent("pa", "PA")
        for i in range(45):
            pa.write(f"node:{i}", {"summary": f"note number {i} about topic {i % 5}"})
        pa.search("topic", 1)  # more than embed_at_search wait: the embed worker makes their vectors
        assert m.hyperspace.wait_embeddings()
        pa.search("topic", 1)  # installs them, and the worker is handed the space
        m.hyperspace.wait_indexing()
        space = m.hyperspace.engine.spaces["hash-v1/32"]
        assert space.stats()["in_graph"] >= 20 and space.stats()["in_graph"] + space.stats()["delta"] == 45
        assert m.hyperspace.index_errors == []
        assert 1 <= len(trims) <= space.stats()["inserts"] // 20
        assert pa.search("note number 44 about topic 4", 1)["iris"] == ["node:44"]


def test_semantic_projection_merges_the_frame_and_the_search(memory: MemorySystem) -> None:
    _team(memory)
    pa = memory.agent("pa", "PA")
    pa.create_task("task:auth")
    plain = pa.project("pa_init", "task:auth")
    merged = pa.project("pa_init", "task:auth", query="dashboard colours")
    assert set(plain["iris"]) <= set(merged["iris"])
    assert "task:ui" in merged["iris"] and "task:ui" not in plain["iris"]  # brought in by meaning
    assert merged["search"]["iris"][0] == "task:ui"
    assert merged["jsonld"] == plain["jsonld"] and merged["tokens"] == plain["tokens"]
    assert all(r["frame_rank"] or r["search_rank"] for r in merged["ranking"])
    assert "review:jwt" not in merged["iris"]  # PA may not read review: not even through meaning
    with pytest.raises(InvalidInput):
        pa.submit_project("pa_init", "task:auth", query=7)  # type: ignore[arg-type]


def test_search_scenario_replays_on_both_runtimes() -> None:
    path = REPO / "scenarios" / "search" / "basic.yaml"
    hashes = set()
    for seed in (0, 1, 7):
        result = load_and_replay(path, seed=seed)
        assert result.ok, result.failure
        hashes.add(result.log_hash)
    assert load_and_replay(path, seed=7).log_hash in hashes
    result = load_and_replay(path, runtime="threads")
    assert result.ok, result.failure


@pytest.mark.slow
def test_search_scenario_replays_under_fifty_seeds() -> None:
    path = REPO / "scenarios" / "search" / "basic.yaml"
    for seed in range(50):
        result = load_and_replay(path, seed=seed)
        assert result.ok, (seed, result.failure)


@settings(max_examples=200)
@given(
    scores=st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3), st.sampled_from([-1.0, 0.0, 0.25, 0.5, 0.5, 1.0, 2.0]), max_size=60
    ),
    k=st.integers(0, 12),
    hidden=st.sets(st.text("abcdef", min_size=1, max_size=3)),
    positive=st.booleans(),
)
def test_property_top_passing_is_the_sorted_prefix_of_the_passing_items(
    scores: dict[str, float], k: int, hidden: set[str], positive: bool
) -> None:
    """The bounded selection answers exactly what sorting every passing item would, ties by IRI included."""
    from gliding_actors.hyperspace._engine import top_passing

    passing = [(i, s) for i, s in scores.items() if i not in hidden and (s > 0 or not positive)]
    expected = sorted(passing, key=lambda kv: (-kv[1], kv[0]))[:k]
    assert top_passing(scores, k, lambda iri: iri not in hidden, positive=positive) == expected


def _asked_by_a_search(corpus: int, readable: list[str]) -> tuple[list[str], int, list[str]]:
    """Index ``corpus`` documents (40 in ``plan``), search as a reader of ``readable``: the documents
    ``visible`` was asked about, how many the reader may read, and the hits."""
    from gliding_actors.config import Config
    from gliding_actors.hyperspace._embedders import EmbedderChain, HashEmbedder
    from gliding_actors.hyperspace._engine import HyperspaceEngine

    config = Config().hyperspace
    engine = HyperspaceEngine(config, EmbedderChain([HashEmbedder(config.hash_dim)]))
    for n in range(corpus):
        graph = "plan" if n < 40 else ["review", "decision", "shared"][n % 3]
        tokens = " token" * (n % 50)  # scores spread out: a crowd tied at the cut is a different case
        engine.upsert(f"n:{n}", {"summary": f"the{tokens} cache note number {n}"}, version=1, graph=graph)
    for index in engine.spaces.values():
        index.index_delta()  # the service keeps the exact delta small the same way
    asked: list[str] = []

    def visible(iri: str) -> bool:
        asked.append(iri)
        return not iri.endswith("7")  # say the registry moved these elsewhere

    hits = engine.search("token cache note", 10, graphs=readable, visible=visible)
    assert len(hits) == 10
    assert all(engine.docs[i].graph in readable and not i.endswith("7") for i, _ in hits)
    in_readable = sum(1 for d in engine.docs.values() if d.graph in readable)
    engine.close()
    return asked, in_readable, [i for i, _ in hits]


def test_a_search_asks_about_the_documents_it_would_show_not_the_corpus() -> None:
    """Permissions cost per result, not per document: a wide readable set is a predicate asked of
    each ranking's best few (as many at 4,000 documents as at 1,000), a narrow one a list of its
    graphs' documents, each asked once."""
    narrow, _, _ = _asked_by_a_search(1_000, ["plan"])
    assert sorted(narrow) == sorted(f"n:{n}" for n in range(40))
    small, _, _ = _asked_by_a_search(1_000, ["review", "decision"])
    large, in_readable, _ = _asked_by_a_search(4_000, ["review", "decision"])
    assert len(set(large)) == len(large)  # each document once
    assert len(large) <= 1.5 * len(small) + 20 and len(large) < in_readable / 4


def _engine_of_two_graphs(keyword_path: Path | None = None) -> object:
    from gliding_actors.config import Config
    from gliding_actors.hyperspace._embedders import EmbedderChain, HashEmbedder
    from gliding_actors.hyperspace._engine import HyperspaceEngine

    config = Config().hyperspace
    engine = HyperspaceEngine(config, EmbedderChain([HashEmbedder(config.hash_dim)]), keyword_path=keyword_path)
    for n in range(100):
        text = "zebra quartz lantern" if n == 0 else f"ordinary cache note number {n}"
        engine.upsert(f"n:{n}", {"summary": text}, version=1, graph="a" if n % 2 == 0 else "b")
    return engine


def test_a_line_moved_to_another_graph_is_found_by_the_readers_of_that_graph_only() -> None:
    from gliding_actors.hyperspace._engine import HyperspaceEngine

    engine = _engine_of_two_graphs()
    assert isinstance(engine, HyperspaceEngine)
    assert "n:0" not in dict(engine.search("zebra quartz lantern", 5, graphs=["b"]))
    engine.upsert("n:0", {"summary": "zebra quartz lantern"}, version=2, graph="b")  # same text: same vector
    (space,) = engine.spaces.values()
    assert space.group_of("n:0") == "b"
    assert engine.search("zebra quartz lantern", 5, graphs=["b"])[0][0] == "n:0"
    assert "n:0" not in dict(engine.search("zebra quartz lantern", 5, graphs=["a"]))
    # the vector ranking alone (the keyword one would find it by its words anyway)
    assert engine._text_ranking("zebra quartz lantern", 5, None, lambda _i: True, {"b"}).items[0][0] == "n:0"
    engine.close()


def test_vectors_saved_before_they_had_graphs_are_put_in_their_documents_graphs_on_load(tmp_path: Path) -> None:
    import msgpack

    from gliding_actors.hyperspace._engine import HyperspaceEngine

    engine = _engine_of_two_graphs(tmp_path / "kw")
    assert isinstance(engine, HyperspaceEngine)
    (name, space), = engine.spaces.items()
    space.save(tmp_path / "space")
    meta = msgpack.unpackb((tmp_path / "space" / "index.msgpack").read_bytes(), raw=False)
    del meta["groups"]
    (tmp_path / "space" / "index.msgpack").write_bytes(msgpack.packb(meta, use_bin_type=True))
    saved = engine.dump_docs()
    engine.close()
    again = HyperspaceEngine(engine.config, engine.chain, keyword_path=tmp_path / "kw")
    index = again.space(name, space.dim)
    assert index.load(tmp_path / "space") and index.loaded_without_groups
    assert again.load_docs(saved)
    assert not index.loaded_without_groups
    assert all(index.group_of(iri) == doc.graph for iri, doc in again.docs.items())
    assert again.search("zebra quartz lantern", 5, graphs=["a"])[0][0] == "n:0"
    again.close()
