"""Gemini CLI's SessionStart/SessionEnd hooks: registered in settings.json with the same care as the
server entry, run through the one hook runner, and its session files read into a session note."""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli, cli_env

from anamnesis.agents.capture import capture_session as capture
from anamnesis.agents.gemini_transcript import looks_like_gemini, summarize_gemini
from anamnesis.agents.registry import AGENTS
from anamnesis.base.paths import Store
from anamnesis.store.operations import create_note, load_note

USER_HOOKS = """{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "hooks": {
    "SessionStart": [
      {"matcher": "startup", "hooks": [{"type": "command", "command": "echo mine"}]}
    ]
  }
}
"""


@pytest.fixture
def gemini_home(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "gemini-home"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(folder))
    return folder / ".gemini"


def _ours(data: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [h for g in data["hooks"][event] for h in g["hooks"] if "-m anamnesis.hooks" in h["command"]]


def test_install_adds_both_hooks_beside_the_users_and_uninstall_gives_the_file_back(
    store: Store, gemini_home: Path
) -> None:
    settings = gemini_home / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(USER_HOOKS)
    gemini = AGENTS["gemini"]
    done = gemini.install(store, with_instructions=False)
    assert any("SessionStart hook" in line for line in done) and any(
        "SessionEnd hook" in line for line in done
    )
    text = settings.read_text()
    data = json.loads(text)
    start, end = _ours(data, "SessionStart"), _ours(data, "SessionEnd")
    assert len(start) == 1 and len(end) == 1
    assert start[0]["type"] == "command" and start[0]["timeout"] == 10_000  # milliseconds, Gemini CLI's unit
    assert start[0]["command"].endswith(f'session-start --agent gemini --home "{store.home.absolute()}"')
    assert " -P -m anamnesis.hooks session-end --agent gemini " in end[0]["command"]
    assert {"type": "command", "command": "echo mine"} in data["hooks"]["SessionStart"][-1][
        "hooks"
    ]  # theirs kept
    removed = [
        line
        for line in difflib.unified_diff(USER_HOOKS.splitlines(), text.splitlines(), lineterm="", n=0)
        if line.startswith("-") and not line.startswith("---")
    ]
    assert removed == []  # only lines added
    assert gemini.install(store, with_instructions=False) == []  # idempotent
    gemini.uninstall(store)
    assert settings.read_text() == USER_HOOKS


def test_a_moved_interpreter_updates_our_hooks_in_place_and_uninstall_cuts_only_them(
    store: Store, gemini_home: Path
) -> None:
    settings = gemini_home / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(USER_HOOKS)
    gemini = AGENTS["gemini"]
    gemini.install(store, python="/old/venv/bin/python", with_instructions=False)
    data = json.loads(settings.read_text())
    data["ui"] = {"theme": "Dark"}  # the user changes something after init
    settings.write_text(json.dumps(data, indent=2))
    done = gemini.install(store, python="/new/venv/bin/python", with_instructions=False)
    assert any(line.endswith("updated the SessionStart hook") for line in done)
    assert any(line.endswith("updated the SessionEnd hook") for line in done)
    data = json.loads(settings.read_text())
    assert [h["command"].split()[0] for h in _ours(data, "SessionStart")] == ['"/new/venv/bin/python"']
    gemini.uninstall(store)
    after = json.loads(settings.read_text())
    assert after == {**json.loads(USER_HOOKS), "ui": {"theme": "Dark"}}


def test_hooks_on_a_new_file_go_again_with_the_file(store: Store, gemini_home: Path) -> None:
    gemini = AGENTS["gemini"]
    gemini.install(store, with_instructions=False)
    settings = gemini_home / "settings.json"
    assert set(json.loads(settings.read_text())) == {"mcpServers", "hooks"}
    gemini.uninstall(store)
    assert not settings.exists()


def test_a_hooks_value_of_the_wrong_kind_is_refused_with_nothing_written(
    store: Store, gemini_home: Path
) -> None:
    from anamnesis.agents.files import AgentConfigError

    settings = gemini_home / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"hooks": {"SessionStart": {"type": "command"}}}\n')
    with pytest.raises(AgentConfigError) as info:
        AGENTS["gemini"].install(store, with_instructions=False)
    assert "SessionStart" in str(info.value) and "nothing was changed" in str(info.value)
    assert settings.read_text() == '{"hooks": {"SessionStart": {"type": "command"}}}\n'


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record) + "\n"


