"""Session capture: one episodic note per agent session (Claude Code, Gemini CLI), written without any API.

SessionEnd and PreCompact both call `capture`; the note's id is derived from
the session id, so the second call finds and updates the note the first one
wrote instead of adding another. The note says what was asked, which files
were touched, which commands ran, how it ended (a tool call that failed and
was not redone is said first: the last reply's "done" is not taken at its
word), which MCP calls were made and what they returned, and what was decided
and left open at the end (`digest`). Every text it is made from was redacted
whole before any of it is cut, trimmed or made a title or a file name (the
transcript reader redacts the summary once, `digest` each assistant text it
takes a line from); the body is redacted once more as a whole. Memory our own
hooks injected is never copied back (attachment lines are skipped, and our
marked block is stripped).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from anamnesis.agents.digest import digest, failed_calls, failing_at_end, tool_name
from anamnesis.agents.recall import EVERYDAY, prompt_words
from anamnesis.agents.summarize_model import split_section, with_section
from anamnesis.agents.transcript import DELETED, REVERTED, SessionSummary, summarize
from anamnesis.base.errors import AnamnesisError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.notes import PROJECTS_DIR, TYPE_FOLDERS, Note, note_relpath, now_iso, project_folder
from anamnesis.base.settings import load_settings, writer_machine_id
from anamnesis.base.text import plural, trim
from anamnesis.search import open_index
from anamnesis.store import (
    SyncRefused,
    checkout_remote,
    load_note,
    project_key,
    redact,
    redact_field,
    require_writable,
    save_note,
    write_lock,
)

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # the alphabet of notes.new_id
MAX_ASK = 1500
MAX_LATER_PROMPTS = 20
MAX_PROMPT_LINE = 200
MAX_FILES = 60
MAX_COMMANDS = 30
MAX_COMMAND = 200
MAX_FAILED_COMMAND = 120  # as the open items name it
MAX_OUTCOME = 2000
MAX_MCP_LINE = 200  # characters of an MCP call's question and of its answer in the note
MIN_CHAT_CHARS = 20  # a tool-less session whose prompts add up to less than this is trivial
MIN_CHAT_WORDS = 3  # and one whose prompts hold fewer words that say something
LOCK_TIMEOUT = 1.5  # a hook waits no longer for a busy store: the detached retry waits instead, off your path
TAGS = ["session", "claude-code"]
DECISIONS = "## Decisions"
OPEN_ITEMS = "## Open items"


@dataclass
class CaptureResult:
    """What `capture` did: the note path it wrote, or why it wrote nothing."""

    path: str | None
    action: str  # "created", "updated", "unchanged", "skipped"
    reason: str = ""


def session_note_id(session_id: str) -> str:
    """A note id derived from the session id: the same on every capture of that session."""
    digest = int.from_bytes(hashlib.sha256(f"claude-session:{session_id}".encode()).digest()[:7], "big")
    return "".join(_ID_ALPHABET[(digest >> (5 * i)) & 31] for i in range(10))


def is_trivial(summary: SessionSummary) -> bool:
    """Nothing done and (almost) nothing said: not worth a note. Small talk ("morning! how's it
    going?", "waiting for coffee :) thanks") says next to nothing however long it is: fewer than
    MIN_CHAT_WORDS words that are neither greetings, fillers nor everyday words."""
    if summary.did_something:
        return False
    if sum(len(p) for p in summary.prompts) < MIN_CHAT_CHARS:
        return True
    said = {w.lower() for p in summary.prompts for w in prompt_words(p) if "'" not in w} - EVERYDAY  # not "how's"
    return len(said) < MIN_CHAT_WORDS


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def _relative(path: str, cwd: str) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def session_title(summary: SessionSummary, project: str) -> str:
    """A one-line title: the first thing asked, or the project and date.

    The whole prompt (redacted by the reader) is redacted again as a field, the
    stricter way, before its first line is taken and cut (a key's BEGIN line
    may be further down, a secret may run past the cut): the title becomes the
    file name and the commit subject.
    """
    if summary.prompts:
        lines = redact_field(summary.prompts[0]).strip().splitlines()
        first = lines[0].strip() if lines else ""
        if first:
            return _one_line(first, 90)
    day = (summary.started or now_iso())[:10]
    return f"Session in {project.rsplit('/', 1)[-1]} on {day}"


def render_body(summary: SessionSummary, project: str) -> str:
    """The markdown body of the session note, from a summary whose texts were redacted whole
    (`transcript.redact_summary`): here they are only cut and clipped."""
    out: list[str] = ["## Ask", ""]
    if summary.prompts:
        out.append(trim(summary.prompts[0], MAX_ASK))
    else:
        out.append("(no prompt: the session only ran tools)")
    later = summary.prompts[1 : 1 + MAX_LATER_PROMPTS]
    if later:
        out += ["", "Later prompts:", ""]
        out += [f"- {_one_line(p, MAX_PROMPT_LINE)}" for p in later]
        more = summary.prompts_total - 1 - len(later)
        if more > 0:
            out.append(f"- … and {more} more")
    if summary.files:
        out += ["", "## Files touched", ""]
        items = list(summary.files.items())
        for path, actions in items[:MAX_FILES]:
            labels = list(actions)
            if path in summary.renamed_from:
                labels.append(f"renamed from {_code(_relative(summary.renamed_from[path], summary.cwd))}")
            out.append(f"- {_code(_relative(path, summary.cwd))} ({', '.join(labels)})")
        if len(items) > MAX_FILES:
            out.append(f"- … and {len(items) - MAX_FILES} more files")
    if summary.commands:
        out += ["", "## Commands run", ""]
        shown: list[str] = []
        for command in summary.commands[-4 * MAX_COMMANDS :]:
            line = _one_line(command, MAX_COMMAND)
            if line not in shown:
                shown.append(line)
        for line in shown[-MAX_COMMANDS:]:
            out.append(f"- {_code(line)}")
        if summary.commands_total > MAX_COMMANDS:
            out.append(f"- (the last {MAX_COMMANDS} distinct commands of {summary.commands_total})")
    # a file a failed call worked on is named as the other lists name it: from the project
    failures = {(tool, _relative(target, summary.cwd)): error for (tool, target), error in summary.failures.items()}
    failed = [f"**Not done:** {line}" for line in failed_calls(failures)]
    # a check that failed at its last run, whatever the last reply claims of it
    failed += [f"**Still failing:** `{_one_line(cmd, MAX_FAILED_COMMAND)}`" for cmd in failing_at_end(summary.results)]
    if summary.outcome or failed:
        out += ["", "## Outcome", ""]
        if failed:
            out += failed
        if summary.outcome:
            said = trim(summary.outcome, MAX_OUTCOME)
            out += ["", f"The last reply said: {said}"] if failed else [said]
    if summary.mcp_calls:
        out += ["", "## MCP calls", ""]
        for tool, asked, got in summary.mcp_calls:
            question = f" {_code(_one_line(asked, MAX_MCP_LINE))}" if asked else ""
            answer = _one_line(got, MAX_MCP_LINE) if got.strip() else "(nothing)"
            out.append(f"- {tool_name(tool)}{question} → {answer}")
    found = digest(
        summary.texts,
        summary.todos,
        summary.results,
        text_seqs=summary.text_seqs,
        actions=summary.actions,
        prompts=summary.prompts,
        prompt_seqs=summary.prompt_seqs,
        failures=failures,
        todos_seq=summary.todos_seq,
        changed=summary.changed,
    )
    for heading, lines in ((DECISIONS, found.decisions), (OPEN_ITEMS, found.open_items)):
        if lines:
            out += ["", heading, ""]
            out += [f"- {_one_line(line, MAX_PROMPT_LINE)}" for line in lines]
    out += ["", "## Session", ""]
    where = f"project {_code(project)}"
    if summary.branch:
        where += f", branch {_code(summary.branch)}"
    out.append(f"- {where}")
    counts = f"{plural(summary.prompts_total, 'prompt')}, {plural(summary.tool_calls, 'tool call')}"
    if summary.compactions:
        counts += f", {plural(summary.compactions, 'compaction')}"
    span = f"{summary.started} → {summary.ended}" if summary.started else "time unknown"
    out.append(f"- {span}; {counts}")
    if summary.tools:
        top = sorted(summary.tools.items(), key=lambda kv: (-kv[1], kv[0]))[:12]
        out.append("- tools: " + ", ".join(f"{name} ×{n}" for name, n in top))
    return "\n".join(out) + "\n"


def _find_existing(store: Store, note_id: str, project: str) -> str | None:
    folder = store.memory / PROJECTS_DIR / project_folder(project) / TYPE_FOLDERS["episodic"]
    try:
        for entry in os.scandir(folder):
            if entry.name.endswith(f"-{note_id}.md") and entry.is_file(follow_symlinks=False):
                return f"{PROJECTS_DIR}/{project_folder(project)}/{TYPE_FOLDERS['episodic']}/{entry.name}"
    except OSError:
        pass
    with open_index(store) as index:
        found = [p for p in index.find_ref(note_id) if PurePosixPath(p).name.endswith(f"-{note_id}.md")]
    return found[0] if found else None


def transcript_problem(path: Path, unreadable: str = "") -> str | None:
    """Why a transcript gives nothing to read (missing, not a regular file, not ours to read), or None.

    `unreadable` is what `summarize` met (`SessionSummary.unreadable`): a file
    that went away or became unreadable after it was looked at. A FIFO or a
    device is never opened (it could block).
    """
    if unreadable:
        return unreadable if unreadable == "does not exist" else f"cannot be read ({unreadable})"
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return "is not a regular file"
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    return None


NO_SESSION = "no session id"  # why nothing was written from a file that is no transcript
TRANSCRIPT_AGENTS = ("claude-code", "gemini-cli")  # whose transcripts capture reads


def _reader(agent: str) -> Callable[[Path], SessionSummary]:
    """The transcript reader for an agent's session files (Claude Code's unless said otherwise)."""
    if agent == "gemini-cli":
        # lazy: Gemini CLI sessions only; keeps it off Claude Code's capture hooks
        from anamnesis.agents.gemini_transcript import summarize_gemini

        return summarize_gemini
    return summarize


QUEUE_DIR = "spool"
QUEUE_PREFIX = "session-note-"


def capture_session(
    store: Store,
    transcript_path: str | Path,
    *,
    session_id: str = "",
    cwd: str = "",
    event: str = "SessionEnd",
    lock_timeout: float = LOCK_TIMEOUT,
    agent: str = "claude-code",
) -> CaptureResult:
    """Write or update the session's note from its transcript; skip trivial sessions.

    When memory/ is left mid-rebase or on another branch, a hook's capture is
    queued (state/spool/session-note-<id>.json, action "queued") and written
    by the next capture once the repo is back on main (`flush_queued`); a capture
    asked for by hand (`event="manual"`) is refused like sync (exit 12).
    """
    settings = load_settings(store)
    if not settings.get("capture", {}).get("enabled", True):
        return CaptureResult(None, "skipped", "capture is turned off in settings")
    summary = _reader(agent)(Path(transcript_path))
    problem = transcript_problem(Path(transcript_path), summary.unreadable)
    if problem:  # said as such: a transcript that could not be read is not a trivial session
        return CaptureResult(None, "skipped", f"the transcript {transcript_path} {problem}")
    key_id = summary.session_id or session_id
    if not key_id:
        return CaptureResult(None, "skipped", NO_SESSION)
    if is_trivial(summary):
        return CaptureResult(None, "skipped", "trivial session (nothing done, nothing said)")
    summary.cwd = summary.cwd or cwd
    project = project_key(summary.cwd) if summary.cwd else "unknown"
    extra: dict[str, Any] = {"session_id": key_id, "agent": agent}
    remote = checkout_remote(summary.cwd) if summary.cwd else None
    if remote:  # the remote this checkout had: `project list` shows every one seen for a project
        extra["remote"] = redact_field(remote)
    if summary.branch:
        extra["branch"] = summary.branch  # redacted as a field by the reader, like the paths
    # the files the session left changed: one it deleted or put back is not what the note is about
    files = [
        _relative(p, summary.cwd)
        for p, actions in list(summary.files.items())[:MAX_FILES]
        if not (actions and actions[-1] in (DELETED, REVERTED))
    ]
    if files:
        extra["files"] = files
    stamped = re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", summary.started)
    started = summary.started[:19] + "Z" if stamped else ""
    session: dict[str, Any] = {
        "note_id": session_note_id(key_id),
        "project": project,
        "title": session_title(summary, project),
        "body": redact(render_body(summary, project)),
        "extra": extra,
        "started": started,
        "captured": now_iso(),
    }
    with write_lock(store, f"capture {event}", timeout=lock_timeout):
        try:
            require_writable(store)
        except SyncRefused as exc:
            if event == "manual":
                raise
            queued = _queue(store, session)
            waits = f"the session note waits in {queued} and is written once that is done"
            return CaptureResult(None, "queued", f"{exc} — {waits}")
        _queue_path(store, session["note_id"]).unlink(missing_ok=True)  # this capture is newer
        flush_queued(store)
        return _write_session(store, session, event)


def _queue_path(store: Store, note_id: str) -> Path:
    return store.state_dir / QUEUE_DIR / f"{QUEUE_PREFIX}{note_id}.json"


def _queue(store: Store, session: dict[str, Any]) -> Path:
    """Keep a session note that cannot be written now (already redacted), for `flush_queued`."""
    path = _queue_path(store, str(session["note_id"]))
    atomic_write_text(path, json.dumps(session) + "\n", mode=0o600)  # ASCII: a lone surrogate survives
    return path


def queued_notes(store: Store) -> list[Path]:
    """Session notes captured while the repo could not be written, oldest first."""
    folder = store.state_dir / QUEUE_DIR
    try:
        found = [p for p in folder.iterdir() if p.name.startswith(QUEUE_PREFIX) and p.suffix == ".json"]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime if p.exists() else 0.0)


def flush_queued(store: Store) -> list[CaptureResult]:
    """Write the session notes queued while the repo was mid-rebase or on another branch.

    Call it under the store lock once `store.require_writable` passed (capture
    does; sync may). A queued note that fails to write stays queued.
    """
    done: list[CaptureResult] = []
    for path in queued_notes(store):
        try:
            session = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(session, dict) or not isinstance(session.get("note_id"), str):
                raise ValueError("not a queued session note")
        except (OSError, ValueError):
            path.replace(path.with_suffix(".unreadable"))
            continue
        try:
            done.append(_write_session(store, session, "queued"))
        except AnamnesisError:
            break  # it stays queued (a full disk, say); the capture at hand still gets its try
        path.unlink(missing_ok=True)
    return done


def _write_session(store: Store, session: dict[str, Any], event: str) -> CaptureResult:
    """Create the session's note, or update the one an earlier capture wrote (under the lock)."""
    note_id, project = str(session["note_id"]), str(session["project"])
    title, body, extra = str(session["title"]), str(session["body"]), dict(session["extra"])
    existing = _find_existing(store, note_id, project)
    machine = writer_machine_id(store)
    if existing:
        note = load_note(store, existing)
        body = with_section(body, split_section(note.body)[1])  # a model-written summary stays until redone
        same_files = note.extra.get("files") == extra.get("files")
        if note.title == title and note.body.strip() == body.strip() and same_files:
            return CaptureResult(existing, "unchanged")
        note.title, note.body, note.updated, note.machine = title, body, now_iso(), machine
        note.extra.update(extra)
        save_note(store, note, message=f"{machine}: update session note {existing} ({event})")
        return CaptureResult(existing, "updated")
    stamp = now_iso()
    note = Note(
        path=note_relpath("episodic", title, note_id, project),
        id=note_id,
        type="episodic",
        title=title,
        body=body,
        project=project,
        tags=list(TAGS) if extra.get("agent", "claude-code") == "claude-code" else ["session", str(extra["agent"])],
        created=str(session.get("started") or "") or str(session.get("captured") or "") or stamp,
        updated=stamp,
        machine=machine,
        source=str(extra.get("agent") or "claude-code"),
        extra=extra,
    )
    save_note(store, note, message=f"{machine}: session note {note.path} ({event})")
    return CaptureResult(note.path, "created")
