"""Projects as a whole: list them, rename or merge one into another, alias a moved repository.

A project is the key its notes carry in their `project` field and the folder
they live in (projects/<folder of the key>/). A rename moves every note of
the old key to the new key's folder and rewrites its `project` field; links
to the moved notes by path follow them, and supersessions follow by
themselves (they name ids, which never change). The whole rename is one
commit written through the store's one write path (`store.write_units`), so
it syncs like any other change. The old key becomes an alias of the new one,
so a checkout still using the old remote keeps finding its notes.

An alias (`set_alias`) maps a key to a project without moving anything: a
repository moved to another organisation or host, or cloned over ssh where
it was https, keeps its notes. Aliases are small files under memory/aliases/
(read by `project.resolve_alias`), synced like notes; one file per alias, so
machines adding different aliases at once never conflict.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from anamnesis.base.errors import NoteNotFound, UsageError
from anamnesis.base.notes import (
    ARCHIVE_DIR,
    PROJECTS_DIR,
    is_note_path,
    parse_note,
    project_folder,
    render_note,
    split_front_matter,
)
from anamnesis.base.text import plural
from anamnesis.search import open_index
from anamnesis.store.links import LinkResolver, NoteKey, link_needle, rewrite_links
from anamnesis.store.operations import relpath_of, require_writable, safe_path, write_lock, write_units
from anamnesis.store.project import (
    ALIAS_SUFFIX,
    ALIASES_DIR,
    alias_file,
    check_project_key,
    read_alias,
    resolve_alias,
)

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

_PLAIN_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@+-]*$")
_REMOTE_FIELD = re.compile(rb"^remote: *['\"]?([^'\"\r\n]+)", re.M)


@dataclass
class ProjectInfo:
    """One project as `project list` shows it."""

    key: str
    notes: int
    types: dict[str, int]
    last_activity: str
    machines: list[str]
    remotes: list[str] = field(
        default_factory=list
    )  # remote keys seen for it: its own, its aliases, sessions'
    aliases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view (the key as `project`)."""
        data = asdict(self)
        return {"project": data.pop("key"), **data}


@dataclass
class Renamed:
    """What `rename_project` did."""

    old: str
    new: str
    moved: list[tuple[str, str]]  # (old path, new path) of every note that moved
    updated: list[str]  # notes that stayed where they were but whose project field or links changed
    alias: str  # the alias file that maps the old key to the new one
    merged: bool

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return {
            "old": self.old,
            "new": self.new,
            "merged": self.merged,
            "moved": [{"from": a, "to": b} for a, b in self.moved],
            "updated": list(self.updated),
            "alias": self.alias,
        }


def list_aliases(store: Store) -> list[tuple[str, str]]:
    """Every (alias, project) pair in memory/aliases/, sorted by alias."""
    folder = store.memory / ALIASES_DIR
    try:
        files = sorted(folder.glob(f"*{ALIAS_SUFFIX}"))
    except OSError:
        return []
    pairs = [found for path in files if (found := read_alias(path)) is not None]
    return sorted(pairs)


def _alias_text(alias: str, target: str) -> bytes:
    return (
        "# anamnesis project alias: a checkout whose project key is `alias` files and finds its notes"
        " under `project`\n"
        f"alias: {alias}\nproject: {target}\n"
    ).encode()


def _slot_taken(store: Store, key: str) -> None:
    """Refuse when the alias file for `key` holds another key's alias: file names keep only letters,
    digits and `._-`, so `acme/my-api` and `acme-my/api` share one, and writing one would drop the other."""
    held = read_alias(alias_file(store.memory, key))
    if held is not None and held[0] != key:
        raise UsageError(
            f"{key} and {held[0]} share the alias file {relpath_of(store, alias_file(store.memory, key))}"
            f" (keys that differ only in punctuation): {held[0]}'s alias would be lost; nothing was written"
        )


