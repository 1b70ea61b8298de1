"""The `Agent` interface, and the shared part of agents configured by one MCP file.

An agent is a coding agent Anamnesis registers its MCP server with: it can
say whether it is installed (`detect`), plan the edits `init` makes to its
config (nothing written, refusing a file it cannot safely edit), and plan
their removal. `install` and `uninstall` apply a plan. Claude Code is one
agent (with hooks besides the server); Codex CLI, Gemini CLI and OpenCode are
`McpFileAgent`s: a server entry in one config file and, optionally, a short
memory block in the instructions file the agent reads at every session.
"""

from __future__ import annotations

import copy
import json
import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.agents import instructions, jsonedit
from anamnesis.agents.files import (
    FILE_CREATED,
    SERVER_NAME,
    FileChange,
    apply,
    backup_holding,
    container,
    custom_home,
    dumps_json,
    edited_json,
    entry_replaced,
    loads_json,
    mcp_args,
    mode_of,
    parse_json,
    python_path,
    read_text,
    remove_empty_folders,
    same_json,
)
from anamnesis.agents.jsonedit import JSON, Dialect
from anamnesis.base.fsutil import atomic_write_text

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

MANIFEST = "agents-install.json"  # in the store's state folder: what init created, per agent and file
FOLDERS = "(folders)"  # manifest key beside the files: the folders init created, for uninstall
REPLACED = "(replaced)"  # manifest key: per file, the person's own `anamnesis` entry init replaced


class Agent(ABC):
    """One coding agent Anamnesis can register with."""

    name: str  # as given to --agent
    title: str  # for people
    binary: str  # the command that starts it

    @abstractmethod
    def config_dir(self) -> Path:
        """The folder holding the agent's user-level config."""

    def on_path(self) -> bool:
        """Whether the agent's command is on PATH."""
        return shutil.which(self.binary) is not None

    def detect(self) -> bool:
        """Whether the agent looks installed: its command is on PATH or its config folder exists."""
        return self.on_path() or self.config_dir().is_dir()

    @abstractmethod
    def plan_install(
        self, store: Store, python: str | None = None, with_instructions: bool = True
    ) -> list[FileChange]:
        """The changes init would make (nothing written); raises AgentConfigError on a file it cannot edit."""

    @abstractmethod
    def plan_uninstall(self, store: Store) -> list[FileChange]:
        """The changes that remove what init added (nothing written)."""

    @abstractmethod
    def install(self, store: Store, python: str | None = None, with_instructions: bool = True) -> list[str]:
        """Apply the install plan; idempotent; returns what was done."""

    @abstractmethod
    def uninstall(self, store: Store) -> list[str]:
        """Remove what init added; returns what was done."""


