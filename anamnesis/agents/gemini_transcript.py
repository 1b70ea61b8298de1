"""Reading Gemini CLI session files (JSONL) into the `SessionSummary` capture writes notes from.

Gemini CLI records a session as `~/.gemini/tmp/<project>/chats/session-*.jsonl`:
a first line of metadata (`sessionId`, `startTime`), then one line per
message (`type` "user" or "gemini", `content` as text or parts, the model's
`toolCalls` with `args`, `status` and `result`), re-written lines for a
message that changed (same `id`: the last one wins) and `{"$set": …}` lines
that update metadata. Lines it cannot parse, or types it does not know, are
skipped. The context our SessionStart hook injected reaches the file inside
`<hook_context>` in the first prompt and is cut out, so memory is never
captured back into memory.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from anamnesis.agents.transcript import (
    MAX_RESULTS,
    MAX_TEXTS,
    SessionSummary,
    iter_records,
    redact_summary,
    strip_injected,
)

FILE_TOOLS = {"write_file": "write", "replace": "edit", "edit": "edit"}
COMMAND_TOOLS = {"run_shell_command"}
_HOOK_CONTEXT = re.compile(r"<hook_context>.*?(?:</hook_context>|\Z)", re.S)
_EXIT_CODE = re.compile(r"Exit Code: (-?\d+)")


def looks_like_gemini(path: Path) -> bool:
    """Whether a transcript is a Gemini CLI session file (its first line names a projectHash)."""
    for record in iter_records(path):
        return "projectHash" in record and "sessionId" in record
    return False


def _text(content: Any) -> str:
    """The text parts of a message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def _output(call: dict[str, Any]) -> str:
    result = call.get("result")
    parts = result if isinstance(result, list) else []
    for part in parts:
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            return str(response.get("output") or response.get("error") or "")
    return ""


def _take_call(summary: SessionSummary, call: dict[str, Any]) -> None:
    name = str(call.get("name") or "?")
    summary.tools[name] = summary.tools.get(name, 0) + 1
    raw = call.get("args")
    args: dict[str, Any] = raw if isinstance(raw, dict) else {}
    ok = call.get("status") == "success"
    if name in FILE_TOOLS:
        path = args.get("file_path")
        if ok and isinstance(path, str) and path:
            actions = summary.files.setdefault(path, [])
            if FILE_TOOLS[name] not in actions:
                actions.append(FILE_TOOLS[name])
    elif name in COMMAND_TOOLS:
        command = args.get("command")
        if isinstance(command, str) and command.strip():
            summary.commands.append(command)
            if call.get("status") in ("success", "error"):
                code = _EXIT_CODE.search(_output(call))
                summary.results.append((command, not ok or (code is not None and code.group(1) != "0")))


def summarize_gemini(path: Path, session_id: str = "") -> SessionSummary:
    """Stream a Gemini CLI session file into a summary; a missing or unreadable one gives an empty summary."""
    summary = SessionSummary(session_id=session_id)
    messages: dict[str, dict[str, Any]] = {}  # by id, in first-seen order; a re-written line replaces
    try:
        for record in iter_records(path):
            summary.lines += 1
            if record.get("type") == "__bad__":
                summary.bad_lines += 1
            elif "projectHash" in record and "sessionId" in record:
                summary.session_id = summary.session_id or str(record["sessionId"])
                summary.started = summary.started or str(record.get("startTime") or "")
            elif record.get("type") in ("user", "gemini") and isinstance(record.get("id"), str):
                messages[record["id"]] = record
    except OSError as exc:
        summary.unreadable = (
            "does not exist" if isinstance(exc, FileNotFoundError) else str(exc.strerror or exc)
        )
        return summary
    for message in messages.values():
        stamp = message.get("timestamp")
        if isinstance(stamp, str) and stamp:
            summary.started = summary.started or stamp
            summary.ended = stamp
        if message["type"] == "user":
            prompt = strip_injected(_HOOK_CONTEXT.sub("", _text(message.get("content")))).strip()
            if prompt:
                summary.prompts.append(prompt)
            continue
        calls = message.get("toolCalls")
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                _take_call(summary, call)
        text = _text(message.get("content")).strip()
        if text:
            summary.texts.append(text)
            summary.assistant_messages += 1
            summary.outcome = text
    del summary.texts[:-MAX_TEXTS]
    del summary.results[:-MAX_RESULTS]
    return redact_summary(summary)  # every text a note is made from, whole, before anything cuts it
