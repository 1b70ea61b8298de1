"""The hook processes exactly as Claude Code runs them: `python -P -m anamnesis.hooks EVENT`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env
from transcripts import typical

from anamnesis.agents.capture import session_note_id
from anamnesis.base.paths import Store
from anamnesis.base.settings import load_settings, save_settings
from anamnesis.store.operations import create_note


def run_hook(
    home: Path, event: str, payload: Any, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-P", "-m", "anamnesis.hooks", event],
        input=stdin,
        capture_output=True,
        text=True,
        env=cli_env(home, **env),
        cwd=cwd,
        timeout=60,
    )


# A package that must never be imported in place of ours (importing it at all is the bug).
SHADOW = 'raise ImportError("the project folder\'s own anamnesis package was imported")\n'


def _shadowing_folder(tmp_path: Path) -> Path:
    """A project folder holding an `anamnesis/` package of its own (as a checkout of this project does)."""
    folder = tmp_path / "shadow"
    (folder / "anamnesis").mkdir(parents=True)
    (folder / "anamnesis" / "__init__.py").write_text(SHADOW)
    return folder


def _log(store: Store) -> str:
    path = store.log_dir / "hooks.log"
    return path.read_text() if path.exists() else ""


def _wait_gone(pid: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError(f"detached process {pid} still running")


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact"])
def test_session_start_prints_context_json(store: Store, tmp_path: Path, source: str) -> None:
    create_note(store, type="preference", title="Prefer small commits", body="One change per commit.")
    proc = run_hook(
        store.home,
        "session-start",
        {
            "session_id": "s",
            "cwd": str(tmp_path),
            "source": source,
            "hook_event_name": "SessionStart",
            "transcript_path": "/x",
        },
    )
    assert proc.returncode == 0 and proc.stderr == ""
    out = json.loads(proc.stdout)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "Prefer small commits" in context and len(context) <= 9500


def test_session_start_fits_the_cap_as_claude_code_counts_it(store: Store, tmp_path: Path) -> None:
    # Claude Code measures the context in UTF-16 code units (JavaScript string length): an emoji
    # counts twice, so 9,500 Python characters of emoji would be 19,000 there and get cut off.
    settings = load_settings(store)
    settings["inject_budget"] = 9500
    save_settings(store, settings)
    create_note(store, type="preference", title="Brain rules 🧠", body="🧠 think first. " * 1200)
    proc = run_hook(
        store.home, "session-start", {"session_id": "s", "cwd": str(tmp_path), "source": "startup"}
    )
    assert proc.returncode == 0 and proc.stderr == ""
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Brain rules" in context
    assert len(context.encode("utf-16-le")) // 2 <= 9500
    assert context.endswith("</anamnesis-memory>\n")


def test_session_start_with_nothing_prints_nothing(store: Store, tmp_path: Path) -> None:
    proc = run_hook(
        store.home, "session-start", {"session_id": "s", "cwd": str(tmp_path), "source": "startup"}
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_user_prompt_submit_recalls_or_stays_silent(store: Store, tmp_path: Path) -> None:
    note = create_note(
        store,
        type="procedural",
        title="Rotate pg_bouncer credentials",
        body="Run scripts/rotate.sh, then reload pgbouncer.",
        project="x",
    )
    payload = {
        "session_id": "s",
        "cwd": str(tmp_path),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "how do we rotate the pg_bouncer credentials?",
        "permission_mode": "default",
    }
    proc = run_hook(store.home, "user-prompt-submit", payload)
    assert proc.returncode == 0
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert note.path in context and len(context) <= 2000
    again = run_hook(store.home, "user-prompt-submit", payload)  # already shown in this session
    assert (again.returncode, again.stdout) == (0, "")
    other = run_hook(
        store.home, "user-prompt-submit", {**payload, "prompt": "rename the variable x to y please"}
    )
    assert (other.returncode, other.stdout) == (0, "")


def test_session_start_then_recall_does_not_repeat(store: Store, tmp_path: Path) -> None:
    create_note(store, type="preference", title="Rotate credentials monthly", body="Use scripts/rotate.sh.")
    run_hook(store.home, "session-start", {"session_id": "s9", "cwd": str(tmp_path), "source": "startup"})
    proc = run_hook(
        store.home,
        "user-prompt-submit",
        {"session_id": "s9", "cwd": str(tmp_path), "prompt": "how often do we rotate credentials?"},
    )
    assert proc.stdout == ""


def test_pre_compact_and_session_end_make_one_note(store: Store, tmp_path: Path) -> None:
    transcript = typical("hook-sess", cwd=str(tmp_path)).write(tmp_path / "t.jsonl")
    payload = {"session_id": "hook-sess", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    pre = run_hook(store.home, "pre-compact", {**payload, "trigger": "auto", "custom_instructions": ""})
    end = run_hook(store.home, "session-end", {**payload, "reason": "prompt_input_exit"})
    assert (pre.returncode, pre.stdout, end.returncode, end.stdout) == (0, "", 0, "")
    notes = list(store.memory.rglob(f"*-{session_note_id('hook-sess')}.md"))
    assert len(notes) == 1
    assert "pre-compact: created" in _log(store) and "session-end: unchanged" in _log(store)


def test_session_end_starts_sync_detached(store: Store, tmp_path: Path) -> None:
    settings = load_settings(store)
    settings["peers"] = {"nowhere": {"url": str(tmp_path / "no-such-peer.git")}}
    save_settings(store, settings)
    transcript = typical("sync-sess", cwd=str(tmp_path)).write(tmp_path / "t.jsonl")
    proc = run_hook(
        store.home,
        "session-end",
        {
            "session_id": "sync-sess",
            "transcript_path": str(transcript),
            "cwd": str(tmp_path),
            "reason": "other",
        },
    )
    assert (proc.returncode, proc.stdout) == (0, "")
    line = next(line for line in _log(store).splitlines() if "session-end: created" in line)
    assert "sync started (pid " in line
    pid = int(line.split("sync started (pid ")[1].split(")")[0])
    _wait_gone(pid)
    assert (store.log_dir / "hooks-background.log").exists()


@pytest.mark.parametrize("where", ["plain folder", "folder holding anamnesis/"])
def test_busy_store_hands_capture_to_a_detached_retry(store: Store, tmp_path: Path, where: str) -> None:
    from anamnesis.base.lock import store_lock

    cwd = _shadowing_folder(tmp_path) if "anamnesis/" in where else tmp_path

    settings = load_settings(store)
    settings["capture"]["lock_timeout"] = 0.3
    save_settings(store, settings)
    transcript = typical("busy", cwd=str(tmp_path)).write(tmp_path / "t.jsonl")
    payload = {"session_id": "busy", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    with store_lock(store, "test holds the store"):
        proc = run_hook(store.home, "session-end", payload, cwd=cwd)
        assert (proc.returncode, proc.stdout) == (0, "")
        assert not list(store.memory.rglob(f"*-{session_note_id('busy')}.md"))
    line = next(line for line in _log(store).splitlines() if "store busy" in line)
    _wait_gone(int(line.split("(pid ")[1].split(")")[0]))
    assert len(list(store.memory.rglob(f"*-{session_note_id('busy')}.md"))) == 1
    assert not list((store.state_dir / "spool").iterdir())


@pytest.mark.parametrize(
    "event,stdin",
    [
        ("session-start", "this is not json"),
        ("user-prompt-submit", '{"prompt": 42}'),
        ("session-end", '{"transcript_path": 7}'),
        ("pre-compact", "[1, 2]"),
        ("no-such-event", "{}"),
    ],
)
def test_bad_input_exits_zero_silently(store: Store, event: str, stdin: str) -> None:
    proc = run_hook(store.home, event, stdin)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_failure_is_logged_and_silent(store: Store, tmp_path: Path) -> None:
    store.settings_path.write_text("{broken")
    proc = run_hook(
        store.home, "session-start", {"session_id": "s", "cwd": str(tmp_path), "source": "startup"}
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert "session-start: FAILED" in _log(store) and "Traceback" in _log(store)


def test_missing_store_is_silent_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "none"
    for event in ("session-start", "user-prompt-submit", "session-end"):
        proc = run_hook(
            home, event, {"session_id": "s", "cwd": str(tmp_path), "prompt": "hello there friend"}
        )
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert not home.exists()


def test_hook_via_cli_is_the_same(store: Store, tmp_path: Path, run_cli: Any) -> None:
    create_note(store, type="preference", title="Prefer small commits", body="One change per commit.")
    proc = run_cli(
        "hook",
        "session-start",
        input=json.dumps({"cwd": str(tmp_path), "source": "startup"}),
        home_dir=store.home,
    )
    assert proc.returncode == 0 and "Prefer small commits" in proc.stdout
    printed = run_cli("inject", "--cwd", str(tmp_path), home_dir=store.home)
    assert printed.returncode == 0 and "Prefer small commits" in printed.stdout


@pytest.mark.parametrize("spelling", ["SessionStart", "session_start", "session-start"])
def test_event_names_as_claude_code_spells_them(store: Store, tmp_path: Path, spelling: str) -> None:
    create_note(store, type="preference", title="Prefer small commits", body="One change per commit.")
    proc = run_hook(store.home, spelling, {"session_id": "s", "cwd": str(tmp_path), "source": "startup"})
    assert proc.returncode == 0 and "Prefer small commits" in proc.stdout
    assert "session-start: (startup)" in _log(store) and "unknown" not in _log(store)
    transcript = typical("spelled", cwd=str(tmp_path)).write(tmp_path / "t.jsonl")
    payload = {"session_id": "spelled", "transcript_path": str(transcript), "cwd": str(tmp_path)}
    assert run_hook(store.home, "SessionEnd", payload).returncode == 0
    assert "session-end: created" in _log(store)


def test_a_transcript_that_cannot_be_read_is_logged_as_such(store: Store, tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    run_hook(
        store.home, "session-end", {"session_id": "s", "transcript_path": str(missing), "cwd": str(tmp_path)}
    )
    run_hook(
        store.home, "pre-compact", {"session_id": "s", "transcript_path": str(tmp_path), "cwd": str(tmp_path)}
    )
    log = _log(store)
    assert f"session-end: skipped: the transcript {missing} does not exist" in log
    assert f"pre-compact: skipped: the transcript {tmp_path} is not a regular file" in log
    assert "trivial" not in log
