"""Ed25519 signatures over a documented canonical JSON of a skill node.

**What is signed.** The bytes ``DOMAIN + canonical(node')`` where ``node'`` is
the node with its ``signature`` object reduced to ``{"algorithm", "keyId"}``
(the ``value`` left out: a signature cannot cover itself) and ``canonical`` is
L0's canonical JSON (``gliding_actors/l0/_canonical.py``: UTF-8, no
insignificant whitespace, object keys sorted by code point, non-ASCII written
as itself, floats in their shortest round-trip form). So every key and value
of the node is covered — array order included — and so are the algorithm and
the key id: a signature cannot be re-labelled as another key's.

**Why canonical JSON, not RDF canonicalization (URDNA2015).** The node is
stored, read and handed over as JSON; RDF canonicalization would make
equivalent what a reader of the JSON sees as different — a reordered array of
steps (RDF lists aside, arrays are sets), a duplicated link, a number spelt
``1`` or ``1.0`` in a schema — and it is a pure-Python pass of a few
milliseconds per node in pyld. The JSON form costs microseconds and a change
to any byte of meaning fails verification (tested field by field).

``DOMAIN`` separates these signatures from anything else the same key signs.

**Trust.** Verification looks the key id up in a :class:`Keyring` the caller
configured; a key embedded in a skill is never consulted (the node has no
place for one). An unknown key id is a :class:`SignatureError` naming it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from gliding_actors.errors import InvalidInput, SignatureError, show
from gliding_actors.l0._canonical import JSON_ERRORS, canonical
from gliding_actors.skills._model import SIGNATURE_ALGORITHM, Skill, check_key_id

__all__ = [
    "DOMAIN",
    "Keyring",
    "load_private_key",
    "public_key_text",
    "sign_skill",
    "signing_payload",
    "verify_skill",
]

DOMAIN: Final = b"gliding-actors skill signature v1\n"


def _b64encode(raw: bytes) -> str:
    """base64url without padding (RFC 4648 §5): one spelling per byte string."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    """The inverse of :func:`_b64encode`; refuses padding, other alphabets and non-canonical tails."""
    if not text or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text):
        raise ValueError("not unpadded base64url")
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64encode(raw) != text:  # trailing bits set: a second spelling of the same bytes
        raise ValueError("not the canonical base64url spelling")
    return raw


def signing_payload(node: Mapping[str, Any], key_id: str) -> bytes:
    """The exact bytes a signature by ``key_id`` covers (module docstring)."""
    body = {k: v for k, v in node.items() if k != "signature"}
    body["signature"] = {"algorithm": SIGNATURE_ALGORITHM, "keyId": key_id}
    try:
        return DOMAIN + canonical(body)
    except JSON_ERRORS as exc:
        raise InvalidInput(f"a skill must be plain JSON to be signed: {exc}") from None


def sign_skill(node: Mapping[str, Any], key: Ed25519PrivateKey, key_id: str) -> dict[str, Any]:
    """A copy of ``node`` signed by ``key`` under ``key_id`` (an earlier signature is replaced).

    The node is checked first (:meth:`Skill.from_node`): a key never signs
    something that is not a skill. The input is not changed.
    """
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInput(f"a skill is signed with an Ed25519 private key, not {type(key).__name__}")
    check_key_id(key_id)
    unsigned = {k: copy.deepcopy(v) for k, v in node.items() if k != "signature"}
    Skill.from_node(unsigned)
    signature = key.sign(signing_payload(unsigned, key_id))
    signed = dict(unsigned)
    signed["signature"] = {"algorithm": SIGNATURE_ALGORITHM, "keyId": key_id, "value": _b64encode(signature)}
    return signed


def verify_skill(node: object, keyring: Keyring) -> str:
    """Check ``node``'s signature against ``keyring``; return the key id that signed it.

    Only the signature is checked, over whatever the node holds, so any change
    to a signed node — including one that also breaks its shape — is a
    :class:`SignatureError` (missing or malformed signature, untrusted key,
    content that does not match). Check the shape with
    :meth:`Skill.from_node` (the invocation guard does both).
    """
    if not isinstance(keyring, Keyring):
        raise InvalidInput(f"verify against a Keyring, not {type(keyring).__name__}")
    if not isinstance(node, dict):
        raise SignatureError(f"not a skill node: {type(node).__name__}")
    iri = node.get("@id") if isinstance(node.get("@id"), str) else None
    label = iri or "the skill"
    signature = node.get("signature")
    if signature is None:
        raise SignatureError(f"{label} is not signed", iri=iri)
    if type(signature) is not dict or set(signature) != {"algorithm", "keyId", "value"}:
        raise SignatureError(f"{label}: the signature is not {{'algorithm', 'keyId', 'value'}}", iri=iri)
    key_id = signature["keyId"]
    try:
        check_key_id(key_id)
    except InvalidInput:
        raise SignatureError(f"{label}: the signature's key id {key_id!r} is malformed", iri=iri) from None
    if signature["algorithm"] != SIGNATURE_ALGORITHM:
        raise SignatureError(
            f"{label}: algorithm {signature['algorithm']!r} is not {SIGNATURE_ALGORITHM}", key_id=key_id, iri=iri
        )
    public = keyring.get(key_id)
    if public is None:
        raise SignatureError(f"{label} is signed with key {key_id!r}, which is not trusted", key_id=key_id, iri=iri)
    value = signature["value"]
    try:
        raw = _b64decode(value) if type(value) is str else b""
    except (ValueError, binascii.Error):
        raw = b""
    if len(raw) != 64:
        raise SignatureError(f"{label}: the signature value is not 64 bytes of base64url", key_id=key_id, iri=iri)
    try:
        payload = signing_payload(node, key_id)
    except InvalidInput as exc:
        raise SignatureError(f"{label}: {exc.message}", key_id=key_id, iri=iri) from None
    try:
        public.verify(raw, payload)
    except InvalidSignature:
        raise SignatureError(
            f"{label}: the signature by key {key_id!r} does not match the skill's content (changed after signing?)",
            key_id=key_id,
            iri=iri,
        ) from None
    return str(key_id)


class Keyring(Mapping[str, Ed25519PublicKey]):
    """The public keys a caller trusts, by key id. Immutable.

    Built from ``{key_id: key}`` where a key is an ``Ed25519PublicKey``, its 32
    raw bytes, or their base64url text (what :func:`public_key_text` prints
    and the keyring file holds). The file form is a JSON object
    ``{"keys": {key_id: base64url}}`` (:meth:`load` / :meth:`to_json`).
    """

    def __init__(self, keys: Mapping[str, Ed25519PublicKey | bytes | str] | None = None) -> None:
        parsed: dict[str, Ed25519PublicKey] = {}
        if keys is not None and not isinstance(keys, Mapping):
            raise InvalidInput(f"a keyring is built from {{key_id: public key}}, not {type(keys).__name__}")
        for key_id, key in (keys or {}).items():
            check_key_id(key_id)
            parsed[key_id] = _public_key(key, key_id)
        self._keys = parsed

    def __getitem__(self, key_id: str) -> Ed25519PublicKey:
        return self._keys[key_id]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._keys))

    def __len__(self) -> int:
        return len(self._keys)

    def to_json(self) -> dict[str, Any]:
        """``{"keys": {key_id: base64url}}``, the keyring file's form."""
        return {"keys": {key_id: public_key_text(self._keys[key_id]) for key_id in self}}

    @classmethod
    def from_json(cls, data: object) -> Keyring:
        """The inverse of :meth:`to_json`; anything else is ``InvalidInput`` naming the path."""
        if not isinstance(data, dict) or set(data) != {"keys"} or not isinstance(data["keys"], dict):
            raise InvalidInput('a keyring is {"keys": {key_id: base64url public key}}', path=("keys",))
        return cls(data["keys"])

    @classmethod
    def load(cls, path: str | Path) -> Keyring:
        """Read a keyring file (JSON, :meth:`to_json`'s form)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InvalidInput(f"{path}: cannot read the keyring: {exc}") from None
        try:
            return cls.from_json(data)
        except InvalidInput as exc:
            raise InvalidInput(f"{path}: {exc.message}", path=exc.path) from None

    def __repr__(self) -> str:
        return f"Keyring({', '.join(self)})"


def _public_key(key: object, key_id: str) -> Ed25519PublicKey:
    if isinstance(key, Ed25519PublicKey):
        return key
    try:
        raw = _b64decode(key) if isinstance(key, str) else key
        if not isinstance(raw, bytes) or len(raw) != 32:
            raise ValueError("not 32 bytes")
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, binascii.Error):
        raise InvalidInput(
            f"key {show(key_id)}: an Ed25519 public key is 32 raw bytes or their unpadded base64url text",
            path=("keys", key_id),
        ) from None


def public_key_text(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """The base64url text of a public key (of a private key's public half): a keyring entry."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return _b64encode(public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw))


def load_private_key(path: str | Path) -> Ed25519PrivateKey:
    """An Ed25519 private key from a PEM file (PKCS#8, unencrypted: ``openssl genpkey -algorithm ed25519``)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read the private key: {exc}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(f"{path}: not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InvalidInput(f"{path}: not an Ed25519 key ({type(key).__name__})")
    return key
