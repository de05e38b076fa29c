"""Skills as lines: stored through an agent, found by SPARQL and hybrid search, guarded before use."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from gliding_actors.errors import InvalidInput, PermissionDenied, SignatureError
from gliding_actors.skills import (
    Invocation,
    Keyring,
    alternatives,
    check_invocation,
    components,
    invoke_skill,
    list_skills,
    load_skill_file,
    prerequisites,
    read_skill,
    sign_skill,
    similar_skills,
    skill_node,
    skill_view,
    store_skill,
    use_skill,
)
from gliding_actors.system import MemorySystem
from skill_support import EXAMPLES, KEYRING, LEAD, OTHER, rotate_node


@pytest.fixture
def memory() -> Iterator[MemorySystem]:
    m = MemorySystem.open(runtime="sim")
    yield m
    m.close(flush=False)


def _state(m: MemorySystem) -> tuple[Any, ...]:
    """Everything a refused call must leave alone: L0, the RDF graph, the line registry."""
    m.quiesce()
    l0 = sorted((e.iri, e.version) for e in m.l0.query(limit=10_000))
    return l0, m.graph.dump(), dict(m.line_graphs.graphs)


def _load_examples(m: MemorySystem) -> dict[str, dict[str, Any]]:
    aa = m.agent("aa", "AA")
    nodes = {}
    for path in EXAMPLES:
        node = sign_skill(load_skill_file(path), LEAD, "lead")
        store_skill(aa, node, keyring=KEYRING)
        nodes[node["@id"]] = node
    return nodes


def test_skills_are_lines_every_role_reads_and_sparql_lists(memory: MemorySystem) -> None:
    nodes = _load_examples(memory)
    sa, da = memory.agent("sa", "SA"), memory.agent("da", "DA")
    assert list_skills(sa) == sorted(nodes)
    skill = read_skill(da, "skill:rotate-signing-keys")
    assert skill.node == nodes["skill:rotate-signing-keys"] and skill.key_id == "lead"
    caches = memory.inspect("skill:rotate-signing-keys")["caches"]
    assert caches["aa"] == caches["da"] == "S"  # a line under coherence: the writer's M copy was shared
    memory.flush()
    stored = memory.l0.retrieve("skill:rotate-signing-keys")
    assert stored is not None and stored.named_graph == "knowledge" and "skill" in stored.tags
    assert stored.content == nodes["skill:rotate-signing-keys"]


def test_discovery_by_sparql_and_hybrid_search(memory: MemorySystem) -> None:
    _load_examples(memory)
    pa = memory.agent("pa", "PA")
    assert prerequisites(pa, "skill:rotate-signing-keys") == ["skill:generate-key-pair"]
    # transitive and ordered: build-artifacts' prerequisite comes before build-artifacts itself
    assert components(pa, "skill:secure-release") == ["skill:build-artifacts", "skill:rotate-signing-keys"]
    chain = prerequisites(pa, "skill:secure-release")
    assert chain == ["skill:generate-key-pair"]
    # alternatives are symmetric: rotate names revoke, revoke names rotate
    assert alternatives(pa, "skill:rotate-signing-keys") == ["skill:revoke-and-reissue"]
    assert alternatives(pa, "skill:revoke-and-reissue") == ["skill:rotate-signing-keys"]
    similar = similar_skills(pa, "skill:rotate-signing-keys", k=3)
    assert "skill:rotate-signing-keys" not in similar and len(similar) == 3
    assert similar[0] == "skill:revoke-and-reissue", similar  # the other key-compromise skill
    assert similar_skills(pa, "skill:summarize-review", k=5)[-1:] != ["skill:summarize-review"]


def test_transitive_prerequisites_come_in_a_working_order(memory: MemorySystem) -> None:
    aa = memory.agent("aa", "AA")
    for iri, pre in (("skill:c", ["skill:b", "skill:a"]), ("skill:b", ["skill:a"]), ("skill:a", None)):
        store_skill(aa, skill_node(iri, name=iri, what="w", trigger="t", steps=[("s", "")], prerequisites=pre))
    assert prerequisites(aa, "skill:c") == ["skill:a", "skill:b"]
    assert prerequisites(aa, "skill:c", transitive=False) == ["skill:a", "skill:b"]
    assert prerequisites(aa, "skill:a") == []


def test_permissions_apply_and_a_refusal_changes_nothing(memory: MemorySystem) -> None:
    _load_examples(memory)
    da = memory.agent("da", "DA")
    before = _state(memory)
    planted = sign_skill(rotate_node(), LEAD, "lead")
    with pytest.raises(PermissionDenied, match="knowledge"):
        store_skill(da, planted)  # DA may not create in knowledge
    with pytest.raises(InvalidInput):
        store_skill(da, {**rotate_node(), "steps": []}, graph="execution")
    stranger = sign_skill(rotate_node(), OTHER, "other")
    with pytest.raises(SignatureError):
        store_skill(memory.agent("aa", "AA"), stranger, keyring=Keyring({"lead": LEAD.public_key()}))
    assert _state(memory) == before
    # a skill in a graph a role may not read is invisible to it, in every discovery path
    store_skill(memory.agent("ca", "CA"), skill_node("skill:review-only", name="R", what="w", trigger="t",
                steps=[("s", "")], prerequisites=["skill:generate-key-pair"]), graph="review")
    assert "skill:review-only" not in list_skills(da)
    with pytest.raises(InvalidInput, match="no skill at skill:review-only"):  # as if there were none
        read_skill(da, "skill:review-only")
    assert "skill:review-only" in list_skills(memory.agent("aa", "AA"))


def test_the_view_is_read_through_the_agent_for_its_role(memory: MemorySystem) -> None:
    _load_examples(memory)
    sa, da = memory.agent("sa", "SA"), memory.agent("da", "DA")
    assert skill_view(sa, "skill:rotate-signing-keys")["level"] == "SA"
    view = skill_view(da, "skill:rotate-signing-keys")
    assert view["level"] == "DA" and view["tokens"] <= 1500 and "inputSchema" in view["jsonld"]


def test_the_guard_hands_over_only_signed_skills_with_valid_input(memory: MemorySystem) -> None:
    _load_examples(memory)
    da = memory.agent("da", "DA")
    good = {"service": "auth", "key_ids": ["auth-1"], "notify": ["ops@example.org"]}
    invocation = use_skill(da, "skill:revoke-and-reissue", good, KEYRING)
    assert isinstance(invocation, Invocation) and invocation.key_id == "lead"
    assert invocation.inputs == good and invocation.inputs is not good
    ran: list[Invocation] = []
    assert invoke_skill(da, "skill:revoke-and-reissue", good, KEYRING, lambda inv: ran.append(inv) or "done") == "done"
    assert len(ran) == 1

    before = _state(memory)
    refusals = [
        ({"service": "auth"}, ("key_ids",), r"\$\.key_ids: 'key_ids' is a required property"),
        ({**good, "key_ids": ["ok", "Not Ok"]}, ("key_ids", 1), r"\$\.key_ids\[1\]"),
        ({**good, "key_ids": []}, ("key_ids",), r"\$\.key_ids"),
        ({**good, "extra": 1}, ("extra",), r"\$\.extra"),
        ({**good, "notify": ["not an email"]}, ("notify", 0), r"\$\.notify\[0\]"),
        ("not an object", (), r"\$: 'not an object' is not of type 'object'"),
    ]
    for inputs, path, message in refusals:
        with pytest.raises(InvalidInput, match=message) as info:
            invoke_skill(da, "skill:revoke-and-reissue", inputs, KEYRING, ran.append)
        assert info.value.path == path
    with pytest.raises(SignatureError, match="'lead'.*not trusted") as sig:
        invoke_skill(da, "skill:revoke-and-reissue", good, Keyring({"other": OTHER.public_key()}), ran.append)
    assert sig.value.key_id == "lead"
    with pytest.raises(InvalidInput, match="no skill"):
        invoke_skill(da, "skill:nothing-here", good, KEYRING, ran.append)
    assert len(ran) == 1  # nothing ran
    assert _state(memory) == before


def test_a_skill_changed_in_memory_after_signing_is_refused(memory: MemorySystem) -> None:
    nodes = _load_examples(memory)
    aa = memory.agent("aa", "AA")
    tampered = copy.deepcopy(nodes["skill:rotate-signing-keys"])
    tampered["steps"][3]["instructions"] = "Keep the old key forever."
    aa.write("skill:rotate-signing-keys", tampered)  # AA may write it: the signature still says no
    ran: list[Any] = []
    with pytest.raises(SignatureError, match="does not match"):
        invoke_skill(memory.agent("da", "DA"), "skill:rotate-signing-keys", {"service": "auth"}, KEYRING, ran.append)
    unsigned = {k: v for k, v in tampered.items() if k != "signature"}
    aa.write("skill:rotate-signing-keys", unsigned)
    with pytest.raises(SignatureError, match="not signed"):
        use_skill(memory.agent("da", "DA"), "skill:rotate-signing-keys", {"service": "auth"}, KEYRING)
    assert ran == []


def test_the_signature_is_checked_before_the_schema_is_believed() -> None:
    node = sign_skill(rotate_node(), LEAD, "lead")
    loosened = copy.deepcopy(node)
    loosened["inputSchema"]["@value"] = {}  # would accept anything
    with pytest.raises(SignatureError):
        check_invocation(loosened, {"anything": 1}, KEYRING)
    with pytest.raises(InvalidInput, match=r"\$\.ttl"):
        check_invocation(node, {"service": "a", "ttl": 0.1}, KEYRING)
    with pytest.raises(InvalidInput, match="plain JSON"):
        check_invocation(node, {"service": float("nan")}, KEYRING)
    assert check_invocation(node, {"service": "a", "ttl": 0.5}, KEYRING).skill.iri == "skill:rotate"
