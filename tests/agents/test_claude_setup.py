"""Registering with Claude Code: merge, idempotence, backups, refusal, --print, uninstall."""

from __future__ import annotations

import difflib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import RunCli

from anamnesis.agents.claude import PERMISSION

USER_SETTINGS: dict[str, Any] = {
    "model": "opus",
    "env": {"FOO": "bar"},
    "statusLine": {"type": "command", "command": "echo hi"},
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/usr/local/bin/my-prompt-hook"}]}],
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}
        ],
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo welcome"}]}],
    },
}
USER_CLAUDE_JSON: dict[str, Any] = {
    "numStartups": 12,
    "projects": {"/home/dev/x": {"allowedTools": []}},
    "mcpServers": {"other": {"type": "stdio", "command": "/usr/bin/other-server", "args": [], "env": {}}},
}


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    """A scratch HOME for Claude Code's config (and nothing else of the real user's).

    Set up after `home`, which points CLAUDE_CONFIG_DIR elsewhere: unset again here."""
    path = tmp_path / "user"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    return path


def _env(user_home: Path, **extra: str) -> dict[str, str]:
    # cli_env points CLAUDE_CONFIG_DIR at a scratch folder; these tests use the scratch HOME's
    # ~/.claude.json and ~/.claude/settings.json instead (an empty value means "not set").
    env = {"HOME": str(user_home), "CLAUDE_CONFIG_DIR": "", **extra}
    return env


def _seed(user_home: Path) -> tuple[Path, Path]:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(USER_SETTINGS, indent=4) + "\n")
    claude_json = user_home / ".claude.json"
    claude_json.write_text(json.dumps(USER_CLAUDE_JSON, indent=2) + "\n")
    os.chmod(claude_json, 0o600)
    return settings, claude_json


def _load(path: Path) -> Any:
    return json.loads(path.read_text())


