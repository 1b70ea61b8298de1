"""What every importer shares: the plan of notes to make, and applying it idempotently.

An importer reads its source and returns a `Plan`: one `Item` per note it
would make, each with a stable `key` (which piece of which source it is) and
a `digest` of the source text it came from, plus what it skipped and why.
`apply` compares the plan with the notes already imported (found by the
`import_key` field they carry, never by title), and writes only what is new
or whose source changed, as one commit. Running it again changes nothing.

A note a person edited in Anamnesis since the import wrote it is never
replaced: the source's new version is merged into it line by line against
what the import last wrote (found in git), and where both changed the same
lines the note keeps both, in a conflict block (merge.py's format, labelled
with this machine's id and `import`) that `anamnesis conflicts` lists.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from anamnesis.base import repo
from anamnesis.base.errors import AnamnesisError
from anamnesis.base.git import read_blobs, run_git, run_git_bytes
from anamnesis.base.notes import (
    _ID_ALPHABET,
    HIDDEN_PREFIX,
    Note,
    has_conflict_markers,
    is_note_path,
    load_yaml,
    normalize_tags,
    note_project,
    note_relpath,
    now_iso,
    parse_note,
    render_note,
    split_front_matter,
)
from anamnesis.base.paths import Store
from anamnesis.base.text import plural
from anamnesis.store import (
    MAX_NOTE_BYTES,
    Side,
    check_writable,
    merge_lines,
    redact_field,
    redact_note_fields,
    require_writable,
    safe_path,
    validate,
    write_lock,
    write_units,
)

# A source file larger than this cannot become a note (its body alone would pass the limit):
# skipped on its size, before it is read and redacted.
MAX_SOURCE_BYTES = MAX_NOTE_BYTES + 64_000
KEY_FIELD = "import_key"
DIGEST_FIELD = "import_hash"
SOURCE_PREFIX = "import:"
SOURCE_LABEL = "import"  # the source's side of a conflict block (the other side: this machine's id)
# What the source last said, per imported note: the base the next import merges against, so a
# person's edit (and a conflict they resolved) is measured against the source's text, not against
# a note that already held edits. A hidden folder: synced, never indexed, no note.
BASES_DIR = ".imports"
COMMIT_MARK = ": import "  # in the subject of every import commit: "<machine>: import <source>: ..."
KEPT_EDIT = "kept-edit: "  # a line of an import commit's message: this note holds a person's edit too

Progress = Callable[[int, int], None]
"""Told (done, total) as the plan is compared and written, for a progress bar."""


def digest(data: bytes | str) -> str:
    """A short content hash of source text: it changes when the source does."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()[:16]


def derived_id(key: str) -> str:
    """A note id made from an import key: the same source piece gets the same id on every machine."""
    number = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") >> 14  # 50 bits
    chars = []
    for _ in range(10):
        number, rest = divmod(number, 32)
        chars.append(_ID_ALPHABET[rest])
    return "".join(chars)


@dataclass
class Item:
    """One note an importer would make from one piece of its source."""

    key: str  # stable identity of the source piece, e.g. "claude-md:github.com/acme/api/CLAUDE.md#testing"
    digest: str  # hash of the source text it came from
    type: str
    title: str
    body: str
    origin: str  # where it came from, for reports (a file, a file and a heading)
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    created: str = ""
    updated: str = ""
    machine: str = ""  # the machine that first wrote it, where the source says; else this one
    note_id: str = ""  # the id to keep (an id another tool gave it); else derived from `key`
    supersedes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    legacy_keys: list[str] = field(default_factory=list)  # keys older versions gave this piece: adopted
    keep_empty: bool = False  # a note with a title and no body is still a note (0.1.3 kept such notes)


@dataclass
class Skip:
    """A file or part of one that was not imported, and why."""

    origin: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"origin": self.origin, "reason": self.reason}


@dataclass
class Plan:
    """What an importer found: the notes to make and what it skipped."""

    source: str  # the importer's name, e.g. "claude-md"
    label: str  # what was read, short, for the commit message and the report
    items: list[Item] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    options: bool = False  # --project or --tag given: a note that lacks them is updated, source unchanged

    def add(self, item: Item) -> None:
        """Add an item; a second item with the same key is reported as skipped, not doubled."""
        if any(other.key == item.key for other in self.items):
            self.skipped.append(Skip(item.origin, "the same source piece appears twice; the first is kept"))
            return
        self.items.append(item)


