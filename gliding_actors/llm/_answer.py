"""The answer an agent's LLM gives: ``{"thought", "content", "summary"}``, parsed and repaired.

The format is the memory's contract with the model: ``thought`` (its
reasoning) and ``content`` (what it produced) go to L0 in full, ``summary``
(one line) stays in the agent's L1 chain. Models often wrap the object in a
code fence, put a sentence before or after it, or leave the summary out; those
are repaired here. Anything else — no JSON object, a value of the wrong type,
no ``content`` — is a :class:`~gliding_actors.errors.MalformedAnswer` that
says what is wrong, and changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from gliding_actors.errors import InvalidInput, MalformedAnswer, show
from gliding_actors.llm._summarize import ExtractiveSummarizer, Summarizer

__all__ = ["ANSWER_INSTRUCTIONS", "Answer", "check_messages", "parse_answer", "prompt_messages"]

#: What a system prompt tells the model about the answer's shape.
ANSWER_INSTRUCTIONS = (
    "Answer with one JSON object and nothing else, with exactly these string keys: "
    '"thought" (your reasoning), "content" (what you produce: the plan, code, review or decision) and '
    '"summary" (one sentence saying what you did, for your own memory).'
)

#: The longest answer text parsed (a longer one is refused, not scanned).
MAX_ANSWER_CHARS = 2_000_000
#: Object starts tried when the answer has text around its JSON (bounds the work on hostile text).
_MAX_STARTS = 64
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.DOTALL)
_KEYS = ("thought", "content", "summary")


@dataclasses.dataclass(frozen=True)
class Answer:
    """One parsed answer. ``summarized``: the model gave no summary, a :class:`Summarizer` wrote it."""

    thought: str
    content: str
    summary: str
    summarized: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def prompt_messages(context: str, request: str, *, system: str = "") -> list[dict[str, str]]:
    """Chat messages for one step: the answer format (after ``system``), the memory's context, the request."""
    head = f"{system.strip()}\n\n{ANSWER_INSTRUCTIONS}" if system.strip() else ANSWER_INSTRUCTIONS
    user = f"{context.strip()}\n\n{request.strip()}" if context.strip() else request.strip()
    return [{"role": "system", "content": head}, {"role": "user", "content": user}]


def parse_answer(answer: object, *, summarizer: Summarizer | None = None) -> Answer:
    """The :class:`Answer` in ``answer``: an LLM's text, an object with the keys, or an :class:`Answer`.

    Repairs, in order: the whole text as JSON; the inside of a code fence;
    the first JSON object found in the text (prose before or after it). A
    missing or blank ``summary`` is written by ``summarizer`` (default:
    :class:`ExtractiveSummarizer`); a missing ``thought`` is empty. Keys
    other than the three are ignored. ``content`` given as a JSON object or
    list is kept as its compact JSON text.
    """
    if isinstance(answer, Answer):
        return answer
    if isinstance(answer, str):
        obj = _object_in(answer)
    elif isinstance(answer, Mapping):
        obj = dict(answer)
    else:
        raise MalformedAnswer(f"an answer is the LLM's text or an object, not {type(answer).__name__}")
    thought = obj.get("thought")
    if thought is None:  # absent or null: no reasoning given
        thought = ""
    content = obj.get("content")
    summary = obj.get("summary")
    if content is None:
        raise MalformedAnswer(f"the answer has no 'content' (keys: {', '.join(sorted(map(str, obj))) or 'none'})")
    if isinstance(content, (Mapping, list)):
        try:
            content = json.dumps(content, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError, RecursionError) as exc:
            raise MalformedAnswer(f"the answer's 'content' is not JSON: {exc}", path=("content",)) from None
    for key, value in (("thought", thought), ("content", content), ("summary", summary)):
        if value is not None and not isinstance(value, str):
            raise MalformedAnswer(f"the answer's {key!r} is a string, not {show(value)}", path=(key,))
    if not isinstance(content, str) or not isinstance(thought, str):  # (checked above; for the type checker)
        raise MalformedAnswer("the answer's 'thought' and 'content' are strings")
    if not content.strip():
        raise MalformedAnswer("the answer's 'content' is empty", path=("content",))
    if summary is not None and summary.strip():
        return Answer(thought, content, summary.strip())
    written = (summarizer or ExtractiveSummarizer()).summarize(thought, content)
    if not isinstance(written, str) or not written.strip():
        raise MalformedAnswer("the answer has no summary and the summarizer wrote none", path=("summary",))
    return Answer(thought, content, written.strip(), summarized=True)


def _object_in(text: str) -> dict[str, Any]:
    if len(text) > MAX_ANSWER_CHARS:
        raise MalformedAnswer(f"the answer is {len(text):,} characters; at most {MAX_ANSWER_CHARS:,} are parsed")
    for candidate in (text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))):
        found = _loads_object(candidate)
        if found is not None:
            return found
    decoder = json.JSONDecoder()
    starts = [i for i, ch in enumerate(text) if ch == "{"][:_MAX_STARTS]
    fallback: dict[str, Any] | None = None
    for start in starts:
        try:
            value, _end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            if any(key in value for key in _KEYS):
                return value
            fallback = fallback or value
    if fallback is not None:
        return fallback
    raise MalformedAnswer(f"no JSON object in the LLM's answer: {show(text[:120])}")


def _loads_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_messages(messages: object) -> list[dict[str, str]]:
    """Chat messages as a list of ``{"role", "content"}`` strings; else :class:`InvalidInput`."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise InvalidInput(f"chat messages are a non-empty list of {{role, content}} objects, not {show(messages)}")
    out: list[dict[str, str]] = []
    for n, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InvalidInput(f"chat message {n} is an object, not {show(message)}", path=(n,))
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role or not isinstance(content, str):
            raise InvalidInput(f"chat message {n} needs a string 'role' and 'content', not {show(message)}", path=(n,))
        out.append({"role": role, "content": content})
    return out
