"""A small Messages API stand-in on 127.0.0.1 that drives the real Claude Code offline.

It answers `POST /v1/messages` with server-sent events (message_start,
content_block_start/delta/stop, message_delta, message_stop), tool calls as
`tool_use` blocks with `input_json_delta`. What to answer is decided by a
`script` function from the request body, and every request body is kept so a
test can look at what the client sent the model (system prompt, injected
context, tool results).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# A reply is a list of content blocks: {"type": "text", "text": ...} or
# {"type": "tool_use", "name": ..., "input": {...}}.
Reply = list[dict[str, Any]]
Script = Callable[[dict[str, Any]], Reply]


def text(value: str) -> Reply:
    return [{"type": "text", "text": value}]


def tool(name: str, tool_input: dict[str, Any]) -> Reply:
    return [{"type": "tool_use", "name": name, "input": tool_input}]


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def sse_body(reply: Reply, model: str) -> bytes:
    """The SSE stream of one assistant message made of `reply`'s blocks."""
    msg_id = f"msg_{uuid.uuid4().hex[:24]}"
    usage = {
        "input_tokens": 50,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    out = [
        _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    stop = "end_turn"
    for index, block in enumerate(reply):
        if block["type"] == "text":
            out.append(
                _event(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
            )
            out.append(
                _event(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": block["text"]},
                    },
                )
            )
        else:
            stop = "tool_use"
            start = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": block["name"],
                "input": {},
            }
            out.append(
                _event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": start},
                )
            )
            payload = json.dumps(block["input"])
            half = len(payload) // 2
            for part in (payload[:half], payload[half:]):
                out.append(
                    _event(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": part},
                        },
                    )
                )
        out.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
        )
    )
    out.append(_event("message_stop", {"type": "message_stop"}))
    return b"".join(out)


def plain_body(reply: Reply, model: str) -> bytes:
    """The same reply as a non-streaming JSON message."""
    content: list[dict[str, Any]] = []
    stop = "end_turn"
    for block in reply:
        if block["type"] == "text":
            content.append({"type": "text", "text": block["text"]})
        else:
            stop = "tool_use"
            content.append({"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", **block})
    return json.dumps(
        {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 9},
        }
    ).encode()


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-request (it does at exit) is not worth a traceback."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers with `_send(status, body, content_type)`."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class LocalServer:
    """An HTTP server on 127.0.0.1 (a free port) in a daemon thread: `start()`, `url`, `stop()`.
    The stand-ins of this suite (this one, gemini_standin) serve their handler through it."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = _QuietServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Self:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class StandIn(LocalServer):
    """The server: start(), .url, .requests (bodies of /v1/messages), stop()."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        standin = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                path = self.path.split("?")[0]
                if path.endswith("/count_tokens"):
                    self._send(200, b'{"input_tokens": 100}', "application/json")
                    return
                if not path.endswith("/v1/messages"):
                    self._send(
                        404,
                        b'{"type":"error","error":{"type":"not_found_error","message":"no"}}',
                        "application/json",
                    )
                    return
                try:
                    body = json.loads(raw)
                    with standin._lock:
                        standin.requests.append(body)
                    reply = standin.script(body)
                except Exception as exc:  # a broken script must show up in the test, not hang it
                    standin.errors.append(repr(exc))
                    reply = text(f"stand-in error: {exc}")
                    body = {}
                model = str(body.get("model") or "claude-sonnet-4-5")
                if body.get("stream"):
                    self._send(200, sse_body(reply, model), "text/event-stream")
                else:
                    self._send(200, plain_body(reply, model), "application/json")

            def do_GET(self) -> None:
                self._send(404, b"{}", "application/json")

            do_HEAD = do_GET

        self.serve(Handler)


def last_user_content(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the last user message of a request."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return [{"type": "text", "text": content}]
            return [b for b in content or [] if isinstance(b, dict)]
    return []


def tool_names(body: dict[str, Any]) -> list[str]:
    return [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]


def request_text(body: dict[str, Any]) -> str:
    """Everything the model would read in a request, as one string (system + messages)."""
    return json.dumps({"system": body.get("system"), "messages": body.get("messages")})