@dataclass
class Step:
    """What `apply` does (or, with --print, would do) with one item."""

    action: str  # "create", "update", "conflict" (updated, a person's edit kept beside it) or "unchanged"
    path: str
    item: Item
    note: str = ""  # what the person should hear about it (a title both sides changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "path": self.path,
            "title": self.item.title,
            "type": self.item.type,
            "project": self.item.project,
            "origin": self.item.origin,
            "key": self.item.key,
            "note": self.note,
        }


@dataclass
class ImportReport:
    """The outcome of one import: steps, skipped pieces and the commit (None: nothing written)."""

    source: str
    label: str
    steps: list[Step] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    commit: str | None = None
    dry_run: bool = False

    def count(self, action: str) -> int:
        return sum(1 for step in self.steps if step.action == action)

    @property
    def written(self) -> int:
        """How many notes were (or would be) written."""
        return self.count("create") + self.count("update") + self.count("conflict")

    def summary(self) -> str:
        """One line: what was done."""
        verb = "would import" if self.dry_run else "imported"
        updated = self.count("update") + self.count("conflict")
        conflicts = self.count("conflict")
        kept = (
            f"; {conflicts} edited here and changed at the source: both versions kept in a conflict block"
            " (`anamnesis conflicts`)"
            if conflicts
            else ""
        )
        return (
            f"{self.source}: {verb} {self.count('create')} new and {updated} updated notes,"
            f" {self.count('unchanged')} unchanged, {len(self.skipped)} skipped (from {self.label}){kept}"
        )

    def brief(self) -> dict[str, Any]:
        """The counts and the commit, without the notes (what `sync --json` lists per mirror)."""
        return {k: v for k, v in self.to_dict().items() if k not in ("notes", "dry_run", "skipped")} | {
            "skipped": len(self.skipped)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "from": self.label,
            "dry_run": self.dry_run,
            "created": self.count("create"),
            "updated": self.count("update") + self.count("conflict"),
            "conflicted": self.count("conflict"),
            "unchanged": self.count("unchanged"),
            "skipped": [skip.to_dict() for skip in self.skipped],
            "commit": self.commit,
            "notes": [step.to_dict() for step in self.steps],
        }


@dataclass
class Imported:
    """A note already in the store that an import made."""

    path: str
    digest: str
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    id: str = ""


def base_path(note_id: str) -> str:
    """Where what the source last said for the note `note_id` is kept (memory/-relative)."""
    return f"{BASES_DIR}/{note_id}.md"


def note_files(memory: Path) -> Iterator[str]:
    """memory/-relative paths of every note file (no dot folders, no symlinks)."""
    for folder, dirs, files in os.walk(memory):
        dirs[:] = sorted(d for d in dirs if not d.startswith(HIDDEN_PREFIX))
        for name in sorted(files):
            full = Path(folder) / name
            relpath = full.relative_to(memory).as_posix()
            if is_note_path(relpath) and not full.is_symlink():
                yield relpath


def imported_notes(store: Store) -> dict[str, Imported]:
    """Every note an import made, by its import key (read from the files: the index keeps no extras)."""
    found: dict[str, Imported] = {}
    for relpath in note_files(store.memory):
        try:
            text = (store.memory / relpath).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        front, _ = split_front_matter(text.removeprefix("\ufeff"))
        if front is None or KEY_FIELD not in front:
            continue
        note = parse_note(text, relpath)
        key = note.extra.get(KEY_FIELD)
        if isinstance(key, str) and key and key not in found:
            found[key] = Imported(relpath, str(note.extra.get(DIGEST_FIELD) or ""), note.project, note.tags, note.id)
    return found


def _redacted(item: Item) -> tuple[str, str, list[str], dict[str, Any]]:
    """Title, body, tags and extra fields as they may be stored: redacted exactly as every writer does."""
    title, body, tags = redact_note_fields(item.title.strip() or "untitled", item.body, item.tags)
    extra = {k: redact_field(v) if isinstance(v, str) else v for k, v in item.extra.items()}
    return " ".join(title.split()), body, normalize_tags(list(tags)), extra


@dataclass
class Built:
    """What `_build` makes of an item: the file to write, and whether it holds a conflict block."""

    path: str
    data: bytes
    conflicted: bool = False
    kept_edit: bool = False  # a person's edit was merged with the source's text
    moved_from: str | None = None  # the note's path before: it now belongs to another project
    base: tuple[str, bytes] | None = None  # (path, text) of what the source said: the next merge's base
    note: str = ""  # said with the step (a title both sides changed: the person's is kept)


