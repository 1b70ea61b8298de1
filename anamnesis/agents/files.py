"""Editing an agent's config files with care: plan, diff, backup, apply, give back.

Every agent's set-up is a list of `FileChange`s computed before anything is
written (a file we cannot safely edit stops the whole step), shown as a
unified diff for `--print`, and applied with a timestamped backup beside each
file it changes: one per file (a newer one replaces the older), and none
written when the newest already holds the file as it is. Uninstall prefers
the newest backup that holds exactly what the file should hold after
removal, so a file nobody touched since `init` comes back byte for byte.
The folders a write had to create are recorded (`made_dirs`), so uninstall
can remove them again once they are empty.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import glob
import json
import os
import re
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anamnesis.agents import jsonedit
from anamnesis.agents.jsonedit import JSON, Dialect
from anamnesis.base.errors import AnamnesisError, ExitCode
from anamnesis.base.fsutil import atomic_write_text, nearest_folder

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

SERVER_NAME = "anamnesis"
# -P: never put the working folder (the project the agent runs in) first on sys.path.
PYTHON_FLAGS = ("-P",)
FILE_CREATED = "(file)"  # manifest marker: init created the file itself


class AgentConfigError(AnamnesisError):
    """An agent's config file we must edit is not something we can safely edit."""

    exit_code = ExitCode.AGENT_CONFIG


def python_path() -> str:
    """This interpreter's absolute path (not symlink-resolved: that would leave a venv)."""
    return os.path.abspath(sys.executable)


def mcp_args() -> list[str]:
    """The arguments after the interpreter: the same fixed form for every agent."""
    return [*PYTHON_FLAGS, "-m", "anamnesis", "mcp"]


def is_our_entry(entry: Any) -> bool:
    """Whether an MCP server entry is one init writes (its command runs `-m anamnesis mcp`, with
    or without the -P of today's form, in any agent's shape), not the person's own."""
    ours = ["-m", "anamnesis", "mcp"]
    lists = [value for value in (entry.values() if isinstance(entry, dict) else ()) if isinstance(value, list)]
    return any(
        value[at : at + len(ours)] == ours for value in lists for at in range(len(value) - len(ours) + 1)
    )


def entry_replaced(change: FileChange, entry: Any) -> Any:
    """The person's own `anamnesis` entry `change` replaces (kept for uninstall to give back), or
    None: none was there, it is one of ours, or the file does not change."""
    return entry if change.changed and entry is not None and not is_our_entry(entry) else None


def custom_home(store: Store) -> str | None:
    """The store home when it is not the default one (the server must be told)."""
    default = (Path.home() / ".anamnesis").absolute()
    return None if store.home.absolute() == default else str(store.home.absolute())


def same_json(a: str, b: str, dialect: Dialect = JSON) -> bool:
    """Whether two JSON texts hold the same data (formatting and comments aside)."""
    return bool(loads_json(a, dialect) == loads_json(b, dialect))


@dataclass
class FileChange:
    """One config file: its text before and after, and what the change means."""

    path: Path
    before: str | None  # None: the file does not exist yet
    after: str
    mode: int
    what: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # containers the change adds (for uninstall)
    remove: bool = False  # uninstall: the file was ours alone, delete it
    same: Callable[[str, str], bool] | None = same_json  # texts that mean the same: no change
    made_dirs: list[str] = field(default_factory=list)  # folders `apply` created for it

    def __post_init__(self) -> None:
        if self.before is None:
            self.created.insert(0, FILE_CREATED)

    @property
    def target(self) -> Path:
        """The file written: a linked file (dotfiles) is edited where the link points, not replaced."""
        return self.path.resolve() if self.path.is_symlink() else self.path

    @property
    def changed(self) -> bool:
        if self.remove:
            return self.before is not None
        if self.before == self.after:
            return False
        return self.before is None or self.same is None or not self.same(self.before, self.after)

    def diff(self) -> str:
        """A unified diff of the change, for --print."""
        before = (self.before or "").splitlines(keepends=True)
        after = [] if self.remove else self.after.splitlines(keepends=True)
        label = str(self.path)
        return "".join(
            difflib.unified_diff(
                before,
                after,
                fromfile=f"{label} (now)" if self.before is not None else "/dev/null",
                tofile=f"{label} (after)" if not self.remove else "/dev/null",
            )
        )


def loads_json(text: str, dialect: Dialect = JSON) -> Any:
    """Parsed JSON (of `dialect`: comments, trailing commas), or None when the text is not that."""
    try:
        return jsonedit.loads(text, dialect)
    except ValueError:
        return None


