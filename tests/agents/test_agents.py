"""Registering with Codex CLI, Gemini CLI and OpenCode: only our lines change, idempotence,
refusal of malformed files with nothing written, --print, and uninstall giving each file back."""

from __future__ import annotations

import difflib
import json
import os
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import RunCli

from anamnesis.agents import instructions
from anamnesis.agents.files import AgentConfigError
from anamnesis.agents.registry import AGENTS, AgentsStep, chosen
from anamnesis.base.paths import Store

PYTHON = os.path.abspath(sys.executable)

CODEX_TOML = """\
# my Codex settings -- hand written
model   =   "o3"      # the good one
approval_policy="on-request"

[projects."/home/dev/api"]
trust_level = 'trusted'   # yes

[mcp_servers.other]
command = "other-server"
args = [ "--fast",
         "--quiet" ]   # two lines

[profiles.fast]
model = "o4-mini"
"""

GEMINI_COMPACT = '{"theme":"Default","mcpServers":{"other":{"command":"x","args":[]}},"selectedAuthType":"oauth"}'

GEMINI_INDENTED = """{
    "theme": "Default",
    "general": {"vimMode": true},
    "mcpServers": {
        "other": {"command": "x"}
    }
}
"""


@pytest.fixture
def agent_homes(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Scratch config folders for the three agents (set in this process's environment)."""
    folders = {
        "codex": tmp_path / "codex-home",
        "gemini": tmp_path / "gemini-home" / ".gemini",
        "opencode": tmp_path / "xdg-config" / "opencode",
    }
    monkeypatch.setenv("CODEX_HOME", str(folders["codex"]))
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path / "gemini-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no agent binary: detection by config folder only
    return folders


def _removed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line.startswith("-") and not line.startswith("---")
    ]


def _backups(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*anamnesis-backup*"))


def test_codex_adds_only_its_table_and_uninstall_gives_the_file_back(store: Store, agent_homes: dict[str, Path]) -> None:
    config = agent_homes["codex"] / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_TOML)
    codex = AGENTS["codex"]
    done = codex.install(store, with_instructions=False)
    text = config.read_text()
    assert _removed_lines(CODEX_TOML, text) == []  # every line of the user's is still there, unchanged
    data = tomllib.loads(text)
    assert data["mcp_servers"]["anamnesis"] == {
        "command": PYTHON,
        "args": ["-P", "-m", "anamnesis", "mcp"],
        "env": {"ANAMNESIS_HOME": str(store.home.absolute())},
    }
    assert data["mcp_servers"]["other"] == {"command": "other-server", "args": ["--fast", "--quiet"]}
    assert data["profiles"] == {"fast": {"model": "o4-mini"}}
    assert any("registered the MCP server" in line for line in done)
    backups = _backups(agent_homes["codex"])
    assert len(backups) == 1
    # again: nothing changes, no new backup
    assert codex.install(store, with_instructions=False) == []
    assert config.read_text() == text and _backups(agent_homes["codex"]) == backups
    codex.uninstall(store)
    assert config.read_text() == CODEX_TOML


def test_codex_update_keeps_the_rest_and_uninstall_without_backups(store: Store, agent_homes: dict[str, Path]) -> None:
    config = agent_homes["codex"] / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_TOML)
    codex = AGENTS["codex"]
    codex.install(store, python="/old venv/bin/python", with_instructions=False)
    done = codex.install(store, python="/new venv/bin/python", with_instructions=False)
    assert any("updated the MCP server" in line for line in done)
    text = config.read_text()
    assert tomllib.loads(text)["mcp_servers"]["anamnesis"]["command"] == "/new venv/bin/python"
    assert text.count("[mcp_servers.anamnesis]") == 1
    assert _removed_lines(CODEX_TOML, text) == []
    for backup in agent_homes["codex"].glob("*anamnesis-backup*"):
        backup.unlink()  # the user cleaned up: uninstall still removes exactly our table
    codex.uninstall(store)
    after = config.read_text()
    assert tomllib.loads(after) == tomllib.loads(CODEX_TOML)
    assert _removed_lines(CODEX_TOML, after) == []


@pytest.mark.parametrize(
    "bad",
    [
        'model = "o3\n',  # unterminated string
        "[mcp_servers]\nother = 1\n[mcp_servers]\n",  # table defined twice
        'mcp_servers = "nope"\n',  # not a table
        'mcp_servers = { other = { command = "x" } }\n',  # an inline table cannot take another table
    ],
)
def test_codex_refuses_a_file_it_cannot_edit_and_writes_nothing(
    store: Store, agent_homes: dict[str, Path], bad: str
) -> None:
    config = agent_homes["codex"] / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(bad)
    with pytest.raises(AgentConfigError) as info:
        AGENTS["codex"].install(store)
    assert str(config) in str(info.value) and "nothing was changed" in str(info.value)
    assert config.read_text() == bad
    assert sorted(p.name for p in agent_homes["codex"].iterdir()) == ["config.toml"]  # no AGENTS.md, no backup


