"""The hook entry point: read the event JSON on stdin, do the work, print the context.

Rules, because this runs on the user's critical path: start fast (at import
only what every event loads anyway: paths, settings, redaction, the transcript
markers; the rest of the core is imported for the event at hand), never
touch the network, never fail the session. Any error is logged to the
store's logs/hooks.log and the hook prints nothing and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from anamnesis.agents import MEMORY_CLOSE
from anamnesis.base.errors import LockTimeout
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.paths import Store, open_store
from anamnesis.base.settings import load_settings
from anamnesis.store import redact_field

EVENTS = {
    "session-start": "SessionStart",
    "user-prompt-submit": "UserPromptSubmit",
    "pre-compact": "PreCompact",
    "session-end": "SessionEnd",
}
SQUASHED = {argument.replace("-", ""): argument for argument in EVENTS}
# --agent NAME (as init registers it) -> whose transcript format capture reads
AGENTS = {"claude": "claude-code", "gemini": "gemini-cli"}
OUTPUT_CAP = 9500  # Claude Code truncates added context past 10,000 characters
LOG_MAX_BYTES = 1_000_000


def _log(store: Store | None, line: str) -> None:
    """Append one line to logs/hooks.log (rotated at 1 MB), redacted; never raises."""
    try:
        if store is None:
            store = open_store()
        if not store.home.is_dir() or store.is_old():  # no store (or 0.1.3's): never write into it
            return
        store.log_dir.mkdir(parents=True, exist_ok=True)
        path = store.log_dir / "hooks.log"
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_suffix(".log.1"))
        except OSError:
            pass
        try:  # a log line can hold a title or an error's text: never a secret
            line = redact_field(line)
        except Exception:
            line = "(a log line was withheld: redacting it failed)"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(f"{stamp} {line}\n")
    except Exception:
        pass


def _fit(text: str, cap: int = OUTPUT_CAP) -> str:
    """`text` within `cap` as Claude Code counts (UTF-16 code units: an emoji is two), closing tag kept."""
    if len(text) * 2 <= cap or len(text.encode("utf-16-le", "surrogatepass")) // 2 <= cap:
        return text
    tail = f"…\n{MEMORY_CLOSE}\n" if text.endswith(f"{MEMORY_CLOSE}\n") else ""
    room = cap - len(tail)
    used = 0
    for at, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > room:
            return text[:at] + tail
    return text


def _context_json(event: str, text: str) -> str:
    text = _fit(text)
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def event_argument(name: str) -> str:
    """The hook argument for an event named either way: `session-start` or `SessionStart`
    (as Claude Code spells it; `session_start` too). Anything else is returned as it is."""
    return SQUASHED.get(name.replace("-", "").replace("_", "").lower(), name)


def _cwd(data: dict[str, Any]) -> str:
    cwd = data.get("cwd")
    if isinstance(cwd, str) and cwd:
        return cwd
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def session_start(store: Store, data: dict[str, Any]) -> tuple[str, str]:
    """Build the SessionStart context; record what was shown so recall does not repeat it."""
    from anamnesis.agents import (  # lazy: inject and recall only for SessionStart
        build_context,
        remember_shown,
    )
    from anamnesis.base.text import plural  # lazy: only the events that inject count notes

    inject = load_settings(store).get("inject")
    if isinstance(inject, dict) and inject.get("enabled") is False:
        return "", "injection is off"
    text, shown = build_context(store, _cwd(data))
    _keep_the_model_loaded(store)
    session_id = str(data.get("session_id") or "")
    if session_id:
        remember_shown(store, session_id, shown, replace=data.get("source") in ("startup", "clear", None))
    source = data.get("source") or "?"
    if not text:
        return "", f"({source}) nothing to inject"
    return _context_json("SessionStart", text), f"({source}) {plural(len(text), 'char')}, {plural(len(shown), 'note')}"


def _keep_the_model_loaded(store: Store) -> None:
    """With semantic search on and no query server answering, start one for this session's prompts."""
    from anamnesis.search import start_query_server  # lazy: only the events that rank by meaning

    try:
        start_query_server(store)
    except Exception as exc:  # what the hook already has to say must still be said
        _log(store, f"could not start the semantic query server: {exc}")


def user_prompt_submit(store: Store, data: dict[str, Any]) -> tuple[str, str]:
    """Recall notes matching the prompt, or print nothing."""
    from anamnesis.agents import build_recall, remember_shown  # lazy: keeps recall off the capture hooks
    from anamnesis.base.text import plural  # lazy: as the line above

    prompt = data.get("prompt")
    if not isinstance(prompt, str):
        return "", "no prompt"
    session_id = str(data.get("session_id") or "")
    text, shown = build_recall(store, prompt, session_id=session_id, cwd=_cwd(data))
    _keep_the_model_loaded(store)
    if not text:
        return "", "no match"
    if session_id:
        remember_shown(store, session_id, shown)
    return _context_json("UserPromptSubmit", text), plural(len(shown), "note")


