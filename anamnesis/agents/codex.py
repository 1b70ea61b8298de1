"""Codex CLI: `[mcp_servers.anamnesis]` in ~/.codex/config.toml, the memory block in ~/.codex/AGENTS.md.

`$CODEX_HOME` moves the ~/.codex folder, as it does for the CLI. A new entry
is appended to the file as a table of its own (TOML allows a sub-table after
other tables), so every existing line, comment and blank stays as it was;
an entry of ours that needs updating is edited with tomlkit, which keeps the
rest of the document's formatting. The result is checked with the standard
library's TOML parser before anything is written. A file that starts with a
UTF-8 byte order mark (Codex reads it) keeps it: the mark is set aside while
the TOML is read and edited, and put back in front.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from anamnesis.agents.base import McpFileAgent
from anamnesis.agents.files import SERVER_NAME, AgentConfigError, mcp_args

TABLE = "mcp_servers"
BOM = "\ufeff"


class Codex(McpFileAgent):
    """OpenAI's Codex CLI."""

    name = "codex"
    title = "Codex CLI"
    binary = "codex"
    file_mode = 0o600  # Codex's config may hold tokens: keep a new one private

    def config_dir(self) -> Path:
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")

    def config_path(self) -> Path:
        return self.config_dir() / "config.toml"

    def instructions_path(self) -> Path | None:
        return self.config_dir() / "AGENTS.md"

    def entry(self, python: str, home: str | None) -> dict[str, Any]:
        """Shaped as `codex mcp add` writes it: command, args, and env when needed."""
        entry: dict[str, Any] = {"command": python, "args": mcp_args()}
        if home:
            entry["env"] = {"ANAMNESIS_HOME": home}
        return entry

    def parsed(self, text: str) -> Any:
        return tomllib.loads(text.removeprefix(BOM))

    def same(self, a: str, b: str) -> bool:
        try:
            return bool(self.parsed(a) == self.parsed(b))
        except tomllib.TOMLDecodeError:
            return False

    def _load(self, path: Path, text: str | None) -> dict[str, Any]:
        try:
            data: dict[str, Any] = tomllib.loads((text or "").removeprefix(BOM))
        except tomllib.TOMLDecodeError as exc:
            raise AgentConfigError(
                f"{path} is not valid TOML ({exc}); fix or move it and run again — nothing was changed"
            ) from None
        servers = data.get(TABLE)
        if servers is not None and not isinstance(servers, dict):
            raise AgentConfigError(
                f"{path}: {TABLE!r} is not a table; fix it and run again — nothing was changed"
            )
        return data

    def add_server(
        self, path: Path, text: str | None, python: str, home: str | None
    ) -> tuple[str, list[str], list[str]]:
        mark = BOM if text and text.startswith(BOM) else ""
        after, what, created = self._add_server(path, text[len(mark) :] if text else text, python, home)
        return mark + after, what, created

    def server_entry(self, path: Path, text: str | None) -> Any:
        return self._load(path, text).get(TABLE, {}).get(SERVER_NAME)

    def put_entry(self, path: Path, text: str, entry: Any) -> str:
        mark = BOM if text.startswith(BOM) else ""
        command = " ".join(str(word) for word in [entry.get("command", ""), *entry.get("args", [])])
        return mark + self._put(path, text[len(mark) :], entry, command)[0]

    def _add_server(
        self, path: Path, text: str | None, python: str, home: str | None
    ) -> tuple[str, list[str], list[str]]:
        data = self._load(path, text)
        created = [] if TABLE in data else [TABLE]
        wanted = self.entry(python, home)
        if data.get(TABLE, {}).get(SERVER_NAME) == wanted:
            return text or "", [], created
        after, what = self._put(path, text, wanted, " ".join([python, *mcp_args()]))
        return after, what, created

    def _put(self, path: Path, text: str | None, wanted: dict[str, Any], command: str) -> tuple[str, list[str]]:
        """`text` with `wanted` as the entry: appended when there is none, else replaced in place."""
        import tomlkit  # lazy: tomlkit (~20 ms) only to edit Codex's config.toml; init loads every agent

        current = self._load(path, text).get(TABLE, {}).get(SERVER_NAME)
        if current is None:
            after = _append(text or "", _render(wanted))
            what = [f"registered the MCP server {SERVER_NAME!r}: {command}"]
        else:
            doc = tomlkit.parse(text or "")
            table = tomlkit.table()
            for key, value in wanted.items():
                table[key] = tomlkit.inline_table() if isinstance(value, dict) else value
                if isinstance(value, dict):
                    table[key].update(value)
            try:
                doc[TABLE][SERVER_NAME] = table  # type: ignore[index]
            except (TypeError, ValueError, KeyError) as exc:
                raise AgentConfigError(
                    f"{path}: cannot update [{TABLE}.{SERVER_NAME}] ({exc}); edit it by hand — nothing was changed"
                ) from None
            after = tomlkit.dumps(doc)
            what = [f"updated the MCP server {SERVER_NAME!r}: {command}"]
        try:
            check = tomllib.loads(after)
        except tomllib.TOMLDecodeError as exc:
            check = {"error": str(exc)}
        if check.get(TABLE, {}).get(SERVER_NAME) != wanted:
            raise AgentConfigError(
                f"{path}: [{TABLE}] is written in a form this tool cannot extend (an inline table or dotted keys); "
                f"add [{TABLE}.{SERVER_NAME}] by hand — nothing was changed"
            )
        return after, what

    def remove_server(self, path: Path, text: str, created: list[str]) -> tuple[str, list[str]]:
        mark = BOM if text.startswith(BOM) else ""
        after, what = self._remove_server(path, text[len(mark) :], created)
        return mark + after, what

    def _remove_server(self, path: Path, text: str, created: list[str]) -> tuple[str, list[str]]:
        import tomlkit  # lazy: tomlkit (~20 ms) only to edit Codex's config.toml; init loads every agent

        data = self._load(path, text)
        if SERVER_NAME not in data.get(TABLE, {}):
            return text, []
        eol = _eol(text)
        block = _render(self.entry_of(data)).replace("\n", eol)
        if text.endswith(block):  # as init appended it: cut exactly that
            after = text[: -len(block)]
            after = after[: -len(eol)] if after.endswith(eol + eol) else after
        else:
            doc = tomlkit.parse(text)
            servers: Any = doc[TABLE]
            del servers[SERVER_NAME]
            if not servers and TABLE in created:
                del doc[TABLE]
            after = tomlkit.dumps(doc)
        return after, [f"removed the MCP server {SERVER_NAME!r}"]

    @staticmethod
    def entry_of(data: dict[str, Any]) -> dict[str, Any]:
        """Our entry as the file holds it."""
        entry = data.get(TABLE, {}).get(SERVER_NAME, {})
        return entry if isinstance(entry, dict) else {}


def _render(entry: dict[str, Any]) -> str:
    """Our table as TOML text (values escaped by tomlkit)."""
    import tomlkit  # lazy: tomlkit (~20 ms) only to edit Codex's config.toml; init loads every agent

    lines = [f"[{TABLE}.{SERVER_NAME}]"]
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            lines.append(f"{key} = {inline.as_string()}")
        else:
            lines.append(f"{key} = {tomlkit.item(value).as_string()}")
    return "\n".join(lines) + "\n"


def _append(text: str, block: str) -> str:
    """`block` after `text`, separated by one blank line, in the file's line endings."""
    if not text:
        return block
    eol = _eol(text)
    newline = "" if text.endswith("\n") else eol
    return text + newline + eol + block.replace("\n", eol)


def _eol(text: str) -> str:
    """The file's line ending: CRLF when it has any (Codex reads either)."""
    return "\r\n" if "\r\n" in text else "\n"
