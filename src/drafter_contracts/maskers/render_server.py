"""In-process stand-in for vLLM's ``/v1/chat/completions/render`` endpoint.

speculators 0.8+ renders every conversation prefix through a running vLLM server.
None runs here, so this module serves the same request on ``127.0.0.1`` from a
thread: the request body speculators sends (``messages``, ``add_generation_prompt``,
``tools``, ``chat_template_kwargs``, ``truncate_prompt_tokens``, ``truncation_side``)
is rendered with transformers' ``apply_chat_template`` (the tokenizer's own template),
tokenized without extra special tokens as vLLM does for chat renders, truncated as
asked, and answered as ``{"token_ids": [...]}``. A template error is a 400 with the
message, as vLLM answers a request its template rejects. speculators' own HTTP client
(``render_client.render_conversation``) talks to it unchanged.

It is a stand-in: what it cannot show is any difference between vLLM's renderer and
transformers' (vLLM itself renders through transformers' templates for HF models).
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

RENDER_PATH = "/v1/chat/completions/render"


def render_ids(tokenizer: Any, body: dict[str, Any]) -> list[int]:
    """What the endpoint answers for one request body."""
    kwargs = dict(body.get("chat_template_kwargs") or {})
    text = tokenizer.apply_chat_template(body["messages"], tools=body.get("tools"), tokenize=False,
                                         add_generation_prompt=bool(body.get("add_generation_prompt")), **kwargs)
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    limit = body.get("truncate_prompt_tokens")
    if limit is not None and limit >= 0 and len(ids) > limit:
        ids = ids[:limit] if body.get("truncation_side", "left") == "right" else ids[len(ids) - limit:]
    return ids


class RenderServer:
    """A one-thread HTTP server answering render requests for one tokenizer."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                if self.path != RENDER_PATH:
                    self._answer(HTTPStatus.NOT_FOUND, {"error": {"message": f"no route {self.path}"}})
                    return
                server.requests += 1
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    ids = render_ids(server.tokenizer, body)
                except Exception as exc:  # the template or the request is at fault: a client error
                    self._answer(HTTPStatus.BAD_REQUEST, {"error": {"message": f"{type(exc).__name__}: {exc}",
                                                                    "type": "BadRequestError"}})
                    return
                self._answer(HTTPStatus.OK, {"token_ids": ids})

        self._httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="render-stand-in", daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "RenderServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
