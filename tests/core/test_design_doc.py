"""docs/DESIGN.md's ownership table and its services-and-ports diagram cannot drift from the code.

The diagram is generated from the services' constructors and the port
Protocols they take; the test fails when the page's copy differs.
``python tests/core/test_design_doc.py --write`` rewrites it. Every name the
ownership table gives in backticks as ``gliding_actors....`` must import, so a
rename or a move breaks the test until the table says where the state went.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "DESIGN.md"
BEGIN, END = "<!-- services-and-ports:begin -->", "<!-- services-and-ports:end -->"

#: each service of the memory, and the callable that builds it from its collaborators
SERVICES = (
    ("Agent", "gliding_actors.agent", "Agent.__init__"),
    ("HyperspaceService", "gliding_actors.hyperspace._service", "HyperspaceService.start"),
    ("ProjectionService (L3)", "gliding_actors.l3._service", "ProjectionService.start"),
    ("ContextService", "gliding_actors.context._service", "ContextService.start"),
    ("L1 session", "gliding_actors.l1._actor", "start_session"),
    ("stats()", "gliding_actors.metrics._stats", "collect"),
    ("Recorder", "gliding_actors.scenario._record", "Recorder.__init__"),
)
#: the port Protocols, by name
PORTS = (
    ("gliding_actors._ports", "MemoryPorts"),
    ("gliding_actors._agent_ports", "AgentPorts"),
    ("gliding_actors.l3._service", "ProjectionPorts"),
    ("gliding_actors.context._service", "ContextPorts"),
    ("gliding_actors.metrics._stats", "StatsSource"),
    ("gliding_actors.scenario._record", "RecordedMemory"),
    ("gliding_actors.scenario._record", "RecordedAgent"),
)
_PROTOCOL_INTERNALS = {"_is_protocol", "_is_runtime_protocol", "_abc_impl"}


def _resolve(module: str, dotted: str) -> Any:
    target: Any = importlib.import_module(module)
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def _ports() -> dict[str, type]:
    return {name: _resolve(module, name) for module, name in PORTS}


def _members(port: type) -> list[str]:
    own = set(vars(port)) | set(vars(port).get("__annotations__", {}))
    return sorted(n for n in own if not n.startswith("__") and n not in _PROTOCOL_INTERNALS)


def _collaborators(builder: Any) -> list[tuple[str, str]]:
    """(parameter, its annotation as written) for each collaborator the builder is given."""
    out = []
    for name, parameter in inspect.signature(builder).parameters.items():
        if name in ("self", "cls"):
            continue
        annotation = parameter.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
        out.append((name, "" if annotation is inspect.Parameter.empty else text))
    return out


def generate() -> str:
    """The diagram and the port table, as the page shows them."""
    ports = _ports()
    lines = ["```mermaid", "flowchart LR", '  facade["MemorySystem (the façade: wiring, open/close, agent(), stats)"]']
    rows = []
    for i, (label, module, builder_name) in enumerate(SERVICES):
        builder = _resolve(module, builder_name)
        given = _collaborators(builder)
        port_names = [a for _n, a in given if a in ports]
        edge = ", ".join(port_names) if port_names else "collaborators"
        lines.append(f'  s{i}["{label}"]')
        lines.append(f'  facade -- "{edge}" --> s{i}')
        args = ", ".join(f"{n}: {a}" if a else n for n, a in given).replace("|", "\\|")  # a table cell
        rows.append(f"| {label} | `{builder_name}({args})` |")
    lines.append("```")
    lines += ["", "| service | built by, with what it is given |", "|---|---|", *rows, ""]
    lines += ["| port | extends | what it offers |", "|---|---|---|"]
    for name, port in ports.items():
        bases = [b.__name__ for b in port.__bases__ if b.__name__ in ports]
        members = ", ".join(f"`{m}`" for m in _members(port))
        lines.append(f"| `{name}` | {', '.join(f'`{b}`' for b in bases) or '—'} | {members} |")
    return "\n".join(lines)


def _page() -> str:
    return DESIGN.read_text(encoding="utf-8")


def _block(page: str) -> str:
    assert BEGIN in page and END in page, f"docs/DESIGN.md lost its {BEGIN} ... {END} markers"
    return page.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_the_services_and_ports_diagram_matches_the_code() -> None:
    assert _block(_page()) == generate(), "docs/DESIGN.md is stale: run python tests/core/test_design_doc.py --write"


def test_every_service_is_given_a_port_or_its_collaborators_never_the_memory_system() -> None:
    for label, module, builder_name in SERVICES:
        for name, annotation in _collaborators(_resolve(module, builder_name)):
            assert "MemorySystem" not in annotation, f"{label} is handed the MemorySystem as {name!r}"


def _ownership_rows(page: str) -> list[list[str]]:
    section = page.split("## Who owns what", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| state")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows if not set(row) <= set("|-: ")]


def test_the_ownership_table_names_owners_that_exist() -> None:
    rows = _ownership_rows(_page())
    assert len(rows) >= 8
    for row in rows:
        assert len(row) == 3, row
        named = re.findall(r"`(gliding_actors(?:\.\w+)+)`", " ".join(row[1:]))
        assert named, f"the owner of {row[0]} names no code: {row}"
        for dotted in named:
            parts = dotted.split(".")
            for cut in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
                try:
                    target: Any = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                for attribute in parts[cut:]:
                    assert hasattr(target, attribute), f"{dotted} (ownership table) does not exist"
                    target = getattr(target, attribute)
                break
            else:
                raise AssertionError(f"{dotted} (ownership table) does not import")


def test_the_check_sees_a_stale_page() -> None:
    page = _page()
    stale = page.replace(generate(), generate().replace("MemoryPorts", "MemoryPortz", 1))
    assert _block(stale) != generate()


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        page = _page()
        if BEGIN in page:
            before, rest = page.split(BEGIN, 1)
            after = rest.split(END, 1)[1]
            DESIGN.write_text(f"{before}{BEGIN}\n{generate()}\n{END}{after}", encoding="utf-8")
        print(generate())
    else:
        print(generate())
