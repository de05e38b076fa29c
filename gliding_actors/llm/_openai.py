"""A client of any OpenAI-compatible chat endpoint (``POST <base>/chat/completions``).

Local servers (llama.cpp's ``llama-server``, vLLM, Ollama's ``/v1``, LM
Studio) and hosted ones speak the same shape, so one small client covers
them. Requests go through the same bounded, retried POST as the ``openai``
embedder (:mod:`gliding_actors._http`).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gliding_actors._http import check_http_url, post_json
from gliding_actors.errors import InvalidInput, LLMError, show
from gliding_actors.llm._answer import check_messages

__all__ = ["ENV_LLM_KEY", "ENV_LLM_MODEL", "ENV_LLM_URL", "OpenAIChat"]

#: Environment variables :class:`OpenAIChat` reads when not given the URL, model or key.
ENV_LLM_URL = "GLIDING_ACTORS_LLM_URL"
ENV_LLM_MODEL = "GLIDING_ACTORS_LLM_MODEL"
ENV_LLM_KEY = "GLIDING_ACTORS_LLM_API_KEY"


class OpenAIChat:
    """An :class:`~gliding_actors.llm.LLM` over an OpenAI-compatible chat endpoint: ``chat(messages) -> text``.

    ``base_url`` is the API root (``http://127.0.0.1:8080/v1``); None reads
    ``GLIDING_ACTORS_LLM_URL`` (then ``OPENAI_BASE_URL``); the model and key
    likewise (``GLIDING_ACTORS_LLM_MODEL``; ``GLIDING_ACTORS_LLM_API_KEY``
    then ``OPENAI_API_KEY``). ``json_mode`` asks the server for a JSON object
    (``response_format``), which most servers honour and the answer parser
    does not need. Each request waits ``timeout_s`` at most and is retried
    ``retries`` times after a transport error, a timeout, 429 or 5xx; any
    other failure, or a reply without a text message, is :class:`LLMError`.
    ``await chat.acall(messages)`` is the same call off the event loop.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_mode: bool = False,
        timeout_s: float = 60.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        env: Mapping[str, str] | None = None,
    ) -> None:
        source = os.environ if env is None else env
        url = base_url or source.get(ENV_LLM_URL) or source.get("OPENAI_BASE_URL")
        if not url:
            raise LLMError(f"openai chat: no endpoint (pass base_url or set {ENV_LLM_URL})")
        self.url = check_http_url(url, "openai chat") + "/chat/completions"
        self.model = model or source.get(ENV_LLM_MODEL) or "default"
        self._key = api_key or source.get(ENV_LLM_KEY) or source.get("OPENAI_API_KEY")
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
            raise InvalidInput(f"openai chat: temperature is a number in [0, 2], not {show(temperature)}")
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
            raise InvalidInput(f"openai chat: max_tokens is an integer >= 1 or None, not {show(max_tokens)}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= 3600:
            raise InvalidInput(f"openai chat: timeout_s is a number in (0, 3600], not {show(timeout_s)}")
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 10:
            raise InvalidInput(f"openai chat: retries is an integer in [0, 10], not {show(retries)}")
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self.json_mode = bool(json_mode)
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep
        #: requests sent (retries included)
        self.requests = 0

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The model's reply to ``messages`` (``[{"role", "content"}, ...]``), as text."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": check_messages(messages),
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if self.json_mode:
            payload["response_format"] = {"type": "json_object"}

        def sent() -> None:
            self.requests += 1

        raw = post_json(
            self.url,
            payload,
            who="openai chat",
            fail=LLMError,
            api_key=self._key,
            timeout_s=self.timeout_s,
            retries=self.retries,
            backoff_s=self.backoff_s,
            sleep=self._sleep,
            sent=sent,
        )
        return self._reply(raw)

    async def acall(self, messages: Sequence[Mapping[str, str]]) -> str:
        """:meth:`__call__` in a worker thread, so an event loop keeps running while the model answers."""
        return await asyncio.to_thread(self, messages)

    def _reply(self, raw: bytes) -> str:
        try:
            body = json.loads(raw)
            text = body["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMError(f"openai chat: {self.url} answered no chat reply: {show(raw[:200])}") from None
        if not isinstance(text, str):
            raise LLMError(f"openai chat: {self.url} answered a message without text: {show(text)}")
        return text

    def __repr__(self) -> str:
        return f"OpenAIChat({self.url!r}, model={self.model!r})"
