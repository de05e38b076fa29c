"""The scheduler's plain logic: one budget, marginal relevance per token, dedup, never over."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.context import Candidate, assemble
from gliding_actors.l1._tokens import EstimateCounter

COUNT = EstimateCounter().count


def cand(iri: str, text: str, source: str = "l0", rank: int = 1, covers: frozenset[str] = frozenset()) -> Candidate:
    return Candidate(iri, text, source, {source: rank}, covers or frozenset({iri}))


def test_a_turn_told_by_a_chosen_summary_adds_nothing() -> None:
    summary = cand("s", "- Caroline went to a support group", rank=1, covers=frozenset({"s", "t"}))
    turn = cand("t", "- Caroline: I went to a LGBTQ support group yesterday and it was powerful", rank=2)
    other = cand("u", "- Melanie: painting relaxes me", rank=3)
    out = assemble([summary, turn, other], 1000, COUNT)
    assert [c.iri for c in out.chosen] == ["s", "u"]  # t is covered by s: zero marginal gain


def test_the_same_node_from_two_sources_is_one_item_with_both_ranks() -> None:
    chain = Candidate("memory:session-pa/block-1", "- planned the rollout", "l1", {"l1": 1})
    found = Candidate("memory:session-pa/block-1", "- [x] pa: planned the rollout", "l0", {"recall": 1})
    out = assemble([chain, found], 100, COUNT)
    assert len(out.chosen) == 1
    assert out.chosen[0].source == "l1" and out.chosen[0].ranks == {"l1": 1, "recall": 1}
    assert out.text == "## session\n- planned the rollout"


def test_higher_ranked_items_win_the_budget() -> None:
    items = [cand(f"n{i}", f"- item number {i} " + "word " * 10, rank=i) for i in range(1, 30)]
    out = assemble(items, 60, COUNT)
    assert out.tokens <= 60
    assert [c.iri for c in out.chosen] == ["n1", "n2", "n3"][: len(out.chosen)]
    assert out.sources["l0"]["items"] == len(out.chosen)


def test_an_item_larger_than_the_budget_is_skipped_for_smaller_ones() -> None:
    big = cand("big", "- " + "lorem ipsum " * 200, rank=1)
    small = cand("small", "- short", rank=2)
    out = assemble([big, small], 30, COUNT)
    assert [c.iri for c in out.chosen] == ["small"]


def test_nothing_fits_is_an_empty_context() -> None:
    out = assemble([cand("a", "- " + "x " * 100)], 3, COUNT)
    assert out.chosen == [] and out.text == "" and out.tokens == 0


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=120)


@settings(max_examples=150)
@given(
    items=st.lists(
        st.tuples(st.sampled_from(["l1", "l3", "l2", "l0"]), texts, st.integers(1, 50), st.integers(0, 30)),
        max_size=40,
    ),
    budget=st.integers(1, 400),
)
def test_assemble_never_exceeds_the_budget(items: list[tuple[str, str, int, int]], budget: int) -> None:
    pool = [
        Candidate(f"iri:{n % 25}", "- " + text, source, {source: rank}, frozenset({f"iri:{n % 25}", f"iri:{cover}"}))
        for n, (source, text, rank, cover) in enumerate(items)
    ]
    out = assemble(pool, budget, COUNT)
    assert out.tokens == (COUNT(out.text) if out.text else 0)
    assert out.tokens <= budget
    assert len({c.iri for c in out.chosen}) == len(out.chosen)