def set_alias(store: Store, alias: str, target: str) -> str:
    """Make the key `alias` find the notes of project `target`; one commit. The alias file's path.

    Refused: an alias of itself, one that would make a loop, and a key that
    still has notes of its own: its checkouts would find `target`'s notes
    instead and never theirs (`project merge` puts both together).
    """
    alias, target = check_project_key(alias).lower(), check_project_key(target)
    if alias == target.lower():
        raise UsageError(f"{alias} cannot be an alias of itself")
    with write_lock(store, "project alias"):
        machine = require_writable(store)
        with open_index(store) as index:
            index.refresh()
            own = sum(1 for _p, _i, _t, project in index.keys_with_project() if (project or "").lower() == alias)
        if own:
            raise UsageError(
                f"project {alias} has {plural(own, 'note')} of its own: as an alias of {target} its checkouts"
                f" would see {target}'s notes and never these; to put them together, run"
                f" `anamnesis project merge {alias} {target}`; nothing was written"
            )
        if resolve_alias(target, store.memory).lower() == alias:
            raise UsageError(
                f"{target} is already an alias of {alias}: that would make a loop; nothing was written"
            )
        path = alias_file(store.memory, alias)
        relpath = relpath_of(store, path)
        if read_alias(path) == (alias, target):
            return relpath
        _slot_taken(store, alias)
        write_units(
            store,
            {relpath: _alias_text(alias, target)},
            f"{machine}: alias project {alias} to {target}",
            alias,
        )
    return relpath


def remove_alias(store: Store, alias: str) -> str:
    """Forget the alias `alias` (one commit); NoteNotFound when there is none."""
    alias = check_project_key(alias).lower()
    with write_lock(store, "project unalias"):
        machine = require_writable(store)
        path = alias_file(store.memory, alias)
        if read_alias(path) is None:
            raise NoteNotFound(f"no alias {alias} (see `anamnesis project list`)")
        relpath = relpath_of(store, path)
        write_units(store, {relpath: None}, f"{machine}: remove project alias {alias}", alias)
    return relpath


def list_projects(store: Store) -> list[ProjectInfo]:
    """Every project with notes (and every alias target), most recently active first."""
    with open_index(store) as index:
        index.refresh()
        rows = index.project_activity()
        sessions = index.session_paths()
    infos: dict[str, ProjectInfo] = {}
    for key, kind, count, last, machines in rows:
        info = infos.setdefault(key, ProjectInfo(key or "global", 0, {}, "", []))
        info.notes += count
        info.types[kind or "?"] = info.types.get(kind or "?", 0) + count
        info.last_activity = max(info.last_activity, last or "")
        for machine in (machines or "").split(","):
            if machine and machine not in info.machines:
                info.machines.append(machine)
    for alias, target in list_aliases(store):
        info = infos.setdefault(target, ProjectInfo(target, 0, {}, "", []))
        info.aliases.append(alias)
    remotes: dict[str, set[str]] = {}
    for key, relpath in sessions:  # the remote a session's checkout had, as capture recorded it
        try:
            head = safe_path(store, relpath).read_bytes()[:4096]
        except (OSError, ValueError):
            continue
        match = _REMOTE_FIELD.search(head)
        if match:
            remotes.setdefault(key, set()).add(match.group(1).decode("utf-8", "replace").strip())
    for key, info in infos.items():
        seen = set(remotes.get(key, set())) | set(info.aliases)
        if "/" in info.key and "." in info.key.split("/", 1)[0]:  # a key made from a remote: host/path
            seen.add(info.key)
        info.remotes = sorted(seen)
        info.machines.sort()
    return sorted(infos.values(), key=lambda i: (i.key != "global", i.last_activity), reverse=True)


def _with_project(text: str, relpath: str, new: str) -> str:
    """`text` with its front matter's `project` set to `new`, every other byte as it was."""
    front, _ = split_front_matter(text.removeprefix("\ufeff"))
    line = f"project: {new}" if _PLAIN_KEY.match(new) else f"project: {json.dumps(new)}"  # JSON: valid YAML
    if front is not None and re.search(r"^project:[^\r\n]*", front, re.M):
        new_front = re.sub(
            r"^project:[^\r\n]*(?:\r?\n[ \t]+[^\r\n]*)*", lambda _m: line, front, count=1, flags=re.M
        )
        return text.replace(front, new_front, 1)
    note = parse_note(text, relpath)  # no project line (or no front matter): written out in full
    note.project = new
    return render_note(note)


def _archived(store: Store, prefix: str) -> list[str]:
    """The archived notes (tidy's memory/.archive/) whose path was under `prefix`."""
    folder = store.memory / ARCHIVE_DIR / prefix
    try:
        return sorted(relpath_of(store, p) for p in folder.rglob("*") if p.is_file() and is_note_path(p.name))
    except OSError:
        return []


