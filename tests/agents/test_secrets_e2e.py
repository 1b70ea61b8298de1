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

Then the same with a secret placed across the cut point of every field a note
cuts (see the second half of this module): a cut must never fall inside a
secret that was not redacted first.
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

from anamnesis.agents.capture import session_note_id
from anamnesis.base.paths import Store, open_store
from anamnesis.store.operations import init_store

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


def _session_end(store: Store, session_id: str, transcript: Path, project: Path, *, real: bool) -> str:
    """Run the SessionEnd hook on a transcript (as a real process, or its `main` in this process:
    what is written is the same, the start is not); the lines it added to hooks.log."""
    payload = {
        "session_id": session_id,
        "transcript_path": str(transcript),
        "cwd": str(project),
        "hook_event_name": "SessionEnd",
        "reason": "prompt_input_exit",
    }
    log = store.log_dir / "hooks.log"
    before = log.stat().st_size if log.exists() else 0
    proc = run_hook_process(
        "session-end", json.dumps(payload), cli_env(store.home), timeout=120, real_process=real
    )
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
    with open(log, encoding="utf-8") as handle:
        handle.seek(before)
        added = handle.read()
    assert "session-end: created" in added, added
    return added


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
    for number, kind in enumerate(sorted(by_kind)):
        session = _session(kind, by_kind[kind], project, number)
        # Every REAL_EVERY-th session goes through the hook process exactly as Claude Code starts it.
        real = number % REAL_EVERY == 0
        session.log = _session_end(store, session.session_id, session.transcript, project, real=real)
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


# What a commit says, without the object ids git prints: a 40-digit hex id holds, by chance, a
# short all-digit secret (a six-digit PIN) often enough to fail a run now and then.
_IDS = re.compile(r"^(?:commit [0-9a-f]{40}.*|index [0-9a-f]+\.\.[0-9a-f]+.*)$", re.MULTILINE)


def _history(store: Store, *args: str) -> str:
    """`git log` of the memory repo as text to search for secrets: authors, messages and diffs."""
    return _IDS.sub("", _git(store, "log", "--all", "--format=%an <%ae>%n%s%n%b", *args))


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
    messages = _history(captured.store)
    for session in captured.sessions:
        path = _note_path(captured.store, session)
        note = path.read_text(encoding="utf-8")
        relpath = str(path.relative_to(captured.store.memory))
        history = _history(captured.store, "-p", "--", relpath)
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


def _store_texts(store: Store) -> dict[str, str]:
    """Every text the store holds, by where: each file and its name, `git log -p` with the commit
    messages, the reflog, and every cell of every table of index.db."""
    out = {
        "git log -p": _history(store, "-p"),
        "git reflog": _git(store, "reflog"),
    }
    for path in store.home.rglob("*"):
        relpath = str(path.relative_to(store.home))
        out[f"the name {relpath}"] = relpath
        if path.is_file() and ".git" not in path.parts and not path.name.startswith("index.db"):
            out[relpath] = path.read_bytes().decode("utf-8", "replace")
    connection = sqlite3.connect(store.index_path)
    try:
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        cells = []
        for table in tables:
            for row in connection.execute(f'SELECT * FROM "{table}"'):
                cells += [c.decode("latin-1") if isinstance(c, bytes) else str(c) for c in row if c is not None]
        out["index.db"] = "\n".join(cells)
    finally:
        connection.close()
    return out


def test_no_secret_anywhere_in_the_store(captured: Captured) -> None:
    """Every file of the store, every cell of index.db and the whole git history, searched for
    every 12 characters in a row of every secret (so a secret cut, re-cased or split is found)."""
    found = _grams("\n".join(_store_texts(captured.store).values()))
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
    assert captured.sessions
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
    from anamnesis.store.operations import create_note, update_note

    shaped = [v for v in VARIANTS if v.kind in SHAPED and v.context.startswith("0:") and "\n" not in v.secret]
    token = shaped[0].secret
    note = create_note(
        store, type="semantic", title=f"{token} for the deploy", body=f"use {token}", tags=["ci"]
    )
    update_note(store, note.path, body="\n".join(v.text for v in shaped[:40]), tags=["ci", shaped[1].secret])
    text = (store.memory / note.path).read_text(encoding="utf-8")
    history = _history(store, "-p")
    leaks = [
        leak for v in shaped[:40] for leak in _leaks(v, "note or git", f"{note.path}\n{text}\n{history}")
    ]
    assert not leaks, "\n".join(leaks[:10])


