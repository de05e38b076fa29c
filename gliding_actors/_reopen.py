"""What a memory rebuilds from L0 when it opens: the graph, the line registry and the expiry table.

L0 is the one durable copy of every line; the L2 graph, the registry of which
graph each line is in (the agents' fast permission checks) and the table of
lines with a time to live are rebuilt from it, in one pass over its entries,
or from the snapshot of those lines a clean close left (gliding_actors/_line_snapshot.py).
L1's archived turns are L0-only nodes, not lines, and are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyoxigraph as ox

from gliding_actors._expiry import ExpiryTable
from gliding_actors._line_snapshot import LineSnapshot, expires_of, line_entries, read_line_snapshot
from gliding_actors._progress import ProgressReporter
from gliding_actors.errors import InvalidInput
from gliding_actors.l0 import L0Entry, L0Store
from gliding_actors.l2._graph import GraphNode, GraphStore
from gliding_actors.l2._registry import LineGraphs

__all__ = ["load_lines", "open_lines", "rebuild_lines"]


def open_lines(
    l0: L0Store,
    graph: GraphStore,
    line_graphs: LineGraphs,
    expiry: ExpiryTable,
    progress: ProgressReporter,
    snapshot_file: Path | None,
) -> str:
    """Load the lines from the snapshot at ``snapshot_file`` when L0 is marked as it left it, else
    rebuild them from L0; says which: ``"snapshot"`` or ``"l0"``. A snapshot whose lines the graph
    refuses (a file made to look whole) is not used: the graph took none of them."""
    snapshot = None if snapshot_file is None else read_line_snapshot(snapshot_file, l0.clean_mark)
    if snapshot is not None:
        try:
            load_lines(snapshot, graph, line_graphs, expiry, progress)
            return "snapshot"
        except InvalidInput:
            pass
    rebuild_lines(l0, graph, line_graphs, expiry, progress)
    return "l0"


def rebuild_lines(
    l0: L0Store,
    graph: GraphStore,
    line_graphs: LineGraphs,
    expiry: ExpiryTable,
    progress: ProgressReporter | None = None,
) -> None:
    """Put every line L0 holds into ``graph`` (which holds none yet), ``line_graphs`` and (when it
    expires) ``expiry``; ``progress`` hears of it as ``lines`` (L0's nodes gone through, of all it holds)."""
    default = line_graphs.default_graph
    reporter = progress or ProgressReporter()
    total = l0.count() if reporter.active else 0  # a key-only scan: paid only for someone watching

    done = 0

    def counted() -> Iterator[L0Entry]:
        nonlocal done
        for entry in l0.query():
            done += 1
            reporter.report("lines", done, max(total, done))
            yield entry

    def lines() -> Iterator[GraphNode]:
        for entry, named in line_entries(counted(), default):
            yield GraphNode(entry.iri, entry.content, named, entry.version, tuple(entry.tags), entry.importance)
            line_graphs.record(entry.iri, named, entry.version)
            expires = expires_of(entry)
            if expires is not None:
                expiry.note(entry.iri, entry.version, expires)

    graph.load_nodes(lines(), stored=True)  # values as L0 stored them: checked when written
    reporter.report("lines", done, done)  # the last report says it ended (nodes deleted meanwhile)


def load_lines(
    snapshot: LineSnapshot,
    graph: GraphStore,
    line_graphs: LineGraphs,
    expiry: ExpiryTable,
    progress: ProgressReporter | None = None,
) -> None:
    """:func:`rebuild_lines` from a snapshot of the lines instead of L0 (``progress`` hears of the
    same stage, ``lines``). Raises :class:`InvalidInput` for a line the graph refuses, having
    changed nothing: the registry and the expiry table are filled once the graph took every line."""
    reporter = progress or ProgressReporter()
    lines = snapshot.lines
    total = len(lines)

    def worked_out() -> Iterator[tuple[GraphNode, tuple[ox.Quad, ...]]]:
        for done, (node, quads, _expires) in enumerate(lines, 1):
            reporter.report("lines", done, total)
            yield node, quads

    graph.load_worked_out(worked_out())
    line_graphs.record_many((node.iri, node.graph, node.version) for node, _quads, _expires in lines)
    for node, _quads, expires in lines:
        if expires is not None:
            expiry.note(node.iri, node.version, expires)
    reporter.report("lines", total, total)
