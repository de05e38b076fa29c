"""One JSON POST to an OpenAI-compatible endpoint, with bounded waits and retries.

Shared by the ``openai`` embedder and the chat adapter: both talk to the same
kind of server and must fail the same way. The standard library's client is
enough for one request and answer; what matters is the policy: every request
waits ``timeout_s`` at most, a transport error, a timeout, 429 or 5xx is
retried ``retries`` times after ``backoff_s * 2**n`` (through an injected
``sleep``), and anything else ends the call with the caller's typed error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from gliding_actors.errors import GlidingError, InvalidInput, show

__all__ = ["check_http_url", "post_json"]


def check_http_url(url: object, who: str) -> str:
    """``url`` without a trailing slash, if it is http(s); else :class:`InvalidInput`."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidInput(f"{who}: the URL must be http(s), not {show(url)}")
    return url.rstrip("/")


def post_json(
    url: str,
    payload: Any,
    *,
    who: str,
    fail: Callable[[str], GlidingError],
    api_key: str | None,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    sleep: Callable[[float], None],
    sent: Callable[[], None] = lambda: None,
) -> bytes:
    """POST ``payload`` as JSON to ``url``; the raw answer body. ``sent`` is called once per request made."""
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    last = ""
    for attempt in range(retries + 1):
        if attempt:
            sleep(backoff_s * 2 ** (attempt - 1))
        sent()
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # http(s) only: check_http_url
                raw: bytes = response.read()
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
            if exc.code == 429 or exc.code >= 500:
                continue
            raise fail(f"{who}: {url} answered {last}") from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            continue
        return raw
    raise fail(f"{who}: {url} failed {retries + 1} times (last: {last})")
