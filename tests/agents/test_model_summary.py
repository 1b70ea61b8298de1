"""The opt-in model-written session summary, against the Messages API stand-in.

The "api" provider talks to the stand-in through its base URL setting; the
"claude" provider runs the real Claude Code CLI pointed at the stand-in
(marked e2e). Hooks run as real processes, the summary as the real detached
`python -P -m anamnesis summary run … --hook` they start.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_standin import Reply, StandIn, request_text, text, tool
from conftest import ROOT, RunCli, cli_env
from test_hooks import run_hook
from transcripts import Transcript, typical

from anamnesis.agents.capture import capture_session as capture
from anamnesis.agents.capture import session_note_id
from anamnesis.agents.summarize_model import (
    MARK,
    SECTION,
    clean_output,
    config_of,
    input_hash,
    split_section,
    summarised_input,
    with_section,
)
from anamnesis.base.paths import Store
from anamnesis.store.operations import load_note

SECRET = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
AWS = "AKIAIOSFODNN7EXAMPLE"
KEY_ENV = "ANAMNESIS_TEST_SUMMARY_KEY"
API_KEY = "sk-ant-summary-test-0000"
SUMMARY = "**Done**\n- Raised the pool timeout to 30 s\n\n**Open**\n- Load-test the orders service"


def _session(tmp_path: Path, session_id: str = "sum-1") -> Path:
    """A typical session in which a token and a key were pasted (they must never leave the machine)."""
    t = typical(session_id, cwd=str(tmp_path / "acme-api"))
    t.prompt(f"the CI uses GITHUB_TOKEN={SECRET} and export AWS_ACCESS_KEY_ID={AWS}")
    t.say(f"Noted; I will not print {SECRET} again. Next step: load-test the orders service.")
    return t.write(tmp_path / f"{session_id}.jsonl")


def _payload(transcript: Path, tmp_path: Path, session_id: str = "sum-1") -> dict[str, Any]:
    return {"session_id": session_id, "transcript_path": str(transcript), "cwd": str(tmp_path / "acme-api")}


def _log(store: Store) -> str:
    path = store.log_dir / "hooks.log"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def _note_path(store: Store, session_id: str = "sum-1") -> Path:
    found = sorted(store.memory.rglob(f"*-{session_note_id(session_id)}.md"))
    assert len(found) == 1, found
    return found[0]


def _wait(predicate: Callable[[], bool], what: str, store: Store, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; hooks log:\n{_log(store)}")


@pytest.fixture
def standin() -> Iterator[StandIn]:
    replies: dict[str, Any] = {"delay": 0.0, "reply": SUMMARY}

    def script(body: dict[str, Any]) -> Reply:
        time.sleep(float(replies["delay"]))
        return text(str(replies["reply"]))

    server = StandIn(script).start()
    server.replies = replies  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def _enable_api(run_cli: RunCli, standin: StandIn, *extra: str) -> None:
    done = run_cli(
        "summary", "enable", "--provider", "api", "--base-url", standin.url, "--key-env", KEY_ENV, *extra
    )
    assert done.returncode == 0, done.stderr


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- off by default -------------------------------------------------------------------------


def test_off_by_default_nothing_is_spawned_and_nothing_is_sent(
    store: Store, tmp_path: Path, standin: StandIn
) -> None:
    assert config_of(store).enabled is False
    transcript = _session(tmp_path)
    env = {"ANTHROPIC_BASE_URL": standin.url, "ANTHROPIC_API_KEY": API_KEY, KEY_ENV: API_KEY}
    assert run_hook(store.home, "session-end", _payload(transcript, tmp_path), **env).returncode == 0
    log = _log(store)
    assert "session-end: created" in log and "model summary" not in log
    time.sleep(1.5)  # had anything been started, it would have asked by now
    assert standin.requests == []
    assert SECTION not in _note_path(store).read_text(encoding="utf-8")
    assert not (store.log_dir / "hooks-background.log").exists()
    assert json.loads(store.settings_path.read_text()).get("summary", {}).get("enabled", False) is False


# -- the hook does not wait; the summary arrives later ---------------------------------------


def test_hook_returns_at_once_and_the_summary_arrives_later_without_the_secrets(
    store: Store, tmp_path: Path, standin: StandIn, run_cli: RunCli
) -> None:
    _enable_api(run_cli, standin, "--timeout", "30")
    standin.replies.update(delay=4.0, reply=SUMMARY + f"\n- Rotate {SECRET}")  # type: ignore[attr-defined]
    transcript = _session(tmp_path)
    started = time.monotonic()
    proc = run_hook(store.home, "session-end", _payload(transcript, tmp_path), **{KEY_ENV: API_KEY})
    took = time.monotonic() - started
    assert proc.returncode == 0
    assert took < 4.0, f"the hook waited for the model ({took:.1f} s)"
    note = _note_path(store)
    assert SECTION not in note.read_text(encoding="utf-8")  # not yet: the model is still thinking
    assert "model summary started (pid" in _log(store)

    _wait(lambda: SECTION in note.read_text(encoding="utf-8"), "the model-written section", store)
    _wait(lambda: "summary: written" in _log(store), "the summary's log line", store)
    text_now = note.read_text(encoding="utf-8")
    body = load_note(store, str(note.relative_to(store.memory))).body
    assert body.startswith(SECTION) and "Raised the pool timeout to 30 s" in body
    assert "## Ask" in body and "## Files touched" in body  # the deterministic note is all still there
    assert len(standin.requests) == 1
    # the section names the input it summarises: what was sent, so the same content is not sent again
    assert summarised_input(body) == input_hash(standin.requests[0]["messages"][0]["content"])
    sent = json.dumps(standin.requests[0])
    assert "orders service" in request_text(standin.requests[0])
    for secret in (SECRET, AWS, "16C7e42F292c6912E7710c"):
        assert secret not in sent, "a secret left the machine"
        assert secret not in text_now and secret not in _log(store)
    assert "[REDACTED" in body.split("## Ask")[0]  # the model echoed the token: redacted in the note too
    history = subprocess.run(
        ["git", "-C", str(store.memory), "log", "-p", "--all"], capture_output=True, text=True, check=True
    ).stdout
    assert SECRET not in history and "Summary (model-written)" in history
    assert API_KEY not in _log(store) and API_KEY not in store.settings_path.read_text()


def test_the_same_content_is_never_summarised_twice(
    store: Store, tmp_path: Path, standin: StandIn, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _enable_api(run_cli, standin)
    monkeypatch.setenv(KEY_ENV, API_KEY)
    transcript = _session(tmp_path)
    note = capture(store, transcript, session_id="sum-1", event="PreCompact").path
    assert note
    first = run_cli("summary", "run", note, "--transcript", str(transcript), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["action"] == "written"
    again = run_cli("summary", "run", note, "--transcript", str(transcript), "--json")
    assert json.loads(again.stdout)["action"] == "unchanged"
    assert len(standin.requests) == 1

    # a later capture of the same content keeps the section; of new content, keeps it until redone
    assert capture(store, transcript, session_id="sum-1").action == "unchanged"
    longer = _session(tmp_path)  # the transcript grows: a resumed session appends to it
    with longer.open("a", encoding="utf-8") as handle:
        handle.write(
            Transcript("sum-1", cwd=str(tmp_path / "acme-api")).prompt("Now add a retry test").text()
        )
    assert capture(store, longer, session_id="sum-1").action == "updated"
    body = load_note(store, note).body
    assert body.startswith(SECTION) and "Now add a retry test" in body
    redo = run_cli("summary", "run", note, "--transcript", str(longer), "--json")
    assert json.loads(redo.stdout)["action"] == "written" and len(standin.requests) == 2
    assert load_note(store, note).body.count(SECTION) == 1
    forced = run_cli("summary", "run", note, "--transcript", str(longer), "--force", "--json")
    assert json.loads(forced.stdout)["action"] == "written" and len(standin.requests) == 3


def test_run_by_hand_without_a_transcript_summarises_the_note_itself(
    store: Store, tmp_path: Path, standin: StandIn, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    relpath = capture(store, _session(tmp_path), session_id="sum-1").path
    assert relpath
    _enable_api(run_cli, standin)
    assert run_cli("summary", "disable").returncode == 0  # by hand it runs even when the automatic one is off
    monkeypatch.setenv(KEY_ENV, API_KEY)
    done = run_cli("summary", "run", session_note_id("sum-1"))
    assert done.returncode == 0 and "written" in done.stdout, done.stderr
    sent = request_text(standin.requests[0])
    assert "## Files touched" in sent and "src/pool.py" in sent and SECRET not in sent
    assert load_note(store, relpath).body.startswith(SECTION)


def test_an_edit_made_while_the_model_thinks_is_kept(
    store: Store, tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    transcript = _session(tmp_path)
    relpath = capture(store, transcript, session_id="sum-1").path
    assert relpath
    path = store.memory / relpath

    def script(body: dict[str, Any]) -> Reply:
        with path.open("a", encoding="utf-8") as handle:  # the person edits the note meanwhile
            handle.write("\nMy own remark: the pool size came from the load test.\n")
        return text(SUMMARY)

    server = StandIn(script).start()
    try:
        _enable_api(run_cli, server)
        monkeypatch.setenv(KEY_ENV, API_KEY)
        done = run_cli("summary", "run", relpath, "--transcript", str(transcript))
        assert done.returncode == 0, done.stderr
    finally:
        server.stop()
    body = load_note(store, relpath).body
    assert body.startswith(SECTION) and "My own remark: the pool size came from the load test." in body
    assert "## Ask" in body and body.count(SECTION) == 1


# -- failures leave the note as it was -------------------------------------------------------


@pytest.mark.parametrize("failure", ["unreachable", "slow", "no key"])
def test_a_failing_or_slow_model_leaves_the_note_and_logs_why(
    store: Store, tmp_path: Path, standin: StandIn, run_cli: RunCli, failure: str
) -> None:
    transcript = _session(tmp_path)
    relpath = capture(store, transcript, session_id="sum-1").path
    assert relpath
    before = (store.memory / relpath).read_bytes()
    url = f"http://127.0.0.1:{_closed_port()}" if failure == "unreachable" else standin.url
    done = run_cli(
        "summary", "enable", "--provider", "api", "--base-url", url, "--key-env", KEY_ENV, "--timeout", "1"
    )
    assert done.returncode == 0
    standin.replies.update(delay=3.0)  # type: ignore[attr-defined]
    env = {} if failure == "no key" else {KEY_ENV: API_KEY}
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "anamnesis",
            "summary",
            "run",
            relpath,
            "--transcript",
            str(transcript),
            "--hook",
        ],
        capture_output=True,
        text=True,
        env=cli_env(store.home, **env),
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == ""  # a detached job reports to the log
    assert time.monotonic() - started < 15
    assert (store.memory / relpath).read_bytes() == before
    log = _log(store)
    want = {
        "unreachable": "cannot reach the API",
        "slow": "gave no answer within 1 s",
        "no key": f"the environment variable {KEY_ENV} is not set",
    }[failure]
    assert f"summary: FAILED for {relpath}: " in log and want in log, log
    assert "the session note is as it was" in log
    by_hand = run_cli(
        "summary", "run", relpath, "--transcript", str(transcript), env=cli_env(store.home, **env)
    )
    assert by_hand.returncode == 1 and want in by_hand.stderr and by_hand.stderr.count("\n") == 1
    assert (store.memory / relpath).read_bytes() == before


def test_a_failure_through_the_hook_reaches_the_log(store: Store, tmp_path: Path, run_cli: RunCli) -> None:
    done = run_cli(
        "summary", "enable", "--provider", "api", "--base-url", f"http://127.0.0.1:{_closed_port()}"
    )
    assert done.returncode == 0
    transcript = _session(tmp_path)
    assert (
        run_hook(
            store.home, "session-end", _payload(transcript, tmp_path), ANTHROPIC_API_KEY=API_KEY
        ).returncode
        == 0
    )
    before = _note_path(store).read_bytes()
    _wait(lambda: "summary: FAILED" in _log(store), "the failure's log line", store)
    assert "cannot reach the API" in _log(store)
    assert _note_path(store).read_bytes() == before


# -- settings and the CLI ------------------------------------------------------------------


def test_enable_status_disable_and_keys_stay_out_of_memory(
    store: Store, tmp_path: Path, run_cli: RunCli
) -> None:
    status = run_cli("summary", "status", "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["enabled"] is False
    key_file = tmp_path / "anthropic.key"
    key_file.write_text(API_KEY + "\n")
    key_file.chmod(0o600)
    done = run_cli("summary", "enable", "--provider", "api", "--key-file", str(key_file), "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["enabled"] is True and info["problem"] is None and info["key_from"] == f"file {key_file}"
    assert API_KEY not in done.stdout and API_KEY not in store.settings_path.read_text()
    assert oct(store.settings_path.stat().st_mode & 0o777) == "0o600"

    inside = store.memory / "key.txt"
    refused = run_cli("summary", "enable", "--provider", "api", "--key-file", str(inside))
    assert refused.returncode == 2 and "synced by git" in refused.stderr
    for bad, words in (
        (["--provider", "gpt"], "unknown provider"),
        (["--provider", "api", "--key-env", API_KEY + "=x"], "not an environment variable name"),
        (["--provider", "api", "--base-url", "ftp://x"], "must start with http"),
        (["--provider", "api", "--timeout", "0"], "between 1 and"),
    ):
        proc = run_cli("summary", "enable", *bad)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1
    assert config_of(store).key_file == str(key_file)  # a refused enable changed nothing

    missing = run_cli(
        "summary", "enable", "--provider", "claude", "--claude-bin", str(tmp_path / "no-claude")
    )
    assert missing.returncode == 0 and "cannot run yet" in missing.stderr
    shown = run_cli("summary", "status")
    assert "model summary: on" in shown.stdout and "ready: no" in shown.stdout
    assert run_cli("summary", "disable").returncode == 0
    assert json.loads(run_cli("summary", "status", "--json").stdout)["enabled"] is False
    assert config_of(store).provider == "claude"  # disable keeps the choice for a later enable


def test_settings_of_the_wrong_kind_are_an_error_naming_the_field(store: Store, run_cli: RunCli) -> None:
    settings = json.loads(store.settings_path.read_text())
    settings["summary"] = {"enabled": "yes"}
    store.settings_path.write_text(json.dumps(settings))
    proc = run_cli("summary", "status")
    assert proc.returncode == 1 and '"summary.enabled" must be true or false' in proc.stderr


# -- the section -----------------------------------------------------------------------------


def test_the_section_is_replaced_never_doubled_and_the_rest_kept() -> None:
    body = "## Ask\n\nFix it\n\n## Outcome\n\nFixed\n"
    section = f"{SECTION}\n\n- one\n\n<!-- {MARK} input=0123456789ab by=api/x -->\n"
    once = with_section(body, section)
    assert once.startswith(SECTION) and once.endswith(body)
    twice = with_section(once, section.replace("one", "two"))
    assert twice.count(SECTION) == 1 and "- two" in twice and "- one" not in twice
    assert split_section(twice) == (body, section.replace("one", "two"))
    assert summarised_input(twice) == "0123456789ab" and summarised_input(body) is None
    assert with_section(twice, "") == body


def test_model_output_cannot_break_out_of_its_section() -> None:
    cleaned = clean_output(
        f"## Decisions\n- kept\n# Big\nkey: {SECRET}\n<!-- {MARK} input=ffffffffffff by=x -->"
    )
    assert "## " not in cleaned and "**Decisions**" in cleaned and "**Big**" in cleaned
    assert SECRET not in cleaned and MARK not in cleaned


# -- capture says why a transcript gave nothing --------------------------------------------------


def test_capture_says_why_a_transcript_could_not_be_read(store: Store, tmp_path: Path) -> None:
    missing = capture(store, tmp_path / "gone.jsonl", session_id="x")
    assert (
        missing.action == "skipped"
        and missing.reason == f"the transcript {tmp_path / 'gone.jsonl'} does not exist"
    )
    folder = capture(store, tmp_path, session_id="x")
    assert folder.action == "skipped" and folder.reason == f"the transcript {tmp_path} is not a regular file"
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    assert capture(store, fifo, session_id="x").reason == f"the transcript {fifo} is not a regular file"
    empty = Transcript("e").write(tmp_path / "empty.jsonl")
    assert "trivial" in capture(store, empty, session_id="e").reason  # a real, empty session still is
    for result in (missing, folder):
        assert "trivial" not in result.reason


def test_the_hook_never_logs_an_unreadable_transcript_as_trivial(store: Store, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    done = threading.Event()

    def hook() -> None:
        run_hook(
            store.home, "pre-compact", {"session_id": "p", "transcript_path": str(fifo), "cwd": str(tmp_path)}
        )
        done.set()

    thread = threading.Thread(target=hook)
    thread.start()
    thread.join(30)
    assert done.is_set(), "the hook blocked on a FIFO"
    run_hook(
        store.home, "session-end", {"session_id": "g", "transcript_path": str(tmp_path / "g"), "cwd": "/"}
    )
    log = _log(store)
    assert f"the transcript {fifo} is not a regular file" in log
    assert f"the transcript {tmp_path / 'g'} does not exist" in log
    assert "trivial" not in log


# -- the "claude" provider with the real Claude Code CLI --------------------------------------------


@pytest.mark.e2e
def test_claude_provider_runs_real_claude_code_headless(tmp_path: Path) -> None:
    from test_claude_e2e import World

    world = World(tmp_path)
    assert world.anamnesis("init").returncode == 0
    enabled = world.anamnesis("summary", "enable", "--provider", "claude", "--claude-bin", world.claude)
    assert enabled.returncode == 0, enabled.stderr
    hello = world.project / "hello.py"
    session = str(uuid.uuid4())

    def script(body: dict[str, Any]) -> Reply:
        sent = request_text(body)
        if "summary of a coding session" in sent:
            return text("**Done**\n- Created hello.py that prints a greeting")
        if "Write" in json.dumps(body.get("tools") or []) and "tool_result" not in json.dumps(
            body["messages"]
        ):
            return tool("Write", {"file_path": str(hello), "content": "print('hi')\n"})
        return text("Created hello.py.")

    standin = StandIn(script).start()
    try:
        prompt = f"Create hello.py that prints a greeting; the deploy key is {SECRET}"
        run = world.run_claude(
            "-p", prompt, "--permission-mode", "acceptEdits", "--session-id", session, standin=standin
        )
        assert run.returncode == 0, run.stderr
        note = world.store / "memory"
        found: list[Path] = []

        def summarised() -> bool:
            found[:] = [p for p in note.rglob("*.md") if SECTION in p.read_text(encoding="utf-8")]
            return bool(found)

        world.wait_for(summarised, "the model-written section", seconds=120)
        world.wait_for(lambda: "summary: written" in world.hooks_log(), "the summary's log line")
    finally:
        standin.stop()
    asked = [b for b in standin.requests if "summary of a coding session" in request_text(b)]
    assert len(asked) == 1
    assert not asked[0].get("tools")  # no tools: the summary run can read nothing and change nothing
    assert SECRET not in json.dumps(asked[0])  # the session's own requests had it: the user typed it
    assert "hello.py" in request_text(asked[0])
    text_now = found[0].read_text(encoding="utf-8")
    assert "Created hello.py that prints a greeting" in text_now and SECRET not in text_now
    assert "<!-- anamnesis:model-summary input=" in text_now and "by=claude/haiku" in text_now
    assert asked[0].get("model") and "haiku" in str(asked[0]["model"]).lower()
    # the headless run fired no hooks of its own: one session, one note, one capture
    log = world.hooks_log()
    assert log.count("session-end:") == 1, log
    sessions = [p for p in world.notes() if "sessions" in p.parts]
    assert [p.name for p in sessions] == [found[0].name] and session_note_id(session) in found[0].name
