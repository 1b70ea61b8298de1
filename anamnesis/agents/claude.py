"""Claude Code as an `Agent`: registering Anamnesis with it, and removing exactly that again.

Three edits, each merged into what the user already has and each idempotent:

- `~/.claude.json` (`$CLAUDE_CONFIG_DIR/.claude.json`): the MCP server
  `anamnesis` at user scope, run by this interpreter's absolute path (a bare
  `python3` may lack the package). The file stays mode 0600.
- `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR/settings.json`): the four
  hooks (SessionStart, UserPromptSubmit, PreCompact, SessionEnd) and the
  permission allow entry `mcp__anamnesis` for the memory tools.

Hooks and server run as `python -P -m …`: Claude Code starts them in the
project folder, and without the interpreter's safe-path flag that folder
comes first on `sys.path`, so a project holding an `anamnesis/` directory
(a checkout of this very project) would shadow the installed package.
Registrations of the older form (no `-P`) are rewritten in place.

A file is only rewritten when its parsed content changes, with a timestamped
backup beside it first, and then only the parts that change are edited in its
text (`jsonedit`): the user's formatting, numbers and escapes stay byte for
byte. A file that is not valid JSON is never touched: the whole step refuses,
naming the file and the error. What init created (which containers did not
exist before) is recorded in the store's state folder so that uninstall
removes exactly that.

Claude Code is always set up by `init` (unless --no-claude), whether or not
it is installed yet: its config files are created when missing, and it picks
them up when it is installed later. It gets no instructions block: its
SessionStart hook injects the memory itself.
"""

from __future__ import annotations

import copy
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.agents.base import Agent
from anamnesis.agents.files import (
    FILE_CREATED,
    PYTHON_FLAGS,
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
    read_json,
    remove_empty_folders,
)
from anamnesis.base.fsutil import atomic_write_text

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

PERMISSION = "mcp__anamnesis"
HOOK_MODULE = "anamnesis.hooks"
MANIFEST = "claude-install.json"

# event -> (matcher or None, hook argument, timeout seconds)
HOOKS: dict[str, tuple[str | None, str, int]] = {
    "SessionStart": ("startup|resume|clear|compact", "session-start", 10),
    "UserPromptSubmit": (None, "user-prompt-submit", 5),
    "PreCompact": ("auto|manual", "pre-compact", 30),
    # SessionEnd hooks are killed after 1.5 s unless they set their own timeout.
    "SessionEnd": (None, "session-end", 15),
}


@dataclass
class ClaudeFiles:
    """Where this user's Claude Code keeps its user-scope config."""

    claude_json: Path  # MCP servers (and much else of the client's own state)
    settings: Path  # hooks and permissions


def claude_files() -> ClaudeFiles:
    """$CLAUDE_CONFIG_DIR/{.claude.json,settings.json} if set, else ~/.claude.json and ~/.claude/settings.json."""
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
    if config_dir:
        base = Path(config_dir).expanduser()
        return ClaudeFiles(base / ".claude.json", base / "settings.json")
    home = Path.home()
    return ClaudeFiles(home / ".claude.json", home / ".claude" / "settings.json")


def _sh_quote(text: str) -> str:
    """Double-quote for the POSIX shell Claude Code runs hook commands with."""
    return '"' + re.sub(r'([\\"$`])', r"\\\1", text) + '"'


def hook_command(python: str, argument: str, home: str | None = None) -> str:
    """The shell command of one hook: `"/abs/python" -P -m anamnesis.hooks <event>`."""
    command = f"{_sh_quote(python)} {' '.join(PYTHON_FLAGS)} -m {HOOK_MODULE} {argument}"
    return f"{command} --home {_sh_quote(home)}" if home else command


def is_our_hook(entry: Any) -> bool:
    """Whether a hook entry in settings.json is one of ours (by the module it runs)."""
    return isinstance(entry, dict) and f"-m {HOOK_MODULE} " in f"{entry.get('command', '')} "


# The hooks anamnesis-memory 0.1.3's `init` wrote: `[ANAMNESIS_MACHINE_ID=... ]<its command> inject`,
# `... sync`, `... capture` and `... capture --source precompact --no-sync`, where its command is an
# `anamnesis` on PATH or `uv run --project <folder> anamnesis`.
_OLD_COMMAND = re.compile(r"""(?:^|[\s/'"])anamnesis['"]?\s+(inject|sync|capture)\b(.*)$""", re.S)


