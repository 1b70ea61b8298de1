"""Gemini CLI: `mcpServers.anamnesis` in ~/.gemini/settings.json, the memory block in ~/.gemini/GEMINI.md.

`$GEMINI_CLI_HOME` moves the whole ~/.gemini folder, as it does for the CLI.
Gemini CLI lists a user-level server only in folders the user trusts; it
then starts it and shows whether it connected (`gemini mcp list`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from anamnesis.agents.base import JsonMcpAgent
from anamnesis.agents.files import mcp_args


class Gemini(JsonMcpAgent):
    """Google's Gemini CLI."""

    name = "gemini"
    title = "Gemini CLI"
    binary = "gemini"
    servers_key = "mcpServers"

    def config_dir(self) -> Path:
        return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini"

    def config_path(self) -> Path:
        return self.config_dir() / "settings.json"

    def instructions_path(self) -> Path | None:
        return self.config_dir() / "GEMINI.md"

    def entry(self, python: str, home: str | None) -> dict[str, Any]:
        """Shaped as `gemini mcp add` writes it (stdio: command, args, env)."""
        entry: dict[str, Any] = {"command": python, "args": mcp_args()}
        if home:
            entry["env"] = {"ANAMNESIS_HOME": home}
        return entry
