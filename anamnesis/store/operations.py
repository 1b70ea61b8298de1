"""Note operations every adapter shares: create, save, delete, read, resolve.

One way to write a note: under the store lock, as careful as sync (a repo a
person left mid-rebase or on another branch is refused with sync's own
message, exit 12), atomically, and as one unit: file, index and commit all
happen, or none does and the error says so (a full disk is exit 8). Paths
from the outside (CLI, MCP, web) are checked to stay inside memory/.

This module is the store's face: the path checks (`storepaths.safe_path`,
`relpath_of`) and the one transaction engine (`transaction.write_unit`,
`write_units`) live in their own modules and other modules import them from here.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import PurePosixPath

from anamnesis.base.errors import (
    AnamnesisError,
    NoteChanged,
    NoteNotFound,
    OutsideStore,
    UsageError,
)
from anamnesis.base.fsutil import is_out_of_space, no_space_error
from anamnesis.base.lock import store_lock
from anamnesis.base.notes import (
    GLOBAL_TYPES,
    MAX_TITLE,
    Note,
    check_type,
    has_conflict_markers,
    is_note_id,
    is_note_path,
    new_id,
    normalize_tags,
    note_project,
    note_relpath,
    now_iso,
    parse_note,
    render_note,
    stamp,
)
from anamnesis.base.paths import Store
from anamnesis.base.settings import load_settings, new_machine_id, save_settings, writer_machine_id
from anamnesis.base.text import plural
from anamnesis.search import open_index
from anamnesis.store.redaction import redact_note_fields
from anamnesis.store.storepaths import relpath_of as relpath_of
from anamnesis.store.storepaths import safe_path as safe_path
from anamnesis.store.transaction import write_unit as write_unit
from anamnesis.store.transaction import write_units as write_units

MAX_NOTE_BYTES = 1_000_000


def init_store(store: Store) -> list[str]:
    """Create the store if missing (idempotent); return what was done."""
    # lazy: git is for writers; keeps it off the SessionStart and UserPromptSubmit hooks
    from anamnesis.base import repo

    done: list[str] = []
    check_home(store)
    for folder in (store.home, store.state_dir, store.log_dir):
        if not folder.exists():
            folder.mkdir(parents=True, exist_ok=True)
            done.append(f"created {folder}")
    os.chmod(store.home, 0o700)
    settings = load_settings(store)
    if not settings.get("machine_id") or not store.settings_path.exists():
        settings["machine_id"] = settings.get("machine_id") or new_machine_id()
        save_settings(store, settings)
        done.append(f"wrote {store.settings_path} (machine id {settings['machine_id']})")
    elif store.settings_path.stat().st_mode & 0o077:
        os.chmod(store.settings_path, 0o600)
        done.append(f"set {store.settings_path} to mode 0600")
    with store_lock(store, "init"):
        if repo.init_repo(store, settings["machine_id"]):
            done.append(f"created git repo {store.memory}")
    with open_index(store) as index:
        index.refresh()
    return done


def check_home(store: Store) -> None:
    """A clear one-line error when ANAMNESIS_HOME, or a folder above it, is a file."""
    for folder in (store.home, *store.home.parents):
        if not (folder.exists() or folder.is_symlink()):
            continue
        if folder.is_dir():
            return
        if folder == store.home:
            raise AnamnesisError(f"{folder} is a file, not a folder; point ANAMNESIS_HOME at a folder")
        raise AnamnesisError(
            f"ANAMNESIS_HOME is {store.home}, but {folder} is a file, not a folder;"
            " point ANAMNESIS_HOME at a folder"
        )


# -- the guard every writer passes ------------------------------------------------------


def check_writable(store: Store) -> str:
    """Whether a write may start, checked without the lock; this machine's id.

    Adapters call it before they ask a person for anything (an editor, a
    confirmation), so nobody types a note that cannot be saved. The write
    itself checks again under the lock (`require_writable`). Raises
    StoreMissing, an AnamnesisError for a broken settings.json, and
    SyncRefused (exit 12, sync's own message) for a repo left mid-rebase,
    mid-merge or on another branch.
    """
    # lazy: recovery (git, merge) is for writers; keeps it off the SessionStart/UserPromptSubmit hooks
    from anamnesis.store.recovery import SyncRefused, wedged

    store.require()
    machine = writer_machine_id(store)
    reason = wedged(store)
    if reason:
        raise SyncRefused(reason)
    return machine


def require_writable(store: Store, rewritten: list[str] | None = None) -> str:
    """What every writer does first, under the store lock: what sync does first. This machine's id.

    Repairs what a killed sync left (stale git lock files, a half-done move
    of the working tree) and refuses, exactly as sync does (`SyncRefused`,
    exit 12, the same message), a repo a person left mid-rebase, mid-merge
    or on another branch. A broken settings.json is an error, never a note
    written by "unknown". The caller holds the store lock. The notes that
    finishing a half-done move changed are added to `rewritten`: whoever
    looked at one of them before saw a half-moved file (see `check_not_rewritten`).
    """
    # lazy: recovery (git, merge) is for writers; keeps it off the SessionStart/UserPromptSubmit hooks
    from anamnesis.store.recovery import repair_or_refuse

    store.require()
    machine = writer_machine_id(store)
    repair_or_refuse(store, rewritten=rewritten)
    for stale in (store.memory / ".git").glob(".index.*.undo.tmp"):  # git's index kept by a killed write
        stale.unlink(missing_ok=True)
    return machine


def check_not_rewritten(relpath: str, rewritten: list[str], doing: str) -> None:
    """Refuse to delete or replace a note that finishing an interrupted sync has just changed.

    A sync killed while git moved the working tree leaves some notes as they
    were; what a person (or an agent) read of such a note was the old
    version, without what another machine added since. Deleting it, or
    writing a body made from that reading, would drop text nobody here saw,
    so the caller is told to look again: nothing is written.
    """
    if relpath in rewritten:
        raise NoteChanged(
            f"{relpath} was out of date (an interrupted sync had not finished updating it) and was brought up "
            f"to date just now, so what you saw of it was an older version; nothing was {doing}: look at it "
            "again (`anamnesis show`) and retry"
        )


@contextmanager
def write_lock(store: Store, what: str, timeout: float = 60.0) -> Iterator[None]:
    """The store lock for a write; a disk too full to take it is DiskFull (nothing was written)."""
    with ExitStack() as stack:
        try:
            stack.enter_context(store_lock(store, what, timeout=timeout))
        except OSError as exc:
            if is_out_of_space(exc):
                raise no_space_error(store.home, "taking the store lock", exc, "nothing was changed") from None
            raise
        yield


def load_note(store: Store, relpath: str) -> Note:
    """Read and parse one note by its memory/-relative path."""
    path = safe_path(store, relpath)
    if path.is_symlink():
        raise OutsideStore(f"{relpath} is a symlink; notes must be plain files")
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # NotADirectory: a path through a note (`x.md/y`)
        raise NoteNotFound(f"no note at {relpath}") from None
    except IsADirectoryError:
        raise NoteNotFound(f"{relpath} is a folder, not a note") from None
    return parse_note(data.decode("utf-8", errors="replace"), relpath)


def resolve_ref(store: Store, ref: str) -> str:
    """Turn what a user typed (path, id, id prefix, file name) into one note path."""
    ref = ref.strip()
    if not ref:
        raise UsageError("empty note reference")
    if ref.endswith(".md") or "/" in ref or os.sep in ref:
        candidate = ref
        memory = os.path.realpath(store.memory)
        if os.path.isabs(ref) or os.path.exists(ref):  # absolute, or relative to the current folder
            full = os.path.realpath(ref)
            if full.startswith(memory + os.sep):
                candidate = os.path.relpath(full, memory)
        path = safe_path(store, candidate)
        if path.is_file():
            relpath = PurePosixPath(candidate.replace(os.sep, "/")).as_posix()
            if not is_note_path(relpath):
                raise UsageError(f"{relpath} is not a note (notes are .md files outside dot folders)")
            return relpath
    try:
        with open_index(store) as index:
            matches = index.find_ref(ref)
            if not matches and index.refresh().changed:  # a note saved by hand a moment ago
                matches = index.find_ref(ref)
    except sqlite3.Error as exc:
        if is_out_of_space(exc, store.home):  # even reading the index needs a little room (its -shm file)
            raise no_space_error(store.home, "reading the search index", exc, "nothing was changed") from None
        raise
    if len(matches) == 1:
        return matches[0]
    if not matches:
        short = " (an id prefix needs 4 characters or more)" if len(ref) < 4 and ref.isalnum() else ""
        raise NoteNotFound(f"no note matches {ref!r}{short} (try `anamnesis search` or `anamnesis list`)")
    shown = ", ".join(matches[:5]) + (f" and {len(matches) - 5} more" if len(matches) > 5 else "")
    raise UsageError(f"{ref!r} matches {plural(len(matches), 'note')}: {shown} — be more specific")


def read_note(store: Store, ref: str) -> Note:
    """The note a reference points at."""
    return load_note(store, resolve_ref(store, ref))


def resolve_supersedes(store: Store, refs: Iterable[str]) -> list[str]:
    """The ids of the notes `refs` point at (any reference `resolve_ref` takes), in order, once each.

    A reference that matches no note, or more than one, raises the error
    `resolve_ref` raises, saying which reference it was; nothing is written.
    """
    ids: dict[str, None] = {}
    for ref in refs:
        try:
            target = read_note(store, ref)
        except AnamnesisError as exc:
            raise type(exc)(f"cannot supersede {ref.strip()!r}: {exc}") from None
        ids.setdefault(target.id, None)
    return list(ids)


def _check_title_length(title: str | None) -> None:
    """A title as given, before redaction (which may lengthen it, and then cuts it to fit)."""
    if title is not None and len(title) > MAX_TITLE:
        raise UsageError(f"the title is {plural(len(title), 'character')}; at most {MAX_TITLE} (put the rest in the body)")


def validate(note: Note) -> None:
    """Refuse notes the store would be unable to round-trip."""
    check_type(note.type)
    if not note.title.strip():
        raise UsageError("a note needs a title")
    if len(note.title) > MAX_TITLE:
        raise UsageError(f"title is longer than {MAX_TITLE} characters")
    if "\n" in note.title or "\r" in note.title:
        raise UsageError("a title is one line")
    if note.project is not None and (
        not any(c.isalnum() for c in note.project) or any(ord(c) < 32 for c in note.project)
    ):
        raise UsageError(f"project key {note.project!r} must be one line with letters or digits")
    if "\0" in note.body or "\0" in note.title:
        raise UsageError("the note contains NUL bytes (binary data?); notes are text")
    for other in note.supersedes:
        if not is_note_id(other):
            raise UsageError(f"supersedes {other!r} is not a note id")
        if other == note.id:
            raise UsageError(f"a note cannot supersede itself ({note.id})")
    size = len(note.body.encode("utf-8"))
    if size > MAX_NOTE_BYTES:
        raise UsageError(f"note body is {size} bytes; the limit is {MAX_NOTE_BYTES}")


def save_note(
    store: Store,
    note: Note,
    *,
    message: str | None = None,
    commit: bool = True,
    expected_text: str | None = None,
) -> Note:
    """Write `note` to its path under the lock, index it, commit it: all of it, or none of it.

    Refused like sync on a repo left mid-rebase or on another branch
    (`require_writable`). `expected_text`, when given, is what the caller last
    read: if the file on disk changed since, nothing is written (a concurrent
    edit is not overwritten). `commit=False` writes and indexes only, and
    leaves the commit to the next sync.
    """
    validate(note)
    path = safe_path(store, note.path)
    with write_lock(store, "save note"):
        machine = require_writable(store)
        try:
            current = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        except OSError:
            current = ""  # unreadable: writing it says why
        if expected_text is not None and current != expected_text:
            raise NoteChanged(f"{note.path} changed on disk since it was read; reload and try again")
        if not note.machine:
            note.machine = machine
        text = render_note(note)
        if has_conflict_markers(current):
            _refuse_half_resolved(note.path, text, current)
        write_unit(store, note.path, text.encode("utf-8"), (message or f"{machine}: save {note.path}") if commit else None)
    return note


def _refuse_half_resolved(relpath: str, text: str, current: str) -> None:
    """A note in conflict saved with marker lines outside a complete block that it did not have
    (a resolution stopped half way) is refused, as sync holds such a hand edit back."""
    # lazy: merge loads yaml; only a note in conflict needs it
    from anamnesis.store.merge import lines_named, new_strays

    left = new_strays(relpath, text, current)
    if left:
        raise UsageError(
            f"{relpath}: {lines_named(left)} is a conflict marker outside a complete block, so the resolution is "
            "half done; remove every marker line of the block (or keep the block whole), or use "
            "`anamnesis resolve NOTE --edit`; nothing was saved"
        )


def create_note(
    store: Store,
    *,
    type: str,
    title: str,
    body: str,
    project: str | None = None,
    tags: Iterable[str] = (),
    source: str = "cli",
    extra: dict[str, object] | None = None,
    supersedes: Iterable[str] = (),
    commit: bool = True,
    path: str | None = None,
) -> Note:
    """Make a new note with a fresh id and a readable path, and save it.

    `supersedes` are references to the notes it replaces (see `resolve_supersedes`);
    one that does not resolve stops the write before anything is written.
    An empty body is refused, as are a repo left mid-rebase or on another
    branch and a broken settings.json (see `check_writable`). `path` puts
    the note where a link already expects it (a .md file outside dot folders,
    not taken yet) instead of the path made from its type and title.
    """
    check_type(type)
    if path is not None:
        path = path.strip().replace("\\", "/")
        if not is_note_path(path):
            raise UsageError(f"{path} is not a note path (notes are .md files outside dot folders)")
        if os.path.lexists(safe_path(store, path)):
            raise UsageError(f"{path} already exists")
    if not body.strip():
        raise UsageError("empty body; nothing was written")
    _check_title_length(title)
    title, body, tags = redact_note_fields(title, body, tags)  # secrets never reach a file name or git
    machine = check_writable(store)
    replaced = resolve_supersedes(store, supersedes)
    note_id = new_id()
    stamp = now_iso()
    note = Note(
        path=path or note_relpath(type, title, note_id, project),
        id=note_id,
        type=type,
        title=title.strip(),
        body=body,
        project=note_project(type, project),
        tags=normalize_tags(tags),
        created=stamp,
        updated=stamp,
        machine=machine,
        source=source,
        supersedes=replaced,
        extra=dict(extra or {}),
    )
    return save_note(store, note, message=f"{note.machine}: new {type} note {note.path}", commit=commit)


def update_note(
    store: Store,
    ref: str,
    *,
    title: str | None = None,
    body: str | None = None,
    tags: Iterable[str] | None = None,
    type: str | None = None,
    supersedes: Iterable[str] | None = None,
    add_supersedes: Iterable[str] = (),
    expected_text: str | None = None,
) -> Note:
    """Change fields of an existing note in place (its path stays) and save it.

    `supersedes` replaces the list of notes it supersedes (empty clears it);
    `add_supersedes` adds to it. Both take note references, resolved to ids
    before anything is written; a note cannot supersede itself. An empty
    body is refused.
    """
    if body is not None and not body.strip():
        raise UsageError("empty body; nothing was written (to delete a note, delete it)")
    _check_title_length(title)
    title, body, tags = redact_note_fields(title, body, tags)
    with write_lock(store, "update note"):
        rewritten: list[str] = []
        machine = require_writable(store, rewritten)
        note = read_note(store, ref)
        if body is not None:  # a new body is made from what the caller read of the old one
            check_not_rewritten(note.path, rewritten, "written")
        if supersedes is not None or add_supersedes:
            links = note.supersedes if supersedes is None else resolve_supersedes(store, supersedes)
            links = list(dict.fromkeys([*links, *resolve_supersedes(store, add_supersedes)]))
            if note.id in links:
                raise UsageError(f"a note cannot supersede itself ({note.id} is {note.path})")
            note.supersedes = links
        if title is not None:
            note.title = title.strip()
        if body is not None:
            note.body = body
        if tags is not None:
            note.tags = normalize_tags(tags)
        if type is not None:
            retype(note, type)
        note.updated = now_iso()
        note.machine = machine
        if not note.created:  # a note written by hand without front matter gets it now: when it was written
            note.created = _written_at(store, note.path) or note.updated
        return save_note(
            store, note, message=f"{note.machine}: update {note.path}", expected_text=expected_text
        )


def _written_at(store: Store, relpath: str) -> str:
    """When the file at `relpath` was last written, as a note's time stamp ("" if it cannot be read)."""
    try:
        return now_iso((store.memory / relpath).stat().st_mtime)
    except OSError:
        return ""


def retype(note: Note, kind: str) -> None:
    """Give `note` the type `kind`, unless that would make a project's note a rule for every
    project: a preference is global (SessionStart shows it in every project as one to follow)."""
    kind = check_type(kind)
    if kind != note.type and kind in GLOBAL_TYPES and note.project:
        raise UsageError(
            f"{note.path} belongs to project {note.project}, and a {kind} holds in every project: write the"
            f" rule as a new note of type {kind} (it is filed as global); nothing was changed"
        )
    note.type = kind


def delete_note(store: Store, ref: str, *, commit: bool = True) -> Note:
    """Remove a note from disk, the index and (committed) the repo: all three, or none."""
    with write_lock(store, "delete note"):
        rewritten: list[str] = []
        machine = require_writable(store, rewritten)
        relpath = resolve_ref(store, ref)
        check_not_rewritten(relpath, rewritten, "deleted")
        note = load_note(store, relpath)
        write_unit(store, relpath, None, f"{machine}: delete {relpath}" if commit else None)
    return note


def save_edited_text(store: Store, relpath: str, data: bytes, *, expected: bytes | None = None) -> None:
    """Save what a person typed in an editor as the note at `relpath`: stamped, indexed, committed.

    The bytes are kept as typed (CRLF, a byte order mark, no front matter at
    all); only `updated` and `machine` are stamped (`notes.stamp`). Refused like `new`: an empty body
    (exit 2), NUL bytes, a repo left mid-rebase or on another branch
    (exit 12). `expected` is the file the editor started from: if the note
    changed on disk since (a sync, another writer), nothing is written.
    """
    text = data.decode("utf-8", errors="replace")
    parsed = parse_note(text.removeprefix("\ufeff"), relpath)
    if not parsed.body.strip():
        raise UsageError("the note's body is empty; nothing was written (`anamnesis rm` deletes a note)")
    if "\0" in text:
        raise UsageError("the note contains NUL bytes (binary data?); notes are text; nothing was written")
    path = safe_path(store, relpath)
    with write_lock(store, "edit note"):
        rewritten: list[str] = []
        machine = require_writable(store, rewritten)
        if expected is None:
            check_not_rewritten(relpath, rewritten, "overwritten")
        else:
            try:
                current: bytes | None = path.read_bytes()
            except FileNotFoundError:
                current = None
            if current != expected:  # finishing an interrupted sync is a change on disk too
                gone = "was deleted" if current is None else "changed on disk"
                raise NoteChanged(f"{relpath} {gone} while you were editing it; nothing was overwritten")
        try:
            on_disk = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            on_disk = ""
        if has_conflict_markers(on_disk):
            _refuse_half_resolved(relpath, text, on_disk)
        stamped = stamp(text, now_iso(), machine) or text
        out = data if stamped == text else stamped.encode("utf-8")
        write_unit(store, relpath, out, f"{machine}: edit {relpath}")


# -- moving a note ------------------------------------------------------------------------


class MovedNote:
    """What `move_note` did: the note at its new path, where it was, the notes whose links changed."""

    def __init__(self, note: Note, old_path: str, rewritten: list[str]) -> None:
        self.note = note
        self.old_path = old_path
        self.rewritten = rewritten


def move_note(store: Store, ref: str, new_relpath: str) -> MovedNote:
    """Move (rename) a note to `new_relpath`, keeping its id, and make links follow it.

    Links in other notes that named the old path or file name (`[[path]]`,
    `[[file-name]]`, relative `[x](../facts/y.md)`) are rewritten to the new
    one; links by id or title still resolve and are left as written. The
    note's own relative links are rewritten to still reach their notes from
    its new folder; nothing else in any file changes. The move, the
    rewritten notes, the index and the commit are one unit: all of it, or
    none of it (as `write_unit`). Refused: a target that exists, is not a
    `.md` file, is in a dot folder or leaves memory/.
    """
    # lazy: only a move rewrites links; keeps links off the hooks
    from anamnesis.store.links import LinkResolver, NoteKey, link_needle, rewrite_links

    wanted = PurePosixPath(new_relpath.strip().replace("\\", "/")).as_posix()
    with write_lock(store, "move note"):
        machine = require_writable(store)
        old = resolve_ref(store, ref)
        new = wanted
        if not is_note_path(new):
            raise UsageError(f"{new} is not a note path (notes are .md files outside dot folders)")
        target = safe_path(store, new)
        if new == old:
            raise UsageError(f"{old} is already at {new}; nothing was moved")
        if os.path.lexists(target) and not (new.lower() == old.lower() and target.samefile(safe_path(store, old))):
            raise UsageError(f"{new} already exists; nothing was moved")
        source = safe_path(store, old)
        if source.is_symlink():
            raise OutsideStore(f"{old} is a symlink; notes must be plain files")
        text = source.read_bytes().decode("utf-8", errors="surrogateescape")
        note = parse_note(text, old)
        with open_index(store) as index:
            index.refresh()
            keys = [NoteKey(path, note_id, title) for path, note_id, title in index.note_keys()]
        if old not in {key.path for key in keys}:
            keys.append(NoteKey(old, note.id, note.title))
        resolver = LinkResolver(keys)
        old_key = NoteKey(old, note.id, note.title)
        moved = rewrite_links(text, new, resolver, old_key, new, moved_from=old)
        changes: dict[str, bytes | None] = {new: moved.encode("utf-8", "surrogateescape"), old: None}
        needle = link_needle(old)
        for key in keys:
            if key.path in (old, new):
                continue
            path = safe_path(store, key.path)
            try:
                if path.is_symlink():
                    continue
                other = path.read_bytes().decode("utf-8", errors="surrogateescape")
            except OSError:
                continue
            if needle not in other.lower():
                continue
            rewritten = rewrite_links(other, key.path, resolver, old_key, new)
            if rewritten != other:
                changes[key.path] = rewritten.encode("utf-8", "surrogateescape")
        write_units(store, changes, f"{machine}: move {old} to {new}", old)
    note.path = new
    return MovedNote(note, old, sorted(p for p in changes if p not in (old, new)))
