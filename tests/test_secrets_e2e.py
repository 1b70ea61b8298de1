"""No secret of the corpus reaches anything a captured session leaves behind.

One Claude Code session per kind of secret, run through the real hook
(`python -P -m anamnesis.hooks session-end`, as Claude Code runs it, for one
session in ten; the same hook `main` in this process for the rest): the first
prompt starts with a secret (so it would be the title, the file name and the
commit subject), later prompts, Bash commands, the last reply, a Write's
contents, tool outputs, file paths and the branch carry more of them. Then
every place the store writes is searched for every secret, whole or in part:
the note files and their names, `git log -p --all` of the memory repo,
index.db (every cell of every table), the logs, and every other file the
store keeps.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import cli_env
from data.secrets import corpus
from procs import run_hook_process
from transcripts import Transcript

from anamnesis.capture import session_note_id
from anamnesis.paths import Store, open_store
from anamnesis.store import init_store

VARIANTS = corpus.secret_variants()
SHAPED = corpus.shaped_kinds()  # the value alone gives them away: tried in branch and file names too
BRANCH_SAFE = re.compile(r"[A-Za-z0-9._/\-]{8,200}")
PATH_SAFE = re.compile(r"[A-Za-z0-9._\-]{8,120}")
PROMPTS, COMMANDS, OUTCOMES = 20, 30, 3  # what a session note shows of each (see capture.py)
REAL_EVERY = 10  # one session in ten through a real hook process (see _hook)

# One module-scoped store captures every session: its tests share one xdist worker, so it is built once.
# End to end (transcript, hook, note, git history, index, logs) for 124 sessions: under the e2e mark,
# while the fast suite checks every variant of every kind through redaction itself (test_redact.py),
# secrets through capture into the note and git (test_capture.py) and the real hook process (test_hooks.py).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("secrets-corpus")]


@dataclass
class Session:
    kind: str
    session_id: str
    transcript: Path
    shown: dict[str, corpus.Variant] = field(default_factory=dict)  # slot marker -> variant in the note
    hidden: list[corpus.Variant] = field(default_factory=list)  # only in the transcript
    note: str = ""
    log: str = ""


@dataclass
class Captured:
    store: Store
    sessions: list[Session]


def _session(kind: str, variants: list[corpus.Variant], project: Path, number: int) -> Session:
    rng = random.Random(number)
    variants = list(variants)
    rng.shuffle(variants)
    first = next((v for v in variants if v.context.startswith("1:")), variants[0])
    variants.remove(first)
    secret = first.secret
    shaped = kind in SHAPED
    branch = f"fix/{secret}" if shaped and BRANCH_SAFE.fullmatch(secret) and ".." not in secret else "main"
    t = Transcript(f"secrets-{number}-{kind}", cwd=str(project), branch=branch)
    session = Session(kind, t.session_id, project.parent / f"{kind}.jsonl")
    slot = iter(range(10_000))

    def marked(variant: corpus.Variant) -> str:
        marker = f"slot{number}x{next(slot)}"
        session.shown[marker] = variant
        return f"{marker} {variant.text}"

    t.prompt(marked(first))
    t.say("Let me look.")
    for variant in variants[:PROMPTS]:
        t.prompt(marked(variant))
    commands = variants[PROMPTS : PROMPTS + COMMANDS]
    rest = variants[PROMPTS + COMMANDS :]
    for variant in commands:
        t.bash(marked(variant), f"done: {variant.text}")
    if shaped and PATH_SAFE.fullmatch(secret):
        t.write_file(f"{project}/keys/{secret}.json", "{}")
    t.write_file(f"{project}/.env", "\n".join(v.text for v in rest) or "X=1")
    t.tool(
        "Read", {"file_path": f"{project}/.env"}, [{"type": "text", "text": "\n".join(v.text for v in rest)}]
    )
    session.hidden = rest
    outcome = [marked(v) for v in rest[:OUTCOMES]] or ["All set."]
    t.say("Configured. " + "\n\n".join(outcome))
    t.write(session.transcript)
    return session


def _hook(home: Path, session: Session, project: Path, number: int) -> subprocess.CompletedProcess[str]:
    payload = {
        "session_id": session.session_id,
        "transcript_path": str(session.transcript),
        "cwd": str(project),
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    # Every REAL_EVERY-th session goes through the hook process exactly as Claude Code starts it;
    # the others through the same `main` in this process (what is written is the same; the start is not).
    real = number % REAL_EVERY == 0
    return run_hook_process("session-end", json.dumps(payload), cli_env(home), timeout=120, real_process=real)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    base = tmp_path_factory.mktemp("secrets-e2e")
    home = base / "home"
    store = open_store(home)
    init_store(store)
    project = base / "acme-api"
    project.mkdir()
    by_kind: dict[str, list[corpus.Variant]] = defaultdict(list)
    for variant in VARIANTS:
        by_kind[variant.kind].append(variant)
    sessions = []
    log = store.log_dir / "hooks.log"
    for number, kind in enumerate(sorted(by_kind)):
        session = _session(kind, by_kind[kind], project, number)
        before = log.stat().st_size if log.exists() else 0
        proc = _hook(home, session, project, number)
        assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
        with open(log, encoding="utf-8") as handle:
            handle.seek(before)
            session.log = handle.read()
        assert "session-end: created" in session.log, session.log
        sessions.append(session)
    yield Captured(store, sessions)


def _note_path(store: Store, session: Session) -> Path:
    note_id = session_note_id(session.session_id)
    found = list((store.memory / "projects").rglob(f"*-{note_id}.md"))
    assert len(found) == 1, f"{session.kind}: no note"
    return found[0]


def _git(store: Store, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(store.memory), *args], capture_output=True, text=True, check=True
    ).stdout


def _leaks(variant: corpus.Variant, where: str, text: str) -> list[str]:
    return [
        f"{variant.kind} [{variant.context}] in {where}: {leak[:40]}"
        for leak in corpus.leaks(variant.secret, text)
    ]


def test_every_session_was_captured_with_its_secrets_in_view(captured: Captured) -> None:
    """The check below means something: the secrets were in what the note is made of."""
    shown = 0
    for session in captured.sessions:
        path = _note_path(captured.store, session)
        session.note = path.read_text(encoding="utf-8")
        seen = [marker for marker in session.shown if marker in session.note]
        assert len(seen) >= min(len(session.shown), 20), f"{session.kind}: only {len(seen)} slots in the note"
        assert "[REDACTED" in session.note, session.kind
        shown += len(seen)
    assert len(captured.sessions) >= 40
    assert shown >= 40 * 20
    print(
        f"\n{len(captured.sessions)} sessions, {shown} secret placements shown in notes, {len(VARIANTS)} in transcripts"
    )


def test_no_secret_in_notes_file_names_commits_or_logs(captured: Captured) -> None:
    leaks = []
    messages = _git(captured.store, "log", "--all", "--format=%H %s%n%b")
    for session in captured.sessions:
        path = _note_path(captured.store, session)
        note = path.read_text(encoding="utf-8")
        relpath = str(path.relative_to(captured.store.memory))
        history = _git(captured.store, "log", "-p", "--all", "--", relpath)
        for variant in [*session.shown.values(), *session.hidden]:
            leaks += _leaks(variant, "the note", note)
            leaks += _leaks(variant, "its file name", relpath)
            leaks += _leaks(variant, "git history", history)
            leaks += _leaks(variant, "hooks.log", session.log)
    for variant in VARIANTS:
        leaks += _leaks(variant, "commit messages", messages)
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks[:30])


def _grams(text: str, size: int = 12) -> set[str]:
    out = set()
    for run in re.findall(f"[a-z0-9]{{{size},}}", text.lower()):
        out.update(run[i : i + size] for i in range(len(run) - size + 1))
    return out


def test_no_secret_anywhere_in_the_store(captured: Captured) -> None:
    """Every file of the store, every cell of index.db and the whole git history, searched for
    every 12 characters in a row of every secret (so a secret cut, re-cased or split is found)."""
    store = captured.store
    texts = [_git(store, "log", "-p", "--all", "--format=%H %an %s%n%b")]
    for path in store.home.rglob("*"):
        if path.is_file() and ".git" not in path.parts and not path.name.startswith("index.db"):
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    connection = sqlite3.connect(store.index_path)
    try:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                for cell in row:
                    if isinstance(cell, bytes):
                        texts.append(cell.decode("latin-1"))
                    elif cell is not None:
                        texts.append(str(cell))
    finally:
        connection.close()
    found = _grams("\n".join(texts))
    leaks = []
    for variant in VARIANTS:
        secret_grams = set()
        for fragment in corpus.fragments(variant.secret):
            secret_grams |= _grams(fragment)
        hit = secret_grams & found
        if hit:
            leaks.append(f"{variant.kind} [{variant.context}]: {sorted(hit)[:2]}")
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks[:30])


def test_a_token_that_opens_the_first_prompt_is_not_the_title(captured: Captured) -> None:
    for session in captured.sessions:
        path = _note_path(captured.store, session)
        title = next(
            line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("title:")
        )
        first = next(iter(session.shown.values()))
        assert not corpus.leaks(first.secret, title), f"{session.kind}: {title}"
        assert not corpus.leaks(first.secret, path.name), f"{session.kind}: {path.name}"


def test_a_note_written_by_a_tool_holds_no_secret(store: Store) -> None:
    """What the MCP `write`/`update` tools and `anamnesis new` store goes through one core place."""
    from anamnesis.store import create_note, update_note

    shaped = [v for v in VARIANTS if v.kind in SHAPED and v.context.startswith("0:") and "\n" not in v.secret]
    token = shaped[0].secret
    note = create_note(
        store, type="semantic", title=f"{token} for the deploy", body=f"use {token}", tags=["ci"]
    )
    update_note(store, note.path, body="\n".join(v.text for v in shaped[:40]), tags=["ci", shaped[1].secret])
    text = (store.memory / note.path).read_text(encoding="utf-8")
    history = _git(store, "log", "-p", "--all")
    leaks = [
        leak for v in shaped[:40] for leak in _leaks(v, "note or git", f"{note.path}\n{text}\n{history}")
    ]
    assert not leaks, "\n".join(leaks[:10])
