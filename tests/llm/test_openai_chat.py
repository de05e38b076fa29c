"""OpenAIChat against a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/llm/_server.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.errors import LLMError
from gliding_actors.llm import LLM, OpenAIChat, prompt_messages
from tests.llm._server import chat_reply, chat_server

ASK = [{"role": "user", "content": "Say hi."}]


def test_a_chat_round_trip_sends_the_openai_shape() -> None:
    with chat_server(lambda body: chat_reply("hi there")) as server:
        chat = OpenAIChat(server.url, "local-model", "sekrit", max_tokens=64, json_mode=True)
        assert isinstance(chat, LLM)
        assert chat(ASK) == "hi there"
    body, headers = server.requests[0], server.headers[0]
    assert body == {
        "model": "local-model",
        "messages": ASK,
        "temperature": 0.0,
        "max_tokens": 64,
        "response_format": {"type": "json_object"},
    }
    assert headers["Authorization"] == "Bearer sekrit" and chat.requests == 1


def test_the_environment_names_the_endpoint_and_the_model() -> None:
    with chat_server(lambda body: chat_reply(body["model"])) as server:
        chat = OpenAIChat(env={"GLIDING_ACTORS_LLM_URL": server.url + "/", "GLIDING_ACTORS_LLM_MODEL": "m7"})
        assert chat(ASK) == "m7" and "Authorization" not in server.headers[0]
    with pytest.raises(LLMError, match="no endpoint"):
        OpenAIChat(env={})


def test_a_busy_server_is_retried_and_a_refusal_is_not() -> None:
    answers: list[tuple[int, Any]] = [(503, {"error": "busy"}), (429, {"error": "slow down"}), chat_reply("ok")]
    slept: list[float] = []
    with chat_server(lambda body: answers.pop(0)) as server:
        chat = OpenAIChat(server.url, retries=2, backoff_s=0.25, sleep=slept.append)
        assert chat(ASK) == "ok"
    assert slept == [0.25, 0.5] and chat.requests == 3
    with chat_server(lambda body: (401, {"error": "no key"})) as server:
        chat = OpenAIChat(server.url, retries=3, sleep=slept.append)
        with pytest.raises(LLMError, match="answered HTTP 401"):
            chat(ASK)
        assert chat.requests == 1


@pytest.mark.parametrize(
    "payload",
    [b"not json", {"choices": []}, {"choices": [{"message": {"content": None}}]}, {"result": "hi"}],
)
def test_a_reply_that_is_not_a_chat_answer_is_an_llm_error(payload: Any) -> None:
    with chat_server(lambda body: (200, payload)) as server, pytest.raises(LLMError):
        OpenAIChat(server.url, retries=0)(ASK)


def test_an_endpoint_that_is_down_fails_after_its_retries() -> None:
    with chat_server() as server:
        url = server.url
    chat = OpenAIChat(url, retries=1, sleep=lambda _s: None, timeout_s=2)
    with pytest.raises(LLMError, match="failed 2 times"):
        chat(ASK)


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"base_url": "ftp://127.0.0.1/v1"}, "http"),
        ({"base_url": "http://127.0.0.1:9/v1", "temperature": 3}, "temperature"),
        ({"base_url": "http://127.0.0.1:9/v1", "max_tokens": 0}, "max_tokens"),
        ({"base_url": "http://127.0.0.1:9/v1", "timeout_s": 0}, "timeout_s"),
        ({"base_url": "http://127.0.0.1:9/v1", "retries": -1}, "retries"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], why: str) -> None:
    with pytest.raises(InvalidInput, match=why):
        OpenAIChat(**kwargs)


@pytest.mark.parametrize("messages", [[], "hi", [{"role": "user"}], [{"role": 1, "content": "x"}], [42]])
def test_bad_messages_are_refused_before_anything_is_sent(messages: Any) -> None:
    with chat_server() as server:
        with pytest.raises(InvalidInput):
            OpenAIChat(server.url)(messages)
        assert server.requests == []


def test_a_team_step_through_the_local_server() -> None:
    """context → the model over HTTP → turn_from: the loop a real deployment runs, swapped in by one line."""
    with chat_server() as server, MemorySystem.open(runtime="threads") as memory:
        llm = OpenAIChat(server.url, "local-model")
        da = memory.agent("da", "DA")
        ctx = da.context("rate limiting", max_tokens=300)
        result = da.turn_from(llm(prompt_messages(ctx["text"], "Add a token-bucket rate limiter.")))
        assert result["answer"]["content"] == "Done: Add a token-bucket rate limiter."
        assert da.session()["summaries"] == ["Handled: Add a token-bucket rate limiter."]
        assert json.loads(json.dumps(server.requests[0]))["messages"][0]["role"] == "system"


def test_acall_answers_off_the_event_loop() -> None:
    with chat_server(lambda body: chat_reply("async hi")) as server:
        chat = OpenAIChat(server.url)

        async def both() -> list[str]:
            return list(await asyncio.gather(chat.acall(ASK), chat.acall(ASK)))

        assert asyncio.run(both()) == ["async hi", "async hi"]
