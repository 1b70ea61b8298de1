"""Importing (and mirroring) Claude Code's built-in auto-memory.

Where Claude Code keeps it, as its CLI (2.1.x) computes it:

- the `autoMemoryDirectory` setting (a `~/` path is expanded), from the
  project's `.claude/settings.local.json`, else the user's `settings.json`;
- else `<config>/projects/<sanitised project root>/memory/`, where `<config>`
  is $CLAUDE_CONFIG_DIR or ~/.claude, the project root is the git repo's top
  folder (a worktree's main checkout) or the working folder, and sanitising
  turns every character that is not an ASCII letter or digit (each UTF-16
  unit) into `-`; a name over 200 characters is cut to 200 and given `-` and
  a base-36 hash of the whole path.

In that folder, `MEMORY.md` is an index (one `- [Title](file.md) — hook` line
per memory, no front matter) and every other `.md` file is one memory with
front matter `name`, `description` and `metadata.type` (user, feedback,
project or reference; older files have a top-level `type`). Shared team
memories sit in `team/`. Each memory becomes one note: `user` a preference,
`feedback` procedural, `project` and `reference` semantic. The import keys
name this machine: each machine's Claude Code keeps its own auto-memory, so
two machines mirroring the same project never overwrite each other's notes.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from anamnesis.agents import claude_files
from anamnesis.base.errors import UsageError
from anamnesis.importers.plan import Item, Plan, Skip, digest, front_matter, read_text, shown
from anamnesis.store import find_repo_root, project_key

NAME = "claude-auto-memory"
INDEX = "MEMORY.md"
MAX_NAME = 200
TYPES = {"user": "preference", "feedback": "procedural", "project": "semantic", "reference": "semantic"}


def sanitise(path: str) -> str:
    """A folder path as Claude Code names its per-project folder (see the module docstring)."""
    data = path.encode("utf-16-le")
    units = [int.from_bytes(data[i : i + 2], "little") for i in range(0, len(data), 2)]
    name = "".join(chr(u) if u < 128 and chr(u).isalnum() else "-" for u in units)
    if len(name) <= MAX_NAME:
        return name
    number = 0
    for unit in units:  # a 32-bit string hash, as JavaScript computes it
        number = (number * 31 + unit) & 0xFFFFFFFF
    if number >= 2**31:
        number -= 2**32
    return f"{name[:MAX_NAME]}-{_base36(abs(number))}"


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if number == 0:
            return out


def project_root(cwd: Path) -> Path:
    """The folder Claude Code names the memory after: the repo's top folder (for a worktree, the
    main checkout's), else the working folder itself."""
    here = cwd.resolve()
    root = find_repo_root(here)
    if root is None:
        return here
    dotgit = root / ".git"
    if dotgit.is_file():  # a worktree: .git names .../<main>/.git/worktrees/<name>
        text = dotgit.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            gitdir = (root / text.split(":", 1)[1].strip()).resolve()
            if gitdir.parent.name == "worktrees" and gitdir.parent.parent.name == ".git":
                return gitdir.parent.parent.parent
    return root


def _setting(path: Path) -> str | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("autoMemoryDirectory") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def memory_dir(cwd: Path) -> Path:
    """Claude Code's auto-memory folder for a working folder (see the module docstring)."""
    config = claude_files().settings.parent
    root = project_root(cwd)
    for setting in (root / ".claude" / "settings.local.json", config / "settings.json"):
        value = _setting(setting)
        if value:
            chosen = (
                Path(os.path.join(Path.home(), value[2:])) if value.startswith(("~/", "~\\")) else Path(value)
            )
            if chosen.is_absolute():
                return chosen
    return config / "projects" / sanitise(str(root)) / "memory"


def is_memory_dir(path: Path) -> bool:
    """Whether `path` is an auto-memory folder itself (it holds MEMORY.md), not a project."""
    return (path / INDEX).is_file()


def plan(
    path: Path | None, *, machine: str, project: str | None = None, tags: list[str] | None = None
) -> Plan:
    """Notes from the auto-memory of the project at `path` (default: the current folder), or of the
    auto-memory folder `path` itself. `project` replaces the key the project folder gives."""
    where = (path or Path.cwd()).absolute()
    if not where.is_dir():
        raise UsageError(f"{where} is not a folder; give a project folder or an auto-memory folder")
    if is_memory_dir(where):
        folder, key_project = where, project
    else:
        folder, key_project = memory_dir(where), project or project_key(where)
    result = Plan(NAME, shown(folder))
    if not folder.is_dir():
        result.skipped.append(Skip(shown(folder), "Claude Code has no auto-memory for this folder yet"))
        return result
    if not os.access(folder, os.R_OK | os.X_OK):
        result.skipped.append(Skip(shown(folder), "cannot be read (permission denied): nothing in it was imported"))
        return result
    scope = key_project or sanitise(str(folder))
    for file in sorted(folder.rglob("*.md")):
        rel = file.relative_to(folder).as_posix()
        origin = shown(file)
        if rel == INDEX:
            result.skipped.append(
                Skip(origin, "the index of the other files (each memory is imported itself)")
            )
            continue
        if any(part.startswith(".") for part in file.relative_to(folder).parts):
            continue
        text = read_text(file, result, origin)
        if text is None:
            continue
        item = _item(text, rel, origin, result)
        if item is None:
            continue
        item.key = f"{NAME}:{machine}:{scope}/{rel}"
        item.project = key_project
        item.tags = ["claude-auto-memory", *item.tags, *(tags or [])]
        result.add(item)
    return result


def _item(text: str, rel: str, origin: str, result: Plan) -> Item | None:
    parsed = front_matter(text, result, origin)
    if parsed is None:
        return None
    meta, body = parsed
    metadata = meta.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    claude_type = str(metadata.get("type") or meta.get("type") or "").strip().lower()
    name = str(meta.get("name") or Path(rel).stem).strip()
    description = str(meta.get("description") or "").strip()
    title = description if 0 < len(description) <= 120 else re.sub(r"[-_]+", " ", name).strip() or name
    body = body.strip("\n")
    if description and title != description:
        body = f"{description}\n\n{body}"
    extra: dict[str, Any] = {"claude_name": name}
    if claude_type:
        extra["claude_type"] = claude_type
    return Item(
        key="",
        digest=digest(text),
        type=TYPES.get(claude_type, "semantic"),
        title=title,
        body=body + "\n",
        origin=origin,
        tags=[claude_type] if claude_type in TYPES else [],
        extra=extra,
    )
