"""``gliding-actors inspect | export | import``: a window into a memory directory, from the shell.

Each command opens the memory at PATH (closed: not in use by another
process) on the deterministic runtime, reads or writes through the public
API, and closes it. ``inspect`` and ``export`` refuse a PATH that holds no
memory; ``import`` creates one if PATH is empty or missing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gliding_actors._dataset import FORMATS
from gliding_actors._progress import progress_bar
from gliding_actors.errors import GlidingError, InvalidInput
from gliding_actors.l1._archive import ARCHIVE_PREFIX, is_archive_iri, session_prefix
from gliding_actors.roles import ROLES
from gliding_actors.system import MemorySystem

__all__ = ["add_window_parsers", "run_window"]

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2


def add_window_parsers(sub: Any) -> None:
    """Add ``inspect``, ``export`` and ``import`` to the CLI's subparsers."""
    ins = sub.add_parser("inspect", help="what a memory directory holds: lines, a node, agents, tasks, sessions")
    ins.add_argument("path", metavar="PATH", help="the memory's directory")
    ins.add_argument("iri", nargs="?", default=None, metavar="IRI", help="show this line (or archived turn) in full")
    what = ins.add_mutually_exclusive_group()
    what.add_argument("--agents", action="store_true", help="the agents that have archived turns")
    what.add_argument("--tasks", action="store_true", help="the lines typed Task (the task DAG itself is not kept)")
    what.add_argument("--sessions", default=None, metavar="AGENT", help="one agent's closed sessions and open one")
    ins.add_argument("--json", action="store_true", help="print one JSON object")

    exp = sub.add_parser("export", help="a memory's lines as N-Quads or JSON-LD (standard output by default)")
    exp.add_argument("path", metavar="PATH", help="the memory's directory")
    exp.add_argument("--format", choices=FORMATS, default="nquads", help="the dataset format (default: nquads)")
    exp.add_argument("--graph", default=None, metavar="G", help="only the lines of named graph G")
    exp.add_argument("-o", "--output", default=None, metavar="FILE", help="write here instead of standard output")

    imp = sub.add_parser("import", help="write a dataset's lines into a memory, through the normal write path")
    imp.add_argument("path", metavar="PATH", help="the memory's directory (created if missing)")
    imp.add_argument("file", metavar="FILE", help="an export: .nq (N-Quads) or .jsonld / .json (JSON-LD)")
    imp.add_argument("--format", choices=FORMATS, default=None, help="the dataset format (default: by extension)")
    imp.add_argument("--role", choices=ROLES, default="system", help="the role the lines are written as (default: system)")
    imp.add_argument("--json", action="store_true", help="print one JSON object")


def run_window(args: argparse.Namespace) -> int:
    out = Console(highlight=False, soft_wrap=True, emoji=False)
    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)
    try:
        if args.command == "import":
            return _import(args, out)
        path = Path(args.path)
        if not (path / "l0").is_dir():
            raise InvalidInput(f"no memory at {path} (a memory's directory holds l0/)")
        with progress_bar(err) as draw:
            memory = MemorySystem.open(path, runtime="sim", progress=draw)
        with memory:
            if args.command == "export":
                return _export(args, memory)
            return _inspect(args, memory, out)
    except GlidingError as exc:
        err.print(f"error: {exc}", markup=False)
        return EXIT_INVALID


# -- export / import -----------------------------------------------------------


def _export(args: argparse.Namespace, memory: MemorySystem) -> int:
    text = memory.export(args.format, graph=args.graph)
    if args.output is None:
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text, encoding="utf-8")
    return EXIT_OK


def _import(args: argparse.Namespace, out: Console) -> int:
    source = Path(args.file)
    fmt = args.format or ("nquads" if source.suffix in (".nq", ".nquads") else "jsonld" if source.suffix in (".jsonld", ".json") else None)
    if fmt is None:
        raise InvalidInput(f"cannot tell the format of {source} from its name: pass --format {'|'.join(FORMATS)}")
    text = source.read_text(encoding="utf-8")
    with progress_bar(Console(stderr=True)) as draw:
        memory = MemorySystem.open(args.path, runtime="sim", progress=draw)
    with memory:
        result = memory.import_dataset(text, fmt, role=args.role)
        memory.flush()
    if args.json:
        out.print(json.dumps(result, indent=2), markup=False)
    else:
        per_graph = ", ".join(f"{g}: {n}" for g, n in result["graphs"].items()) or "none"
        out.print(f"imported {result['lines']} lines into {args.path} ({per_graph})", markup=False)
    return EXIT_OK


# -- inspect ---------------------------------------------------------------------


def _inspect(args: argparse.Namespace, memory: MemorySystem, out: Console) -> int:
    if args.iri is not None:
        found = _node(memory, args.iri)
        if found is None:
            raise InvalidInput(f"nothing at {args.iri} in {args.path}")
        data: dict[str, Any] = found
    elif args.agents:
        data = {"agents": _agents(memory)}
    elif args.tasks:
        data = {"tasks": _tasks(memory)}
    elif args.sessions is not None:
        data = _sessions(memory, args.sessions)
    else:
        data = _overview(memory)
    if args.json:
        out.print(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True), markup=False)
    else:
        _render(out, args, data)
    return EXIT_OK


