"""The real Gemini CLI (from npm, see scripts/test), offline against a Gemini API stand-in: after
`init --agent gemini` its SessionStart hook puts the memory into the request the model gets, and its
SessionEnd hook leaves a session note in the store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli
from gemini_standin import Parts, StandIn, call, request_text, text

from anamnesis.base.paths import open_store
from anamnesis.store.operations import create_note

CACHE = Path(os.environ.get("ANAMNESIS_TEST_CACHE", Path.home() / ".cache" / "anamnesis-test"))
# The user's own settings: an API key sign-in (the key itself comes from the environment).
ORIGINAL = '{\n  "security": {"auth": {"selectedType": "gemini-api-key"}}\n}\n'


def _gemini() -> str:
    """The CLI from the test cache (or $ANAMNESIS_GEMINI_BIN); in CI a missing one fails the test."""
    path = os.environ.get("ANAMNESIS_GEMINI_BIN") or str(
        CACHE / "agents" / "node_modules" / ".bin" / "gemini"
    )
    if not os.access(path, os.X_OK):
        message = f"gemini CLI not installed at {path} (scripts/test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.mark.e2e
def test_a_real_gemini_session_gets_the_memory_and_leaves_a_session_note(
    tmp_path: Path, run_cli: RunCli, home: Path
) -> None:
    binary = _gemini()
    user = tmp_path / "user"
    project = user / "orders-service"
    project.mkdir(parents=True)
    settings = user / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(ORIGINAL)
    env = {"HOME": str(user), "GEMINI_CLI_HOME": str(user), "PATH": f"{Path(binary).parent}:/usr/bin:/bin"}
    proc = run_cli("init", "--agent", "gemini", "--no-schedule", "--no-instructions", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    create_note(
        open_store(home), type="preference", title="Pool sizes", body="Keep the pool at 12 connections."
    )

    target = project / "notes.txt"

    def script(body: dict[str, Any]) -> Parts:
        answered = any("functionResponse" in p for c in body.get("contents", []) for p in c.get("parts", []))
        if answered:
            return text("Wrote notes.txt. Decided to keep the pool at 12.")
        return call("write_file", {"file_path": str(target), "content": "pool: 12\n"})

    standin = StandIn(script).start()
    try:
        cli_env = {
            **os.environ,
            **env,
            "ANAMNESIS_HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": standin.url,
            "GEMINI_API_KEY": "not-a-real-key",
            "GEMINI_CLI_TRUST_WORKSPACE": "true",  # hooks (like MCP servers) run only in trusted folders
        }
        run = subprocess.run(
            [binary, "-m", "gemini-2.5-flash", "--yolo", "-p", "Write the pool size into notes.txt"],
            env=cli_env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=240,
            stdin=subprocess.DEVNULL,
        )
    finally:
        standin.stop()
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert target.read_text() == "pool: 12\n"  # the session really ran the tool
    model_calls = [body for path, body in standin.requests if "GenerateContent" in path]
    assert model_calls, standin.requests
    assert "Keep the pool at 12 connections." in request_text(model_calls[0])  # injected by SessionStart

    store = open_store(home)
    log = (store.log_dir / "hooks.log").read_text()
    notes = [p for p in store.memory.rglob("*.md") if "gemini-cli" in p.read_text()]
    assert len(notes) == 1, log
    note = notes[0].read_text()
    assert "Write the pool size into notes.txt" in note and "notes.txt" in note
    assert "Keep the pool at 12 connections." not in note  # the injected memory is not captured back

    proc = run_cli("uninstall", "--agent", "gemini", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert settings.read_text() == ORIGINAL  # byte for byte, hooks and server gone
    assert json.loads(settings.read_text()) == json.loads(ORIGINAL)
