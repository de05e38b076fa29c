"""The seam between an agent's LLM and its memory (docs/LLM.md).

An :class:`LLM` is any callable from chat messages to text (an
:class:`AsyncLLM` the awaitable kind): a hosted model, a local server through
:class:`OpenAIChat`, or a scripted stand-in in tests. Its answer follows the
memory's contract, ``{"thought", "content", "summary"}``
(:data:`ANSWER_INSTRUCTIONS`); :func:`parse_answer` reads it, repairing the
usual slips, and :meth:`gliding_actors.Agent.turn_from` records it as a turn.
A :class:`Summarizer` writes the summary a model left out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from gliding_actors.llm._answer import (
    ANSWER_INSTRUCTIONS,
    Answer,
    check_messages,
    parse_answer,
    prompt_messages,
)
from gliding_actors.llm._openai import ENV_LLM_KEY, ENV_LLM_MODEL, ENV_LLM_URL, OpenAIChat
from gliding_actors.llm._summarize import ExtractiveSummarizer, LLMSummarizer, Summarizer

__all__ = [
    "ANSWER_INSTRUCTIONS",
    "ENV_LLM_KEY",
    "ENV_LLM_MODEL",
    "ENV_LLM_URL",
    "LLM",
    "Answer",
    "AsyncLLM",
    "ExtractiveSummarizer",
    "LLMSummarizer",
    "OpenAIChat",
    "Summarizer",
    "check_messages",
    "parse_answer",
    "prompt_messages",
]


@runtime_checkable
class LLM(Protocol):
    """A chat model: ``llm([{"role": "system", "content": ...}, {"role": "user", ...}]) -> text``."""

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> str: ...


@runtime_checkable
class AsyncLLM(Protocol):
    """The awaitable kind: ``await llm(messages) -> text``."""

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> Awaitable[str]: ...
