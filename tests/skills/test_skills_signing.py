"""Signatures: every change to a signed skill fails verification; trust comes only from the keyring."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from gliding_actors.errors import InvalidInput, PermissionDenied, SignatureError
from gliding_actors.skills import (
    Keyring,
    parse_markdown,
    public_key_text,
    render_markdown,
    sign_skill,
    signing_payload,
    verify_skill,
)
from gliding_actors.skills._signing import DOMAIN
from skill_support import KEYRING, LEAD, OTHER, rotate_node, skills

Path = tuple[str | int, ...]


def _paths(value: Any, at: Path = ()) -> Iterator[Path]:
    """Every path in a JSON value: the root's members, containers and leaves alike."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*at, key)
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield (*at, i)
            yield from _paths(item, (*at, i))


def _get(value: Any, path: Path) -> Any:
    for part in path:
        value = value[part]
    return value


def _changed(leaf: Any) -> list[Any]:
    """Values different from ``leaf`` in meaning (never an equal JSON value)."""
    if isinstance(leaf, bool):
        return [not leaf, int(leaf)]
    if isinstance(leaf, int):
        return [leaf + 1, str(leaf), float(leaf) + 0.5]
    if isinstance(leaf, float):
        return [leaf + 1.0, -leaf if leaf else 1.0]
    if isinstance(leaf, str):
        return [leaf + "x", leaf[:-1] if leaf else "y", leaf.upper() if leaf.upper() != leaf else leaf.lower() + "q"]
    if isinstance(leaf, list):
        changes: list[Any] = [[*leaf, leaf[0] if leaf else 1]]
        if len(leaf) > 1 and leaf[::-1] != leaf:
            changes.append(leaf[::-1])
        if leaf:
            changes.append(leaf[1:])
        return changes
    if isinstance(leaf, dict):
        return [{**leaf, "extra": 1}, {k: v for k, v in list(leaf.items())[1:]}]
    return [0]


