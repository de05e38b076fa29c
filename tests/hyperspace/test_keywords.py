"""The keyword index: BM25 on tantivy plus an exact delta, against the formula, across commits and reopens."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.hyperspace._bm25 import BM25Index
from gliding_actors.hyperspace._keywords import PRUNE_FROM, KeywordIndex

WORDS = ["jwt", "key", "rotation", "cache", "token", "dashboard", "colour", "the", "a", "plan"]


def always(_doc: str) -> bool:
    return True


def exact_scores(docs: dict[str, list[str]], query: list[str]) -> dict[str, float]:
    """The formula's scores of every matching document (the index this one replaced)."""
    reference = BM25Index()
    for doc, tokens in docs.items():
        reference.add(doc, tokens)
    return {d: s for d, s in reference.scores(query).items() if s > 0}


def assert_top_by_formula(got: list[str], scores: dict[str, float], k: int) -> None:
    """``got`` is a top ``k`` of ``scores``, best first, up to float rounding: tantivy adds in 32 bits, so
    two scores the formula tells apart in the last bits of a double may tie there (then IRI order)."""
    assert len(got) == len(set(got)) == min(k, len(scores)) and set(got) <= scores.keys()
    tolerance = 1e-5
    for a, b in pairwise(got):
        assert scores[a] >= scores[b] - tolerance and (scores[a] > scores[b] + tolerance or a < b)
    if got:
        floor = min(scores[d] for d in got)
        assert all(scores[d] <= floor + tolerance for d in scores.keys() - set(got))


@settings(max_examples=60, deadline=None)
@given(
    docs=st.dictionaries(
        st.text("abcdefgh", min_size=1, max_size=3).map(lambda s: f"d:{s}"),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=12),
        min_size=1,
        max_size=40,
    ),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    commit_after=st.sampled_from([1, 7, 1_000]),
    removed=st.sets(st.text("abcdefgh", min_size=1, max_size=3).map(lambda s: f"d:{s}"), max_size=5),
)
def test_property_the_top_is_the_formulas_in_the_delta_and_after_commits(
    docs: dict[str, list[str]], query: list[str], commit_after: int, removed: set[str]
) -> None:
    """Short documents (tantivy stores their lengths exactly): the same documents in the same order as
    scoring every document with the formula, whether they sit in the delta or were committed. After
    removals the statistics count a removed document until a merge drops it, so then only what is
    found is pinned: every live match up to ``k``, nothing removed."""
    index = KeywordIndex(None, commit_after=commit_after)
    for doc, tokens in docs.items():
        index.add(doc, tokens)
    for doc in removed:
        index.remove(doc)
    live = {d: t for d, t in docs.items() if d not in removed}
    scores = exact_scores(live, query)
    k = 5
    if commit_after == 1_000:  # all in the delta: scored by the formula itself
        assert_top_by_formula([d for d, _ in index.top(query, k, always)], scores, k)
    index.commit()
    got = [d for d, _ in index.top(query, k, always)]
    if removed & docs.keys():
        assert len(got) == len(set(got)) == min(k, len(scores)) and set(got) <= scores.keys()
    else:
        assert_top_by_formula(got, scores, k)
    index.close()


def test_a_change_is_searchable_at_once_and_a_removal_gone_at_once() -> None:
    index = KeywordIndex(None, commit_after=1_000)
    index.add("d:1", ["jwt", "key", "rotation"])
    index.add("d:2", ["dashboard", "colour"])
    index.commit()
    assert [d for d, _ in index.top(["jwt"], 5, always)] == ["d:1"]
    index.add("d:1", ["lunch", "menu"])  # rewritten: the committed copy must not answer
    assert index.top(["jwt"], 5, always) == []
    assert [d for d, _ in index.top(["menu"], 5, always)] == ["d:1"]
    assert index.remove("d:2") and index.top(["dashboard"], 5, always) == []
    assert not index.remove("d:2")
    index.commit()
    assert index.top(["dashboard"], 5, always) == [] and [d for d, _ in index.top(["menu"], 5, always)] == ["d:1"]
    assert len(index) == 1 and "d:1" in index and "d:2" not in index
    index.close()


