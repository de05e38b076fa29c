"""Coherence messages: kinds and constructors that build plain dicts.

Every message is a ``dict`` holding only str / int / bool / None / list / dict,
so the same message can be logged, replayed byte for byte, and sent across a
process boundary with msgpack. The kind is under ``"t"``; ``"src"`` names the
sender (redundant with the transport's sender, but it makes a message log
readable on its own).

Protocol messages use the vocabulary of Sorin, Hill and Wood, ch. 8 (GetS,
GetM, PutS, PutE, PutM, Fwd-GetS, Fwd-GetM, Inv, Inv-Ack, Data, Put-Ack), plus
four of ours: ``WT`` / ``WT-Ack`` (a write-through store made durable at home
before the write completes) and ``Recall`` / ``Recall-Ack`` (a multi-line reader
asks a directory to bring every dirty line in its scope home first).

Client requests reach a cache controller from the pseudo-sender
:data:`CLIENT` and are answered with a ``done`` or ``failed`` message addressed
to :data:`CLIENT`.

Counting: ``Data``, ``Fwd-GetS`` and ``Fwd-GetM`` carry ``n``, the number of
messages their transaction has cost up to and including that message (the
request, the forward, the invalidations the directory sent, the copy an owner
sends home). The requester adds the Inv-Acks it receives, so it knows exactly
what its miss cost without anyone keeping a global count.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "CLIENT",
    "Msg",
    "directory_shard",
]

Msg = dict[str, Any]
"""A message: a msgpack-serialisable dict with its kind under ``"t"``."""

Value = dict[str, Any] | None
"""A line's value: a JSON object, or None when absent or deleted (tombstone)."""

Meta = dict[str, Any] | None
"""What home needs to index and keep a write: ``{"tags": [sorted str], "graph": str | None}``,
plus ``"importance"`` (0..1) when the writer gave one (kept by later writes that give none) and
``"expires"`` (seconds on the memory's clock) when the write carries a time to live."""

CLIENT = "@client"
"""Pseudo-address of the agent-facing side of a cache controller."""

# -- protocol kinds (the primer's vocabulary) ------------------------------
GET_S = "GetS"
GET_M = "GetM"
PUT_S = "PutS"
PUT_E = "PutE"
PUT_M = "PutM"
FWD_GET_S = "Fwd-GetS"
FWD_GET_M = "Fwd-GetM"
INV = "Inv"
INV_ACK = "Inv-Ack"
DATA = "Data"
PUT_ACK = "Put-Ack"
# -- ours ------------------------------------------------------------------
WT = "WT"
WT_ACK = "WT-Ack"
WT_NACK = "WT-Nack"
RECALL = "Recall"
RECALL_ACK = "Recall-Ack"
# -- recovery (handled by the hosting actors, not the controllers) ----------
RECLAIM = "Reclaim"
"""A restarted cache to every directory: forget what my previous life held."""
CENSUS = "Census"
"""A restarted directory to every cache: which of my lines do you hold?"""
CENSUS_ACK = "Census-Ack"
"""A cache's answer to Census: ``{"lines": {iri: state}, "deferred": {iri: [[kind, req], ...]}}``
for the lines homed at that directory (``deferred``: the forwards and Invs it has not served yet)."""
RECLAIM_ACK = "Reclaim-Ack"
"""A directory to a restarted cache: your Reclaim is done. Per-pair FIFO puts every
message the directory sent to the cache's previous life before it, so until it
arrives a reborn cache treats messages from that directory as addressed to its
dead self (docs/RELIABILITY.md, "Crashes in the middle of a transaction")."""
NACK = "Nack"
"""A reborn cache to a directory: ``{"iri", "req", "inc"?}``: a Fwd-GetM for ``req``
reached me after my previous life died; its data is gone, answer ``req`` from home."""

PROTOCOL_KINDS = frozenset(
    {
        GET_S,
        GET_M,
        PUT_S,
        PUT_E,
        PUT_M,
        FWD_GET_S,
        FWD_GET_M,
        INV,
        INV_ACK,
        DATA,
        PUT_ACK,
        WT,
        WT_ACK,
        WT_NACK,
    }
)