# ---------------------------------------------------------------------------
# A secret that a line cut would fall inside never leaks: every field is redacted whole first.
#
# Each field a session note makes from a transcript is cut somewhere: the title
# at 90 characters and its file name (slug) at 60, later prompts and commands at
# 200, decision, open-item and plan lines at 200, a failing command at 120 inside
# its open item, an MCP call's question and answer at 200, a failed call's target
# at 120, the Ask at 1,500, the Outcome at 2,000, an assistant text at 8,000. One
# session per kind of secret and cut offset puts a secret across the cut point of
# every one of them (2 characters in, half way, 2 characters from its end), runs
# the SessionEnd hook as Claude Code runs it (one session in four as a real
# process), and then looks for any 8 characters in a row of any secret in the
# note, its file name, the commit messages and `git log -p`, hooks.log, every
# state file and every cell of index.db.

WINDOW = 8  # a leak is any 8 characters in a row of a secret's random part
CUT_REAL_EVERY = 4
_rng = random.Random(20261127)
_gen = corpus._Gen(20261127)


@dataclass(frozen=True)
class Kind:
    """A secret in its context: `core` (the random part) sits at `text[at:]`."""

    name: str
    text: str
    core: str

    @property
    def at(self) -> int:
        return self.text.index(self.core)


def _pw(n: int) -> str:
    return _gen.password(n)


def _kinds() -> list[Kind]:
    mysql = _gen.chars("b64u", 16)
    dd = _gen.chars("hex", 40)
    https = _gen.chars("b62", 22)
    dbpw = _gen.chars("b62", 6) + "#" + _gen.chars("b62", 9)
    django = _gen.chars("django", 50)
    fed = _pw(18)
    heredoc = _pw(16)
    rsa = _gen.body("rsa", 600).replace("\n", "")
    pgp = _gen.body("pgp", 200).replace("\n", "")
    return [
        Kind("mysql-url", f"mysql://shop_admin:{mysql}@db.internal:3306/shop", mysql),
        Kind("datadog-app-key", f"DD-APPLICATION-KEY: {dd}", dd),
        Kind("https-userinfo", f"https://jdoe:{https}@git.example.com/acme/api.git", https),
        Kind("db-password", f'db_password = "{dbpw}"', dbpw),
        Kind("django-secret-key", f"SECRET_KEY = '{django}'", django),
        Kind("sudo-fed", f"echo '{fed}' | sudo -S systemctl restart nginx", fed),
        Kind("passwd-here-string", f"passwd deploy <<< '{heredoc}'", heredoc),
        Kind(
            "rsa-private-key",
            f"-----BEGIN RSA PRIVATE KEY----- {rsa[:64]} {rsa[64:128]} {rsa[128:192]} -----END RSA PRIVATE KEY-----",
            rsa[:64],
        ),
        Kind(
            "pgp-private-key",
            f"-----BEGIN PGP PRIVATE KEY BLOCK----- {pgp[:64]} {pgp[64:128]} -----END PGP PRIVATE KEY BLOCK-----",
            pgp[:64],
        ),
    ]


KINDS = _kinds()
OFFSETS = ("start", "middle", "end")


def _filler(n: int) -> str:
    """`n` characters of plain words (single spaces, no sentence end, no cue words)."""
    words = "the loader reads invoice rows from the replica and keeps their order while batching them".split()
    out = ""
    while len(out) < n:
        out += _rng.choice(words) + " "
    out = out[:n]
    return out[:-1] + " " if out else out  # the secret's text starts a word