def capture_event(
    store: Store, data: dict[str, Any], event: str, lock_timeout: float | None = None, agent: str = "claude-code"
) -> str:
    """Capture the session note; when the store is busy, hand the work to a detached retry."""
    # lazy: capture (digest, summaries) is for PreCompact and SessionEnd; keeps it off the prompt hooks
    from anamnesis.agents import LOCK_TIMEOUT, capture_session, transcript_problem

    transcript = data.get("transcript_path")
    if not isinstance(transcript, str) or not transcript:
        return "no transcript_path"
    problem = transcript_problem(Path(transcript))
    if problem:
        return f"skipped: the transcript {transcript} {problem}"
    try:
        result = capture_session(
            store,
            transcript,
            session_id=str(data.get("session_id") or ""),
            cwd=_cwd(data),
            event=event,
            lock_timeout=_lock_timeout(load_settings(store), LOCK_TIMEOUT)
            if lock_timeout is None
            else lock_timeout,
            agent=agent,
        )
    except LockTimeout:
        if lock_timeout is not None:
            raise
        retry = _spool_retry(store, data, event, agent)
        return f"store busy: capture handed to a detached retry (pid {retry})"
    started = ""
    if result.action in ("created", "updated") and result.path:
        # lazy: a capture hook module; keeps it off the prompt hooks
        from anamnesis.agents import start_background

        summary = start_background(store, result.path, transcript)  # off by default: one settings read
        started = f"; model summary started (pid {summary})" if summary else ""
    if event == "SessionEnd" and result.action in ("created", "updated"):
        sync = spawn_sync(store)
        return f"{result.action} {result.path}" + (f"; sync started (pid {sync})" if sync else "") + started
    return f"{result.action} {result.path or ''} {result.reason}".strip() + started


def _lock_timeout(settings: dict[str, Any], default: float) -> float:
    knobs = settings.get("capture")
    try:
        return float(knobs.get("lock_timeout", default)) if isinstance(knobs, dict) else default
    except (TypeError, ValueError):
        return default


def _detached(store: Store, args: list[str]) -> int:
    """Start `python -P ARGS` detached (see `anamnesis.base.spawn`), output to logs/hooks-background.log."""
    # lazy: only when a hook detaches work; keeps subprocess off the prompt hooks
    from anamnesis.base.spawn import spawn_detached

    return spawn_detached(store, args, "hooks-background.log")


def spawn_sync(store: Store) -> int | None:
    """Start `anamnesis sync` detached (own session, not waited for) when there are peers; its pid."""
    settings = load_settings(store)
    knobs = settings.get("capture")
    if not settings.get("peers") or (isinstance(knobs, dict) and knobs.get("sync_after") is False):
        return None
    return _detached(store, ["-m", "anamnesis", "sync"])


def _spool_retry(store: Store, data: dict[str, Any], event: str, agent: str = "claude-code") -> int:
    spool = store.state_dir / "spool"
    name = "".join(c for c in str(data.get("session_id") or "unknown") if c.isalnum() or c in "-_")[:80]
    path = spool / f"capture-{name or 'unknown'}-{event}.json"
    atomic_write_text(path, json.dumps({"event": event, "data": data, "agent": agent}), mode=0o600)
    return _detached(store, ["-m", "anamnesis.hooks", "capture-retry", str(path)])


def capture_retry(store: Store, spool_file: str) -> str:
    """The detached second try of a capture that found the store busy (waits longer)."""
    path = Path(spool_file)
    payload = json.loads(path.read_text(encoding="utf-8"))
    agent = str(payload.get("agent") or "claude-code")
    result = capture_event(store, payload["data"], payload["event"], lock_timeout=300, agent=agent)
    path.unlink(missing_ok=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run one hook event; always returns 0."""
    args = list(sys.argv[1:] if argv is None else argv)
    started = time.perf_counter()
    store: Store | None = None
    event = event_argument(args[0]) if args else ""
    try:
        home = None
        if "--home" in args:
            at = args.index("--home")
            home = args[at + 1] if at + 1 < len(args) else None
            del args[at : at + 2]
        agent = "claude-code"
        if "--agent" in args:  # another agent's hooks: its transcript format (input and output are Claude's)
            at = args.index("--agent")
            agent = AGENTS.get(args[at + 1] if at + 1 < len(args) else "", agent)
            del args[at : at + 2]
        store = open_store(home)
        if event == "capture-retry":
            note = capture_retry(store, args[1])
            _log(store, f"capture-retry {note} ({(time.perf_counter() - started) * 1000:.0f} ms)")
            return 0
        if event not in EVENTS:
            known = ", ".join(f"{argument} ({name})" for argument, name in EVENTS.items())
            _log(store, f"unknown hook event {event!r}; expected one of {known}")
            return 0
        raw = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
        data = json.loads(raw) if raw.strip() else {}
        if not isinstance(data, dict):
            data = {}
        if not store.exists():
            _log(store, f"{event}: no store at {store.home}; run `anamnesis init`")
            return 0
        out = ""
        if event == "session-start":
            out, note = session_start(store, data)
        elif event == "user-prompt-submit":
            out, note = user_prompt_submit(store, data)
        else:
            note = capture_event(store, data, EVENTS[event], agent=agent)
        if out:
            sys.stdout.write(out)
            sys.stdout.flush()
        _log(store, f"{event}: {note} ({(time.perf_counter() - started) * 1000:.0f} ms)")
    except BaseException as exc:  # a memory hook must never fail or block the session
        import traceback  # lazy: only a failed event formats a traceback

        detail = "".join(traceback.format_exception(exc)).rstrip().replace("\n", "\n    ")
        _log(store, f"{event}: FAILED {type(exc).__name__}: {exc}\n    {detail}")
    return 0