def dumps_json(data: Any, like: str | None = None) -> str:
    """JSON text, indented like the file it replaces (so a diff shows only what changed)."""
    indent: int | str = 2
    match = re.search(r"^([ \t]+)\S", like or "", re.M)
    if match:
        lead = match.group(1)
        indent = lead if "\t" in lead else len(lead)
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    # A lone surrogate (Claude Code's history can hold a prompt cut inside an emoji) stays escaped:
    # it is valid JSON but cannot be written as UTF-8.
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def read_text(path: Path) -> str | None:
    """A config file's text as it is (no newline translation: CRLF stays); None when missing."""
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgentConfigError(f"cannot read {path}: {exc.strerror or exc}; nothing was changed") from exc
    except UnicodeDecodeError:
        raise AgentConfigError(
            f"{path} is not UTF-8 text; fix or move it and run again — nothing was changed"
        ) from None


def read_json(path: Path) -> tuple[str | None, dict[str, Any]]:
    """(text, object) of a JSON config file; ({} when missing); refuses anything else."""
    text = read_text(path)
    return text, parse_json(path, text)


def parse_json(path: Path, text: str | None, dialect: Dialect = JSON) -> dict[str, Any]:
    """The object a JSON config text holds ({} for none or blank); refuses anything else."""
    if text is None or not text.strip():
        return {}
    try:
        data = jsonedit.loads(text, dialect)
    except (ValueError, RecursionError) as exc:
        kind = "JSON" if dialect == JSON else "JSON with comments" if not dialect.trailing_commas else "JSONC"
        raise AgentConfigError(
            f"{path} is not valid {kind} ({exc}); fix or move it and run again — nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise AgentConfigError(
            f"{path} must hold a JSON object; fix or move it and run again — nothing was changed"
        )
    return data


def container(data: dict[str, Any], key: str, kind: type, path: Path, where: str = "") -> Any:
    """data[key], created empty when missing; refuses a value of another kind."""
    value = data.get(key)
    if value is None:
        value = kind()
        data[key] = value
    if not isinstance(value, kind):
        raise AgentConfigError(
            f"{path}: {where}{key!r} is a {type(value).__name__}, expected a JSON "
            f"{'object' if kind is dict else 'array'}; fix it and run again — nothing was changed"
        )
    return value


def edited_json(text: str | None, new: dict[str, Any], dialect: Dialect = JSON, path: Path | None = None) -> str:
    """The file's text changed to hold `new`: only what differs is edited, every other byte (the
    person's comments too) is kept; a new or blank file is written whole."""
    if text is None or not text.strip():
        return dumps_json(new, text)
    try:
        return jsonedit.edit(text, new, dump_whole=lambda data: dumps_json(data, text), dialect=dialect)
    except jsonedit.Uneditable as exc:
        raise AgentConfigError(f"{path or 'a config file'}: {exc}; nothing was changed") from None


def mode_of(path: Path, default: int) -> int:
    """A file's permission bits (kept when it is rewritten), or `default` for a new file."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return default


def backups_of(path: Path) -> list[Path]:
    """The backups beside `path`, newest first (their names sort by time)."""
    return sorted(path.parent.glob(f"{glob.escape(path.name)}.anamnesis-backup-*"), reverse=True)


def backup_holding(path: Path, matches: Callable[[str], bool]) -> str | None:
    """The text of the newest backup of `path` that `matches`: giving it back keeps the
    user's own formatting byte for byte when nothing else changed since init."""
    for backup in backups_of(path):
        try:
            text = backup.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if matches(text):
            return text
    return None


def _refusal(change: FileChange) -> str | None:
    """Why `change` cannot be written, found before any file is touched: a folder that cannot be
    written, or a file the system will not let anyone replace (immutable, `chattr +i`)."""
    target = change.target
    for parent in target.parents:  # a dotfiles link whose folder is not there (`~/.gemini -> dotfiles/gemini`)
        if parent.is_symlink() and not parent.exists():
            return f"{parent} is a link to {os.readlink(parent)}, which does not exist (create it, or remove the link)"
    folder = nearest_folder(target.parent, Path(target.anchor))
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} cannot be written"
    if target.exists():
        if not target.stat().st_mode & stat.S_IWUSR:  # replacing it would work; but the person said no
            return f"{target} is read-only (chmod u+w it to let init change it)"
        try:
            os.close(os.open(target, os.O_WRONLY))  # opens without changing a byte
        except PermissionError as exc:
            if exc.errno == errno.EPERM:  # not the mode bits (the file is replaced, not written in)
                return f"{target} cannot be changed by anyone ({exc.strerror}; immutable? see `lsattr`)"
        except OSError:
            pass  # a directory in its place and the like were refused when the change was planned
    return None


