"""OpenCode: `mcp.anamnesis` in its global config, the memory block in its global AGENTS.md.

OpenCode's global config folder is `$XDG_CONFIG_HOME/opencode` (by default
~/.config/opencode); it merges config.json, opencode.json and opencode.jsonc
from it, and `opencode mcp add` writes to opencode.json, or to
opencode.jsonc when only that exists. We edit the same file. OpenCode reads
all of them as JSONC (comments and trailing commas): so do we, editing the
file in place with its comments kept. The global instructions file is
AGENTS.md in the same folder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from anamnesis.agents.base import JsonMcpAgent
from anamnesis.agents.files import mcp_args
from anamnesis.agents.jsonedit import JSONC


class OpenCode(JsonMcpAgent):
    """The OpenCode terminal agent."""

    name = "opencode"
    title = "OpenCode"
    binary = "opencode"
    servers_key = "mcp"
    dialect = JSONC

    def config_dir(self) -> Path:
        base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        return Path(base) / "opencode"

    def config_path(self) -> Path:
        plain, with_comments = self.config_dir() / "opencode.json", self.config_dir() / "opencode.jsonc"
        return with_comments if with_comments.exists() and not plain.exists() else plain

    def instructions_path(self) -> Path | None:
        return self.config_dir() / "AGENTS.md"

    def entry(self, python: str, home: str | None) -> dict[str, Any]:
        """A local server: the command as one list, enabled, with its environment."""
        entry: dict[str, Any] = {"type": "local", "command": [python, *mcp_args()], "enabled": True}
        if home:
            entry["environment"] = {"ANAMNESIS_HOME": home}
        return entry
