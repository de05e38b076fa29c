"""inspect / export / import on a closed memory directory, and MemorySystem.export / import_dataset."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem, PermissionDenied
from gliding_actors.cli import main

VALUES: dict[str, tuple[dict[str, Any], str]] = {
    "task:auth": ({"@type": "Task", "summary": "switch to JWT", "status": "open", "importance": 0.9}, "plan"),
    "step:jwt": ({"@type": "Step", "summary": "validate JWT 署名", "n": 5, "x": 1.5, "ok": True,
                  "detail": {"k": "v", "z": [1, 2]}, "order": {"@list": [3, 1, 2]},
                  "part": {"@id": "step:jwt#a", "name": "first"}, "task": {"@id": "task:auth"}}, "plan"),
    "review:jwt": ({"@type": "Review", "summary": "rotate keys", "lang": {"@value": "clé", "@language": "fr"}}, "review"),
}


def _memory(path: Path) -> Path:
    with MemorySystem.open(path) as memory:
        root = memory.agent("root", "system")
        for iri, (value, graph) in VALUES.items():
            root.write(iri, value, graph=graph)
        pa = memory.agent("pa", "PA")
        pa.turn("planned the JWT rollout", thought="t", content="c")
        pa.close_session()
        pa.turn("wrote the middleware")
    return path


@pytest.mark.parametrize(("fmt", "suffix"), [("nquads", ".nq"), ("jsonld", ".jsonld")])
def test_export_import_export_is_byte_identical(tmp_path: Path, fmt: str, suffix: str) -> None:
    source = _memory(tmp_path / "a")
    first = tmp_path / f"first{suffix}"
    assert main(["export", str(source), "--format", fmt, "-o", str(first)]) == 0
    assert main(["import", str(tmp_path / "b"), str(first)]) == 0
    second = tmp_path / f"second{suffix}"
    assert main(["export", str(tmp_path / "b"), "--format", fmt, "-o", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert first.read_text(encoding="utf-8").count("step:jwt") >= 1 and "memory:session-" not in first.read_text()


def test_export_to_standard_output_and_by_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = _memory(tmp_path / "a")
    assert main(["export", str(source), "--graph", "review"]) == 0
    out = capsys.readouterr().out
    assert "review:jwt" in out and "task:auth" not in out and out.endswith(" .\n")
    assert main(["export", str(source), "--format", "jsonld"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [g["@id"].rsplit("/", 1)[1] for g in document["@graph"]] == ["plan", "review"]


def test_the_api_exports_a_live_memory_with_write_back_lines_still_in_caches() -> None:
    with MemorySystem.open() as memory:
        pa = memory.agent("pa", "PA")
        pa.write("plan:x", {"summary": "in pa's cache only"}, graph="plan")
        assert memory.inspect("plan:x")["caches"]["pa"] == "M"
        assert "in pa's cache only" in memory.export("nquads")
        with pytest.raises(InvalidInput, match="format"):
            memory.export("turtle")


def test_import_goes_through_permissions_and_a_refused_dataset_writes_nothing(tmp_path: Path) -> None:
    source = _memory(tmp_path / "a")
    with MemorySystem.open(source) as memory:
        text = memory.export("jsonld")
    with MemorySystem.open(tmp_path / "b") as target:
        before = target.export("nquads")
        with pytest.raises(PermissionDenied, match="review"):
            target.import_dataset(text, "jsonld", role="PA")  # PA may not write in review
        assert target.export("nquads") == before == ""
        assert target.import_dataset(text, "jsonld", role="system") == {"lines": 3, "graphs": {"plan": 2, "review": 1}}


@pytest.mark.parametrize(
    ("text", "fmt", "why"),
    [
        ("not json", "jsonld", "not JSON"),
        ('{"@graph": []}', "jsonld", "as export writes it"),
        ("<a:b> <c:d> <e:f> .\n", "nquads", "outside any named graph"),
        ("<a:b> <c:d> <e:f> <http://example.org/g> .\n", "nquads", "not one of this memory's"),
        ("garbage here\n", "nquads", "not N-Quads"),
        ("", "csv", "format"),
        (
            (
                '{"@context": {"@vocab": "https://gliding-actors.dev/ns#"}, "@graph": [{"@id": '
                '"https://gliding-actors.dev/graph/plan", "@graph": [{"@id": "memory:session-x/block-1", "a": 1}]}]}'
            ),
            "jsonld",
            "archive",
        ),
    ],
)
def test_a_bad_dataset_is_refused_and_changes_nothing(tmp_path: Path, text: str, fmt: str, why: str) -> None:
    with MemorySystem.open(tmp_path / "m") as memory:
        memory.agent("root", "system").write("keep:me", {"a": 1}, graph="plan")
        before = memory.export("nquads")
        with pytest.raises(InvalidInput, match=why):
            memory.import_dataset(text, fmt)
        assert memory.export("nquads") == before


def test_the_cli_refuses_what_it_cannot_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(tmp_path / "nothing")]) == 2
    assert "no memory at" in capsys.readouterr().err
    bad = tmp_path / "data.txt"
    bad.write_text("x", encoding="utf-8")
    assert main(["import", str(tmp_path / "m"), str(bad)]) == 2
    assert "--format" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()  # refused before a memory was made
    assert main(["import", str(tmp_path / "m"), str(bad), "--format", "nquads"]) == 2
    assert "not N-Quads" in capsys.readouterr().err


def test_inspect_shows_lines_a_node_agents_tasks_and_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(_memory(tmp_path / "a"))

    def inspect(*extra: str) -> Any:
        assert main(["inspect", source, *extra, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    assert inspect() == {"path": source, "lines": 3, "graphs": {"plan": 2, "review": 1}, "archived": 3, "agents": 1}
    node = inspect("step:jwt")
    assert node["graph"] == "plan" and node["value"]["n"] == 5 and node["version"] >= 1
    assert inspect("memory:session-pa/block-1")["value"]["summary"] == "planned the JWT rollout"
    assert inspect("--agents") == {"agents": [{"agent": "pa", "blocks": 2, "sessions": 1}]}
    assert inspect("--tasks") == {"tasks": [{"graph": "plan", "iri": "task:auth", "status": "open", "summary": "switch to JWT"}]}
    sessions = inspect("--sessions", "pa")
    assert [row["blocks"] for row in sessions["closed"]] == [1]
    assert sessions["open"]["summaries"] == ["wrote the middleware"]
    # the tables render too
    for extra in ([], ["task:auth"], ["--agents"], ["--tasks"], ["--sessions", "pa"]):
        assert main(["inspect", source, *extra]) == 0
    rendered = capsys.readouterr().out
    assert "plan" in rendered and "switch to JWT" in rendered and "wrote the middleware" in rendered
    assert main(["inspect", source, "nothing:here"]) == 2
    assert main(["inspect", source, "--sessions", "nobody"]) == 2
    assert os.path.isdir(os.path.join(source, "l0"))


def test_text_that_is_not_utf8_is_refused_as_input(tmp_path: Path) -> None:
    """Found by the fuzzer: a lone surrogate reached pyoxigraph as a str and came back as AttributeError."""
    with MemorySystem.open(tmp_path / "m") as memory, pytest.raises(InvalidInput, match="UTF-8"):
        memory.import_dataset("<a:b> <c:d> \"\ud800\" <https://gliding-actors.dev/graph/plan> .\n", "nquads")


def test_an_import_checks_each_line_as_an_agents_write_does(tmp_path: Path) -> None:
    """Found by the fuzzer: a lone surrogate inside a JSON-LD value reached the graph's parser untyped."""
    bad = json.dumps({"@context": {"@vocab": "https://gliding-actors.dev/ns#"}, "@graph": [
        {"@id": "https://gliding-actors.dev/graph/plan", "@graph": [{"@id": "ex:a", "s": "\ud800"}]}]})
    with MemorySystem.open(tmp_path / "m") as memory:
        with pytest.raises(InvalidInput):
            memory.import_dataset(bad, "jsonld")
        assert memory.export("nquads") == ""
