"""Importing CLAUDE.md files: the user's (~/.claude/CLAUDE.md) and a project's.

Each file is split into one note per section (a `#` or `##` heading outside
code blocks; the text before the first heading is a section of its own).
The user's file gives `preference` notes (rules for every project); a
project's `CLAUDE.md`, `.claude/CLAUDE.md` and `CLAUDE.local.md` give
`semantic` notes filed under the project key of the folder they sit in.
`@path` imports (relative to the file, or `~/...`) are followed once, up to
five deep as Claude Code does, never in a loop; their sections are filed
with the file that imported them. A missing import is reported and skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from anamnesis.agents import claude_files
from anamnesis.base.errors import UsageError
from anamnesis.base.notes import slugify
from anamnesis.importers.plan import Item, Plan, Skip, digest, read_text, shown
from anamnesis.store import detect_project, find_repo_root

NAME = "claude-md"
PROJECT_FILES = ("CLAUDE.md", ".claude/CLAUDE.md", "CLAUDE.local.md")
MAX_DEPTH = 5
_HEADING = re.compile(r"^(#{1,2})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
_IMPORT = re.compile(r"(?:^|(?<=\s))@((?:~/|\.{1,2}/|/)?[\w.~-][\w./~-]*)")


@dataclass
class Section:
    """One part of a markdown file: its heading (None before the first) and its text."""

    heading: str | None
    text: str


def split_sections(text: str) -> list[Section]:
    """The file cut at its `#` and `##` headings; headings inside fenced code do not count."""
    sections: list[Section] = [Section(None, "")]
    lines: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
        elif opened:
            fence = opened.group(1)
        elif (match := _HEADING.match(line.rstrip("\r\n"))) is not None:
            sections[-1].text = "".join(lines)
            sections.append(Section(match.group(2).strip(), ""))
            lines = []
        lines.append(line)
    sections[-1].text = "".join(lines)
    return [s for s in sections if s.text.strip()]


def imports_in(text: str) -> list[str]:
    """The `@path` imports of a file, in order, outside code blocks and code spans."""
    found: list[str] = []
    fence: str | None = None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0]:
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        line = re.sub(r"`[^`]*`", " ", line)
        for match in _IMPORT.finditer(line):
            target = match.group(1).rstrip(".,;:)")
            if "/" in target or "." in target:
                found.append(target)
    return found


def user_file() -> Path:
    """The user's own CLAUDE.md: in $CLAUDE_CONFIG_DIR if set, else ~/.claude."""
    return claude_files().settings.parent / "CLAUDE.md"


def plan(path: Path | None, *, project: str | None = None, tags: list[str] | None = None) -> Plan:
    """Notes from CLAUDE.md files: `path` is a file or a project folder; None means the user's file
    and the current folder's project. `project` replaces the key the folder gives."""
    files: list[tuple[Path, bool]] = []  # (file, is the user's own)
    if path is None:
        files.append((user_file(), True))
        files.extend((f, False) for f in _project_files(Path.cwd()))
        label = f"{shown(user_file())} and the project at {shown(Path.cwd())}"
    elif path.is_dir():
        files.extend((f, False) for f in _project_files(path))
        label = shown(path)
    elif path.is_file():
        files.append((path, path.resolve() == user_file().resolve()))
        label = shown(path)
    else:
        raise UsageError(f"{path} does not exist; give a CLAUDE.md file or a project folder")
    result = Plan(NAME, label)
    seen: set[Path] = set()
    found_any = False
    for file, is_user in files:
        if not file.is_file():
            continue
        found_any = True
        _add_file(result, file, is_user, project, tags or [], seen, depth=0, scope=None)
    if not found_any:
        result.skipped.append(Skip(label, "no CLAUDE.md or CLAUDE.local.md found"))
    return result


def _project_files(folder: Path) -> list[Path]:
    """A project's instruction files: in the folder given, or at the root of the repo it is in."""
    root = find_repo_root(folder) if not any((folder / name).is_file() for name in PROJECT_FILES) else None
    base = root or folder
    return [base / name for name in PROJECT_FILES if (base / name).is_file()]


def _scope(file: Path, is_user: bool, project: str | None) -> tuple[str, str | None, str, Path]:
    """(key base, project, note type, root folder) for a top-level file; keys name files relative to the root."""
    if is_user:
        return "user", None, "preference", file.resolve().parent
    key = project or detect_project(file.parent) or file.parent.resolve().name.lower()
    root = find_repo_root(file.parent) or file.parent
    return key, key, "semantic", root.resolve()


def _key_path(real: Path, base: str, root: Path) -> str:
    """How a file is named in import keys: the same on every machine where it is inside the root."""
    try:
        return f"{base}/{real.relative_to(root).as_posix()}"
    except ValueError:
        return f"{base}@{shown(real)}"


def _add_file(
    result: Plan,
    file: Path,
    is_user: bool,
    project: str | None,
    tags: list[str],
    seen: set[Path],
    depth: int,
    scope: tuple[str, str | None, str, Path] | None,
) -> None:
    """Add the sections of `file`, then of the files it imports (each file once)."""
    real = file.resolve()
    if real in seen:
        return
    seen.add(real)
    origin = shown(file)
    text = read_text(file, result, origin)
    if text is None:
        return
    if scope is None:  # an imported file is filed with the file that imported it
        scope = _scope(file, is_user, project)
    base, key_project, kind, root = scope
    prefix = _key_path(real, base, root)
    counts: dict[str, int] = {}
    for section in split_sections(text):
        heading = section.heading or _first_words(section.text) or file.name
        slug = slugify(section.heading or "intro")
        counts[slug] = counts.get(slug, 0) + 1
        number = f"-{counts[slug]}" if counts[slug] > 1 else ""
        title = heading if section.heading else f"{file.name}: {heading}"
        under = section.text.split("\n", 1)[1] if section.heading and "\n" in section.text else ("" if section.heading else section.text)
        if not under.strip():  # a heading with nothing under it ("## Later"): nothing to remember
            result.skipped.append(Skip(f"{origin}#{slug}{number}", "empty: no text to keep"))
            continue
        result.add(
            Item(
                key=f"{NAME}:{prefix}#{slug}{number}",
                digest=digest(section.text),
                type=kind,
                title=title,
                body=section.text.strip("\n") + "\n",
                origin=f"{origin}#{slug}{number}",
                project=key_project,
                tags=["claude-md", *tags],
            )
        )
    for target in imports_in(text):
        if depth + 1 > MAX_DEPTH:
            result.skipped.append(Skip(f"{origin}: @{target}", f"imports nest deeper than {MAX_DEPTH}"))
            continue
        child = Path(target).expanduser() if target.startswith("~/") else file.parent / target
        if not child.is_file():
            result.skipped.append(Skip(f"{origin}: @{target}", "imported file not found"))
            continue
        _add_file(result, child, is_user, project, tags, seen, depth + 1, scope)


def _first_words(text: str) -> str:
    for line in text.splitlines():
        words = line.strip().lstrip("#>-* ").strip()
        if words:
            return words[:60].rstrip()
    return ""