def is_old_hook(entry: Any) -> bool:
    """Whether a hook entry is one anamnesis-memory 0.1.3 registered (it runs that program, which
    writes into this store): its env prefix, or a subcommand form this program never registers."""
    if not isinstance(entry, dict) or is_our_hook(entry):
        return False
    command = str(entry.get("command", ""))
    match = _OLD_COMMAND.search(command)
    if match is None:
        return False
    if re.search(r"(?:^|\s)ANAMNESIS_(?:MACHINE_ID|GIT_REMOTE)=", command) or " run --project " in command:
        return True
    verb, rest = match.group(1), match.group(2).strip()
    if verb == "inject":
        return not rest
    return verb == "capture" and (not rest or rest.startswith(("--source", "--no-sync")))


def old_hooks(data: dict[str, Any]) -> list[str]:
    """The events of settings data that hold a 0.1.3 hook, in order ("SessionEnd", ...)."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return []
    return [
        event
        for event, groups in hooks.items()
        if isinstance(groups, list)
        and any(
            isinstance(group, dict) and isinstance(group.get("hooks"), list) and any(map(is_old_hook, group["hooks"]))
            for group in groups
        )
    ]


def find_old_hooks() -> tuple[Path, list[str]]:
    """(Claude Code's settings.json, the events it holds 0.1.3 hooks for); never raises (a file that
    cannot be read holds none that we can see)."""
    path = claude_files().settings
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return path, []
    return path, old_hooks(data) if isinstance(data, dict) else []


def drop_old_hooks(data: dict[str, Any]) -> list[str]:
    """Take the 0.1.3 hooks out of settings data in place (a group left empty goes, and an event
    left empty); what changed."""
    events = old_hooks(data)
    hooks = data.get("hooks")
    if not events or not isinstance(hooks, dict):
        return []
    for event in events:
        groups = hooks[event]
        for group in list(groups):
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [e for e in group["hooks"] if not is_old_hook(e)]
                if len(kept) != len(group["hooks"]):
                    if kept:
                        group["hooks"] = kept
                    else:
                        groups.remove(group)
        if not groups:
            del hooks[event]
    return [f"removed the hooks of anamnesis-memory 0.1.3 ({', '.join(events)})"]


def server_entry(python: str, home: str | None) -> dict[str, Any]:
    """The `mcpServers.anamnesis` entry, shaped as `claude mcp add` writes it."""
    return {
        "type": "stdio",
        "command": python,
        "args": mcp_args(),
        "env": {"ANAMNESIS_HOME": home} if home else {},
    }


def _hook_entry(python: str, event: str, home: str | None) -> dict[str, Any]:
    _matcher, argument, timeout = HOOKS[event]
    return {"type": "command", "command": hook_command(python, argument, home), "timeout": timeout}


def merge_settings(
    data: dict[str, Any], python: str, home: str | None, path: Path
) -> tuple[list[str], list[str]]:
    """Put our hooks and permission into settings data in place.

    Returns (what changed, containers created) — an existing hook of ours is
    updated where it stands; the user's hooks and other keys are left alone.
    """
    what: list[str] = []
    created = [k for k in ("hooks", "permissions") if k not in data]
    hooks = container(data, "hooks", dict, path, "")
    for event, (matcher, _argument, _timeout) in HOOKS.items():
        if event not in hooks:
            created.append(f"hooks.{event}")
        groups = container(hooks, event, list, path, "hooks.")
        wanted = _hook_entry(python, event, home)
        found = False
        emptied: list[int] = []
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            entries = group["hooks"]
            for position, entry in enumerate(list(entries)):
                if not is_our_hook(entry):
                    continue
                if found:  # a duplicate of ours: drop it
                    entries.remove(entry)
                    what.append(f"removed a duplicate {event} hook")
                    if not entries:
                        emptied.append(id(group))
                    continue
                found = True
                if entry != wanted:
                    entries[position] = wanted
                    safe = f" -P -m {HOOK_MODULE} " in str(entry.get("command", ""))
                    what.append(f"updated the {event} hook" + ("" if safe else " (now run with -P)"))
                only_ours = all(is_our_hook(e) for e in entries)
                if only_ours and matcher is not None and group.get("matcher") != matcher:
                    group["matcher"] = matcher
                    what.append(f"set the {event} hook's matcher to {matcher!r}")
        groups[:] = [g for g in groups if id(g) not in emptied]
        if not found:
            group_new: dict[str, Any] = {"matcher": matcher} if matcher is not None else {}
            group_new["hooks"] = [wanted]
            # first: in an indented file that adds lines without changing any (not even a comma)
            groups.insert(0, group_new)
            what.append(f"added the {event} hook")
    permissions = container(data, "permissions", dict, path, "")
    if "allow" not in permissions:
        created.append("permissions.allow")
    allow = container(permissions, "allow", list, path, "permissions.")
    if PERMISSION not in allow:
        allow.insert(0, PERMISSION)
        what.append(f"allowed the memory tools ({PERMISSION})")
    return what, created


def merge_claude_json(
    data: dict[str, Any], python: str, home: str | None, path: Path
) -> tuple[list[str], list[str]]:
    """Put our MCP server into ~/.claude.json data in place; returns (what, containers created)."""
    created = [] if "mcpServers" in data else ["mcpServers"]
    servers = container(data, "mcpServers", dict, path, "")
    wanted = server_entry(python, home)
    if servers.get(SERVER_NAME) == wanted:
        return [], created
    verb = "updated" if SERVER_NAME in servers else "registered"
    servers[SERVER_NAME] = wanted
    command = " ".join([python, *wanted["args"]])
    return [f"{verb} the MCP server {SERVER_NAME!r} (user scope): {command}"], created


def plan_install(store: Store, python: str | None = None, drop_old: bool = False) -> list[FileChange]:
    """The changes `anamnesis init` would make to Claude Code's config (nothing written); with
    `drop_old`, the hooks anamnesis-memory 0.1.3 left in settings.json go too."""
    python = python or python_path()
    home = custom_home(store)
    files = claude_files()
    changes: list[FileChange] = []
    text, data = read_json(files.claude_json)
    new = copy.deepcopy(data)
    what, created = merge_claude_json(new, python, home, files.claude_json)
    after = edited_json(text, new) if what or text is None else text
    changes.append(FileChange(files.claude_json, text, after, 0o600, what, created))
    text, data = read_json(files.settings)
    new = copy.deepcopy(data)
    dropped = drop_old_hooks(new) if drop_old else []
    what, created = merge_settings(new, python, home, files.settings)
    what = dropped + what
    after = edited_json(text, new) if what or text is None else text
    changes.append(FileChange(files.settings, text, after, mode_of(files.settings, 0o600), what, created))
    return changes


def _manifest_path(store: Store) -> Path:
    return store.state_dir / MANIFEST


def install(store: Store, python: str | None = None, drop_old: bool = False) -> list[str]:
    """Register the MCP server, hooks and permission; idempotent; returns what was done."""
    changes = plan_install(store, python, drop_old)  # refuses (raises) before anything is written
    manifest = _read_manifest(store)
    servers = parse_json(changes[0].path, changes[0].before).get("mcpServers")
    theirs = entry_replaced(changes[0], servers.get(SERVER_NAME) if isinstance(servers, dict) else None)
    if theirs is not None and "replaced_server" not in manifest:
        manifest["replaced_server"] = theirs  # the person's own entry: given back by uninstall
    for change in changes:
        previous = manifest.setdefault("created", {}).setdefault(str(change.path), [])
        previous.extend(k for k in change.created if k not in previous)
        if change.path == claude_files().settings and "permission_preexisted" not in manifest:
            manifest["permission_preexisted"] = not any(PERMISSION in w for w in change.what)
    done = apply(changes)
    made = [d for change in changes for d in change.made_dirs]
    if made:
        folders = manifest.setdefault("folders", [])
        folders.extend(d for d in made if d not in folders)
    atomic_write_text(_manifest_path(store), dumps_json(manifest), mode=0o600)
    return done


def _read_manifest(store: Store) -> dict[str, Any]:
    try:
        data = json.loads(_manifest_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _prune(container: dict[str, Any], key: str, created: list[str], dotted: str) -> None:
    value = container.get(key)
    if dotted in created and isinstance(value, (dict, list)) and not value:
        del container[key]


def plan_uninstall(store: Store) -> list[FileChange]:
    """The changes that remove what init added (nothing written)."""
    files = claude_files()
    manifest = _read_manifest(store)
    created_by = manifest.get("created", {}) if isinstance(manifest.get("created"), dict) else {}
    changes: list[FileChange] = []

    text, data = read_json(files.claude_json)
    new = copy.deepcopy(data)
    what: list[str] = []
    servers = new.get("mcpServers")
    if isinstance(servers, dict) and SERVER_NAME in servers and "replaced_server" in manifest:
        servers[SERVER_NAME] = manifest["replaced_server"]
        what.append(f"gave back the MCP server {SERVER_NAME!r} init had replaced")
    elif isinstance(servers, dict) and SERVER_NAME in servers:
        del servers[SERVER_NAME]
        what.append(f"removed the MCP server {SERVER_NAME!r}")
        _prune(new, "mcpServers", created_by.get(str(files.claude_json), []), "mcpServers")
    changes.append(
        _removal(files.claude_json, text, new, what, created_by.get(str(files.claude_json), []), 0o600)
    )

    text, data = read_json(files.settings)
    new = copy.deepcopy(data)
    what = []
    created = created_by.get(str(files.settings), [])
    hooks = new.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            removed = 0
            emptied: list[int] = []
            for group in groups:
                if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                    before = len(group["hooks"])
                    group["hooks"] = [e for e in group["hooks"] if not is_our_hook(e)]
                    removed += before - len(group["hooks"])
                    if before and not group["hooks"]:
                        emptied.append(id(group))
            if removed:
                what.append(f"removed the {event} hook")
                groups[:] = [g for g in groups if id(g) not in emptied]
                _prune(hooks, event, created, f"hooks.{event}")
        _prune(new, "hooks", created, "hooks")
    permissions = new.get("permissions")
    allow = permissions.get("allow") if isinstance(permissions, dict) else None
    if (
        isinstance(permissions, dict)
        and isinstance(allow, list)
        and PERMISSION in allow
        and not manifest.get("permission_preexisted", False)
    ):
        permissions["allow"] = [p for p in allow if p != PERMISSION]
        what.append(f"removed the permission {PERMISSION}")
        _prune(permissions, "allow", created, "permissions.allow")
        _prune(new, "permissions", created, "permissions")
    changes.append(_removal(files.settings, text, new, what, created, mode_of(files.settings, 0o600)))
    return [c for c in changes if c.before is not None]


def _removal(
    path: Path, text: str | None, new: dict[str, Any], what: list[str], created: list[str], mode: int
) -> FileChange:
    after = text or ""
    if what:
        # an empty file was read as {} at init: it is given back empty, byte for byte
        held = backup_holding(path, lambda old: (loads_json(old) if old.strip() else {}) == new)
        after = held if held is not None else edited_json(text, new)
    change = FileChange(path, text, after, mode, what)
    change.remove = bool(what) and not new and FILE_CREATED in created
    return change


def uninstall(store: Store) -> list[str]:
    """Remove what init added to Claude Code's config, and the folder it made if left empty;
    returns what was done."""
    made = _read_manifest(store).get("folders", [])
    done = apply(plan_uninstall(store))
    try:
        _manifest_path(store).unlink()
    except FileNotFoundError:
        pass
    return done + remove_empty_folders([f for f in made if isinstance(f, str)] if isinstance(made, list) else [])


class ClaudeCode(Agent):
    """Anthropic's Claude Code."""

    name = "claude"
    title = "Claude Code"
    binary = "claude"

    def __init__(self, drop_old: bool = False) -> None:
        self.drop_old = drop_old  # init also removes the hooks anamnesis-memory 0.1.3 left

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClaudeCode)

    def __hash__(self) -> int:
        return hash(self.name)

    def config_dir(self) -> Path:
        config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(config_dir).expanduser() if config_dir else Path.home() / ".claude"

    def detect(self) -> bool:
        """Always: hooks and server are registered ahead of a later install."""
        return True

    def plan_install(
        self, store: Store, python: str | None = None, with_instructions: bool = True
    ) -> list[FileChange]:
        return plan_install(store, python, self.drop_old)

    def plan_uninstall(self, store: Store) -> list[FileChange]:
        return plan_uninstall(store)

    def install(self, store: Store, python: str | None = None, with_instructions: bool = True) -> list[str]:
        return install(store, python, self.drop_old)

    def uninstall(self, store: Store) -> list[str]:
        return uninstall(store)
