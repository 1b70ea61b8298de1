"""Agent configs just off the happy path: comments, trailing commas and a byte order mark the
agents themselves accept; a file that truly cannot be edited skips only its agent; uninstall
removes the empty folders init made; backups do not pile up."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest
from conftest import RunCli
from test_agents import agent_homes  # noqa: F401

from anamnesis.agents import jsonedit
from anamnesis.agents.registry import AGENTS
from anamnesis.base.paths import Store

GEMINI_COMMENTED = """{
  // my look
  "ui": {"theme": "Default"},
  /* servers I use:
     one, for now */
  "mcpServers": {
    "other": {"command": "x", "args": []} // keep
  }
}
"""

OPENCODE_JSONC = """{
  // schema, for the editor
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "other": {"type": "local", "command": ["x"], "enabled": false,}, // off
  },
}
"""

CODEX_BOM = "\ufeff# mine\nmodel = \"o3\"  # keep\n\n[mcp_servers.other]\ncommand = \"/bin/true\"\n"


@pytest.mark.parametrize(
    ("agent", "name", "original", "kept", "dialect", "key"),
    [
        ("gemini", "settings.json", GEMINI_COMMENTED,
         ["// my look", "/* servers I use:\n     one, for now */", "// keep"], jsonedit.WITH_COMMENTS, "mcpServers"),
        ("opencode", "opencode.jsonc", OPENCODE_JSONC,
         ["// schema, for the editor", '"enabled": false,}, // off'], jsonedit.JSONC, "mcp"),
    ],
)
def test_a_json_config_with_comments_is_edited_keeping_them(
    store: Store, agent_homes: dict[str, Path], agent: str, name: str, original: str, kept: list[str],
    dialect: jsonedit.Dialect, key: str,
) -> None:
    config = agent_homes[agent] / name
    config.parent.mkdir(parents=True)
    config.write_text(original)
    AGENTS[agent].install(store, with_instructions=False)
    text = config.read_text()
    assert all(comment in text for comment in kept), text
    assert set(jsonedit.loads(text, dialect)[key]) == {"anamnesis", "other"}
    assert AGENTS[agent].install(store, with_instructions=False) == []  # idempotent
    AGENTS[agent].uninstall(store)
    assert config.read_text() == original


def test_a_codex_config_with_a_byte_order_mark_is_edited_keeping_it(store: Store, agent_homes: dict[str, Path]) -> None:
    config = agent_homes["codex"] / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(CODEX_BOM, encoding="utf-8")
    AGENTS["codex"].install(store, with_instructions=False)
    text = config.read_text(encoding="utf-8")
    assert text.startswith(CODEX_BOM)  # mark, comments, everything kept; our table after
    assert set(tomllib.loads(text.removeprefix("\ufeff"))["mcp_servers"]) == {"anamnesis", "other"}
    AGENTS["codex"].uninstall(store)
    assert config.read_text(encoding="utf-8") == CODEX_BOM


def test_an_agent_whose_file_truly_cannot_be_edited_is_skipped_and_the_rest_set_up(
    agent_homes: dict[str, Path], run_cli: RunCli, home: Path, tmp_path: Path
) -> None:
    settings = agent_homes["gemini"] / "settings.json"
    settings.parent.mkdir(parents=True)
    broken = '{\n  "ui": {"theme": "Default",},\n}\n'  # Gemini CLI itself refuses the trailing commas
    settings.write_text(broken)
    agent_homes["codex"].mkdir(parents=True)
    env = {"PATH": "/usr/bin:/bin"}
    proc = run_cli("init", "--no-schedule", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "Gemini CLI: skipped" in out and "`anamnesis init --agent gemini`" in out and str(settings) in out
    assert settings.read_text() == broken and not (agent_homes["gemini"] / "GEMINI.md").exists()
    assert (home / "memory" / ".git").is_dir()  # the store
    assert "anamnesis" in json.loads((tmp_path / "claude-config" / ".claude.json").read_text())["mcpServers"]
    assert "anamnesis" in tomllib.loads((agent_homes["codex"] / "config.toml").read_text())["mcp_servers"]
    named = run_cli("init", "--agent", "gemini", "--no-schedule", env=env)  # asked for by name: refused
    assert named.returncode == 15 and str(settings) in named.stderr

    gone = run_cli("uninstall", env=env)  # the same for uninstall: the rest is removed
    assert gone.returncode == 0, gone.stderr
    assert "`anamnesis uninstall --agent gemini`" in " ".join(gone.stdout.split())
    assert not (agent_homes["codex"] / "config.toml").exists() and settings.read_text() == broken
    assert run_cli("uninstall", "--agent", "gemini", env=env).returncode == 15


def test_uninstall_removes_the_empty_folders_init_made_and_only_those(
    agent_homes: dict[str, Path], run_cli: RunCli, tmp_path: Path
) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    claude = tmp_path / "claude-config"
    agent_homes["gemini"].mkdir(parents=True)  # there before init: stays
    (agent_homes["gemini"] / "settings.json").write_text("{}\n")
    names = ("--agent", "claude", "--agent", "codex", "--agent", "gemini", "--agent", "opencode")
    assert run_cli("init", *names, "--no-schedule", env=env).returncode == 0
    for folder in (claude, agent_homes["codex"], agent_homes["opencode"]):
        assert folder.is_dir()
    (agent_homes["codex"] / "history.jsonl").write_text("{}\n")  # Codex wrote there since: stays
    proc = run_cli("uninstall", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not claude.exists() and not agent_homes["opencode"].exists()
    assert not agent_homes["opencode"].parent.exists()  # ~/.config too: init had made it, it is empty
    assert f"removed the empty folder {claude}" in " ".join(proc.stdout.split())
    assert agent_homes["codex"].is_dir() and agent_homes["gemini"].is_dir()
    assert [a.name for a in AGENTS.values() if a.name != "claude" and a.detect()] == ["codex", "gemini"]


@pytest.mark.parametrize("rounds", [3])
def test_backups_do_not_pile_up(agent_homes: dict[str, Path], run_cli: RunCli, tmp_path: Path, rounds: int) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    claude = tmp_path / "claude-config"
    claude.mkdir()
    (claude / "settings.json").write_text('{"theme": "dark"}\n')
    codex = agent_homes["codex"]
    codex.mkdir(parents=True)
    (codex / "config.toml").write_text('model = "o3"\n')
    for _ in range(rounds):
        assert run_cli("init", "--agent", "claude", "--agent", "codex", "--no-schedule", env=env).returncode == 0
        assert run_cli("init", "--agent", "claude", "--agent", "codex", "--no-schedule", env=env).returncode == 0
        assert run_cli("uninstall", env=env).returncode == 0
    for config in (claude / "settings.json", codex / "config.toml"):
        backups = list(config.parent.glob(config.name + ".anamnesis-backup*"))
        assert len(backups) <= 1, backups  # one per file at most
    assert (claude / "settings.json").read_text() == '{"theme": "dark"}\n'
    assert (codex / "config.toml").read_text() == 'model = "o3"\n'


def test_comments_inside_an_object_init_fills_or_empties_are_kept(store: Store, agent_homes: dict[str, Path]) -> None:
    settings = agent_homes["gemini"] / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{\n  "mcpServers": {\n    // none yet\n  },\n  "hooks": {} /* later */\n}\n')
    AGENTS["gemini"].install(store, with_instructions=False)
    text = settings.read_text()
    assert "// none yet" in text and "/* later */" in text
    assert "anamnesis" in jsonedit.loads(text, jsonedit.WITH_COMMENTS)["mcpServers"]
    settings.write_text(text.replace("// none yet", "// none yet, but soon"))  # changed since: no backup fits
    AGENTS["gemini"].uninstall(store)
    after = settings.read_text()
    assert "// none yet, but soon" in after and "/* later */" in after
    assert jsonedit.loads(after, jsonedit.WITH_COMMENTS) == {"mcpServers": {}, "hooks": {}}


def test_a_config_linked_to_a_dotfile_not_there_yet_is_made_there_and_removed_there(
    agent_homes: dict[str, Path], run_cli: RunCli, tmp_path: Path
) -> None:
    # GNU stow's state before the package file exists: the link dangles. init writes where it
    # points; uninstall removes that file again and keeps the person's link.
    env = {"PATH": "/usr/bin:/bin"}
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    agent_homes["gemini"].mkdir(parents=True)
    claude = tmp_path / "claude-config"
    claude.mkdir()
    links = {agent_homes["gemini"] / "settings.json": dotfiles / "gemini.json", claude / "settings.json": dotfiles / "claude.json"}
    for link, target in links.items():
        link.symlink_to(target)
    names = ("--agent", "claude", "--agent", "gemini", "--no-instructions", "--no-schedule")
    assert run_cli("init", *names, env=env).returncode == 0
    for link, target in links.items():
        assert link.is_symlink() and "anamnesis" in target.read_text()
    proc = run_cli("uninstall", env=env)
    assert proc.returncode == 0, proc.stderr
    for link, target in links.items():
        assert link.is_symlink(), f"{link}: the person's link was removed"
        assert not target.exists(), f"{target}: init made it, uninstall left it: {target.read_text()}"


CODEX_OWN_ENTRY = 'model = "o3"\r\n\r\n[mcp_servers.anamnesis]\r\n# hand-added, points elsewhere\r\ncommand = "/opt/old/bin/anamnesis"\r\nargs = ["mcp"]\r\n\r\n[mcp_servers.anamnesis.env]\r\nX = "1"\r\n'
GEMINI_OWN_ENTRY = '{\n  // mine\n  "mcpServers": {"anamnesis": {"command": "/opt/old/bin/anamnesis", "args": ["mcp"], "trust": true}}\n}\n'
CLAUDE_OWN_ENTRY = '{"numStartups": 3, "mcpServers": {"anamnesis": {"type": "stdio", "command": "/opt/old/bin/anamnesis", "args": ["mcp"]}}}'


@pytest.mark.parametrize("edited_since", [False, True])
def test_an_anamnesis_entry_of_the_persons_own_that_init_replaced_is_given_back_by_uninstall(
    agent_homes: dict[str, Path], run_cli: RunCli, tmp_path: Path, edited_since: bool
) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    claude = tmp_path / "claude-config"
    files = {
        agent_homes["codex"] / "config.toml": CODEX_OWN_ENTRY,
        agent_homes["gemini"] / "settings.json": GEMINI_OWN_ENTRY,
        claude / ".claude.json": CLAUDE_OWN_ENTRY,
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode())
    names = ("--agent", "claude", "--agent", "codex", "--agent", "gemini", "--no-instructions", "--no-schedule")
    assert run_cli("init", *names, env=env).returncode == 0
    for path in files:
        assert "/opt/old/bin" not in path.read_text(), f"{path}: init did not replace the entry"
    assert run_cli("init", *names, env={**env, "ANAMNESIS_PYTHON_FOR_TEST": "1"}).returncode == 0  # again: no change
    if edited_since:  # the person changed something else since: only the entry is put back
        for path in files:
            path.write_bytes(path.read_bytes().replace(b'"o3"', b'"o4"').replace(b'"numStartups": 3', b'"numStartups": 4'))
    proc = run_cli("uninstall", env=env)
    assert proc.returncode == 0, proc.stderr
    codex = tomllib.loads((agent_homes["codex"] / "config.toml").read_text())
    assert codex["mcp_servers"]["anamnesis"] == {"command": "/opt/old/bin/anamnesis", "args": ["mcp"], "env": {"X": "1"}}
    gemini = jsonedit.loads((agent_homes["gemini"] / "settings.json").read_text(), jsonedit.WITH_COMMENTS)
    assert gemini["mcpServers"]["anamnesis"]["trust"] is True
    assert json.loads((claude / ".claude.json").read_text())["mcpServers"]["anamnesis"]["command"] == "/opt/old/bin/anamnesis"
    if not edited_since:  # nothing else changed: every byte as it was, comments and line endings too
        for path, text in files.items():
            assert path.read_bytes() == text.encode(), path


def test_codex_config_with_crlf_line_endings_gets_our_entry_in_crlf(store: Store, agent_homes: dict[str, Path]) -> None:
    config = agent_homes["codex"] / "config.toml"
    config.parent.mkdir(parents=True)
    original = b'model = "o3"\r\n[mcp_servers.a]\r\ncommand = "y"\r\n'
    config.write_bytes(original)
    AGENTS["codex"].install(store, with_instructions=False)
    text = config.read_bytes()
    assert b"[mcp_servers.anamnesis]\r\n" in text and b"\n" not in text.replace(b"\r\n", b""), text
    AGENTS["codex"].uninstall(store)
    assert config.read_bytes() == original


@pytest.mark.parametrize("agent", ["gemini", "opencode", "codex"])
def test_an_empty_config_file_comes_back_empty(store: Store, agent_homes: dict[str, Path], agent: str) -> None:
    name = {"gemini": "settings.json", "opencode": "opencode.json", "codex": "config.toml"}[agent]
    config = agent_homes[agent] / name
    config.parent.mkdir(parents=True)
    config.write_bytes(b"")
    AGENTS[agent].install(store, with_instructions=False)
    assert "anamnesis" in config.read_text()
    AGENTS[agent].uninstall(store)
    assert config.read_bytes() == b""


def test_a_hard_linked_config_stays_one_file_and_a_dangling_folder_link_is_named(
    store: Store, agent_homes: dict[str, Path], tmp_path: Path, run_cli: RunCli
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "gemini.json").write_text('{"ui": {"theme": "Default"}}\n')
    agent_homes["gemini"].mkdir(parents=True)
    settings = agent_homes["gemini"] / "settings.json"
    os.link(dotfiles / "gemini.json", settings)
    AGENTS["gemini"].install(store, with_instructions=False)
    assert os.path.samefile(settings, dotfiles / "gemini.json") and "anamnesis" in (dotfiles / "gemini.json").read_text()
    AGENTS["gemini"].uninstall(store)
    assert os.path.samefile(settings, dotfiles / "gemini.json")
    assert (dotfiles / "gemini.json").read_text() == '{"ui": {"theme": "Default"}}\n'

    codex = agent_homes["codex"]
    codex.symlink_to(tmp_path / "dotfiles-codex-not-there")
    proc = run_cli("init", "--agent", "codex", "--no-schedule", "--no-instructions", env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 15 and "which does not exist" in proc.stderr and str(codex) in proc.stderr, proc.stderr
