"""Hooks and MCP server exactly as `init` registers them, run from a folder holding an
`anamnesis/` directory: a checkout of this very project, or any project with a package of
that name. Claude Code runs both with the project folder as working directory; without the
interpreter's safe-path flag that folder would come first on sys.path and shadow the package.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, RunCli
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from test_claude_e2e import claude_bin  # (imported before any test points HOME elsewhere)
from transcripts import typical

from anamnesis.agents.capture import session_note_id
from anamnesis.base.paths import Store
from anamnesis.store.operations import create_note

PROMPT = "how do we rotate the pg_bouncer credentials?"
# The project's own package: importing it in place of ours at all is the bug.
SHADOW = 'raise ImportError("the project folder\'s own anamnesis package was imported")\n'


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    """A scratch HOME for Claude Code's own config (~/.claude.json, ~/.claude/settings.json)."""
    path = tmp_path / "user"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return path


@pytest.fixture(params=["checkout-of-this-project", "project-with-an-anamnesis-package"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "checkout-of-this-project":
        assert (ROOT / "anamnesis" / "__init__.py").is_file()
        return ROOT
    folder = tmp_path / "shadow"
    (folder / "anamnesis").mkdir(parents=True)
    (folder / "anamnesis" / "__init__.py").write_text(SHADOW)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(
        ["git", "-C", str(folder), "remote", "add", "origin", "git@github.com:acme/shadow.git"], check=True
    )
    return folder


def _claude_env(user_home: Path, project: Path) -> dict[str, str]:
    """What a hook or the server gets from Claude Code: no ANAMNESIS_HOME (init wrote the store's
    place into the commands), the project folder in CLAUDE_PROJECT_DIR."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANAMNESIS_HOME", "CLAUDE_CONFIG_DIR")}
    env.update(HOME=str(user_home), CLAUDE_PROJECT_DIR=str(project), CLAUDECODE="1")
    return env


def _registered(user_home: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The hook commands (event -> command) and the server entry, read back from the files init wrote."""
    settings = json.loads((user_home / ".claude" / "settings.json").read_text())
    commands = {
        event: hook["command"]
        for event, groups in settings["hooks"].items()
        for group in groups
        for hook in group["hooks"]
        if "anamnesis.hooks" in hook["command"]
    }
    server = json.loads((user_home / ".claude.json").read_text())["mcpServers"]["anamnesis"]
    return commands, server


def _hook(command: str, payload: dict[str, Any], env: dict[str, str], cwd: Path) -> str:
    proc = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )
    assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    return proc.stdout


def test_hooks_and_server_as_registered_work_from_a_folder_holding_anamnesis(
    store: Store, user_home: Path, project: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    create_note(store, type="preference", title="Prefer small commits", body="One change per commit.")
    rotate = create_note(
        store,
        type="procedural",
        title="Rotate pg_bouncer credentials",
        body="Run scripts/rotate.sh, then reload pgbouncer.",
        project="elsewhere",
    )
    init = run_cli("init", env={"HOME": str(user_home), "CLAUDE_CONFIG_DIR": ""})
    assert init.returncode == 0, init.stderr
    commands, server = _registered(user_home)
    assert set(commands) == {"SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd"}
    env = _claude_env(user_home, project)
    session = "5f0c6a1e-0000-4000-8000-00000000a11c"
    transcript = typical(session, cwd=str(project)).write(tmp_path / "t" / f"{session}.jsonl")
    base = {"session_id": session, "transcript_path": str(transcript), "cwd": str(project)}

    started = _hook(
        commands["SessionStart"],
        {**base, "hook_event_name": "SessionStart", "source": "startup"},
        env,
        project,
    )
    context = json.loads(started)["hookSpecificOutput"]["additionalContext"]
    assert "Prefer small commits" in context
    recalled = _hook(
        commands["UserPromptSubmit"],
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": PROMPT},
        env,
        project,
    )
    assert rotate.path in json.loads(recalled)["hookSpecificOutput"]["additionalContext"]
    _hook(commands["PreCompact"], {**base, "hook_event_name": "PreCompact", "trigger": "auto"}, env, project)
    _hook(commands["SessionEnd"], {**base, "hook_event_name": "SessionEnd", "reason": "other"}, env, project)
    log = (store.log_dir / "hooks.log").read_text()
    assert "FAILED" not in log and "unknown" not in log, log
    assert "pre-compact: created" in log and "session-end: unchanged" in log, log
    assert list(store.memory.rglob(f"*-{session_note_id(session)}.md"))

    async def drive() -> None:
        params = StdioServerParameters(
            command=server["command"], args=server["args"], env={**env, **server["env"]}, cwd=str(project)
        )
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"search", "write", "status"} <= names
                status = await client.call_tool("status", {})
                assert not status.is_error, status.content
                assert json.loads(status.content[0].text)["memory"] == str(store.memory)

    asyncio.run(asyncio.wait_for(drive(), timeout=120))


def _claude_in(home: Path, folder: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """The real client, run in `folder` with `home` as HOME, offline and with no key."""
    claude = claude_bin()
    drop = ("CLAUDE", "ANTHROPIC", "ANAMNESIS", "XDG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(
        HOME=str(home),
        DISABLE_AUTOUPDATER="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_ERROR_REPORTING="1",
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [claude, *args], capture_output=True, text=True, cwd=folder, env=env, timeout=240, stdin=subprocess.DEVNULL
        )

    return run


@pytest.mark.e2e
def test_real_claude_code_connects_and_runs_the_hooks_from_such_a_folder(
    store: Store, user_home: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    """`claude mcp list` from a project holding `anamnesis/` shows the server connected, and a
    session there (no key: the client exits 1, the hooks still fire) runs our hooks cleanly."""
    folder = tmp_path / "shadow"
    run = _claude_in(user_home, folder)
    (folder / "anamnesis").mkdir(parents=True)
    (folder / "anamnesis" / "__init__.py").write_text(SHADOW)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    init = run_cli("init", env={"HOME": str(user_home), "CLAUDE_CONFIG_DIR": ""})
    assert init.returncode == 0, init.stderr

    listed = run("mcp", "list")
    line = next((x for x in listed.stdout.splitlines() if x.startswith("anamnesis")), "")
    assert "Connected" in line and "Failed" not in line, listed.stdout + listed.stderr
    run("-p", "Explain the retry policy of the webhook handlers in this project please")
    log = (store.log_dir / "hooks.log").read_text() if (store.log_dir / "hooks.log").exists() else ""
    assert "session-start:" in log and "user-prompt-submit:" in log, log
    assert "FAILED" not in log and "unknown hook event" not in log, log


@pytest.mark.e2e
def test_real_claude_code_connects_to_the_server_over_http_with_the_token_and_not_without(
    store: Store, user_home: Path, tmp_path: Path
) -> None:
    """The command docs/claude-code.md gives (`claude mcp add --transport http … --header
    "Authorization: Bearer TOKEN"`) connects; the same address without the token does not."""
    from mcp_support import served  # lazy: starts a server; only this test needs it

    run = _claude_in(user_home, tmp_path)
    with served(store.home) as server:
        header = f"Authorization: Bearer {server.token}"
        assert (
            run("mcp", "add", "--transport", "http", "memory", server.url, "--header", header).returncode == 0
        )
        assert run("mcp", "add", "--transport", "http", "tokenless", server.url).returncode == 0
        listed = run("mcp", "list")
    lines = {line.split(":")[0]: line for line in listed.stdout.splitlines() if ": http" in line}
    assert "Connected" in lines.get("memory", ""), listed.stdout + listed.stderr
    assert "Connected" not in lines.get("tokenless", "Connected"), listed.stdout