def _build(
    store: Store, item: Item, source: str, existing: Imported | None, base: Note | None, machine: str, now: str
) -> Built | Skip:
    """The file for an item, or why it cannot be written; `base` is the existing note as an import
    last wrote it from its source alone (None: not found in this history)."""
    title, body, tags, extra = _redacted(item)
    if not body.strip() and not item.keep_empty:
        return Skip(item.origin, "empty: no text to keep")
    project = note_project(item.type, item.project)
    said = (title, body, list(tags))  # the source's own text, before any edit of the person's is merged in
    said_note = ""
    conflicted = kept = False
    if existing is not None:
        path = existing.path
        note = parse_note(safe_path(store, path).read_text(encoding="utf-8", errors="replace"), path)
        if has_conflict_markers(note.body):
            return Skip(
                item.origin,
                f"{path} holds a conflict not resolved yet; resolve it (`anamnesis conflicts`) and import again",
            )
        if base is None or note.body.strip() != base.body.strip() or note.title != base.title:
            # edited here since the import wrote it: merge the source's change in, never replace the edit
            base_body = base.body if base is not None else ""
            merged = merge_lines(base_body, Side(machine, note.body), Side(SOURCE_LABEL, body))
            body, conflicted, kept = merged.text, merged.conflicted, True
            if base is not None:
                if note.title != base.title and title not in (base.title, note.title):
                    said_note = f"kept your title {note.title!r}; the source's is now {title!r}"
                title = note.title if note.title != base.title else title
                project = note.project if note.project != base.project else project
                tags = [*note.tags, *(t for t in tags if t not in note.tags and t not in base.tags)]
        moved_from = None
        if project != note.project:  # imported again with another --project: filed where its project's notes are
            moved_from, path = path, note_relpath(item.type, title, note.id, project)
            if os.path.lexists(safe_path(store, path)):
                return Skip(item.origin, f"{path} already exists; {moved_from} stays where it is")
            note.path = path
        note.type, note.title, note.body, note.project, note.tags = item.type, title, body, project, tags
        note.updated = item.updated or now
        note.supersedes = list(item.supersedes) or note.supersedes
        note.extra = {**note.extra, **extra}
    else:
        moved_from = None
        note_id = item.note_id or derived_id(item.key)
        path = note_relpath(item.type, title, note_id, project)
        if os.path.lexists(safe_path(store, path)):
            return Skip(item.origin, f"{path} already exists and was not made by an import; it is left alone")
        note = Note(
            path=path,
            id=note_id,
            type=item.type,
            title=title,
            body=body,
            project=project,
            tags=tags,
            created=item.created or now,
            updated=item.updated or item.created or now,
            machine=item.machine or machine,
            source=SOURCE_PREFIX + source,
            supersedes=[s for s in item.supersedes if s != note_id],
            extra=dict(extra),
        )
    note.extra[KEY_FIELD] = item.key
    note.extra[DIGEST_FIELD] = item.digest
    try:
        validate(note)
    except AnamnesisError as exc:
        return Skip(item.origin, str(exc))
    source_only = Note(
        path=path, id=note.id, type=item.type, title=said[0], body=said[1], project=project, tags=said[2]
    )
    said_file = (base_path(note.id), render_note(source_only).encode("utf-8"))
    return Built(path, render_note(note).encode("utf-8"), conflicted, kept, moved_from, said_file, said_note)


def last_imported(store: Store, paths: list[str]) -> dict[str, Note]:
    """Each note at `paths` as an import last wrote it from its source alone (a path missing:
    no such commit in this history), read with two git processes however many paths there are.
    An import that merged a person's edit in says so in its commit message (KEPT_EDIT): what it
    wrote there is not the source's text, so an earlier import's version is the base."""
    if not paths:
        return {}
    wanted = set(paths)
    log = run_git(
        store.memory, "log", "--format=%x01%H%x00%B%x02", "--name-only", "--fixed-strings",
        f"--grep={COMMIT_MARK}", check=False,
    )
    where: dict[str, str] = {}  # path -> the commit to read it from
    for entry in log.stdout.split("\x01")[1:] if log.returncode == 0 else []:
        head, _, names = entry.partition("\x02")
        commit, _, message = head.partition("\0")
        kept = {line[len(KEPT_EDIT) :] for line in message.splitlines() if line.startswith(KEPT_EDIT)}
        for name in names.splitlines():
            if name in wanted and name not in where and name not in kept:
                where[name] = commit
    if not where:
        return {}
    blobs = read_blobs(store.memory, [f"{commit}:{path}" for path, commit in where.items()])
    return {
        path: parse_note(data.decode("utf-8", errors="replace"), path)
        for path, commit in where.items()
        if (data := blobs.get(f"{commit}:{path}")) is not None
    }


