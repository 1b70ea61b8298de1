"""A secret that a line cut would fall inside never leaks: every field is redacted whole first.

Each field a session note makes from a transcript is cut somewhere: the title
at 90 characters and its file name (slug) at 60, later prompts and commands at
200, decision, open-item and plan lines at 200, a failing command at 120 inside
its open item, an MCP call's question and answer at 200, a failed call's target
at 120, the Ask at 1,500, the Outcome at 2,000, an assistant text at 8,000. One
session per kind of secret and cut offset puts a secret across the cut point of
every one of them (2 characters in, half way, 2 characters from its end), runs
the SessionEnd hook as Claude Code runs it (one session in four as a real
process), and then looks for any 8 characters in a row of any secret in the
note, its file name, the commit messages and `git log -p`, hooks.log, every
state file and every cell of index.db.
"""

from __future__ import annotations

import json
import random
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import cli_env
from data.secrets import corpus
from procs import run_hook_process
from transcripts import Transcript

from anamnesis.paths import Store, open_store
from anamnesis.store import init_store

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("secrets-cut")]

WINDOW = 8  # a leak is any 8 characters in a row of a secret's random part
REAL_EVERY = 4
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
class Session:
    kind: Kind
    offset: str
    session_id: str
    transcript: Path
    log: str = ""
    fields: list[str] = field(default_factory=list)


def _session(kind: Kind, offset: str, number: int, folder: Path, project: Path) -> Session:
    t = Transcript(f"cut-{number}-{kind.name}-{offset}", cwd=str(project), branch="main")
    session = Session(kind, offset, t.session_id, folder / f"cut-{number}.jsonl")
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
class Captured:
    store: Store
    sessions: list[Session]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Captured]:
    base = tmp_path_factory.mktemp("secrets-cut")
    home = base / "home"
    store = open_store(home)
    init_store(store)
    project = base / "acme-api"
    project.mkdir()
    log = store.log_dir / "hooks.log"
    sessions = []
    number = 0
    for kind in KINDS:
        for offset in OFFSETS:
            session = _session(kind, offset, number, base, project)
            payload = {
                "session_id": session.session_id,
                "transcript_path": str(session.transcript),
                "cwd": str(project),
                "hook_event_name": "SessionEnd",
                "reason": "prompt_input_exit",
            }
            before = log.stat().st_size if log.exists() else 0
            proc = run_hook_process(
                "session-end", json.dumps(payload), cli_env(home), timeout=120, real_process=number % REAL_EVERY == 0
            )
            assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr
            with open(log, encoding="utf-8") as handle:
                handle.seek(before)
                session.log = handle.read()
            assert "session-end: created" in session.log, session.log
            sessions.append(session)
            number += 1
    yield Captured(store, sessions)


def _windows(core: str) -> set[str]:
    return {core[i : i + WINDOW].lower() for i in range(len(core) - WINDOW + 1)}


def _everything(store: Store) -> dict[str, str]:
    """Every text the store holds: files (names too), git history and messages, index cells."""
    out: dict[str, str] = {}
    git = ["git", "-C", str(store.memory)]
    out["git log -p"] = subprocess.run(
        [*git, "log", "-p", "--all", "--format=%H %an %s%n%b"], capture_output=True, text=True, check=True
    ).stdout
    out["git reflog"] = subprocess.run([*git, "reflog"], capture_output=True, text=True, check=True).stdout
    for path in store.home.rglob("*"):
        relpath = str(path.relative_to(store.home))
        out[f"name {relpath}"] = relpath
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


def test_the_secrets_were_in_the_notes_at_their_cut_points(captured: Captured) -> None:
    """The check below means something: the fields were made, with the secrets where the cuts are."""
    notes = list((captured.store.memory / "projects").rglob("*.md"))
    assert len(notes) == len(KINDS) * len(OFFSETS)
    body = "\n".join(p.read_text(encoding="utf-8") for p in notes)
    for section in ("## Outcome", "**Not done:** Edit of", "## MCP calls", "## Decisions", "## Open items"):
        assert body.count(section) == len(notes), section
    assert body.count("still fails at the end of the session") == len(notes)
    assert "[REDACTED" in body


def test_no_secret_cut_at_any_field_leaks_anywhere(captured: Captured) -> None:
    texts = _everything(captured.store)
    leaks = []
    for session in captured.sessions:
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
