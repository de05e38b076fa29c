"""docs/LLM.md's example runs as written against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.llm._server import chat_server

DOC = Path(__file__).resolve().parents[2] / "docs" / "LLM.md"


def test_the_documented_example_runs_against_a_local_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1
    with chat_server() as server:
        monkeypatch.setenv("GLIDING_ACTORS_LLM_URL", server.url)
        monkeypatch.setenv("GLIDING_ACTORS_LLM_MODEL", "local-model")
        monkeypatch.delenv("GLIDING_ACTORS_LLM_API_KEY", raising=False)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        exec(compile(blocks[0], str(DOC), "exec"), {"__name__": "llm_doc"})  # noqa: S102 - the doc's own code
    assert capsys.readouterr().out.strip() == "Handled: Implement the plan."
    assert [r["model"] for r in server.requests] == ["local-model", "local-model"]
    assert os.environ["GLIDING_ACTORS_LLM_URL"] == server.url