@pytest.mark.parametrize("original", [GEMINI_COMPACT, GEMINI_INDENTED])
def test_gemini_merges_into_settings_and_gives_them_back(
    store: Store, agent_homes: dict[str, Path], original: str
) -> None:
    settings = agent_homes["gemini"] / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(original)
    gemini = AGENTS["gemini"]
    gemini.install(store, with_instructions=False)
    text = settings.read_text()
    data = json.loads(text)
    assert data["mcpServers"]["anamnesis"] == {
        "command": PYTHON,
        "args": ["-P", "-m", "anamnesis", "mcp"],
        "env": {"ANAMNESIS_HOME": str(store.home.absolute())},
    }
    old = json.loads(original)
    assert data["mcpServers"]["other"] == old["mcpServers"]["other"]
    ours = ("mcpServers", "hooks")
    assert {k: v for k, v in data.items() if k not in ours} == {k: v for k, v in old.items() if k not in ours}
    assert sorted(data["hooks"]) == ["SessionEnd", "SessionStart"]  # SessionStart/End hooks besides the server
    if "\n" in original.strip():  # an indented file: lines are only added
        assert _removed_lines(original, text) == []
    assert gemini.install(store, with_instructions=False) == []
    gemini.uninstall(store)
    assert settings.read_text() == original


