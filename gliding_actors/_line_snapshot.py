"""The lines a memory loads when it opens, saved beside L0 by a clean close.

Opening a memory puts every line L0 holds into the graph store, the line
registry and the expiry table (gliding_actors/_reopen.py). Read from L0 record
by record, each value parsed as JSON-LD again, that was most of an open's time.
A clean close writes the same lines, with the quads they make, to one file
and then marks L0 with the file's token; the next open loads the file instead
when L0 still holds that mark and the file is whole. L0 deletes its mark with
the first write after it (:attr:`L0Store.clean_mark`), so a crash, a repair or
a write by another program sends the open back to L0. The file is a copy of
what L0 holds, never the truth: missing, damaged or out of date, it is ignored.

The file: ``MAGIC``, then the format and the header's length (``<IQ``), the
header (msgpack: ``token``, the lengths of the two parts of the body and the
body's CRC-32), then the body: the lines (msgpack rows) and their quads
(N-Quads, each line's in its row's order).
"""

from __future__ import annotations

import os
import secrets
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import pyoxigraph as ox

from gliding_actors.coherence._home import EXPIRES_AT
from gliding_actors.errors import GlidingError
from gliding_actors.l0 import L0Entry, L0Store
from gliding_actors.l1 import is_archive_iri
from gliding_actors.l2._graph import GraphNode, GraphStore
from gliding_actors.l2._jsonld import to_quads

__all__ = [
    "LINE_SNAPSHOT",
    "LineSnapshot",
    "expires_of",
    "line_entries",
    "read_line_snapshot",
    "save_lines_on_close",
    "write_line_snapshot",
]

#: the file, in a memory's directory
LINE_SNAPSHOT = "lines.snapshot"
MAGIC = b"GA-LINES"
FORMAT = 1
_PREFIX = struct.Struct("<IQ")


def line_entries(entries: Iterable[L0Entry], default_graph: str) -> Iterator[tuple[L0Entry, str]]:
    """The entries of ``entries`` that are lines (L1's archived turns are L0-only nodes, not lines),
    each with its named graph (a line stored without one is in ``default_graph``)."""
    for entry in entries:
        if not is_archive_iri(entry.iri):
            yield entry, entry.named_graph or default_graph


def expires_of(entry: L0Entry) -> float | None:
    """When line ``entry`` expires (a time on the memory's clock), or None when it does not."""
    expires = entry.metadata.get(EXPIRES_AT)
    return None if expires is None else float(expires)


class LineSnapshot(NamedTuple):
    """What a snapshot holds: each line as L0 holds it, with its quads and its expiry time (or None)."""

    lines: list[tuple[GraphNode, tuple[ox.Quad, ...], float | None]]


def write_line_snapshot(l0: L0Store, graph: GraphStore, default_graph: str, path: Path, token: str) -> int:
    """Write the snapshot of every line ``l0`` holds to ``path`` (atomically); returns how many lines.

    The lines are read from L0 (the truth); each line's quads are taken from
    ``graph`` when it holds the same version in the same graph, and worked
    out from the value otherwise (a line without a graph is in
    ``default_graph``). The caller marks L0 with ``token`` after this
    returns (``L0Store.close(clean_mark=token)``), and not if it raises
    (:class:`GlidingError` or OSError)."""
    rows: list[list[Any]] = []
    quads: list[ox.Quad] = []
    for entry, named in line_entries(l0.query(), default_graph):
        own = graph.quads_if_held(entry.iri, entry.version, named)
        if own is None:
            own = to_quads(entry.iri, entry.content, graph.graph_node(named), stored=True)
        rows.append([
            entry.iri,
            entry.content,
            named,
            entry.version,
            list(entry.tags),
            entry.importance,
            expires_of(entry),
            len(own),
        ])
        quads.extend(own)
    body_rows = msgpack.packb(rows, use_bin_type=True)
    body_quads = (ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"") if quads else b""
    head = msgpack.packb(
        {
            "token": token,
            "rows": len(body_rows),
            "quads": len(body_quads),
            "crc": zlib.crc32(body_quads, zlib.crc32(body_rows)),
        },
        use_bin_type=True,
    )
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(MAGIC + _PREFIX.pack(FORMAT, len(head)))
            fh.write(head)
            fh.write(body_rows)
            fh.write(body_quads)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind
        raise
    return len(rows)


def save_lines_on_close(l0: L0Store, graph: GraphStore, default_graph: str, path: Path) -> str | None:
    """At a clean close, once nothing but ``l0.close`` writes to ``l0`` any more: write the snapshot
    to ``path``; the token ``l0.close(clean_mark=...)`` records, or None when the snapshot could
    not be written (the next open then reads L0, as after a crash).

    A life that found L0 marked and wrote nothing to it but its epoch and access counts leaves L0
    as the snapshot of that mark describes it: the token is kept and nothing is written (a life
    that only read closes at once). Whether that file is still whole is checked when it is read.
    """
    if not l0.nodes_written and l0.clean_mark is not None:
        return l0.clean_mark
    token = secrets.token_hex(16)
    try:
        write_line_snapshot(l0, graph, default_graph, path, token)
    except (GlidingError, OSError):
        return None
    return token


def read_line_snapshot(path: Path, token: str | None) -> LineSnapshot | None:
    """The snapshot at ``path`` if it is whole and was written under ``token``; None otherwise."""
    if token is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return _parse(data, token)
    except (ValueError, TypeError, KeyError, IndexError, SyntaxError, struct.error, msgpack.UnpackException):
        return None


def _parse(data: bytes, token: str) -> LineSnapshot | None:
    start = len(MAGIC) + _PREFIX.size
    if data[: len(MAGIC)] != MAGIC:
        return None
    version, head_len = _PREFIX.unpack_from(data, len(MAGIC))
    if version != FORMAT:
        return None
    head = msgpack.unpackb(data[start : start + head_len], raw=False)
    if type(head) is not dict or head.get("token") != token:
        return None
    body = start + head_len
    rows_end = body + int(head["rows"])
    quads_end = rows_end + int(head["quads"])
    if quads_end != len(data):
        return None
    view = memoryview(data)
    if zlib.crc32(view[rows_end:quads_end], zlib.crc32(view[body:rows_end])) != head["crc"]:
        return None
    rows = msgpack.unpackb(view[body:rows_end], raw=False)
    quads = list(ox.parse(bytes(view[rows_end:quads_end]), format=ox.RdfFormat.N_QUADS)) if quads_end > rows_end else []
    lines: list[tuple[GraphNode, tuple[ox.Quad, ...], float | None]] = []
    at = 0
    for iri, value, graph, version, tags, importance, expires, count in rows:
        # the graph checks the rest as it loads the lines (GraphStore._checked); these it takes as given
        if (
            type(value) is not dict
            or type(count) is not int
            or count < 0
            or type(tags) is not list
            or (expires is not None and type(expires) is not float)
        ):
            return None
        end = at + count
        node = GraphNode(iri, value, graph, version, tuple(tags), importance)
        lines.append((node, tuple(quads[at:end]), expires))
        at = end
    if at != len(quads):
        return None
    return LineSnapshot(lines)
