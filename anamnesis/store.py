"""Note operations every adapter shares: create, save, delete, read, resolve.

One way to write a note: under the store lock, atomically, committed, and
the index updated from the path written. Paths from the outside (CLI, MCP,
web) are checked to stay inside memory/.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from anamnesis.errors import AnamnesisError, NoteNotFound, OutsideStore, UsageError
from anamnesis.fsutil import atomic_write_text
from anamnesis.lock import store_lock
from anamnesis.notes import (
    NOTE_TYPES,
    Note,
    is_note_id,
    new_id,
    note_relpath,
    now_iso,
    parse_note,
    render_note,
)
from anamnesis.paths import Store

MAX_NOTE_BYTES = 1_000_000
MAX_TITLE = 200


def init_store(store: Store) -> list[str]:
    """Create the store if missing (idempotent); return what was done."""
    from anamnesis import repo
    from anamnesis.settings import load_settings, new_machine_id, save_settings

    done: list[str] = []
    if store.home.exists() and not store.home.is_dir():
        raise AnamnesisError(f"{store.home} is a file, not a folder; point ANAMNESIS_HOME at a folder")
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
    from anamnesis.index import open_index

    with open_index(store) as index:
        index.refresh()
    return done


def safe_path(store: Store, relpath: str) -> Path:
    """The absolute path of `relpath` inside memory/, or OutsideStore.

    Rejects absolute paths, '..', the .git folder and anything that resolves
    (through symlinks) outside memory/.
    """
    if not relpath or "\0" in relpath:
        raise OutsideStore("empty or invalid note path")
    pure = PurePosixPath(relpath.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or (pure.parts and pure.parts[0] == ".git"):
        raise OutsideStore(f"path {relpath!r} is outside the store")
    root = store.memory.resolve()
    full = (store.memory / pure).resolve()
    if full != root and root not in full.parents:
        raise OutsideStore(f"path {relpath!r} resolves outside the store")
    if full == root / ".git" or root / ".git" in full.parents:  # e.g. through a symlinked folder
        raise OutsideStore(f"path {relpath!r} resolves into the git folder")
    return store.memory / pure


def relpath_of(store: Store, path: Path) -> str:
    """memory/-relative posix path of an absolute path inside the store."""
    return path.absolute().relative_to(store.memory.absolute()).as_posix()


def load_note(store: Store, relpath: str) -> Note:
    """Read and parse one note by its memory/-relative path."""
    path = safe_path(store, relpath)
    if path.is_symlink():
        raise OutsideStore(f"{relpath} is a symlink; notes must be plain files")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
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
            if not relpath.lower().endswith(".md") or any(p.startswith(".") for p in relpath.split("/")):
                raise UsageError(f"{relpath} is not a note (notes are .md files outside dot folders)")
            return relpath
    from anamnesis.index import open_index

    with open_index(store) as index:
        matches = index.find_ref(ref)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NoteNotFound(f"no note matches {ref!r} (try `anamnesis search` or `anamnesis list`)")
    shown = ", ".join(matches[:5])
    raise UsageError(f"{ref!r} matches {len(matches)} notes: {shown} — be more specific")


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


def validate(note: Note) -> None:
    """Refuse notes the store would be unable to round-trip."""
    if note.type not in NOTE_TYPES:
        raise UsageError(f"unknown type {note.type!r}; use one of {', '.join(NOTE_TYPES)}")
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
    """Write `note` to its path atomically under the lock, index it, commit it.

    `expected_text`, when given, is what the caller last read: if the file on
    disk changed since, nothing is written (a concurrent edit is not overwritten).
    """
    from anamnesis import repo
    from anamnesis.settings import machine_id

    validate(note)
    path = safe_path(store, note.path)
    with store_lock(store, "save note"):
        if expected_text is not None:
            current = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
            if current != expected_text:
                raise AnamnesisError(f"{note.path} changed on disk since it was read; reload and try again")
        if not note.machine:
            note.machine = machine_id(store)
        atomic_write_text(path, render_note(note))
        _reindex(store, [note.path])
        if commit:
            repo.commit_paths(store, [note.path], message or f"{machine_id(store)}: save {note.path}")
    return note


def _reindex(store: Store, paths: list[str]) -> None:
    """Index what a write changed; with semantic search on, embed it in the background."""
    from anamnesis.index import open_index
    from anamnesis.semantic import start_background_update

    with open_index(store) as index:
        changed = index.refresh(paths).changed
    if changed:
        start_background_update(store)


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
) -> Note:
    """Make a new note with a fresh id and a readable path, and save it.

    `supersedes` are references to the notes it replaces (see `resolve_supersedes`);
    one that does not resolve stops the write before anything is written.
    """
    from anamnesis.settings import machine_id

    if type not in NOTE_TYPES:
        raise UsageError(f"unknown type {type!r}; use one of {', '.join(NOTE_TYPES)}")
    replaced = resolve_supersedes(store, supersedes)
    note_id = new_id()
    stamp = now_iso()
    note = Note(
        path=note_relpath(type, title, note_id, project),
        id=note_id,
        type=type,
        title=title.strip(),
        body=body,
        project=project.strip() if project and type != "preference" else None,
        tags=[t.strip().lstrip("#").lower() for t in tags if t.strip()],
        created=stamp,
        updated=stamp,
        machine=machine_id(store),
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
    before anything is written; a note cannot supersede itself.
    """
    from anamnesis.settings import machine_id

    with store_lock(store, "update note"):
        note = read_note(store, ref)
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
            note.tags = [t.strip().lstrip("#").lower() for t in tags if t.strip()]
        if type is not None:
            note.type = type
        note.updated = now_iso()
        note.machine = machine_id(store)
        return save_note(
            store, note, message=f"{note.machine}: update {note.path}", expected_text=expected_text
        )


def delete_note(store: Store, ref: str, *, commit: bool = True) -> Note:
    """Remove a note from disk, the index and (committed) the repo."""
    from anamnesis import repo
    from anamnesis.settings import machine_id

    with store_lock(store, "delete note"):
        relpath = resolve_ref(store, ref)
        note = load_note(store, relpath)
        safe_path(store, relpath).unlink()
        _reindex(store, [relpath])
        if commit:
            repo.commit_paths(store, [relpath], f"{machine_id(store)}: delete {relpath}")
    return note