def rename_project(store: Store, old: str, new: str, *, merge: bool = False) -> Renamed:
    """Move every note of project `old` to project `new` (one commit) and alias `old` to `new`.

    Without `merge`, a `new` that already has notes is refused (that is a
    merge: say so). Notes under projects/<old folder>/ move to the same
    place under projects/<new folder>/; notes filed elsewhere by hand keep
    their path and get the new `project` field. Links by path to a moved
    note, from any note, are rewritten; nothing else in any file changes.
    """
    old, new = check_project_key(old), check_project_key(new)
    if old == new:
        raise UsageError(f"{old} and {new} are the same project; nothing was changed")
    with write_lock(store, "project merge" if merge else "project rename"):
        machine = require_writable(store)
        with open_index(store) as index:
            index.refresh()
            rows = index.keys_with_project()
        mine = sorted(path for path, _id, _title, project in rows if project == old)
        theirs = [path for path, _id, _title, project in rows if project == new]
        if not mine:
            raise NoteNotFound(
                f"project {old} has no notes (see `anamnesis project list`); nothing was changed"
            )
        if theirs and not merge:
            raise UsageError(
                f"project {new} already has {plural(len(theirs), 'note')}: to put both together, run"
                f" `anamnesis project merge {old} {new}`; nothing was changed"
            )
        if not theirs and merge:
            raise UsageError(f"project {new} has no notes: use `anamnesis project rename {old} {new}`")
        aliased = read_alias(alias_file(store.memory, new.lower()))
        if aliased is not None and aliased[1].lower() != old.lower():
            raise UsageError(
                f"{new} is an alias of {aliased[1]} (its checkouts find {aliased[1]}'s notes): {old} would take"
                f" it over; choose another key, or first `anamnesis project unalias {new}`; nothing was changed"
            )
        _slot_taken(store, old.lower())
        old_prefix = f"{PROJECTS_DIR}/{project_folder(old)}/"
        new_prefix = f"{PROJECTS_DIR}/{project_folder(new)}/"
        taken = {path for path, *_ in rows}
        moves: dict[str, str] = {}
        for path in mine:
            if not path.startswith(old_prefix) or old_prefix == new_prefix:
                continue
            target = new_prefix + path[len(old_prefix) :]
            if target in taken or target in moves.values():
                stem, ext = posixpath.splitext(target)
                target = f"{stem}-from-{project_folder(old)[:40]}{ext}"
            moves[path] = target
        keys = [NoteKey(path, note_id, title) for path, note_id, title, _project in rows]
        resolver = LinkResolver(keys)
        moved_keys = [key for key in keys if key.path in moves]
        texts: dict[str, str] = {}
        changes: dict[str, bytes | None] = {}
        for key in keys:
            full = safe_path(store, key.path)
            if full.is_symlink():
                continue
            try:
                original = full.read_bytes().decode("utf-8", errors="surrogateescape")
            except OSError:
                continue
            text = _with_project(original, key.path, new) if key.path in mine else original
            where = moves.get(key.path, key.path)
            lowered = text.lower()
            for moved in moved_keys:
                if moved.path != key.path and link_needle(moved.path) in lowered:
                    text = rewrite_links(text, where, resolver, moved, moves[moved.path])
            if text != original or key.path in moves:
                texts[key.path] = text
        for path, text in texts.items():
            data = text.encode("utf-8", "surrogateescape")
            if path in moves:
                changes[path] = None
                changes[moves[path]] = data
            else:
                changes[path] = data
        archived = _archived(store, old_prefix) if old_prefix != new_prefix else []
        for path in archived:  # set aside by tidy: moved with the project, so a restore lands in it
            full = safe_path(store, path)
            target = f"{ARCHIVE_DIR}/{new_prefix}{path[len(ARCHIVE_DIR) + 1 + len(old_prefix):]}"
            if full.is_symlink() or target in changes or safe_path(store, target).exists():
                continue
            try:
                original = full.read_bytes().decode("utf-8", errors="surrogateescape")
            except OSError:
                continue
            changes[path] = None
            changes[target] = _with_project(original, path, new).encode("utf-8", "surrogateescape")
        alias_path = alias_file(store.memory, old.lower())
        alias_rel = relpath_of(store, alias_path)
        changes[alias_rel] = _alias_text(old.lower(), new)
        for alias, target in list_aliases(store):  # aliases of the old key follow it
            if target == old and alias != new.lower():
                changes[relpath_of(store, alias_file(store.memory, alias))] = _alias_text(alias, new)
        stale = alias_file(store.memory, new.lower())  # the new key is no alias any more
        if read_alias(stale) is not None:
            changes[relpath_of(store, stale)] = None
        verb = "merge project" if merge else "rename project"
        into = "into" if merge else "to"
        write_units(store, changes, f"{machine}: {verb} {old} {into} {new} ({plural(len(mine), 'note')})", old)
    updated = sorted(p for p in texts if p not in moves)
    return Renamed(old, new, sorted(moves.items()), updated, alias_rel, merge)