def gemini_session(path: Path, cwd: Path, session_id: str = "5e1f0c3a-0d4d-4a0c-9379-956cb6bedfa5") -> Path:
    """A session file in the shape the real Gemini CLI 0.61 writes (see gemini_transcript)."""
    write = {
        "id": "w1",
        "name": "write_file",
        "args": {"file_path": str(cwd / "pool.py"), "content": "x"},
        "status": "success",
        "result": [{"functionResponse": {"id": "w1", "name": "write_file", "response": {"output": "ok"}}}],
    }
    refused = {
        "id": "w2",
        "name": "replace",
        "args": {"file_path": str(cwd / "never.py")},
        "status": "error",
        "result": [{"functionResponse": {"id": "w2", "name": "replace", "response": {"error": "no match"}}}],
    }
    shell = {
        "id": "s1",
        "name": "run_shell_command",
        "args": {"command": "pytest -q"},
        "status": "success",
        "result": [
            {
                "functionResponse": {
                    "id": "s1",
                    "name": "run_shell_command",
                    "response": {"output": "Output: 1 failed\nExit Code: 1"},
                }
            }
        ],
    }
    lines = [
        _line(
            {
                "sessionId": session_id,
                "projectHash": "ab12",
                "startTime": "2026-11-26T10:00:00.000Z",
                "lastUpdated": "2026-11-26T10:00:00.000Z",
                "kind": "main",
            }
        ),
        _line(
            {
                "$set": {
                    "messages": [{"id": "ctx", "type": "user", "content": [{"text": "<session_context>"}]}]
                }
            }
        ),
        _line(
            {
                "id": "u1",
                "timestamp": "2026-11-26T10:00:01.000Z",
                "type": "user",
                "content": [
                    {
                        "text": "<hook_context>&lt;anamnesis-memory&gt;SECRET-MEMORY&lt;/anamnesis-memory&gt;</hook_context>"
                        "\n\nFix the pool timeout in the orders service"
                    }
                ],
            }
        ),
        _line(
            {
                "id": "g1",
                "timestamp": "2026-11-26T10:00:02.000Z",
                "type": "gemini",
                "content": "",
                "model": "m",
            }
        ),
        _line(
            {
                "id": "g1",
                "timestamp": "2026-11-26T10:00:02.000Z",
                "type": "gemini",
                "content": "",
                "model": "m",
                "toolCalls": [write, refused, shell],
            }
        ),  # the same message again, with its calls
        "{not json\n",
        _line(
            {
                "id": "u2",
                "timestamp": "2026-11-26T10:00:03.000Z",
                "type": "user",
                "content": [{"functionResponse": {"id": "s1", "name": "run_shell_command", "response": {}}}],
            }
        ),
        _line({"$set": {"lastUpdated": "2026-11-26T10:00:03.000Z"}}),
        _line(
            {
                "id": "g2",
                "timestamp": "2026-11-26T10:00:04.000Z",
                "type": "gemini",
                "content": "Raised the pool timeout to 30 s. Decided to keep the retry at 3.",
                "model": "m",
            }
        ),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


def test_the_reader_folds_a_gemini_session_into_a_summary(tmp_path: Path) -> None:
    path = gemini_session(tmp_path / "chats" / "session.jsonl", tmp_path / "proj")
    assert looks_like_gemini(path)
    summary = summarize_gemini(path)
    assert summary.session_id == "5e1f0c3a-0d4d-4a0c-9379-956cb6bedfa5"
    assert summary.prompts == ["Fix the pool timeout in the orders service"]  # injected memory cut out
    assert list(summary.files) == [str(tmp_path / "proj" / "pool.py")]  # the failed replace touched nothing
    assert summary.commands == ["pytest -q"] and summary.results == [("pytest -q", True)]
    assert summary.tools == {
        "write_file": 1,
        "replace": 1,
        "run_shell_command": 1,
    }  # the re-written line once
    assert summary.outcome.startswith("Raised the pool timeout") and summary.bad_lines == 1
    assert summary.started == "2026-11-26T10:00:00.000Z" and summary.ended == "2026-11-26T10:00:04.000Z"


def test_a_claude_transcript_is_not_taken_for_a_gemini_one(tmp_path: Path) -> None:
    from transcripts import typical

    path = typical().write(tmp_path / "t.jsonl")
    assert not looks_like_gemini(path)
    assert summarize_gemini(tmp_path / "missing.jsonl").unreadable == "does not exist"


def test_capture_writes_a_gemini_session_note_without_the_injected_memory(
    store: Store, tmp_path: Path
) -> None:
    path = gemini_session(tmp_path / "chats" / "session.jsonl", tmp_path / "proj")
    result = capture(store, path, cwd=str(tmp_path / "proj"), agent="gemini-cli")
    assert result.action == "created", result
    note = load_note(store, str(result.path))
    assert note.extra["agent"] == "gemini-cli" and note.source == "gemini-cli"
    assert note.tags == ["session", "gemini-cli"]
    assert "Fix the pool timeout" in note.body and "pool.py" in note.body and "pytest -q" in note.body
    assert "SECRET-MEMORY" not in note.body
    again = capture(store, path, cwd=str(tmp_path / "proj"), agent="gemini-cli")
    assert again.path == result.path and again.action == "unchanged"


def _hook(home: Path, argv: list[str], payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "anamnesis.hooks", *argv],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=cli_env(home),
        timeout=60,
    )


