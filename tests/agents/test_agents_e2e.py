"""The real Codex CLI, Gemini CLI and OpenCode (from npm, see scripts/test) list our MCP server
after `init` — connected, where the CLI checks that — and `uninstall` gives their files back byte
for byte."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import RunCli

from anamnesis.agents import instructions

CACHE = Path(os.environ.get("ANAMNESIS_TEST_CACHE", Path.home() / ".cache" / "anamnesis-test"))


@dataclass
class Case:
    agent: str
    binary: str
    config: str  # relative to the scratch HOME
    notes: str  # the instructions file
    original: str  # the user's config before init


CASES = [
    Case(
        "codex",
        "codex",
        ".codex/config.toml",
        ".codex/AGENTS.md",
        '# mine\nmodel = "o3"   # keep\n\n[mcp_servers.other]\ncommand = "/bin/true"\n',
    ),
    Case("gemini", "gemini", ".gemini/settings.json", ".gemini/GEMINI.md", '{\n  "ui": {"theme": "Default"}\n}\n'),
    Case(
        "opencode",
        "opencode",
        ".config/opencode/opencode.json",
        ".config/opencode/AGENTS.md",
        '{\n  "$schema": "https://opencode.ai/config.json"\n}\n',
    ),
]
# What each agent accepts besides plain JSON / TOML: edited in place, comments kept, still loaded by the CLI.
COMMENTED = [
    Case(
        "codex",
        "codex",
        ".codex/config.toml",
        ".codex/AGENTS.md",
        '\ufeff# mine, with a byte order mark\nmodel = "o3"   # keep\n\n[mcp_servers.other]\ncommand = "/bin/true"\n',
    ),
    Case(
        "gemini",
        "gemini",
        ".gemini/settings.json",
        ".gemini/GEMINI.md",
        '{\n  // my look\n  "ui": {"theme": "Default"}, /* the default */\n  "mcpServers": {}\n}\n',
    ),
    Case(
        "opencode",
        "opencode",
        ".config/opencode/opencode.jsonc",
        ".config/opencode/AGENTS.md",
        '{\n  // for the editor\n  "$schema": "https://opencode.ai/config.json",\n  "mcp": {\n    "other": {"type": "local",'
        ' "command": ["/bin/true"], "enabled": false,},\n  },\n}\n',
    ),
]


def _binary(name: str) -> str:
    """The CLI from the test cache (or $ANAMNESIS_<NAME>_BIN); in CI a missing one fails the test."""
    path = os.environ.get(f"ANAMNESIS_{name.upper()}_BIN") or str(CACHE / "agents" / "node_modules" / ".bin" / name)
    if not os.access(path, os.X_OK):
        message = f"{name} CLI not installed at {path} (scripts/test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _listing(case: Case, binary: str, env: dict[str, str], cwd: Path) -> str:
    args = {"codex": ["mcp", "list", "--json"], "gemini": ["mcp", "list"], "opencode": ["mcp", "list"]}[case.agent]
    proc = subprocess.run(
        [binary, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout + proc.stderr


@pytest.mark.e2e
@pytest.mark.parametrize(
    "case", CASES + COMMENTED, ids=[c.agent for c in CASES] + [f"{c.agent}-commented" for c in COMMENTED]
)
def test_the_real_cli_lists_the_server_and_uninstall_gives_files_back(
    case: Case, tmp_path: Path, run_cli: RunCli, home: Path
) -> None:
    binary = _binary(case.binary)
    user = tmp_path / "user"
    project = user / "project"
    project.mkdir(parents=True)
    config = user / case.config
    config.parent.mkdir(parents=True)
    config.write_text(case.original, encoding="utf-8")
    env = {
        "HOME": str(user),
        "CODEX_HOME": str(user / ".codex"),
        "GEMINI_CLI_HOME": str(user),
        "XDG_CONFIG_HOME": str(user / ".config"),
        "PATH": f"{Path(binary).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    proc = run_cli("init", "--agent", case.agent, "--no-schedule", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert instructions.present((user / case.notes).read_text())

    cli_env = {**os.environ, **env, "ANAMNESIS_HOME": str(home), "GEMINI_CLI_TRUST_WORKSPACE": "true"}
    listing = _listing(case, binary, cli_env, project)
    if case.agent == "codex":  # codex lists its servers without starting them
        servers = {s["name"]: s for s in json.loads(listing[: listing.rindex("]") + 1])}
        assert servers["anamnesis"]["enabled"] is True
        assert servers["anamnesis"]["transport"]["args"] == ["-P", "-m", "anamnesis", "mcp"]
        assert "other" in servers
    elif case.agent == "gemini":  # gemini starts each server and reports whether it connected
        line = next(line for line in listing.splitlines() if "anamnesis:" in line)
        assert "Connected" in line and "Disconnected" not in line, listing
    else:  # opencode too
        lines = listing.splitlines()
        index = next(i for i, line in enumerate(lines) if " anamnesis" in line)
        assert "connected" in lines[index] and "✓" in lines[index], listing

    proc = run_cli("uninstall", "--agent", case.agent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert config.read_text(encoding="utf-8") == case.original  # byte for byte
    assert not (user / case.notes).exists()  # init created it; nothing else was in it
    assert "anamnesis" not in _listing(case, binary, cli_env, project).replace("/anamnesis", "")