def _overview(memory: MemorySystem) -> dict[str, Any]:
    lines = [n for n in memory.graph.lines() if n.value is not None]
    graphs: dict[str, int] = {}
    for n in lines:
        graphs[n.graph] = graphs.get(n.graph, 0) + 1
    return {
        "path": str(memory.path),
        "lines": len(lines),
        "graphs": dict(sorted(graphs.items())),
        "archived": len(memory.l0.query_iris(prefix=ARCHIVE_PREFIX)),
        "agents": len(_agents(memory)),
    }


def _node(memory: MemorySystem, iri: str) -> dict[str, Any] | None:
    entry = memory.l0.retrieve(iri, touch=False)
    node = memory.graph.node(iri)
    if node is not None and node.value is not None:
        return {
            "iri": iri,
            "graph": node.graph,
            "version": node.version,
            "tags": list(node.tags),
            "importance": None if entry is None else entry.importance,
            "value": node.value,
        }
    if entry is not None and is_archive_iri(iri):
        return {"iri": iri, "graph": entry.named_graph, "version": entry.version, "tags": list(entry.tags),
                "importance": entry.importance, "value": entry.content}
    return None


def _agents(memory: MemorySystem) -> list[dict[str, Any]]:
    counts: dict[str, dict[str, int]] = {}
    for iri in memory.l0.query_iris(prefix=ARCHIVE_PREFIX):
        encoded, _, tail = iri[len(ARCHIVE_PREFIX) :].rpartition("/")
        kind = "blocks" if tail.startswith("block-") else "sessions" if tail.startswith("session-") else None
        if kind is not None:
            row = counts.setdefault(urllib.parse.unquote(encoded), {"blocks": 0, "sessions": 0})
            row[kind] += 1
    return [{"agent": agent, **row} for agent, row in sorted(counts.items())]


def _tasks(memory: MemorySystem) -> list[dict[str, Any]]:
    rows = []
    for n in memory.graph.lines():
        value = n.value
        if value is None:
            continue
        types = value.get("@type")
        if "Task" not in (types if isinstance(types, list) else [types]):
            continue
        rows.append({"iri": n.iri, "graph": n.graph, "status": value.get("status"), "summary": value.get("summary") or value.get("goal")})
    return rows


def _sessions(memory: MemorySystem, agent: str) -> dict[str, Any]:
    prefix = session_prefix(agent)
    closed = []
    for entry in memory.l0.query(prefix=prefix + "/session-"):
        c = entry.content
        closed.append({"session": entry.iri, "opened_at": c.get("openedAt"), "closed_at": c.get("closedAt"),
                       "blocks": len(c.get("blocks") or ()), "chain": len(c.get("chain") or ()), "tokens": c.get("tokens")})
    closed.sort(key=lambda row: int(str(row["session"]).rpartition("-")[2]))
    session = memory.agent(agent, "system").session() if closed or memory.l0.query_iris(prefix=prefix + "/block-", limit=1) else None
    if session is None:
        raise InvalidInput(f"agent {agent!r} has no archived turns in {memory.path}")
    return {
        "agent": agent,
        "closed": closed,
        "open": {"turns": len(session["turns"]), "weak_refs": len(session["weak_refs"]), "tokens": session["tokens"],
                 "summaries": session["summaries"]},
    }


def _render(out: Console, args: argparse.Namespace, data: dict[str, Any]) -> None:
    if args.iri is not None:
        out.print(f"{data['iri']}  graph {data['graph']}  v{data['version']}  tags {data['tags'] or '-'}  importance {data['importance']}", markup=False)
        out.print(json.dumps(data["value"], indent=2, ensure_ascii=False), markup=False)
        return
    if args.agents:
        table = Table("agent", "turns archived", "sessions closed", title="agents")
        for row in data["agents"]:
            table.add_row(row["agent"], str(row["blocks"]), str(row["sessions"]))
    elif args.tasks:
        table = Table("task", "graph", "status", "summary", title="lines typed Task")
        for row in data["tasks"]:
            table.add_row(row["iri"], row["graph"], str(row["status"] or "-"), str(row["summary"] or "-"))
    elif args.sessions is not None:
        table = Table("session", "blocks", "chain", "tokens", "opened", "closed", title=f"sessions of {data['agent']}")
        for row in data["closed"]:
            table.add_row(str(row["session"]).rpartition("/")[2], str(row["blocks"]), str(row["chain"]),
                          str(row["tokens"]), _when(row["opened_at"]), _when(row["closed_at"]))
        o = data["open"]
        table.add_row("(open)", "-", str(o["turns"]), str(o["tokens"]), "-", "-")
        out.print(table)
        for n, summary in enumerate(o["summaries"], 1):
            out.print(f"  {n}. {summary}", markup=False)
        return
    else:
        table = Table("graph", "lines", title=f"{data['path']}: {data['lines']} lines, {data['archived']} archived turns and sessions of {data['agents']} agents")
        for graph, count in data["graphs"].items():
            table.add_row(graph, str(count))
    out.print(table)


def _when(at: object) -> str:
    """A recorded clock reading as UTC time (a virtual clock's small numbers stay numbers)."""
    if not isinstance(at, (int, float)) or isinstance(at, bool):
        return "-"
    if at < 1e9:  # a VirtualClock's seconds, not a wall-clock time
        return f"{at:g} s"
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