def test_a_malformed_json_settings_file_stops_every_agent(
    store: Store, agent_homes: dict[str, Path], run_cli: RunCli, home: Path
) -> None:
    settings = agent_homes["gemini"] / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"theme": "Default",}')
    agent_homes["codex"].mkdir(parents=True)
    proc = run_cli("init", "--agent", "codex", "--agent", "gemini", "--no-schedule", env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 15, proc.stdout + proc.stderr
    assert "not valid JSON" in proc.stderr and str(settings) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert settings.read_text() == '{"theme": "Default",}'
    assert list(agent_homes["codex"].iterdir()) == []  # codex was planned too, but nothing written
    assert not (agent_homes["gemini"] / "GEMINI.md").exists()


def test_opencode_creates_its_config_and_removes_it_again(store: Store, agent_homes: dict[str, Path]) -> None:
    opencode = AGENTS["opencode"]
    assert not opencode.detect()
    opencode.install(store)
    config = agent_homes["opencode"] / "opencode.json"
    entry = json.loads(config.read_text())["mcp"]["anamnesis"]
    assert entry == {
        "type": "local",
        "command": [PYTHON, "-P", "-m", "anamnesis", "mcp"],
        "enabled": True,
        "environment": {"ANAMNESIS_HOME": str(store.home.absolute())},
    }
    notes = agent_homes["opencode"] / "AGENTS.md"
    assert instructions.present(notes.read_text())
    assert opencode.detect()  # its config folder exists now
    opencode.uninstall(store)
    assert not config.exists() and not notes.exists()  # both were ours alone


def test_opencode_uses_a_jsonc_file_when_only_that_exists(store: Store, agent_homes: dict[str, Path]) -> None:
    folder = agent_homes["opencode"]
    folder.mkdir(parents=True)
    jsonc = folder / "opencode.jsonc"
    jsonc.write_text('{\n  "model": "anthropic/claude-sonnet-4"\n}\n')
    AGENTS["opencode"].install(store, with_instructions=False)
    assert not (folder / "opencode.json").exists()
    assert json.loads(jsonc.read_text())["model"] == "anthropic/claude-sonnet-4"
    assert "anamnesis" in json.loads(jsonc.read_text())["mcp"]
    AGENTS["opencode"].uninstall(store)
    assert jsonc.read_text() == '{\n  "model": "anthropic/claude-sonnet-4"\n}\n'
    commented = '{\n  // my model\n  "model": "x",\n}\n'  # OpenCode reads JSONC: so do we
    jsonc.write_text(commented)
    AGENTS["opencode"].install(store, with_instructions=False)
    assert "// my model" in jsonc.read_text()
    AGENTS["opencode"].uninstall(store)
    assert jsonc.read_text() == commented


@pytest.mark.parametrize(
    "original",
    ["# My rules\n\nAlways run the tests.\n", "no newline at the end", "line one\r\nline two\r\n", ""],
)
def test_the_instructions_block_is_added_once_and_removed_exactly(
    store: Store, agent_homes: dict[str, Path], original: str
) -> None:
    notes = agent_homes["codex"] / "AGENTS.md"
    notes.parent.mkdir(parents=True)
    notes.write_bytes(original.encode())
    codex = AGENTS["codex"]
    codex.install(store)
    text = notes.read_bytes().decode()
    assert text.startswith(original) and text.count(instructions.BEGIN) == 1
    assert "search" in text and "write" in text
    if "\r\n" in original:
        assert "\n" not in text.replace("\r\n", "")  # the file's own line endings
    codex.install(store)
    assert notes.read_bytes().decode() == text
    for backup in agent_homes["codex"].glob("AGENTS.md.anamnesis-backup*"):
        backup.unlink()  # even without the backup the block and only it goes
    codex.uninstall(store)
    after = notes.read_bytes().decode()
    assert after == (original if original.endswith("\n") or not original else original + "\n")


def test_text_the_user_wrote_after_the_block_stays(store: Store, agent_homes: dict[str, Path]) -> None:
    codex = AGENTS["codex"]
    codex.install(store)  # creates AGENTS.md holding only the block
    notes = agent_homes["codex"] / "AGENTS.md"
    notes.write_text(notes.read_text() + "## Mine\nUse tabs.\n")
    codex.uninstall(store)
    assert notes.read_text() == "## Mine\nUse tabs.\n"  # not deleted, nothing else touched


def test_init_sets_up_the_agents_it_finds_and_print_writes_nothing(
    agent_homes: dict[str, Path], run_cli: RunCli, home: Path
) -> None:
    agent_homes["codex"].mkdir(parents=True)  # Codex "installed"; Gemini and OpenCode not
    env = {"PATH": "/usr/bin:/bin"}
    printed = run_cli("init", "--print", "--no-schedule", env=env)
    assert printed.returncode == 0, printed.stderr
    assert "[mcp_servers.anamnesis]" in printed.stdout and "Codex CLI" in printed.stdout
    assert "Gemini CLI" not in printed.stdout and "OpenCode" not in printed.stdout
    assert list(agent_homes["codex"].iterdir()) == [] and not home.exists()
    proc = run_cli("init", "--no-schedule", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "anamnesis" in tomllib.loads((agent_homes["codex"] / "config.toml").read_text())["mcp_servers"]
    assert instructions.present((agent_homes["codex"] / "AGENTS.md").read_text())
    assert not agent_homes["gemini"].exists() and not agent_homes["opencode"].exists()
    again = run_cli("init", "--no-schedule", env=env)
    assert again.returncode == 0 and "Codex CLI: already set up" in again.stdout


def test_agent_option_picks_one_and_uninstall_agent_removes_only_it(
    agent_homes: dict[str, Path], run_cli: RunCli
) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    assert run_cli("init", "--agent", "gemini", "--agent", "codex", "--no-instructions", "--no-schedule", env=env).returncode == 0
    gemini = agent_homes["gemini"] / "settings.json"
    codex = agent_homes["codex"] / "config.toml"
    assert "anamnesis" in json.loads(gemini.read_text())["mcpServers"]
    assert not (agent_homes["codex"] / "AGENTS.md").exists()  # --no-instructions
    printed = run_cli("uninstall", "--agent", "codex", "--print", env=env)
    assert printed.returncode == 0 and "-[mcp_servers.anamnesis]" in printed.stdout
    assert codex.exists()
    proc = run_cli("uninstall", "--agent", "codex", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not codex.exists()  # init created it and nothing else was in it
    assert "anamnesis" in json.loads(gemini.read_text())["mcpServers"]  # gemini untouched
    bad = run_cli("init", "--agent", "cursor", env=env)
    assert bad.returncode == 2 and "unknown agent 'cursor'" in bad.stderr
    assert "claude, codex, gemini, opencode" in bad.stderr


def test_chosen_and_the_step_plan_before_writing(store: Store, agent_homes: dict[str, Path]) -> None:
    assert [a.name for a in chosen(None)] == ["claude"]  # nothing else installed
    assert [a.name for a in chosen(None, with_claude=False)] == []
    agent_homes["gemini"].mkdir(parents=True)
    assert [a.name for a in chosen(None)] == ["claude", "gemini"]
    assert [a.name for a in chosen(["Codex", "codex"])] == ["codex"]
    step = AgentsStep(store, chosen(["gemini"]))
    assert not (agent_homes["gemini"] / "settings.json").exists()  # planned only
    assert any("registered the MCP server" in line for line in step.planned())
    step.apply()
    assert (agent_homes["gemini"] / "settings.json").exists()


def test_version_says_which_program_this_is(run_cli: RunCli) -> None:
    """The published anamnesis-memory 0.1.3 is another program with the same command name."""
    from anamnesis import __version__

    proc = run_cli("--version", real_process=True)
    assert proc.returncode == 0, proc.stderr
    first, *rest = proc.stdout.splitlines()
    assert first == f"anamnesis {__version__}"
    text = "\n".join(rest)
    assert "not the anamnesis-memory 0.1.3 package" in text
    assert f"package: {Path(__file__).resolve().parents[2] / 'anamnesis'}" in text  # where it runs from
    assert run_cli("-V").stdout == proc.stdout
