"""Importing a folder of markdown: an Obsidian vault, a notes folder, a docs tree.

Every `.md` or `.markdown` file outside dot folders (`.obsidian`, `.git`, `.trash`) and
`node_modules` becomes
one note. Its front matter is kept: `title`, `type`, `project`, `tags`,
`created` and `updated` fill the fields of the same name, every other field
is kept as it is (an `id` of the source's own is kept as `source_id`: ids
here are this store's). The title is, in order, the front matter's, the
first `# ` heading, the file name (a date in it kept as written: `2026-11-26`).
Wikilinks and links are kept as written.

A note's import key is the folder's resolved absolute path (shown under `~`
when it is in the home folder, so the same vault on two machines is one
source) plus the file's path in it: two folders of the same name never share
a note. Notes an older version keyed by the folder's name alone are adopted
under the new key on the next import, not made twice.
Other files (images, PDFs: attachments) are not copied, since memory/ is
synced to every machine and holds text; each is reported as skipped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from anamnesis.base.errors import AnamnesisError, UsageError
from anamnesis.base.notes import NOTE_TYPES, _title_from, normalize_tags
from anamnesis.importers.plan import Item, Plan, Skip, digest, front_matter, iso_z, read_text, shown
from anamnesis.store import check_project_key

NAME = "markdown"
CONSUMED = ("id", "type", "title", "project", "tags", "created", "updated", "machine", "source", "supersedes")


def plan(path: Path | None, *, project: str | None = None, tags: list[str] | None = None) -> Plan:
    """Notes from every markdown file under the folder `path`; `project` files the notes whose front
    matter names no project, `tags` are added to every note."""
    if path is None:
        raise UsageError("give the folder to import: anamnesis import markdown PATH")
    if not path.is_dir():
        raise UsageError(f"{path} is not a folder; give the folder of markdown files to import")
    root = path.absolute()
    result = Plan(NAME, shown(root))
    source = shown(root.resolve())
    legacy = root.resolve().name or "notes"  # the key older versions gave the folder: its name alone
    files, links, unread, vendored = _files(root)
    for link in links:
        result.skipped.append(Skip(shown(link), "a symbolic link: not followed (it may point outside the folder)"))
    for folder, why in unread:
        result.skipped.append(Skip(shown(folder), f"a folder that cannot be read ({why}): nothing in it was imported"))
    for folder in vendored:
        result.skipped.append(Skip(shown(folder), "installed packages (node_modules): not imported"))
    for file in files:
        rel = file.relative_to(root).as_posix()
        origin = shown(file)
        if not file.name.lower().endswith(MARKDOWN):
            result.skipped.append(Skip(origin, "attachment (not markdown): not copied; links to it are kept"))
            continue
        text = read_text(file, result, origin)
        if text is None:
            continue
        text = text.replace("\r\n", "\n")  # a note's lines end in LF, whatever the source's did
        item = _item(text, rel, origin, result)
        if item is None:
            continue
        item.key = f"{NAME}:{source}/{rel}"
        item.legacy_keys = [f"{NAME}:{legacy}/{rel}"]
        item.project = item.project or project
        item.tags = [*item.tags, *(tags or [])]
        result.add(item)
    return result


MARKDOWN = (".md", ".markdown")
VENDORED = "node_modules"  # packages a tool installed: their READMEs are not the person's notes


def _files(root: Path) -> tuple[list[Path], list[Path], list[tuple[Path, str]], list[Path]]:
    """The files under `root` (hidden ones and installed packages aside), the symbolic links met
    there (not followed), the folders that could not be read (with why) and the package folders."""
    out: list[Path] = []
    links: list[Path] = []
    unread: list[tuple[Path, str]] = []
    vendored: list[Path] = []

    def failed(exc: OSError) -> None:
        unread.append((Path(exc.filename or root), exc.strerror or str(exc)))

    for folder, dirs, files in os.walk(root, onerror=failed):
        vendored += [Path(folder) / d for d in dirs if d == VENDORED]
        visible = sorted(d for d in dirs if not d.startswith(".") and d != VENDORED)
        links += [Path(folder) / d for d in visible if (Path(folder) / d).is_symlink()]
        dirs[:] = [d for d in visible if not (Path(folder) / d).is_symlink()]
        for name in sorted(files):
            full = Path(folder) / name
            if name.startswith("."):
                continue
            (links if full.is_symlink() else out).append(full)
    return out, links, unread, vendored


def _item(text: str, rel: str, origin: str, result: Plan) -> Item | None:
    parsed = front_matter(text, result, origin)
    if parsed is None:
        return None
    meta, body = parsed
    kind = str(meta.get("type") or "semantic").strip().lower()
    extra = {k: v for k, v in meta.items() if k not in CONSUMED}
    if kind not in NOTE_TYPES:
        extra["source_type"] = meta.get("type")
        kind = "semantic"
    if meta.get("id") is not None:
        extra["source_id"] = meta["id"]
    project = None
    if isinstance(meta.get("project"), str) and meta["project"].strip():
        try:
            project = check_project_key(meta["project"])
        except AnamnesisError:
            extra["source_project"] = meta["project"]
    title = meta.get("title")
    title_text = str(title).strip() if isinstance(title, (str, int, float)) else ""
    return Item(
        key="",
        digest=digest(text),
        type=kind,
        title=title_text or file_title(body, rel),
        body=body.strip("\n") + "\n",
        origin=origin,
        project=project,
        tags=normalize_tags(meta.get("tags")) if not isinstance(meta.get("tags"), dict) else [],
        created=iso_z(meta.get("created")),
        updated=iso_z(meta.get("updated")) or iso_z(meta.get("created")),
        extra=extra,
    )


_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})(.*)")


def file_title(body: str, rel: str) -> str:
    """The first `# ` heading, else the file's name made readable; a leading date stays as written
    (`2026-11-26.md` is "2026-11-26", `2026-11-26-standup.md` "2026-11-26 standup")."""
    found = _title_from(body, rel)
    stem = Path(rel).stem
    match = _DATE.fullmatch(stem)
    if match is None or any(line.startswith("# ") for line in body.splitlines()[:40]):
        return found
    rest = match.group(2).replace("-", " ").replace("_", " ").strip()
    return f"{match.group(1)} {rest}".strip()
