"""Session capture into one episodic note per session, with a real store and real git."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from transcripts import SECRETS, Transcript, typical

from anamnesis.agents.capture import capture_session as capture
from anamnesis.agents.capture import session_note_id
from anamnesis.agents.transcript import MEMORY_CLOSE, MEMORY_OPEN
from anamnesis.base.paths import Store
from anamnesis.store.operations import load_note


def _git_log(store: Store) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(store.memory), "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    return out.stdout.splitlines()


def _repo(tmp_path: Path, name: str = "acme-api") -> Path:
    """A project checkout with an origin remote, so the project key is the remote's."""
    repo = tmp_path / name
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", f"git@github.com:acme/{name}.git"], check=True
    )
    return repo


def test_capture_writes_one_note(store: Store, tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    path = typical("sess-1", cwd=str(repo)).write(tmp_path / "t.jsonl")
    result = capture(store, path, session_id="sess-1", cwd=str(repo))
    assert result.action == "created"
    assert result.path is not None
    assert result.path.startswith("projects/github.com-acme-acme-api/sessions/")
    assert result.path.endswith(f"-{session_note_id('sess-1')}.md")
    note = load_note(store, result.path)
    assert note.type == "episodic"
    assert note.project == "github.com/acme/acme-api"
    assert note.title == "Fix the connection pool timeout in the orders service"
    assert note.extra["session_id"] == "sess-1"
    assert note.extra["branch"] == "fix/db-pool"
    assert note.extra["files"] == ["src/pool.py", "src/orders.py"]
    body = note.body
    assert "## Ask" in body and "Fix the connection pool timeout" in body
    assert "`src/pool.py` (write)" in body and "`src/orders.py` (edit)" in body
    assert "`pytest -q tests/test_orders.py`" in body
    assert "## Outcome" in body and "tests pass" in body
    assert "branch `fix/db-pool`" in body
    assert _git_log(store)[0].endswith("(SessionEnd)")
    assert not subprocess.run(
        ["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True
    ).stdout.strip()


def test_precompact_then_session_end_update_the_same_note(store: Store, tmp_path: Path) -> None:
    t = typical("sess-2")
    path = t.write(tmp_path / "t.jsonl")
    first = capture(store, path, session_id="sess-2", event="PreCompact")
    again = capture(store, path, session_id="sess-2", event="PreCompact")
    assert again.action == "unchanged" and again.path == first.path
    t.compact()
    t.prompt("Now also raise the pool size in staging")
    t.edit_file("/home/dev/acme-api/deploy/staging.yaml", "20", "40")
    t.say("Staging now uses 40.")
    t.write(path)
    final = capture(store, path, session_id="sess-2", event="SessionEnd")
    assert final.action == "updated" and final.path == first.path
    sessions = list((store.memory / "projects").rglob("*.md"))
    assert len(sessions) == 1
    note = load_note(store, first.path or "")
    assert "Now also raise the pool size in staging" in note.body
    assert "deploy/staging.yaml" in note.body
    assert "1 compaction" in note.body
    assert note.body.count("## Outcome") == 1 and "Staging now uses 40." in note.body


def test_resumed_session_keeps_its_note(store: Store, tmp_path: Path) -> None:
    """A resumed session's transcript starts with the original session's lines: same note."""
    t = typical("orig")
    path = t.write(tmp_path / "orig.jsonl")
    first = capture(store, path, session_id="orig")
    resumed = Transcript("orig")
    resumed.lines = list(t.lines)
    resumed.session_id = "resumed-id"
    resumed.prompt("continue: add a test for the pool")
    resumed.write_file("/home/dev/acme-api/tests/test_pool.py")
    second = capture(store, resumed.write(tmp_path / "resumed.jsonl"), session_id="resumed-id")
    assert second.path == first.path and second.action == "updated"
    assert "tests/test_pool.py" in load_note(store, first.path or "").body


def test_trivial_sessions_are_skipped(store: Store, tmp_path: Path) -> None:
    empty = Transcript("e").write(tmp_path / "empty.jsonl")
    assert capture(store, empty, session_id="e").action == "skipped"
    hi = Transcript("h").prompt("hi").say("Hello! How can I help?").write(tmp_path / "hi.jsonl")
    assert capture(store, hi, session_id="h").action == "skipped"
    meta_only = Transcript("m").meta("<local-command-caveat>x</local-command-caveat>")
    meta_only.prompt("<command-name>/clear</command-name>")
    assert capture(store, meta_only.write(tmp_path / "m.jsonl"), session_id="m").action == "skipped"
    # small talk, however long: nothing in it a later session could use
    chat = Transcript("c").prompt("morning! how's it going?").say("Good morning! Ready when you are.")
    chat.prompt("nothing yet, waiting for coffee :) thanks").say("Enjoy the coffee!")
    assert capture(store, chat.write(tmp_path / "chat.jsonl"), session_id="c").action == "skipped"
    missing = capture(store, tmp_path / "missing.jsonl", session_id="x")
    assert missing.action == "skipped"
    assert not (store.memory / "projects").exists()


def test_a_question_without_tools_is_captured(store: Store, tmp_path: Path) -> None:
    t = Transcript("q").prompt("Why does the orders service retry three times before failing?")
    t.say("Because RetryPolicy defaults to 3 attempts.")
    assert capture(store, t.write(tmp_path / "q.jsonl"), session_id="q").action == "created"


def test_injected_memory_is_never_captured(store: Store, tmp_path: Path) -> None:
    t = typical("inj")
    t.lines.insert(
        0, Transcript("inj").attachment(f"{MEMORY_OPEN}\nPREF-MARKER-TEXT\n{MEMORY_CLOSE}").lines[0]
    )
    t.prompt(f"{MEMORY_OPEN}\nRECALL-MARKER-TEXT\n{MEMORY_CLOSE}\nand one more thing to do please")
    result = capture(store, t.write(tmp_path / "t.jsonl"), session_id="inj")
    text = (store.memory / (result.path or "")).read_text()
    assert "PREF-MARKER-TEXT" not in text and "RECALL-MARKER-TEXT" not in text
    assert MEMORY_OPEN not in text
    assert "and one more thing to do please" in text


def test_no_secret_reaches_the_note_or_git(store: Store, tmp_path: Path) -> None:
    t = Transcript("sec", cwd="/home/dev/acme-api")
    t.prompt("Set up the deploy. Credentials:\n" + "\n".join(text for _k, text, _s in SECRETS))
    for _kind, text, _secret in SECRETS:
        t.bash(f"echo '{text}' >> .env")
        t.prompt(f"also note {text}")
    t.write_file("/home/dev/acme-api/.env", "\n".join(text for _k, text, _s in SECRETS))
    t.say("Configured with " + " and ".join(text for _k, text, _s in SECRETS))
    result = capture(store, t.write(tmp_path / "t.jsonl"), session_id="sec")
    assert result.action == "created"
    text = (store.memory / (result.path or "")).read_text()
    history = subprocess.run(
        ["git", "-C", str(store.memory), "log", "-p", "--all"], capture_output=True, text=True, check=True
    ).stdout
    for kind, _text, secret in SECRETS:
        assert secret not in text, f"{kind} reached the note"
        assert secret not in history, f"{kind} reached git"
    assert "[REDACTED" in text


def test_front_matter_is_redacted_too(store: Store, tmp_path: Path) -> None:
    token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    t = Transcript("fm", cwd="/home/dev/acme-api", branch=f"ci/{token}")
    t.prompt("rotate the deploy keys")
    t.write_file(f"/home/dev/acme-api/keys/{token}.json", "{}")
    result = capture(store, t.write(tmp_path / "t.jsonl"), session_id="fm")
    text = (store.memory / (result.path or "")).read_text()
    assert token not in text and "branch: ci/[REDACTED:github-token]" in text


def test_lone_surrogates_in_the_transcript_do_not_lose_the_note(store: Store, tmp_path: Path) -> None:
    # A string cut in the middle of an emoji is written as a lone "\\ud83d" escape: it is valid
    # JSON but cannot be encoded as UTF-8, and must not make the whole capture fail.
    t = Transcript("sur", cwd="/home/dev/acme-api")
    t.prompt("fix the emoji bug \ud83d in the greeting")
    t.bash("echo \ude00")
    t.write_file("/home/dev/acme-api/greet\ud83d.py", "x")
    t.say("Fixed it \ud83d")
    result = capture(store, t.write(tmp_path / "t.jsonl"), session_id="sur")
    assert result.action == "created"
    text = (store.memory / (result.path or "")).read_text(encoding="utf-8")
    assert "fix the emoji bug \ufffd in the greeting" in text and "Fixed it \ufffd" in text


def test_capture_is_off_when_settings_say_so(store: Store, tmp_path: Path) -> None:
    from anamnesis.base.settings import load_settings, save_settings

    settings = load_settings(store)
    settings["capture"]["enabled"] = False
    save_settings(store, settings)
    result = capture(store, typical("off").write(tmp_path / "t.jsonl"), session_id="off")
    assert result.action == "skipped" and "off" in result.reason


def test_big_session_note_stays_small(store: Store, tmp_path: Path) -> None:
    t = Transcript("big").prompt("x" * 50_000)
    for i in range(300):
        t.prompt(f"prompt number {i} " + "y" * 500)
        t.write_file(f"/w/file_{i}.py")
        t.bash(f"run step {i} " + "z" * 500)
    t.say("w" * 50_000)
    result = capture(store, t.write(tmp_path / "t.jsonl"), session_id="big")
    note = load_note(store, result.path or "")
    assert len(note.body) < 30_000
    assert "and 280 more" in note.body
    assert "and 240 more files" in note.body
    assert len(note.extra["files"]) == 60


@pytest.mark.parametrize("event", ["PreCompact", "SessionEnd"])
def test_note_is_indexed(store: Store, tmp_path: Path, event: str) -> None:
    from anamnesis.search.engine import search as search_notes
    from anamnesis.search.index import open_index

    capture(store, typical("idx").write(tmp_path / "t.jsonl"), session_id="idx", event=event)
    with open_index(store) as index:
        hits = search_notes(index, "connection pool timeout", type="episodic")
    assert [h.id for h in hits] == [session_note_id("idx")]
    data = json.loads(json.dumps(hits[0].to_dict()))
    assert "session" in data["tags"]


def test_the_files_a_note_is_about_are_those_the_session_left_changed(store: Store, tmp_path: Path) -> None:
    t = Transcript("files-left", cwd="/w/acme")
    t.prompt("Tidy up the parser and its config")
    t.edit_file("/w/acme/src/parser.py", "split(',')", "csv.reader(line)")
    t.edit_file("/w/acme/config/http.toml", "timeout = 10", "timeout = 30")
    t.bash("git checkout -- config/http.toml")  # put back
    t.write_file("/w/acme/scratch.txt", "notes")
    t.bash("rm scratch.txt")  # gone again
    t.say("The parser reads quoted fields now.")
    done = capture(store, t.write(tmp_path / "files.jsonl"), session_id="files-left")
    note = load_note(store, done.path or "")
    assert note.extra["files"] == ["src/parser.py"], note.extra["files"]
    assert "config/http.toml` (edit, reverted)" in note.body  # the note still tells what happened