def _mutations(node: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every single change to ``node``: each member replaced by different values, each key deleted,
    a key added to each object."""
    yield "add a top-level key", {**node, "extra": True}
    for path in _paths(node):
        for replacement in _changed(_get(node, path)):
            mutated = copy.deepcopy(node)
            _get(mutated, path[:-1])[path[-1]] = replacement
            if mutated != node:
                yield f"{path} = {replacement!r}", mutated
        if isinstance(path[-1], str):
            mutated = copy.deepcopy(node)
            del _get(mutated, path[:-1])[path[-1]]
            yield f"del {path}", mutated


def test_a_signed_skill_verifies_and_names_its_key() -> None:
    signed = sign_skill(rotate_node(), LEAD, "lead")
    assert verify_skill(signed, KEYRING) == "lead"
    assert signed["signature"]["algorithm"] == "Ed25519"
    assert LEAD.public_key().verify is not None
    # the payload is the documented one: domain + canonical JSON without the value
    unsigned = {k: v for k, v in signed.items() if k != "signature"}
    assert signing_payload(unsigned, "lead").startswith(DOMAIN)
    assert b'"keyId":"lead"' in signing_payload(unsigned, "lead")


def test_tampering_with_any_field_of_a_signed_skill_fails_verification() -> None:
    """Exhaustive over the fields: every member of every object and list, at every depth —
    the schema, the steps, the links, the signature's algorithm, key id and value included."""
    signed = sign_skill(rotate_node(), LEAD, "lead")
    count = 0
    for what, mutated in _mutations(signed):
        with pytest.raises(SignatureError):
            verify_skill(mutated, KEYRING)
        count += 1
    assert count > 150, count  # the enumeration really covered the node


def test_signature_metadata_is_covered_relabelling_to_another_trusted_key_fails() -> None:
    signed = sign_skill(rotate_node(), LEAD, "lead")
    relabelled = copy.deepcopy(signed)
    relabelled["signature"]["keyId"] = "other"  # another key we trust
    with pytest.raises(SignatureError, match="other") as info:
        verify_skill(relabelled, KEYRING)
    assert info.value.key_id == "other"


def _every_change_fails(node: dict[str, Any]) -> None:
    signed = sign_skill(node, OTHER, "other")
    assert verify_skill(signed, KEYRING) == "other"
    for what, mutated in _mutations(signed):
        with pytest.raises(SignatureError):
            verify_skill(mutated, KEYRING)


@settings(max_examples=15)
@given(node=skills())
def test_every_change_to_a_random_signed_skill_fails(node: dict[str, Any]) -> None:
    """Random skills (any kind, schema, links), each with every single change of _mutations."""
    _every_change_fails(node)


@pytest.mark.slow
@settings(max_examples=500)
@given(node=skills())
def test_every_change_to_a_random_signed_skill_fails_long(node: dict[str, Any]) -> None:
    _every_change_fails(node)


def test_key_order_and_markdown_round_trip_keep_the_signature_valid() -> None:
    signed = sign_skill(rotate_node(), LEAD, "lead")
    reordered = dict(reversed(list(signed.items())))
    assert verify_skill(reordered, KEYRING) == "lead"  # canonical JSON sorts keys
    assert verify_skill(parse_markdown(render_markdown(signed)), KEYRING) == "lead"


def test_an_untrusted_key_is_refused_by_name_and_the_embedded_key_is_never_trusted() -> None:
    stranger = Ed25519PrivateKey.from_private_bytes(bytes(32))
    signed = sign_skill(rotate_node(), stranger, "mallory")
    with pytest.raises(SignatureError, match="'mallory'.*not trusted") as info:
        verify_skill(signed, KEYRING)
    assert info.value.key_id == "mallory" and info.value.iri == "skill:rotate"
    assert isinstance(info.value, PermissionDenied)
    # a stranger signing under a trusted key id: the keyring's key decides, and it does not match
    forged = sign_skill(rotate_node(), stranger, "lead")
    with pytest.raises(SignatureError, match="does not match"):
        verify_skill(forged, KEYRING)
    # extra keys (a "publicKey" beside the signature) are not part of a skill: refused, never consulted
    with_key = {**forged, "publicKey": public_key_text(stranger)}
    with pytest.raises(SignatureError):
        verify_skill(with_key, KEYRING)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda n: n.pop("signature"), "not signed"),
        (lambda n: n.__setitem__("signature", "abc"), "not {"),
        (lambda n: n["signature"].__setitem__("algorithm", "RSA"), "algorithm"),
        (lambda n: n["signature"].__setitem__("keyId", "bad id\n"), "malformed"),
        (lambda n: n["signature"].__setitem__("value", "not base64!"), "64 bytes"),
        (lambda n: n["signature"].__setitem__("value", n["signature"]["value"] + "=="), "64 bytes"),
        (lambda n: n["signature"].__setitem__("value", 12), "64 bytes"),
    ],
)
def test_malformed_signatures_are_signature_errors(change: Any, message: str) -> None:
    signed = sign_skill(rotate_node(), LEAD, "lead")
    change(signed)
    with pytest.raises(SignatureError, match=message):
        verify_skill(signed, KEYRING)


def test_signing_checks_the_node_and_changes_nothing() -> None:
    node = rotate_node()
    before = copy.deepcopy(node)
    signed = sign_skill(node, LEAD, "lead")
    assert node == before and "signature" not in node
    resigned = sign_skill(signed, OTHER, "other")  # re-signing replaces the signature
    assert verify_skill(resigned, KEYRING) == "other" and signed["signature"]["keyId"] == "lead"
    bad = {**node, "steps": []}
    with pytest.raises(InvalidInput, match="steps"):
        sign_skill(bad, LEAD, "lead")
    with pytest.raises(InvalidInput, match="key id"):
        sign_skill(node, LEAD, "has space")
    with pytest.raises(InvalidInput):
        sign_skill(node, "not a key", "lead")  # type: ignore[arg-type]
    assert node == before


def test_keyrings_parse_strictly() -> None:
    ring = Keyring.from_json(KEYRING.to_json())
    assert list(ring) == ["lead", "other"] and len(ring) == 2
    assert public_key_text(ring["lead"]) == public_key_text(LEAD)
    with pytest.raises(InvalidInput, match="'lead'"):
        Keyring({"lead": "AAAA"})
    with pytest.raises(InvalidInput):
        Keyring({"lead": public_key_text(LEAD) + "="})  # padded: not the one spelling
    with pytest.raises(InvalidInput, match="key id"):
        Keyring({"": LEAD.public_key()})
    with pytest.raises(InvalidInput, match="keys"):
        Keyring.from_json({"lead": public_key_text(LEAD)})
    with pytest.raises(InvalidInput):
        verify_skill(sign_skill(rotate_node(), LEAD, "lead"), {"lead": LEAD.public_key()})  # type: ignore[arg-type]
