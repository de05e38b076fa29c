"""A local OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 whose behaviour each test scripts."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable
from typing import Any

from gliding_actors.hyperspace import HashEmbedder


class EmbeddingServer:
    """A tiny /v1/embeddings server whose behaviour each test scripts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.headers: list[dict[str, str]] = []
        #: per call: a function (inputs) -> (status, body bytes) or "hang"
        self.script: list[Callable[[list[str]], tuple[int, bytes]] | str] = []
        self.release = threading.Event()
        #: a request holding a text this says yes to waits for ``gate`` (at most 10 s), then answers
        self.hold: Callable[[str], bool] | None = None
        self.gate = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                payload = json.loads(self.rfile.read(length))
                server.calls.append(list(payload["input"]))
                server.headers.append(dict(self.headers))
                action = server.script.pop(0) if server.script else ok_answer
                if server.hold is not None and any(server.hold(t) for t in payload["input"]):
                    server.gate.wait(10)
                if action == "hang":
                    server.release.wait(5)
                    return
                assert callable(action)
                status, body = action(payload["input"])
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def vector(text: str) -> list[float]:
    return HashEmbedder(16).embed([text])[0].tolist()


def ok_answer(inputs: list[str]) -> tuple[int, bytes]:
    data = [{"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(inputs)]
    return 200, json.dumps({"object": "list", "data": data, "model": "m"}).encode()