# -- client requests and completions ---------------------------------------
LOAD = "load"
STORE = "store"
CAS = "cas"
DELETE = "delete"
EVICT = "evict"
#: a read-modify-write: the value is ``fn(current value)``, computed once the line is held in M
MODIFY = "modify"
CLIENT_KINDS = frozenset({LOAD, STORE, CAS, DELETE, EVICT, MODIFY})
WRITE_KINDS = frozenset({STORE, CAS, DELETE, MODIFY})
DONE = "done"
FAILED = "failed"


def directory_shard(iri: str, shards: Sequence[str]) -> str:
    """The directory (one of ``shards``) that is home of ``iri``.

    Uses CRC-32 of the UTF-8 IRI, not ``hash()``: Python salts string hashes per
    process, and every process (and every replay) must agree on a line's home.
    """
    if not shards:
        raise ValueError("directory_shard needs at least one shard")
    return shards[zlib.crc32(iri.encode("utf-8")) % len(shards)]


def _base(kind: str, iri: str, src: str) -> Msg:
    return {"t": kind, "iri": iri, "src": src}


def with_inc(msg: Msg, inc: int) -> Msg:
    """``msg`` carrying the requester's incarnation ``inc`` (not at all when 0).

    A cache reborn after a crash counts its lives; its GetS / GetM carry the
    count, the directory copies it into the Fwd-GetS / Fwd-GetM / Inv it sends
    on the request's behalf, and the cache answering copies it into its Data or
    Inv-Ack. The requester drops an answer from another cache that names
    another life: it answers a request that died with the previous one. A
    first life (0) sends no field, so a run without crashes is byte for byte
    what it was before crashes could happen mid-transaction.
    """
    if inc:
        msg["inc"] = inc
    return msg


def inc_of(msg: Msg) -> int:
    """The requester incarnation a message carries (0 when absent)."""
    inc = msg.get("inc", 0)
    return inc if isinstance(inc, int) and not isinstance(inc, bool) else 0


def get_s(iri: str, src: str) -> Msg:
    """Cache -> directory: I want a readable copy."""
    return _base(GET_S, iri, src)


def get_m(iri: str, src: str) -> Msg:
    """Cache -> directory: I want the only, writable copy."""
    return _base(GET_M, iri, src)


def put_s(iri: str, src: str) -> Msg:
    """Cache -> directory: I drop my S copy."""
    return _base(PUT_S, iri, src)


def put_e(iri: str, src: str) -> Msg:
    """Cache -> directory: I drop my clean E copy (no data: home has it)."""
    return _base(PUT_E, iri, src)


def put_m(iri: str, src: str, value: Value, version: int, meta: Meta) -> Msg:
    """Cache -> directory: I drop my M copy; here is the data."""
    msg = _base(PUT_M, iri, src)
    msg.update(value=value, version=version, meta=meta)
    return msg


def fwd_get_s(iri: str, src: str, req: str, n: int) -> Msg:
    """Directory -> owner: send ``req`` (and home) a copy and keep S.

    ``req`` equal to the directory's own name is a recall: the data goes home once.
    """
    msg = _base(FWD_GET_S, iri, src)
    msg.update(req=req, n=n)
    return msg


def fwd_get_m(iri: str, src: str, req: str, n: int) -> Msg:
    """Directory -> owner: send ``req`` your data and invalidate."""
    msg = _base(FWD_GET_M, iri, src)
    msg.update(req=req, n=n)
    return msg


def inv(iri: str, src: str, req: str) -> Msg:
    """Directory -> sharer: invalidate, and ack to ``req`` (the new owner)."""
    msg = _base(INV, iri, src)
    msg.update(req=req)
    return msg


def inv_ack(iri: str, src: str) -> Msg:
    """Sharer -> new owner: my copy is gone."""
    return _base(INV_ACK, iri, src)