def test_the_hook_processes_inject_and_capture_for_gemini(store: Store, home: Path, tmp_path: Path) -> None:
    create_note(store, type="preference", title="Prefer small commits", body="One change per commit.")
    project = tmp_path / "proj"
    project.mkdir()
    transcript = gemini_session(tmp_path / "chats" / "session.jsonl", project)
    base = {
        "session_id": "5e1f0c3a-0d4d-4a0c-9379-956cb6bedfa5",
        "transcript_path": str(transcript),
        "cwd": str(project),
        "timestamp": "2026-11-26T10:00:00.000Z",
    }
    start = _hook(
        home,
        ["session-start", "--agent", "gemini"],
        {**base, "hook_event_name": "SessionStart", "source": "startup"},
    )
    assert start.returncode == 0 and start.stderr == ""
    context = json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Prefer small commits" in context
    end = _hook(
        home,
        ["session-end", "--agent", "gemini", "--home", str(home)],
        {**base, "hook_event_name": "SessionEnd", "reason": "exit"},
    )
    assert end.returncode == 0 and end.stdout == ""
    sessions = [
        p for p in store.memory.rglob("*.md") if "session" in p.read_text() and "gemini-cli" in p.read_text()
    ]
    assert len(sessions) == 1, (store.log_dir / "hooks.log").read_text()
    assert "Fix the pool timeout" in sessions[0].read_text()


def test_the_capture_command_reads_a_gemini_session_when_told_so(
    store: Store, run_cli: RunCli, tmp_path: Path
) -> None:
    path = gemini_session(tmp_path / "chats" / "session.jsonl", tmp_path / "proj")
    wrong = run_cli("capture", str(path), "--agent", "codex")
    assert wrong.returncode == 2 and "unknown agent" in wrong.stderr
    (tmp_path / "proj").mkdir(exist_ok=True)
    done = run_cli("capture", str(path), "--agent", "gemini-cli", "--json", cwd=tmp_path / "proj")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["action"] == "created"
    note = load_note(store, report["path"])
    assert note.source == "gemini-cli" and "Fix the pool timeout" in note.body
