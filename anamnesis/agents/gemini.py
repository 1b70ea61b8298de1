"""Gemini CLI: `mcpServers.anamnesis` and two hooks in ~/.gemini/settings.json, the memory block in ~/.gemini/GEMINI.md.

`$GEMINI_CLI_HOME` moves the whole ~/.gemini folder, as it does for the CLI.
Gemini CLI reads settings.json with `//` and `/* */` comments (not with
trailing commas): we edit such a file in place, its comments kept.
Gemini CLI lists a user-level server only in folders the user trusts; it
then starts it and shows whether it connected (`gemini mcp list`).

Its hooks (settings `hooks`, on by default: `hooksConfig.enabled`) take the
same JSON on stdin as Claude Code's (`session_id`, `transcript_path`, `cwd`,
`source`) and read the same `hookSpecificOutput.additionalContext`, so the
one hook runner serves both; `--agent gemini` tells it the transcript is a
Gemini session file. SessionStart injects the memory (Gemini CLI puts it
before the first prompt), SessionEnd captures the session note. Gemini CLI
has no per-prompt hook that adds context the way UserPromptSubmit does
without rewriting the prompt, and no hook before it compresses history that
sees the transcript, so those two are not registered.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from anamnesis.agents.base import JsonMcpAgent
from anamnesis.agents.claude import hook_command, is_our_hook
from anamnesis.agents.files import container, edited_json, mcp_args, parse_json
from anamnesis.agents.jsonedit import WITH_COMMENTS

# event -> (hook argument, timeout in milliseconds: Gemini CLI's unit)
HOOKS: dict[str, tuple[str, int]] = {
    "SessionStart": ("session-start", 10_000),
    "SessionEnd": ("session-end", 15_000),
}


def hook_entry(python: str, event: str, home: str | None) -> dict[str, Any]:
    """Our hook for `event`, in Gemini CLI's schema (the name is what `hooksConfig.disabled` lists)."""
    argument, timeout = HOOKS[event]
    return {
        "name": f"anamnesis-{argument}",
        "type": "command",
        "command": hook_command(python, f"{argument} --agent gemini", home),
        "timeout": timeout,
    }


def add_hooks(data: dict[str, Any], python: str, home: str | None, path: Path) -> tuple[list[str], list[str]]:
    """Put our hooks into settings data in place: (what changed, containers created).

    An existing hook of ours is updated where it stands (duplicates dropped);
    the user's hooks are left alone.
    """
    what: list[str] = []
    created = [] if "hooks" in data else ["hooks"]
    hooks = container(data, "hooks", dict, path)
    for event in HOOKS:
        if event not in hooks:
            created.append(f"hooks.{event}")
        groups = container(hooks, event, list, path, "hooks.")
        wanted = hook_entry(python, event, home)
        found = False
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            for position, entry in enumerate(list(entries)):
                if not is_our_hook(entry):
                    continue
                if found:
                    entries.remove(entry)
                    what.append(f"removed a duplicate {event} hook")
                    continue
                found = True
                if entry != wanted:
                    entries[position] = wanted
                    what.append(f"updated the {event} hook")
        groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not found:
            groups.insert(0, {"hooks": [wanted]})  # first: an indented file gains lines, none change
            what.append(f"added the {event} hook")
    return what, created


def remove_hooks(data: dict[str, Any], created: list[str]) -> list[str]:
    """Take our hooks out of settings data in place; containers in `created` go if left empty."""
    what: list[str] = []
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return what
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        removed = 0
        for group in list(groups):
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            kept = [e for e in entries if not is_our_hook(e)]
            removed += len(entries) - len(kept)
            if kept != entries:
                if kept:
                    group["hooks"] = kept
                else:
                    groups.remove(group)
        if removed:
            what.append(f"removed the {event} hook")
            if not groups and f"hooks.{event}" in created:
                del hooks[event]
    if not hooks and "hooks" in created:
        del data["hooks"]
    return what


class Gemini(JsonMcpAgent):
    """Google's Gemini CLI."""

    name = "gemini"
    title = "Gemini CLI"
    binary = "gemini"
    servers_key = "mcpServers"
    dialect = WITH_COMMENTS  # Gemini CLI strips comments from settings.json; a trailing comma fails it

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

    def add_server(
        self, path: Path, text: str | None, python: str, home: str | None
    ) -> tuple[str, list[str], list[str]]:
        """The server entry (as every JSON agent) and then the SessionStart/SessionEnd hooks."""
        after, what, created = super().add_server(path, text, python, home)
        new = copy.deepcopy(parse_json(path, after, self.dialect))
        more, made = add_hooks(new, python, home, path)
        if not more:
            return after, what, created + made
        return edited_json(after, new, self.dialect, path), what + more, created + made

    def remove_server(self, path: Path, text: str, created: list[str]) -> tuple[str, list[str]]:
        """Without our server entry and our hooks."""
        after, what = super().remove_server(path, text, created)
        new = copy.deepcopy(parse_json(path, after, self.dialect))
        more = remove_hooks(new, created)
        if not more:
            return after, what
        return edited_json(after, new, self.dialect, path), what + more