def data(
    iri: str,
    src: str,
    value: Value,
    version: int,
    meta: Meta,
    *,
    acks: int,
    excl: bool,
    n: int,
) -> Msg:
    """The line's data.

    ``acks``: Inv-Acks the receiver must collect before it holds M (only from the
    directory answering a GetM). ``excl``: the directory grants E (GetS to a line
    nobody holds). ``n``: messages of this transaction so far, this one included.
    """
    msg = _base(DATA, iri, src)
    msg.update(value=value, version=version, meta=meta, acks=acks, excl=excl, n=n)
    return msg


def put_ack(iri: str, src: str) -> Msg:
    """Directory -> evicting cache: your Put* is ordered; the line is yours to forget."""
    return _base(PUT_ACK, iri, src)


def wt(iri: str, src: str, value: Value, version: int, meta: Meta) -> Msg:
    """Owner -> directory: store this write durably (L2 and L0) and tell me."""
    msg = _base(WT, iri, src)
    msg.update(value=value, version=version, meta=meta)
    return msg


def wt_ack(iri: str, src: str, version: int) -> Msg:
    """Directory -> owner: ``version`` is durable at home; the write may complete."""
    msg = _base(WT_ACK, iri, src)
    msg.update(version=version)
    return msg


def wt_nack(iri: str, src: str, version: int, error: str) -> Msg:
    """Directory -> owner: home holds ``version`` but could not make it durable (``error``); the write fails."""
    msg = _base(WT_NACK, iri, src)
    msg.update(version=version, error=error)
    return msg


def recall(src: str, rid: int, iris: Iterable[str] | None) -> Msg:
    """Reader -> directory: bring every E/M line of ``iris`` (None: all) home, then ack."""
    return {"t": RECALL, "src": src, "rid": rid, "iris": None if iris is None else sorted(iris)}


def recall_ack(src: str, rid: int, iris: list[str], n: int) -> Msg:
    """Directory -> reader: every line in scope is home. ``iris``: those fetched from an owner."""
    return {"t": RECALL_ACK, "src": src, "rid": rid, "iris": iris, "n": n}


# -- client side -----------------------------------------------------------
def load(iri: str, op: int) -> Msg:
    """Client request: read ``iri``."""
    return {"t": LOAD, "iri": iri, "op": op}


def store(
    iri: str, op: int, value: dict[str, Any], tags: Iterable[str] = (), graph: str | None = None
) -> Msg:
    """Client request: write ``value`` (a JSON object) to ``iri``."""
    return {"t": STORE, "iri": iri, "op": op, "value": value, "tags": list(tags), "graph": graph}


def cas(
    iri: str,
    op: int,
    version: int,
    value: dict[str, Any],
    tags: Iterable[str] = (),
    graph: str | None = None,
) -> Msg:
    """Client request: write ``value`` only if the line's version is still ``version``."""
    return {
        "t": CAS,
        "iri": iri,
        "op": op,
        "version": version,
        "value": value,
        "tags": list(tags),
        "graph": graph,
    }


def delete(iri: str, op: int, tags: Iterable[str] | None = None, version: int | None = None) -> Msg:
    """Client request: write a tombstone. Without ``tags`` it keeps the line's tags; with
    ``version``, only if the line is still at that version (as ``cas`` does)."""
    msg: Msg = {"t": DELETE, "iri": iri, "op": op}
    if tags is not None:
        msg["tags"] = list(tags)
    if version is not None:
        msg["version"] = version
    return msg


def evict(iri: str, op: int) -> Msg:
    """Client request: give the line up (its dirty data goes home)."""
    return {"t": EVICT, "iri": iri, "op": op}


def done(op: int, result: dict[str, Any]) -> Msg:
    """Completion of client op ``op``."""
    return {"t": DONE, "op": op, "result": result}


def failed(op: int, error: str, message: str) -> Msg:
    """Failure of client op ``op``; ``error`` is a class name of gliding_actors.errors."""
    return {"t": FAILED, "op": op, "error": error, "message": message}