def test_ok_filters_and_the_bulk_is_asked_wider_until_k_pass() -> None:
    index = KeywordIndex(None, commit_after=10)
    for n in range(300):
        index.add(f"d:{n:03}", ["token"] * (1 + n % 9) + ["filler"] * (n % 5))
    index.commit()
    hidden = {f"d:{n:03}" for n in range(0, 300, 2)}
    got = index.top(["token"], 20, lambda d: d not in hidden)
    assert len(got) == 20 and not hidden & {d for d, _ in got}
    everything = index.top(["token"], 300, always)
    assert [kv for kv in everything if kv[0] not in hidden][:20] == got  # the passing prefix of the full order
    index.close()


def test_the_same_changes_give_the_same_scores() -> None:
    def build() -> list[tuple[str, float]]:
        index = KeywordIndex(None, commit_after=16)
        for n in range(200):
            index.add(f"d:{n}", [WORDS[(n * 7 + j) % len(WORDS)] for j in range(1 + n % 11)])
            if n % 3 == 0:
                index.remove(f"d:{n // 2}")
        top = index.top(["jwt", "cache", "the"], 30, always)
        index.close()
        return top

    assert build() == build()


def test_a_reopen_uses_the_saved_index_and_a_stale_one_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "keywords"
    texts = {f"d:{n}": [WORDS[(n + j) % len(WORDS)] for j in range(1 + n % 6)] for n in range(100)}
    index = KeywordIndex(path, commit_after=8)
    for doc, tokens in texts.items():
        index.add(doc, tokens)
    state = index.state()  # commits: what follows is tantivy's answer
    before = index.top(["jwt", "plan"], 10, always)
    index.close()

    again = KeywordIndex(path)
    assert again.adopt(state, lambda: pytest.fail("a matching index is not rebuilt"))  # type: ignore[arg-type,return-value]
    assert again.top(["jwt", "plan"], 10, always) == before and len(again) == 100
    again.add("d:extra", ["jwt", "jwt", "plan"])  # committed later than the state: the files moved on
    again.close()

    third = KeywordIndex(path)
    assert not third.adopt(state, {doc: (tokens, "") for doc, tokens in texts.items()})
    assert third.top(["jwt", "plan"], 10, always) == before and "d:extra" not in third
    third.close()


def test_damaged_files_are_rebuilt_from_the_documents(tmp_path: Path) -> None:
    path = tmp_path / "keywords"
    path.mkdir()
    (path / "meta.json").write_text("{ not json", encoding="utf-8")
    index = KeywordIndex(path)
    assert not index.adopt({"opstamp": 3, "lengths": {"d:1": 1}}, {"d:1": (["jwt"], "")})
    assert [d for d, _ in index.top(["jwt"], 3, always)] == ["d:1"]
    index.close()


def test_groups_confine_a_search_in_the_bulk_and_in_the_delta_without_changing_scores(tmp_path: Path) -> None:
    index = KeywordIndex(tmp_path / "keywords", commit_after=10_000, commit_at_search=10_000)
    for n in range(60):
        index.add(f"d:{n:02}", [WORDS[(n + j) % len(WORDS)] for j in range(1 + n % 6)], group=f"g{n % 3}")
    everything = index.top(["jwt", "plan"], 60, always)
    index.commit()
    index.add("d:new", ["jwt", "jwt", "plan"], group="g1")  # in the delta
    index.add("d:07", ["jwt"], group="g0")  # moved from g1 to g0, in the delta
    mine = index.top(["jwt", "plan"], 60, always, groups={"g1"})
    assert mine and all(doc == "d:new" or (int(doc[2:]) % 3 == 1 and doc != "d:07") for doc, _ in mine)
    assert "d:new" in dict(mine) and "d:07" not in dict(mine)
    # the filter adds nothing to a score: the same documents score as in an unconfined search
    unconfined = dict(index.top(["jwt", "plan"], 100, always))
    assert all(score == unconfined[doc] for doc, score in mine)
    assert index.top(["jwt"], 5, always, groups=set()) == [] and index.top(["jwt"], 5, always, groups={"nowhere"}) == []
    assert len(everything) > len(mine)
    # a state carries the groups: a reopen that adopts it still confines
    state = index.state()  # commits the delta: tantivy's scores from here on
    committed = index.top(["jwt", "plan"], 60, always, groups={"g1"})
    assert {doc for doc, _ in committed} == {doc for doc, _ in mine}
    index.close()
    again = KeywordIndex(tmp_path / "keywords")
    assert again.adopt(state, lambda: pytest.fail("a matching index is not rebuilt"))  # type: ignore[arg-type,return-value]
    assert again.top(["jwt", "plan"], 60, always, groups={"g1"}) == committed
    again.close()