def read_manifest(store: Store) -> dict[str, Any]:
    """What init created, per agent name and file (empty when nothing was recorded)."""
    try:
        data = json.loads((store.state_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_manifest(store: Store, data: dict[str, Any]) -> None:
    """Record what init created (removed again when nothing is left in it)."""
    path = store.state_dir / MANIFEST
    if not data:
        path.unlink(missing_ok=True)
        return
    atomic_write_text(path, dumps_json(data), mode=0o600)


class McpFileAgent(Agent):
    """An agent set up by one MCP server entry in one config file (plus its instructions file)."""

    file_mode = 0o644  # for a config file init creates

    @abstractmethod
    def config_path(self) -> Path:
        """The user-level config file that holds MCP servers."""

    @abstractmethod
    def instructions_path(self) -> Path | None:
        """The instructions file the agent reads in every session (None: it has none)."""

    @abstractmethod
    def add_server(
        self, path: Path, text: str | None, python: str, home: str | None
    ) -> tuple[str, list[str], list[str]]:
        """(text after, what changed, containers created) with our server entry in the file."""

    @abstractmethod
    def remove_server(self, path: Path, text: str, created: list[str]) -> tuple[str, list[str]]:
        """(text after, what changed) without our server entry; containers in `created` go if left empty."""

    @abstractmethod
    def same(self, a: str, b: str) -> bool:
        """Whether two texts of the config file hold the same settings."""

    @abstractmethod
    def parsed(self, text: str) -> Any:
        """The settings a text of the config file holds (for finding the backup to give back)."""

    @abstractmethod
    def server_entry(self, path: Path, text: str | None) -> Any:
        """The `anamnesis` entry the file holds (None: none)."""

    @abstractmethod
    def put_entry(self, path: Path, text: str, entry: Any) -> str:
        """The file's text with `entry` as its `anamnesis` entry (to give back one init replaced)."""

    def kept(self, backup: str, text: str) -> bool:
        """Whether giving `backup` back keeps what the person wrote into `text` since besides the
        settings (their comments): only then is it given back."""
        return True

    def plan_install(
        self, store: Store, python: str | None = None, with_instructions: bool = True
    ) -> list[FileChange]:
        python = python or python_path()
        path = self.config_path()
        text = read_text(path)
        after, what, created = self.add_server(path, text, python, custom_home(store))
        changes = [
            FileChange(path, text, after, mode_of(path, self.file_mode), what, created, same=self.same)
        ]
        notes = self.instructions_path()
        if with_instructions and notes is not None:
            text = read_text(notes)
            after = instructions.add(text)
            what = [] if text == after else ["added the memory instructions block"]
            changes.append(FileChange(notes, text, after, mode_of(notes, 0o644), what, same=None))
        return changes

    def plan_uninstall(self, store: Store) -> list[FileChange]:
        created_by = read_manifest(store).get(self.name, {})
        created_by = created_by if isinstance(created_by, dict) else {}
        changes: list[FileChange] = []
        path = self.config_path()
        text = read_text(path)
        if text is not None:
            created = created_by.get(str(path), [])
            after, what = self.remove_server(path, text, created)
            replaced = created_by.get(REPLACED, {})
            theirs = replaced.get(str(path)) if isinstance(replaced, dict) else None
            if what and theirs is not None:  # the person's own entry, as it was before init
                after = self.put_entry(path, after, theirs)
                what = [f"gave back the {SERVER_NAME!r} entry init had replaced"]
            if what:
                wanted, now = self.parsed(after), text
                held = backup_holding(path, lambda old: self.parsed(old) == wanted and self.kept(old, now))
                after = held if held is not None else after  # an empty file comes back empty
            change = FileChange(path, text, after, mode_of(path, self.file_mode), what, same=self.same)
            change.remove = bool(what) and FILE_CREATED in created and not self.parsed(after)
            changes.append(change)
        notes = self.instructions_path()
        text = read_text(notes) if notes is not None else None
        if notes is not None and text is not None and instructions.present(text):
            held = backup_holding(notes, lambda old: instructions.add(old) == text)
            after = held if held is not None else instructions.remove(text)
            change = FileChange(
                notes,
                text,
                after,
                mode_of(notes, 0o644),
                ["removed the memory instructions block"],
                same=None,
            )
            change.remove = FILE_CREATED in created_by.get(str(notes), []) and not after.strip()
            changes.append(change)
        return changes

    def install(self, store: Store, python: str | None = None, with_instructions: bool = True) -> list[str]:
        changes = self.plan_install(store, python, with_instructions)  # refuses before anything is written
        manifest = read_manifest(store)
        mine = manifest.setdefault(self.name, {})
        for change in changes:
            if change.changed:
                previous = mine.setdefault(str(change.path), [])
                previous.extend(k for k in change.created if k not in previous)
        config = changes[0]
        theirs = entry_replaced(config, self.server_entry(config.path, config.before))
        replaced = mine.setdefault(REPLACED, {})
        if theirs is not None and str(config.path) not in replaced:
            replaced[str(config.path)] = theirs  # given back by uninstall
        if not replaced:
            del mine[REPLACED]
        done = apply(changes)
        made = [d for change in changes for d in change.made_dirs]
        if made:
            folders = mine.setdefault(FOLDERS, [])
            folders.extend(d for d in made if d not in folders)
        write_manifest(store, {k: v for k, v in manifest.items() if v})
        return done

    def uninstall(self, store: Store) -> list[str]:
        mine = read_manifest(store).get(self.name)
        made = mine.get(FOLDERS, []) if isinstance(mine, dict) else []
        done = apply(self.plan_uninstall(store))
        manifest = read_manifest(store)
        if manifest.pop(self.name, None) is not None:
            write_manifest(store, manifest)
        return done + remove_empty_folders([f for f in made if isinstance(f, str)])


class JsonMcpAgent(McpFileAgent):
    """An `McpFileAgent` whose config is a JSON object with servers under one key."""

    servers_key: str  # "mcpServers", "mcp"
    dialect: Dialect = JSON  # what the agent itself reads: comments, trailing commas

    @abstractmethod
    def entry(self, python: str, home: str | None) -> dict[str, Any]:
        """Our server entry, in the agent's own schema."""

    def add_server(
        self, path: Path, text: str | None, python: str, home: str | None
    ) -> tuple[str, list[str], list[str]]:
        data = parse_json(path, text, self.dialect)
        new = copy.deepcopy(data)
        created = [] if self.servers_key in data else [self.servers_key]
        servers = container(new, self.servers_key, dict, path)
        wanted = self.entry(python, home)
        if servers.get(SERVER_NAME) == wanted:
            return text if text is not None else edited_json(text, new), [], created
        verb = "updated" if SERVER_NAME in servers else "registered"
        servers[SERVER_NAME] = wanted
        command = " ".join([python, *mcp_args()])
        after = edited_json(text, new, self.dialect, path)
        return after, [f"{verb} the MCP server {SERVER_NAME!r}: {command}"], created

    def remove_server(self, path: Path, text: str, created: list[str]) -> tuple[str, list[str]]:
        new = copy.deepcopy(parse_json(path, text, self.dialect))
        servers = new.get(self.servers_key)
        if not isinstance(servers, dict) or SERVER_NAME not in servers:
            return text, []
        del servers[SERVER_NAME]
        if not servers and self.servers_key in created:
            del new[self.servers_key]
        return edited_json(text, new, self.dialect, path), [f"removed the MCP server {SERVER_NAME!r}"]

    def server_entry(self, path: Path, text: str | None) -> Any:
        servers = parse_json(path, text, self.dialect).get(self.servers_key)
        return servers.get(SERVER_NAME) if isinstance(servers, dict) else None

    def put_entry(self, path: Path, text: str, entry: Any) -> str:
        new = copy.deepcopy(parse_json(path, text, self.dialect))
        container(new, self.servers_key, dict, path)[SERVER_NAME] = entry
        return edited_json(text, new, self.dialect, path)

    def same(self, a: str, b: str) -> bool:
        return same_json(a, b, self.dialect)

    def parsed(self, text: str) -> Any:
        return loads_json(text, self.dialect) if text.strip() else {}

    def kept(self, backup: str, text: str) -> bool:
        return self.dialect == JSON or jsonedit.comments(backup) == jsonedit.comments(text)
