"""A real OpenAI-compatible chat server on 127.0.0.1, for the adapter's tests and the docs' example.

It serves ``POST /v1/chat/completions`` over HTTP like llama.cpp's or vLLM's
servers do; only the "model" is canned: ``reply(body)`` decides each answer
(status and JSON body), and every request is kept for the test to look at.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Reply = Callable[[dict[str, Any]], tuple[int, Any]]


def chat_reply(text: str) -> tuple[int, Any]:
    """A 200 answer carrying ``text`` as the assistant's message, in the OpenAI shape."""
    return 200, {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }


def answering_model(body: dict[str, Any]) -> tuple[int, Any]:
    """A stand-in model that follows the answer format: it restates the request, in a code fence as models do."""
    request = body["messages"][-1]["content"].strip().splitlines()[-1]
    answer = {"thought": f"The request is: {request}", "content": f"Done: {request}", "summary": f"Handled: {request}"}
    return chat_reply("Here is my answer:\n```json\n" + json.dumps(answer) + "\n```")


class ChatServer:
    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                server.requests.append(body)
                server.headers.append(dict(self.headers))
                if self.path != "/v1/chat/completions":
                    status, payload = 404, {"error": "not found"}
                else:
                    status, payload = server.reply(body)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="chat-server", daemon=True
        )

    def start(self) -> ChatServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)


@contextmanager
def chat_server(reply: Reply = answering_model) -> Iterator[ChatServer]:
    server = ChatServer(reply).start()
    try:
        yield server
    finally:
        server.stop()