def across(kind: Kind, cut: int, offset: str, lead: str = "") -> str:
    """`lead` + filler + the secret's text, so that character `cut` of the result falls inside its core."""
    into = {"start": 2, "middle": len(kind.core) // 2, "end": len(kind.core) - 2}[offset]
    before = max(0, cut - kind.at - into - len(lead))  # a long secret's end may not reach back far enough
    text = lead + _filler(before) + kind.text
    assert text.index(kind.core) < cut < text.index(kind.core) + len(kind.core)
    return text


@dataclass
class CutSession:
    kind: Kind
    offset: str
    session_id: str
    transcript: Path
    log: str = ""
    fields: list[str] = field(default_factory=list)


def _cut_session(kind: Kind, offset: str, number: int, folder: Path, project: Path) -> CutSession:
    t = Transcript(f"cut-{number}-{kind.name}-{offset}", cwd=str(project), branch="main")
    session = CutSession(kind, offset, t.session_id, folder / f"cut-{number}.jsonl")
    slug_fits = kind.at + len(kind.core) < 59
    title_cut = 59 if number % 2 and slug_fits else 89  # the slug (60) or the title (90)
    t.prompt(across(kind, title_cut, offset) + "\n\n" + across(kind, 1498, offset))  # title, Ask
    t.say("I'll look into it.")
    t.prompt(across(kind, 199, offset))  # a later prompt
    t.bash(across(kind, 199, offset, "cd /srv && "), "ok")  # a command
    t.tool(
        "TodoWrite",
        {"todos": [{"content": across(kind, 199, offset), "status": "pending", "activeForm": "x"}]},
        "Todos have been modified successfully.",
    )
    t.mcp("search", "query", {"query": across(kind, 199, offset)}, across(kind, 199, offset))  # MCP call
    t.failed_tool(
        "Edit",
        {
            "file_path": f"{project}/" + across(kind, 119 - len(str(project)) - 1, offset),
            "old_string": "a",
            "new_string": "b",
            "replace_all": False,
        },
        "File has not been read yet. Read it first before writing to it.",
    )
    t.failed_bash(across(kind, 119, offset, "make deploy ARGS='") + "'", "deploy failed")  # failing command
    long_text = across(kind, 7999, offset, "Some notes on the loader.\n\n- [ ] ")  # an assistant text cut at 8,000
    t.say(long_text + "\n\nMore text after it.")
    t.say(
        "- Decided to " + across(kind, 199 - len("Decided to "), offset) + "\n"  # a decision line
        "- [ ] " + across(kind, 199, offset) + "\n\n"  # an open item line
        + across(kind, 1999, offset)  # the last reply: the Outcome
    )
    t.write(session.transcript)
    return session


@dataclass
class CutCaptured:
    store: Store
    sessions: list[CutSession]


@pytest.fixture(scope="module")
def cut_captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CutCaptured]:
    base = tmp_path_factory.mktemp("secrets-cut")
    store = open_store(base / "home")
    init_store(store)
    project = base / "acme-api"
    project.mkdir()
    sessions = []
    for number, (kind, offset) in enumerate((kind, offset) for kind in KINDS for offset in OFFSETS):
        session = _cut_session(kind, offset, number, base, project)
        real = number % CUT_REAL_EVERY == 0
        session.log = _session_end(store, session.session_id, session.transcript, project, real=real)
        sessions.append(session)
    # The next session starts and recalls: what it is shown is kept in state/sessions/<id>.json.
    for event, extra in (("session-start", {"source": "startup"}), ("user-prompt-submit", {"prompt": _filler(80)})):
        payload = {"session_id": "next-session", "cwd": str(project), "hook_event_name": event, **extra}
        proc = run_hook_process(event, json.dumps(payload), cli_env(store.home), timeout=120, real_process=True)
        assert proc.returncode == 0, proc.stderr
    assert (store.state_dir / "sessions" / "next-session.json").exists()
    yield CutCaptured(store, sessions)


def _windows(core: str) -> set[str]:
    return {core[i : i + WINDOW].lower() for i in range(len(core) - WINDOW + 1)}


def test_the_secrets_were_in_the_notes_at_their_cut_points(cut_captured: CutCaptured) -> None:
    """The check below means something: the fields were made, with the secrets where the cuts are."""
    notes = list((cut_captured.store.memory / "projects").rglob("*.md"))
    assert len(notes) == len(KINDS) * len(OFFSETS)
    body = "\n".join(p.read_text(encoding="utf-8") for p in notes)
    for section in ("## Outcome", "**Not done:** Edit of", "## MCP calls", "## Decisions", "## Open items"):
        assert body.count(section) == len(notes), section
    assert body.count("still fails at the end of the session") == len(notes)
    assert "[REDACTED" in body


def test_no_secret_cut_at_any_field_leaks_anywhere(cut_captured: CutCaptured) -> None:
    texts = _store_texts(cut_captured.store)
    leaks = []
    for session in cut_captured.sessions:
        windows = _windows(session.kind.core)
        for where, text in texts.items():
            low = text.lower()
            hit = next((w for w in windows if w in low), None)
            if hit:
                leaks.append(f"{session.kind.name} ({session.offset}) in {where}: {hit!r}")
        hit = next((w for w in windows if w in session.log.lower()), None)
        if hit:
            leaks.append(f"{session.kind.name} ({session.offset}) in its hooks.log lines: {hit!r}")
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(sorted(set(leaks))[:40])