def deleted_imports(store: Store) -> dict[str, str]:
    """{import key: the commit that deleted its note} for every imported note deleted since (by
    `anamnesis rm`, by hand, on any machine): an import must not bring back what a person removed.
    A note moved is no deletion (git's rename detection pairs the two paths)."""
    log = run_git(
        store.memory, "log", "-M", "--diff-filter=D", "--format=%x01%H", "--name-only", check=False
    )
    gone: list[tuple[str, str]] = []
    for entry in log.stdout.split("\x01")[1:] if log.returncode == 0 else []:
        commit, _, names = entry.partition("\n")
        gone += [(commit.strip(), name) for name in names.split("\n") if name and is_note_path(name)]
    if not gone:
        return {}
    blobs = read_blobs(store.memory, [f"{commit}^:{name}" for commit, name in gone])  # as it was just before
    keys: dict[str, str] = {}
    for commit, name in gone:
        text = blobs.get(f"{commit}^:{name}", b"").decode("utf-8", errors="replace")
        if KEY_FIELD in text:
            key = parse_note(text, name).extra.get(KEY_FIELD)
            if isinstance(key, str) and key:
                keys.setdefault(key, commit)  # newest deletion first
    return keys


def _bases(store: Store, found: list[Imported]) -> dict[str, Note]:
    """Each note's base for merging the source's change in, by its path: what the source said at
    the last import (kept under BASES_DIR), else, for a note imported before those were kept, the
    note as an import last wrote it (`last_imported`)."""
    bases: dict[str, Note] = {}
    for imported in found:
        try:
            text = safe_path(store, base_path(imported.id)).read_text(encoding="utf-8", errors="replace")
        except (OSError, ValueError):
            continue
        if has_conflict_markers(text):  # two machines imported the same source apart: trust git's history
            continue
        bases[imported.path] = parse_note(text, imported.path)
    older = last_imported(store, [f.path for f in found if f.path not in bases])
    return {**older, **bases}


def _applied(found: Imported, item: Item) -> bool:
    """Whether a note already has the project and tags the import's options give it."""
    _title, _body, tags, _extra = _redacted(item)
    return found.project == note_project(item.type, item.project) and set(tags) <= set(found.tags)


def apply(
    store: Store, plan: Plan, *, dry_run: bool = False, progress: Progress | None = None
) -> ImportReport:
    """Write the plan's new and changed notes as one commit; with `dry_run`, only say what would change.

    Under the store lock and refused like every writer (a repo left
    mid-rebase, a broken settings.json). A note whose source is unchanged
    (same key, same digest) and that has the --project/--tag asked for is
    not touched; one whose source changed is rewritten in place (same path,
    same id), a person's edit to it merged with the source's change (see the
    module docstring). A note an older version keyed differently is adopted
    under its new key, not made twice. Nothing is ever deleted.
    """
    report = ImportReport(plan.source, plan.label, skipped=list(plan.skipped), dry_run=dry_run)
    machine = check_writable(store)
    with nullcontext() if dry_run else write_lock(store, f"import {plan.source}"):
        if not dry_run:
            machine = require_writable(store)
        existing = imported_notes(store)
        planned = {item.key for item in plan.items}
        adopted: set[str] = set()
        now = now_iso()
        changes: dict[str, bytes | None] = {}
        kept: list[str] = []
        total = len(plan.items)
        matched: list[tuple[Item, Imported | None, bool]] = []  # item, its note, whether to write it
        for item in plan.items:
            found = existing.get(item.key)
            rekey = False
            if found is None:
                old = next(
                    (k for k in item.legacy_keys if k in existing and k not in adopted and k not in planned), None
                )
                if old is not None:
                    found, rekey = existing[old], True
                    adopted.add(old)
            same = found is not None and found.digest == item.digest and not rekey
            applied = found is not None and (not plan.options or _applied(found, item))
            matched.append((item, found, not (same and applied)))
        bases = _bases(store, [found for _, found, write in matched if found is not None and write])
        removed = deleted_imports(store) if any(found is None for _, found, _w in matched) else {}
        for done, (item, found, write) in enumerate(matched, 1):
            if found is not None and not write:
                report.steps.append(Step("unchanged", found.path, item))
            elif found is None and item.key in removed:
                report.skipped.append(
                    Skip(item.origin, f"deleted here after it was imported (commit {removed[item.key][:10]}): not imported again")
                )
            else:
                base = bases.get(found.path) if found is not None else None
                built = _build(store, item, plan.source, found, base, machine, now)
                if isinstance(built, Skip):
                    report.skipped.append(built)
                elif built.path in changes:
                    report.skipped.append(
                        Skip(item.origin, f"would be written to {built.path} like another piece")
                    )
                else:
                    changes[built.path] = built.data
                    if built.moved_from is not None:
                        changes[built.moved_from] = None
                    if built.base is not None:
                        changes[built.base[0]] = built.base[1]
                    if built.kept_edit:
                        kept.append(built.path)
                    action = "create" if found is None else "conflict" if built.conflicted else "update"
                    report.steps.append(Step(action, built.path, item, built.note))
            if progress is not None:
                progress(done, total)
        # Notes an import killed before its commit had written (their files are here, as the source
        # has them): committed now, not called unchanged and left for the next sync to find.
        quiet = [found for _item, found, write in matched if found is not None and not write]
        waiting = [] if dry_run else _uncommitted(
            store, [f.path for f in quiet] + [base_path(f.id) for f in quiet if f.id]  # a note and what its source said
        )
        for path in waiting:
            changes[path] = (store.memory / path).read_bytes()
        if changes and not dry_run:
            new, updated = report.count("create"), report.count("update") + report.count("conflict")
            message = f"{machine}: import {plan.source}: {new} new, {updated} updated notes from {plan.label}"
            notes = [path for path in waiting if is_note_path(path)]
            if notes:
                message += f" ({plural(len(notes), 'note')} an interrupted import had written, committed)"
            if kept:
                message += "\n\n" + "\n".join(f"{KEPT_EDIT}{path}" for path in kept)
            write_units(store, changes, message, f"import {plan.source}")
            report.commit = repo.head(store.memory)
    return report


