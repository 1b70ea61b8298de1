"""A small Gemini API stand-in on 127.0.0.1 that drives the real Gemini CLI offline.

It answers `POST /v1beta/models/<model>:generateContent` with one JSON
response and `:streamGenerateContent?alt=sse` with server-sent events (one
`data:` line per chunk), and `:countTokens` with a token count. The reply is
decided by a `script` function from the request body (a list of parts: text
or `functionCall`), and every request is kept so a test can look at what the
client sent the model (the injected context among it). Point the CLI at it
with `GOOGLE_GEMINI_BASE_URL` and any `GEMINI_API_KEY`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from claude_standin import LocalServer, QuietHandler

Parts = list[dict[str, Any]]
Script = Callable[[dict[str, Any]], Parts]


def text(value: str) -> Parts:
    return [{"text": value}]


def call(name: str, args: dict[str, Any]) -> Parts:
    return [{"functionCall": {"name": name, "args": args}}]


def response(parts: Parts) -> dict[str, Any]:
    """One GenerateContentResponse holding `parts` as the model's turn."""
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": 5, "totalTokenCount": 55},
        "modelVersion": "gemini-standin",
    }


def request_text(body: dict[str, Any]) -> str:
    """Every text part of a request (system instruction and contents), joined."""
    out: list[str] = []
    system = body.get("systemInstruction") or body.get("system_instruction") or {}
    for part in system.get("parts", []) if isinstance(system, dict) else []:
        out.append(str(part.get("text", "")))
    for content in body.get("contents", []):
        for part in content.get("parts", []) if isinstance(content, dict) else []:
            if isinstance(part, dict):
                out.append(str(part.get("text", "")))
    return "\n".join(out)


class StandIn(LocalServer):
    """The server: `start()`, `url`, `requests` (path, body), `stop()`."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                outer.requests.append((self.path, body))
                if ":countTokens" in self.path:
                    self._send(200, json.dumps({"totalTokens": 50}).encode(), "application/json")
                    return
                if ":streamGenerateContent" in self.path:
                    data = json.dumps(response(outer.script(body)))
                    self._send(200, f"data: {data}\r\n\r\n".encode(), "text/event-stream")
                    return
                if ":generateContent" in self.path:
                    self._send(200, json.dumps(response(outer.script(body))).encode(), "application/json")
                    return
                self._send(404, b'{"error": {"code": 404, "message": "not here"}}', "application/json")

            def do_GET(self) -> None:
                outer.requests.append((self.path, {}))
                self._send(404, b'{"error": {"code": 404, "message": "not here"}}', "application/json")

        self.serve(Handler)