def _ours(settings: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [
        h
        for g in settings["hooks"].get(event, [])
        for h in g["hooks"]
        if "-m anamnesis.hooks" in h.get("command", "")
    ]


def test_init_on_an_empty_home(user_home: Path, run_cli: RunCli, home: Path) -> None:
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    claude_json = user_home / ".claude.json"
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600
    server = _load(claude_json)["mcpServers"]["anamnesis"]
    assert server["type"] == "stdio" and os.path.isabs(server["command"])
    assert server["command"] == os.path.abspath(sys.executable)
    assert server["args"] == ["-P", "-m", "anamnesis", "mcp"]  # -P: the project folder cannot shadow us
    assert server["env"] == {"ANAMNESIS_HOME": str(home)}  # not the default home, so it is passed on
    settings = _load(user_home / ".claude" / "settings.json")
    for event, argument, timeout in (
        ("SessionStart", "session-start", 10),
        ("UserPromptSubmit", "user-prompt-submit", 5),
        ("PreCompact", "pre-compact", 30),
        ("SessionEnd", "session-end", 15),
    ):
        (hook,) = _ours(settings, event)
        assert hook["command"].startswith(
            f'"{os.path.abspath(sys.executable)}" -P -m anamnesis.hooks {argument}'
        )
        assert f'--home "{home}"' in hook["command"]
        assert hook["timeout"] == timeout
    assert settings["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert settings["hooks"]["PreCompact"][0]["matcher"] == "auto|manual"
    assert settings["permissions"]["allow"] == ["mcp__anamnesis"]
    assert "Claude Code" in proc.stdout


def test_init_twice_changes_nothing(user_home: Path, run_cli: RunCli) -> None:
    settings, claude_json = _seed(user_home)
    assert run_cli("init", env=_env(user_home)).returncode == 0
    first = (settings.read_bytes(), claude_json.read_bytes())
    backups = sorted(p.name for p in user_home.rglob("*anamnesis-backup*"))
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert (settings.read_bytes(), claude_json.read_bytes()) == first
    assert sorted(p.name for p in user_home.rglob("*anamnesis-backup*")) == backups
    assert "already set up" in proc.stdout
    printed = run_cli("init", "--print", env=_env(user_home))
    assert printed.returncode == 0 and "---" not in printed.stdout and "no change" in printed.stdout


def test_init_keeps_the_users_hooks_and_keys(user_home: Path, run_cli: RunCli) -> None:
    settings_path, claude_json = _seed(user_home)
    original_settings = settings_path.read_text()
    original_claude = claude_json.read_text()
    assert run_cli("init", env=_env(user_home)).returncode == 0
    settings = _load(settings_path)
    for key in ("model", "env", "statusLine"):
        assert settings[key] == USER_SETTINGS[key]
    # ours go first: in an indented file that adds lines without changing any of the user's
    assert settings["permissions"]["allow"] == ["mcp__anamnesis", "Bash(npm run test:*)"]
    assert settings["permissions"]["deny"] == ["Read(./.env)"]
    assert settings["hooks"]["PostToolUse"] == USER_SETTINGS["hooks"]["PostToolUse"]
    prompt_commands = [h["command"] for g in settings["hooks"]["UserPromptSubmit"] for h in g["hooks"]]
    assert prompt_commands[1] == "/usr/local/bin/my-prompt-hook" and len(prompt_commands) == 2
    assert settings["hooks"]["SessionStart"][1] == USER_SETTINGS["hooks"]["SessionStart"][0]
    data = _load(claude_json)
    assert data["numStartups"] == 12 and data["projects"] == USER_CLAUDE_JSON["projects"]
    assert data["mcpServers"]["other"] == USER_CLAUDE_JSON["mcpServers"]["other"]
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600
    (settings_backup,) = (user_home / ".claude").glob("settings.json.anamnesis-backup-*")
    assert settings_backup.read_text() == original_settings
    (claude_backup,) = user_home.glob(".claude.json.anamnesis-backup-*")
    assert claude_backup.read_text() == original_claude
    assert stat.S_IMODE(claude_backup.stat().st_mode) == 0o600


def test_malformed_settings_refuse_and_change_nothing(user_home: Path, run_cli: RunCli, home: Path) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    broken = '{"hooks": {"SessionStart": [ }\n'
    settings.write_text(broken)
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode != 0
    assert f"{settings} is not valid JSON" in proc.stderr and "nothing was changed" in proc.stderr
    assert settings.read_text() == broken
    assert not (user_home / ".claude.json").exists()
    assert not home.exists()  # not even the store was created
    assert list(settings.parent.iterdir()) == [settings]


@pytest.mark.parametrize("name", [".claude.json", ".claude/settings.json"])
def test_a_config_file_that_is_not_utf8_refuses_and_changes_nothing(
    user_home: Path, run_cli: RunCli, home: Path, name: str
) -> None:
    target = user_home / name
    target.parent.mkdir(parents=True, exist_ok=True)
    garbage = b'\xff\xfe{"numStartups": 3}'
    target.write_bytes(garbage)
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"{target} is not UTF-8 text" in proc.stderr and "nothing was changed" in proc.stderr
    assert target.read_bytes() == garbage
    assert not home.exists()
    assert sorted(p.name for p in target.parent.iterdir() if "anamnesis-backup" in p.name) == []
    proc = run_cli("uninstall", env=_env(user_home))
    assert "Traceback" not in proc.stderr and target.read_bytes() == garbage


def test_symlinked_config_files_are_written_through_the_link(user_home: Path, run_cli: RunCli) -> None:
    # dotfiles managers link ~/.claude/settings.json (and ~/.claude.json) into a repo:
    # init and uninstall must edit the linked file, not replace the link with a copy.
    dotfiles = user_home / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text(json.dumps(USER_SETTINGS, indent=4) + "\n")
    (dotfiles / "claude.json").write_text(json.dumps(USER_CLAUDE_JSON, indent=2) + "\n")
    settings, claude_json = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    settings.parent.mkdir()
    settings.symlink_to(dotfiles / "settings.json")
    claude_json.symlink_to(dotfiles / "claude.json")
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert settings.is_symlink() and claude_json.is_symlink()
    assert _ours(_load(dotfiles / "settings.json"), "SessionEnd")
    assert "anamnesis" in _load(dotfiles / "claude.json")["mcpServers"]
    proc = run_cli("uninstall", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert settings.is_symlink() and claude_json.is_symlink()
    assert _load(dotfiles / "settings.json") == USER_SETTINGS
    assert _load(dotfiles / "claude.json") == USER_CLAUDE_JSON


def test_uninstall_gives_back_the_users_files_byte_for_byte(user_home: Path, run_cli: RunCli) -> None:
    settings, claude_json = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    settings.parent.mkdir()
    mine = '{\n  "model": "opus",   "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]},\n  "env": {"A": "1"}\n}'
    theirs = '{"numStartups": 3, "mcpServers": {"x": {"command": "y"}}}'
    settings.write_text(mine)
    claude_json.write_text(theirs)
    assert run_cli("init", env=_env(user_home)).returncode == 0
    assert settings.read_text() != mine
    proc = run_cli("uninstall", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert settings.read_text() == mine and claude_json.read_text() == theirs


def test_a_lone_surrogate_in_claude_json_is_kept_escaped(user_home: Path, run_cli: RunCli) -> None:
    # Claude Code keeps prompt history in ~/.claude.json; a prompt cut inside an emoji is written
    # as a lone "\\ud83d" escape, which cannot be written back as raw UTF-8.
    claude_json = user_home / ".claude.json"
    original = '{"numStartups": 3, "projects": {"/x": {"history": [{"display": "fix \\ud83d emoji"}]}}}'
    claude_json.write_text(original)
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    data = _load(claude_json)
    assert data["projects"]["/x"]["history"][0]["display"] == "fix \ud83d emoji"
    assert "anamnesis" in data["mcpServers"]
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert claude_json.read_text() == original


@pytest.mark.parametrize(
    "content",
    [
        '["a list"]',
        '{"hooks": []}',
        '{"hooks": {"SessionEnd": {"not": "a list"}}}',
        '{"permissions": {"allow": "x"}}',
    ],
)
def test_unexpected_shapes_refuse(user_home: Path, run_cli: RunCli, content: str) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(content)
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode != 0 and "nothing was changed" in proc.stderr
    assert settings.read_text() == content


def test_print_shows_diffs_and_writes_nothing(user_home: Path, run_cli: RunCli, home: Path) -> None:
    settings, claude_json = _seed(user_home)
    before = (settings.read_text(), claude_json.read_text())
    proc = run_cli("init", "--print", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert (settings.read_text(), claude_json.read_text()) == before
    assert not home.exists()
    assert f"--- {settings} (now)" in proc.stdout and f"+++ {settings} (after)" in proc.stdout
    assert f"--- {claude_json} (now)" in proc.stdout
    added = [line for line in proc.stdout.splitlines() if line.startswith("+")]
    assert any("-m anamnesis.hooks session-end" in line for line in added)
    assert any('"mcp__anamnesis"' in line for line in added)
    assert "Would do" in proc.stdout
    as_json = run_cli("init", "--print", "--json", env=_env(user_home))
    planned = json.loads(as_json.stdout)["planned"]
    assert any("added the SessionEnd hook" in line for line in planned)


def test_no_claude_and_local_only_skip_the_step(user_home: Path, run_cli: RunCli) -> None:
    assert run_cli("init", "--no-claude", env=_env(user_home)).returncode == 0
    assert not (user_home / ".claude.json").exists() and not (user_home / ".claude").exists()
    assert run_cli("init", "--local-only", env=_env(user_home)).returncode == 0
    assert not (user_home / ".claude.json").exists()


def test_uninstall_removes_exactly_what_init_added(user_home: Path, run_cli: RunCli) -> None:
    settings, claude_json = _seed(user_home)
    before = (_load(settings), _load(claude_json))
    assert run_cli("init", env=_env(user_home)).returncode == 0
    printed = run_cli("uninstall", "--print", env=_env(user_home))
    assert printed.returncode == 0 and "removed the SessionEnd hook" in printed.stdout
    assert "anamnesis" in _load(claude_json)["mcpServers"]  # --print changed nothing
    proc = run_cli("uninstall", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert (_load(settings), _load(claude_json)) == before
    again = run_cli("uninstall", env=_env(user_home))
    assert again.returncode == 0 and (_load(settings), _load(claude_json)) == before


def test_uninstall_after_init_on_an_empty_home(user_home: Path, run_cli: RunCli) -> None:
    assert run_cli("init", env=_env(user_home)).returncode == 0
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert not (user_home / ".claude.json").exists()
    assert not (user_home / ".claude" / "settings.json").exists()


def test_uninstall_keeps_a_permission_the_user_had(user_home: Path, run_cli: RunCli) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"permissions": {"allow": ["mcp__anamnesis"]}, "hooks": {}}))
    assert run_cli("init", env=_env(user_home)).returncode == 0
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert _load(settings) == {"permissions": {"allow": ["mcp__anamnesis"]}, "hooks": {}}


def test_a_new_interpreter_updates_hooks_in_place(user_home: Path, store: Any) -> None:
    from anamnesis.agents import claude as claude_setup

    settings, _ = _seed(user_home)
    claude_setup.install(store, python="/old/venv/bin/python")
    claude_setup.install(store, python="/new venv/bin/python")
    data = _load(settings)
    for event in claude_setup.HOOKS:
        (hook,) = _ours(data, event)
        assert hook["command"].startswith('"/new venv/bin/python" -P -m anamnesis.hooks ')
    assert data["hooks"]["UserPromptSubmit"][1]["hooks"][0]["command"] == "/usr/local/bin/my-prompt-hook"
    assert _load(user_home / ".claude.json")["mcpServers"]["anamnesis"]["command"] == "/new venv/bin/python"


def test_claude_config_dir_is_respected(user_home: Path, tmp_path: Path, run_cli: RunCli) -> None:
    config = tmp_path / "cfg"
    proc = run_cli("init", env=_env(user_home, CLAUDE_CONFIG_DIR=str(config)))
    assert proc.returncode == 0, proc.stderr
    assert "anamnesis" in _load(config / ".claude.json")["mcpServers"]
    assert _ours(_load(config / "settings.json"), "SessionEnd")
    assert not (user_home / ".claude.json").exists()


def test_the_registered_hook_command_runs_through_a_shell(
    user_home: Path, tmp_path: Path, run_cli: RunCli
) -> None:
    """The exact command string init writes works under sh, with spaces and quotes in the store path."""
    odd_home = tmp_path / 'my "store" $HOME dir'
    assert run_cli("init", env=_env(user_home), home_dir=odd_home).returncode == 0
    (hook,) = _ours(_load(user_home / ".claude" / "settings.json"), "SessionStart")
    proc = subprocess.run(
        ["sh", "-c", hook["command"]],
        input=json.dumps({"session_id": "x", "cwd": str(tmp_path), "source": "startup"}),
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "ANAMNESIS_HOME"},
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stderr == ""
    log = (odd_home / "logs" / "hooks.log").read_text()
    assert "session-start: (startup) nothing to inject" in log


def test_the_diff_shows_only_what_changes(user_home: Path, run_cli: RunCli) -> None:
    settings, _ = _seed(user_home)  # indented with four spaces
    proc = run_cli("init", "--print", env=_env(user_home))
    removed = [
        line for line in proc.stdout.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    assert removed == []  # lines are only added: not even a comma is added to an existing line
    assert run_cli("init", env=_env(user_home)).returncode == 0
    assert '\n    "model": "opus"' in settings.read_text()


def _only_added(before: str, after: str, *, whole_lines: bool) -> list[str]:
    """What `after` adds to `before`, failing if any byte of `before` was changed or dropped
    (with `whole_lines`: if any line of it was)."""
    old: Any = before.splitlines(keepends=True) if whole_lines else before
    new: Any = after.splitlines(keepends=True) if whole_lines else after
    added: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        assert op in ("equal", "insert"), (op, old[i1:i2], new[j1:j2])
        if op == "insert":
            added.append("".join(new[j1:j2]))
    return added


# Written by hand: odd indentation, compact objects, no space after colons in places, numbers
# and escapes json.dumps would write differently, a float timeout, CRLF-free, no final newline.
HAND_SETTINGS = (
    "{\n"
    '   "model":"opus",\n'
    '   "cleanupPeriodDays": 1e3,\n'
    '   "env": {"GREETING": "gr\\u00fc\\u00df dich", "SLASHED": "a\\/b", "EMOJI": "\\ud83e\\udde0"},\n'
    '   "statusLine": { "type" : "command", "command" : "echo hi" },\n'
    '   "permissions": {\n'
    '         "allow": [\n'
    '              "Bash(npm run test:*)"\n'
    "         ],\n"
    '         "deny":  []\n'
    "   },\n"
    '   "hooks": {\n'
    '      "SessionStart": [\n'
    '         {"matcher": "startup", "hooks": [{"type": "command", "command": "echo welcome"}]}\n'
    "      ],\n"
    '      "Stop": [ {"hooks": [{"type": "command", "command": "say done", "timeout": 5.0}]} ]\n'
    "   }\n"
    "}"
)
HAND_CLAUDE_JSON = (
    '{"numStartups":3,"tipsHistory":{"memory":1E+2,"ratio":0.50},'
    '"projects":{"/home/dev/x":{"history":[{"display":"caf\\u00e9 \\ud83d cut"}]}},'
    '"mcpServers":{"other":{"type":"stdio","command":"/usr/bin/other","args":[],"env":{}}}}\n'
)


def test_init_changes_only_what_it_adds_to_hand_formatted_files(user_home: Path, run_cli: RunCli) -> None:
    settings, claude_json = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    settings.parent.mkdir()
    settings.write_text(HAND_SETTINGS)
    claude_json.write_text(HAND_CLAUDE_JSON)
    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    after_settings, after_claude = settings.read_text(), claude_json.read_text()

    # settings.json is indented: whole lines are added, not one existing line changes
    added = "".join(_only_added(HAND_SETTINGS, after_settings, whole_lines=True))
    assert '"mcp__anamnesis"' in added and added.count("-P -m anamnesis.hooks") == 4
    assert "1e3" in after_settings and "\\u00fc\\u00df" in after_settings and "a\\/b" in after_settings
    assert '"timeout": 5.0' in after_settings
    # what is added is indented like the lines around it
    assert (
        '\n         "allow": [\n              "mcp__anamnesis",\n              "Bash(npm run test:*)"\n'
        in after_settings
    )
    assert '\n      "SessionEnd": [\n         {\n            "hooks": [\n' in after_settings
    data = _load(settings)
    assert data["cleanupPeriodDays"] == 1000 and data["env"]["EMOJI"] == "\U0001f9e0"
    for event in ("SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd"):
        assert len(_ours(data, event)) == 1
    assert data["hooks"]["SessionStart"][1]["hooks"][0]["command"] == "echo welcome"

    # ~/.claude.json is one compact line: the server goes in, in its compact style, nothing else moves
    (server,) = _only_added(HAND_CLAUDE_JSON, after_claude, whole_lines=False)
    assert '{"numStartups":3,"anamnesis":' not in after_claude  # (where it went: into mcpServers)
    assert '"mcpServers":{"anamnesis":{"type":"stdio","command":' in after_claude
    assert '"args":["-P","-m","anamnesis","mcp"]' in server
    assert "1E+2" in after_claude and "0.50" in after_claude and "\\ud83d cut" in after_claude
    assert stat.S_IMODE(claude_json.stat().st_mode) == 0o600

    # uninstall gives both back byte for byte: from init's backups, and without them too
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert settings.read_text() == HAND_SETTINGS and claude_json.read_text() == HAND_CLAUDE_JSON
    assert run_cli("init", env=_env(user_home)).returncode == 0
    for backup in user_home.rglob("*.anamnesis-backup-*"):
        backup.unlink()
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert settings.read_text() == HAND_SETTINGS and claude_json.read_text() == HAND_CLAUDE_JSON


def test_init_keeps_crlf_line_ends(user_home: Path, run_cli: RunCli) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = '{\r\n  "model": "opus",\r\n  "permissions": {\r\n    "allow": []\r\n  }\r\n}\r\n'
    settings.write_bytes(original.encode())
    assert run_cli("init", env=_env(user_home)).returncode == 0
    text = settings.read_bytes().decode()
    assert "\n" not in text.replace("\r\n", "")
    assert _load(settings)["permissions"]["allow"] == ["mcp__anamnesis"]
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert settings.read_bytes() == original.encode()


def test_init_rewrites_registrations_of_the_old_form(user_home: Path, run_cli: RunCli, home: Path) -> None:
    """Hooks and server registered by an older init (`python -m …`, no -P) are rewritten in place."""
    from anamnesis.agents import claude as claude_setup

    python = os.path.abspath(sys.executable)
    settings, claude_json = user_home / ".claude" / "settings.json", user_home / ".claude.json"
    settings.parent.mkdir()
    hooks: dict[str, Any] = {}
    for event, (matcher, argument, timeout) in claude_setup.HOOKS.items():
        entry = {"type": "command", "command": f'"{python}" -m anamnesis.hooks {argument} --home "{home}"'}
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        hooks[event] = [{**group, "hooks": [{**entry, "timeout": timeout}]}]
    hooks["Stop"] = [{"hooks": [{"type": "command", "command": "say done"}]}]
    old_settings = json.dumps(
        {"model": "opus", "hooks": hooks, "permissions": {"allow": [PERMISSION]}}, indent=2
    )
    settings.write_text(old_settings + "\n")
    old_server = {"type": "stdio", "command": python, "args": ["-m", "anamnesis", "mcp"]}
    old_server["env"] = {"ANAMNESIS_HOME": str(home)}  # type: ignore[assignment]
    old_claude = json.dumps({"numStartups": 3, "mcpServers": {"anamnesis": old_server}}, indent=2) + "\n"
    claude_json.write_text(old_claude)

    proc = run_cli("init", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert "updated the SessionStart hook (now run with -P)" in proc.stdout
    data = _load(settings)
    for event, (_matcher, argument, _timeout) in claude_setup.HOOKS.items():
        (hook,) = _ours(data, event)
        assert hook["command"] == f'"{python}" -P -m anamnesis.hooks {argument} --home "{home}"'
    assert data["hooks"]["Stop"] == hooks["Stop"] and data["model"] == "opus"
    assert _load(claude_json)["mcpServers"]["anamnesis"]["args"] == ["-P", "-m", "anamnesis", "mcp"]
    # only the command lines changed (and the args gained a line); the old text is in the backup
    changed = [
        line
        for line in difflib.unified_diff(old_settings.splitlines(), settings.read_text().splitlines(), n=0)
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]
    assert len(changed) == 8 and all('"command": ' in line for line in changed), changed
    assert _only_added(old_claude, claude_json.read_text(), whole_lines=True) == ['        "-P",\n']
    (backup,) = (user_home / ".claude").glob("settings.json.anamnesis-backup-*")
    assert backup.read_text() == old_settings + "\n"

    again = run_cli("init", env=_env(user_home))
    assert again.returncode == 0 and "already set up" in again.stdout
    assert run_cli("uninstall", env=_env(user_home)).returncode == 0
    assert (
        "anamnesis.hooks" not in settings.read_text() and "anamnesis" not in _load(claude_json)["mcpServers"]
    )


def test_a_config_file_made_read_only_is_refused_not_replaced(user_home: Path, home: Path, run_cli: RunCli) -> None:
    """A settings.json the person made read-only could still be replaced (its folder is
    writable), but that would undo their choice: init stops naming it, and changes no file."""
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    claude_json = user_home / ".claude.json"
    claude_json.write_text('{"numStartups": 3}\n')
    settings.chmod(0o444)
    ran = run_cli("init", "--agent", "claude", "--no-schedule", "--no-semantic", env=_env(user_home))
    assert ran.returncode == 15, (ran.returncode, ran.stdout, ran.stderr)
    assert f"{settings} is read-only" in ran.stderr and "nothing was changed" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1, ran.stderr
    assert settings.read_text() == '{"model": "opus"}\n' and claude_json.read_text() == '{"numStartups": 3}\n'
    assert settings.stat().st_mode & 0o777 == 0o444
    settings.chmod(0o644)
    assert run_cli("init", "--agent", "claude", "--no-schedule", "--no-semantic", env=_env(user_home)).returncode == 0
    assert "anamnesis" in settings.read_text()


def test_a_config_folder_that_cannot_be_written_changes_no_file(user_home: Path, home: Path) -> None:
    """~/.claude read-only: init stops (exit 15) naming it, and ~/.claude.json is not touched either."""
    from conftest import cli_env
    from mounts import without_root_powers

    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "opus"}\n')
    claude_json = user_home / ".claude.json"
    claude_json.write_text('{"numStartups": 3}\n')
    settings.parent.chmod(0o555)
    try:
        ran = subprocess.run(
            without_root_powers([sys.executable, "-m", "anamnesis", "init", "--agent", "claude", "--no-schedule", "--no-semantic"]),
            capture_output=True, text=True, timeout=60, env=cli_env(home, **_env(user_home)),
        )
    finally:
        settings.parent.chmod(0o755)
    assert ran.returncode == 15, (ran.returncode, ran.stdout, ran.stderr)
    assert f"{settings.parent} cannot be written" in ran.stderr and "nothing was changed" in ran.stderr
    assert claude_json.read_text() == '{"numStartups": 3}\n' and settings.read_text() == '{"model": "opus"}\n'
    assert sorted(p.name for p in user_home.iterdir()) == [".claude", ".claude.json"]  # no backup left


def test_a_write_that_fails_half_way_puts_back_the_files_already_written(tmp_path: Path) -> None:
    from anamnesis.agents.files import AgentConfigError, FileChange, apply, backups_of

    first = tmp_path / "first.json"
    first.write_text('{"a": 1}\n')
    blocker = tmp_path / "blocker"  # a file where the second change needs a folder: passes the checks
    blocker.write_text("")
    blocker.chmod(0o755)
    changes = [
        FileChange(first, '{"a": 1}\n', '{"a": 1, "b": 2}\n', 0o644, what=["added b"]),
        FileChange(blocker / "sub" / "second.json", None, "{}\n", 0o644, what=["created"]),
    ]
    with pytest.raises(AgentConfigError, match="nothing was changed"):
        apply(changes)
    assert first.read_text() == '{"a": 1}\n' and backups_of(first) == []


def test_an_empty_settings_file_is_given_back_empty(user_home: Path, run_cli: RunCli) -> None:
    settings = user_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(b"")
    assert run_cli("init", "--agent", "claude", "--no-schedule", "--no-semantic", env=_env(user_home)).returncode == 0
    assert settings.read_bytes() != b""
    proc = run_cli("uninstall", "--agent", "claude", env=_env(user_home))
    assert proc.returncode == 0, proc.stderr
    assert settings.read_bytes() == b""


def test_init_says_when_claude_code_is_not_installed_yet(run_cli: RunCli, tmp_path: Path) -> None:
    """Its settings are written ahead of a later install; the report says so rather than implying
    Claude Code was found."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("git", "ssh"):
        found = next((Path(d) / tool for d in os.environ["PATH"].split(os.pathsep) if (Path(d) / tool).exists()), None)
        if found:
            (bare / tool).symlink_to(found)
    said = run_cli("init", "--no-schedule", "--no-semantic", "--json", env={"PATH": str(bare)})
    assert said.returncode == 0, said.stderr
    done = json.loads(said.stdout)["done"]
    assert any("Claude Code: not installed here" in line for line in done), done
    (bare / "claude").write_text("#!/bin/sh\n")
    (bare / "claude").chmod(0o755)
    again = json.loads(run_cli("init", "--no-schedule", "--no-semantic", "--json", env={"PATH": str(bare)}).stdout)
    assert not any("not installed here" in line for line in again["done"]), again