def _uncommitted(store: Store, paths: list[str]) -> list[str]:
    """Those of `paths` git has never seen (written, then the import was killed before its commit).
    A note changed since its commit is left alone: that may be a person's edit, sync's to commit."""
    if not paths:
        return []
    out = run_git_bytes(store.memory, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames").stdout
    new = {entry[3:] for entry in out.decode("utf-8", "surrogateescape").split("\0") if entry.startswith("?? ")}
    return sorted(p for p in paths if p in new)


def shown(path: Path) -> str:
    """A path as a person reads it: under the home folder as ~/..., else as it is."""
    home = Path.home()
    try:
        return "~/" + path.relative_to(home).as_posix()
    except ValueError:
        return str(path)


def read_text(path: Path, plan: Plan, origin: str) -> str | None:
    """A source file's text, or None with the reason in `plan.skipped` (unreadable, not UTF-8, binary,
    not a regular file, far too big to be a note: those two found before a byte is read)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block the import for ever
            plan.skipped.append(Skip(origin, "not a regular file (a FIFO, a socket or a device)"))
            return None
        if info.st_size > MAX_SOURCE_BYTES:
            plan.skipped.append(
                Skip(origin, f"{info.st_size} bytes: too big for a note (the limit is {MAX_NOTE_BYTES} bytes)")
            )
            return None
        data = path.read_bytes()
    except OSError as exc:
        plan.skipped.append(Skip(origin, f"cannot be read: {exc.strerror or exc}"))
        return None
    if b"\0" in data:
        plan.skipped.append(Skip(origin, "binary data (NUL bytes), not text"))
        return None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        plan.skipped.append(Skip(origin, f"not UTF-8 text (byte {exc.start})"))
        return None


def front_matter(text: str, plan: Plan, origin: str) -> tuple[dict[str, Any], str] | None:
    """A source file's front matter fields and body, or None with the reason in `plan.skipped`
    (YAML that does not parse, fields that are not a mapping, a block never closed)."""
    front, body = split_front_matter(text)
    if front is None:
        if text.startswith(("---\n", "---\r\n")):
            plan.skipped.append(Skip(origin, "front matter is not closed by a '---' line"))
            return None
        return {}, body
    try:
        loaded = load_yaml(front)  # a date that is none stays text; a value holding itself is invalid
    except yaml.YAMLError as exc:
        plan.skipped.append(Skip(origin, f"front matter is not valid YAML: {str(exc).splitlines()[0]}"))
        return None
    if loaded is not None and not isinstance(loaded, dict):
        plan.skipped.append(Skip(origin, "front matter is not a mapping of fields"))
        return None
    return {str(k): v for k, v in (loaded or {}).items()}, body


def iso_z(value: Any) -> str:
    """A date from a source's front matter as this store writes dates (2026-11-26T09:14:03Z); '' if none."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        return str(value.replace(tzinfo=None, microsecond=0).isoformat()) + "Z"
    if isinstance(value, dt.date):
        return str(value.isoformat())
    if not isinstance(value, str) or not value.strip():
        return ""
    try:
        parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return ""
    return iso_z(parsed)
