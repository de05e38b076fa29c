"""The answer contract: parsing, the repairs, the summarizers, and Agent.turn_from through a real memory."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping, Sequence

import pytest

from gliding_actors import InvalidInput, MemorySystem
from gliding_actors.errors import LLMError, MalformedAnswer
from gliding_actors.llm import (
    ANSWER_INSTRUCTIONS,
    LLM,
    Answer,
    ExtractiveSummarizer,
    LLMSummarizer,
    parse_answer,
    prompt_messages,
)

GOOD = {"thought": "cookies do not scale", "content": "1) keys 2) tokens", "summary": "planned the JWT rollout"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "```\n" + json.dumps(GOOD) + "\n```\nLet me know if you need more.",
        "Sure! Here is the answer: " + json.dumps(GOOD) + " Hope this helps {not json}",
        "{broken " + json.dumps(GOOD),
        json.dumps({**GOOD, "confidence": 0.9}),  # extra keys are ignored
    ],
)
def test_the_answer_is_found_through_the_usual_slips(text: str) -> None:
    assert parse_answer(text) == Answer(GOOD["thought"], GOOD["content"], GOOD["summary"])


def test_a_missing_summary_is_written_by_the_summarizer() -> None:
    extractive = parse_answer(json.dumps({"thought": "t", "content": "Added a rate limiter. It uses Redis."}))
    assert extractive.summary == "Added a rate limiter." and extractive.summarized
    assert parse_answer({"content": "x", "summary": "  "}).summarized  # blank counts as missing
    assert parse_answer({"content": "x"}).thought == ""
    assert parse_answer('{"thought": null, "content": "x", "summary": null}') == Answer("", "x", "x", summarized=True)
    long = " ".join(f"w{i}" for i in range(100))
    assert ExtractiveSummarizer(max_words=5).summarize("", long) == "w0 w1 w2 w3 w4 …"
    assert ExtractiveSummarizer().summarize("the thought says why", "") == "the thought says why"
    as_json = parse_answer({"content": {"steps": [1, 2]}, "summary": "s"})
    assert as_json.content == '{"steps":[1,2]}'


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("I could not decide.", "no JSON object"),
        ("[1, 2, 3]", "no JSON object"),
        (json.dumps({"thought": "t", "summary": "s"}), "no 'content'"),
        (json.dumps({"content": 42}), "'content' is a string"),
        (json.dumps({"content": "x", "summary": ["a"]}), "'summary' is a string"),
        (json.dumps({"content": "   "}), "'content' is empty"),
        (42, "text or an object"),
        ("{" * 100_000, "no JSON object"),
        ("x" * 2_000_001, "at most"),
    ],
)
def test_what_cannot_be_repaired_is_a_typed_error(answer: object, why: str) -> None:
    with pytest.raises(MalformedAnswer, match=why):
        parse_answer(answer)
    assert issubclass(MalformedAnswer, InvalidInput)


def test_an_llm_summarizer_asks_the_model_for_one_sentence() -> None:
    asked: list[Sequence[Mapping[str, str]]] = []

    def model(messages: Sequence[Mapping[str, str]]) -> str:
        asked.append(messages)
        return '\n"Switched the API to token-bucket rate limiting."\nExtra line.'

    summarizer = LLMSummarizer(model, max_words=12)
    answer = parse_answer({"thought": "why", "content": "the code"}, summarizer=summarizer)
    assert answer.summary == "Switched the API to token-bucket rate limiting." and answer.summarized
    assert "the code" in asked[0][-1]["content"] and "12 words" in asked[0][0]["content"]
    assert isinstance(model, LLM)
    with pytest.raises(LLMError):
        LLMSummarizer(lambda _m: None).summarize("t", "c")  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidInput):
        LLMSummarizer("not callable")  # type: ignore[arg-type]


def test_prompt_messages_carry_the_format_the_context_and_the_request() -> None:
    messages = prompt_messages("Chain:\n1. planned", "Write the middleware.", system="You are the DA.")
    assert messages[0]["role"] == "system" and messages[0]["content"].startswith("You are the DA.")
    assert ANSWER_INSTRUCTIONS in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "Chain:\n1. planned\n\nWrite the middleware."}


@pytest.fixture(params=["sim", "threads"])
def memory(request: pytest.FixtureRequest) -> Iterator[MemorySystem]:
    with MemorySystem.open(runtime=request.param, config={"l1": {"counter": "estimate-v1"}}) as m:
        yield m


def test_turn_from_records_the_answer_as_a_turn(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    text = "Plan ready:\n```json\n" + json.dumps(GOOD) + "\n```"
    result = pa.turn_from(text)
    assert result["answer"] == {**GOOD, "summarized": False}
    node = pa.reload(result["archive_iri"])
    assert (node["thought"], node["content"], node["summary"]) == (GOOD["thought"], GOOD["content"], GOOD["summary"])
    assert pa.session()["summaries"] == [GOOD["summary"]]
    no_summary = pa.turn_from({"content": "Rate limit: 100 requests per minute. Burst 20."}, relevance=0.9)
    assert pa.session()["summaries"][-1] == "Rate limit: 100 requests per minute." == no_summary["answer"]["summary"]


def test_a_malformed_answer_records_nothing(memory: MemorySystem) -> None:
    pa = memory.agent("pa", "PA")
    pa.turn_from(json.dumps(GOOD))
    before, count = pa.session(), memory.l0.count()
    with pytest.raises(MalformedAnswer):
        pa.turn_from("I am not sure what to do.")
    assert pa.session() == before and memory.l0.count() == count


def test_the_awaitable_turn_from() -> None:
    async def main() -> dict[str, object]:
        with MemorySystem.open(runtime="threads") as memory:
            da = memory.agent("da", "DA").aio
            return await da.turn_from({"content": "wrote it"}, summarizer=ExtractiveSummarizer())

    assert asyncio.run(main())["answer"] == {"thought": "", "content": "wrote it", "summary": "wrote it", "summarized": True}


def test_content_that_is_not_json_is_malformed() -> None:
    with pytest.raises(MalformedAnswer, match="not JSON"):
        parse_answer({"content": {"raw": b"bytes"}})
