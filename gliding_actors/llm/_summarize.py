"""Who writes a turn's summary when the model gave none.

A turn's summary is what stays in the agent's L1 chain, so a turn cannot do
without one. The default needs no model: the first sentence of what was
produced (else of the reasoning), cut to a few dozen words. An LLM-backed one
asks the model for the sentence instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from gliding_actors.errors import InvalidInput, LLMError, show

__all__ = ["ExtractiveSummarizer", "LLMSummarizer", "Summarizer"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


@runtime_checkable
class Summarizer(Protocol):
    """Writes one short summary of a turn from its thought and content."""

    def summarize(self, thought: str, content: str) -> str: ...


def _words_at_most(text: str, limit: int) -> str:
    words = text.split()
    return " ".join(words) if len(words) <= limit else " ".join(words[:limit]) + " …"


class ExtractiveSummarizer:
    """The first sentence of the content (else of the thought), at most ``max_words`` words. Needs no model."""

    def __init__(self, max_words: int = 30) -> None:
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
            raise InvalidInput(f"max_words is an integer >= 1, not {show(max_words)}")
        self.max_words = max_words

    def summarize(self, thought: str, content: str) -> str:
        for text in (content, thought):
            line = next((ln.strip(" \t#>*-`") for ln in text.splitlines() if ln.strip(" \t#>*-`")), "")
            if line:
                return _words_at_most(_SENTENCE_END.split(line, maxsplit=1)[0], self.max_words)
        return ""


class LLMSummarizer:
    """Asks ``llm`` (any :class:`~gliding_actors.llm.LLM`) for a one-sentence summary of the turn."""

    def __init__(self, llm: Callable[[Sequence[Mapping[str, str]]], str], max_words: int = 30) -> None:
        if not callable(llm):
            raise InvalidInput(f"an LLM is a callable from chat messages to text, not {show(llm)}")
        self.llm = llm
        self.max_words = ExtractiveSummarizer(max_words).max_words

    def summarize(self, thought: str, content: str) -> str:
        messages = [
            {
                "role": "system",
                "content": f"Summarize what this step did in one sentence of at most {self.max_words} words. "
                "Answer with the sentence only.",
            },
            {"role": "user", "content": f"Reasoning:\n{thought}\n\nResult:\n{content}"},
        ]
        reply = self.llm(messages)
        if not isinstance(reply, str):
            raise LLMError(f"the summarizing LLM answered {show(reply)}, not text")
        line = next((ln.strip() for ln in reply.splitlines() if ln.strip()), "")
        return _words_at_most(line.strip('"'), self.max_words)