def apply(changes: list[FileChange]) -> list[str]:
    """Write the changed files (backup first, atomically, keeping modes); returns what was done.

    All or nothing: every file is checked first, and a write that fails anyway puts back the
    files already written (and drops the backups made), so an agent is never left half set up."""
    todo = [change for change in changes if change.changed]
    for change in todo:
        why = _refusal(change)
        if why is not None:
            raise AgentConfigError(f"cannot change {change.path}: {why}; nothing was changed")
    written: list[tuple[FileChange, list[Path]]] = []
    try:
        return _write_all(todo, written)
    except OSError as exc:
        for change, made in reversed(written):
            _put_back(change, made)
        failed = todo[len(written)].path if len(written) < len(todo) else exc.filename
        raise AgentConfigError(
            f"cannot write {failed}: {exc.strerror or exc}; every file is as it was, nothing was changed"
        ) from exc


def _put_back(change: FileChange, made: list[Path]) -> None:
    """Undo one file `_write_all` wrote: its old text (or no file), and the backup it made."""
    with contextlib.suppress(OSError):
        if change.before is None:
            change.target.unlink(missing_ok=True)
        else:
            atomic_write_text(change.target, change.before, mode=change.mode)
        for path in made:
            path.unlink(missing_ok=True)


def _write_all(changes: list[FileChange], written: list[tuple[FileChange, list[Path]]]) -> list[str]:
    done: list[str] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for change in changes:
        made: list[Path] = []
        if change.remove:
            # A linked file (dotfiles) init created where the link pointed: that file goes, the
            # person's link stays (dangling again, as it was before init).
            change.target.unlink(missing_ok=True)
            written.append((change, made))
            where = f" (where {change.path} links to)" if change.target != change.path else ""
            done.append(f"removed {change.target}{where} (init had created it; nothing else was in it)")
            continue
        older = backups_of(change.path)
        if change.before is not None and not (older and _holds(older[0], change.before)):
            backup = change.path.with_name(f"{change.path.name}.anamnesis-backup-{stamp}")
            number = 1
            while backup.exists():  # two runs in one second: never overwrite an earlier backup
                number += 1
                backup = change.path.with_name(f"{change.path.name}.anamnesis-backup-{stamp}-{number}")
            atomic_write_text(backup, change.before, mode=change.mode)
            made.append(backup)
            done.append(f"backed up {change.path} to {backup.name}")
        target = change.target
        change.made_dirs = [str(p) for p in (target.parent, *target.parent.parents) if not p.exists()]
        if _hard_linked(target):  # another name for the same file (a dotfiles repo): written in place, kept one file
            with open(target, "w", encoding="utf-8", newline="") as handle:
                handle.write(change.after)
        else:
            atomic_write_text(target, change.after, mode=change.mode)
        written.append((change, made))
        done.extend(f"{change.path}: {what}" for what in change.what)
    for change in changes:  # one backup per file, the newest: only once every file is written
        if not change.remove:
            for stale in backups_of(change.path)[1:]:
                stale.unlink(missing_ok=True)
    return done


def _hard_linked(path: Path) -> bool:
    try:
        return path.stat().st_nlink > 1
    except OSError:
        return False


def _holds(backup: Path, text: str) -> bool:
    try:
        return backup.read_bytes() == text.encode("utf-8")
    except OSError:
        return False


def remove_empty_folders(folders: list[str]) -> list[str]:
    """Remove the folders init created that are empty now, deepest first; what was done."""
    done: list[str] = []
    for folder in sorted(set(folders), key=lambda f: f.count(os.sep), reverse=True):
        try:
            os.rmdir(folder)
        except OSError:  # not empty (the agent wrote there since), or gone already
            continue
        done.append(f"removed the empty folder {folder} (init had created it)")
    return done


def describe(changes: list[FileChange], with_diff: bool = False) -> list[str]:
    """Human lines for a plan: one per file, plus its diff when asked."""
    lines: list[str] = []
    for change in changes:
        if not change.changed:
            lines.append(f"{change.path}: already set up, no change")
            continue
        lines.append(f"{change.path}: " + "; ".join(change.what or ["rewrite"]))
        if with_diff:
            lines.append(change.diff().rstrip("\n"))
    return lines