def test_a_state_of_the_format_before_groups_is_rebuilt(tmp_path: Path) -> None:
    index = KeywordIndex(tmp_path / "keywords")
    index.add("d:1", ["jwt"], group="g")
    state = dict(index.state())
    index.close()
    old = {"opstamp": state["opstamp"], "lengths": state["lengths"]}  # what a save wrote before groups
    again = KeywordIndex(tmp_path / "keywords")
    assert not again.adopt(old, {"d:1": (["jwt"], "g")})
    assert [d for d, _ in again.top(["jwt"], 3, always, groups={"g"})] == ["d:1"]
    again.close()


def test_an_index_written_before_documents_had_keys_is_rebuilt(tmp_path: Path) -> None:
    """The schema before the ``key`` column (a stored IRI per document): its files do not open with
    today's schema, so they are wiped and the documents put back from their texts."""
    import tantivy

    path = tmp_path / "keywords"
    path.mkdir()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("iri", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace", index_option="freq")
    builder.add_text_field("group", stored=False, tokenizer_name="raw", index_option="basic")
    old = tantivy.Index(builder.build(), path=str(path), reuse=True)
    writer = old.writer(heap_size=15_000_000, num_threads=1)
    writer.add_document(tantivy.Document(iri="d:old", body="jwt", group="g"))
    opstamp = writer.commit()
    writer.wait_merging_threads()
    state = {"format": 2, "opstamp": int(opstamp), "lengths": {"d:old": 1}, "groups": {"d:old": "g"}}
    del writer, old

    again = KeywordIndex(path)
    assert not again.adopt(state, {"d:1": (["jwt"], "g"), "d:2": (["plan"], "g")})
    assert [d for d, _ in again.top(["jwt", "plan"], 3, always)] == ["d:1", "d:2"]
    assert "d:old" not in again
    again.close()


def test_a_replaced_document_keeps_one_key_and_a_removed_one_is_not_named_again(tmp_path: Path) -> None:
    index = KeywordIndex(tmp_path / "keywords", commit_after=1)
    index.add("d:a", ["jwt"])
    index.add("d:b", ["plan"])
    index.add("d:a", ["jwt", "jwt"])  # replaced, committed again under its key
    index.remove("d:b")
    index.add("d:c", ["plan", "jwt"])
    assert [d for d, _ in index.top(["jwt", "plan"], 5, always)] == ["d:c", "d:a"]
    state = index.state()
    assert sorted(state["keys"]) == ["d:a", "d:c"] and len(set(state["keys"].values())) == 2
    index.close()
    again = KeywordIndex(tmp_path / "keywords")
    assert again.adopt(state, lambda: pytest.fail("a matching index is not rebuilt"))  # type: ignore[arg-type,return-value]
    again.add("d:d", ["plan"])  # a new key after the adopted ones: no hit is named after another document
    again.commit()
    assert {d for d, _ in again.top(["plan"], 5, always)} == {"d:c", "d:d"}
    assert {d for d, _ in again.top(["jwt"], 5, always)} == {"d:a", "d:c"}
    again.close()


@pytest.mark.parametrize("committed", [True, False])
def test_a_large_corpus_does_not_score_the_terms_in_more_than_half_of_it(committed: bool) -> None:
    """From ``PRUNE_FROM`` documents, "the" (in 60 % of them) no longer finds a document by itself when
    the query has a word that discriminates; alone, it still finds. Counted the same in the delta."""
    index = KeywordIndex(None, commit_after=1 if committed else 100_000, commit_at_search=100_000)
    docs: dict[str, list[str]] = {}
    for i in range(PRUNE_FROM):
        tokens = docs[f"d:{i:04}"] = ["the", "filler"] if i % 5 < 3 else ["other"]
        if i % 100 == 0:
            tokens.append("jwt")
        index.add(f"d:{i:04}", tokens)
    if committed:
        index.commit()
    found = dict(index.top(["the", "jwt"], 50, always))
    by_jwt_alone = exact_scores(docs, ["jwt"])
    assert found.keys() == by_jwt_alone.keys() and len(found) == 10
    assert all(found[d] == pytest.approx(by_jwt_alone[d], rel=1e-4) for d in found)
    assert len(index.top(["the"], 50, always)) == 50
    assert len(index.top(["the", "unheard"], 50, always)) == 50  # a word found nowhere does not count
    index.close()
