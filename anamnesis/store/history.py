"""What git remembers about notes: per-note versions, diffs, restores, and who wrote.

The CLI and the dashboard both show a note's history and the machines that
wrote to the memory; this module reads it once from `git log` so neither
adapter parses git output itself. A restore is an ordinary save of the old
text (locked, atomic, indexed, committed), so it is itself part of history.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from anamnesis.base.errors import NoteNotFound, UsageError
from anamnesis.base.git import run_git
from anamnesis.base.lock import store_lock
from anamnesis.base.notes import now_iso, parse_note
from anamnesis.base.paths import Store
from anamnesis.base.repo import JOIN_SUBJECT
from anamnesis.base.settings import machine_id
from anamnesis.store.conflicts import ConflictedNote, block_labels_of
from anamnesis.store.merge import KEEP_PREFIX, resolve_text
from anamnesis.store.operations import safe_path, save_note

_COMMIT_RE = re.compile(r"^[0-9a-f]{7,64}$")
_REC = "\x1e"
_SEP = "\x1f"
_LOG_FORMAT = f"{_REC}%H{_SEP}%an{_SEP}%ae{_SEP}%aI{_SEP}%s"
AUTHOR_PREFIX = "anamnesis@"
# What the sync engine writes at the start of its commits' subjects (sync.py): "<machine>: sync: ...";
# a note's title or path that holds the word "sync" ("async-io") says nothing of a sync.
_SYNC_RE = re.compile(r"^[^\s:]+: sync: ")
_MERGE_RE = re.compile(r"^[^\s:]+: sync: merge (\S+)")


@dataclass(frozen=True)
class Version:
    """One commit that touched a note, with the note's path at that commit."""

    commit: str
    author: str
    machine: str
    date: str
    message: str
    path: str
    status: str  # A, M, R, D, C ... as git reports it; two letters (MM) for a merge that changed it itself
    old_path: str = ""  # where it was before this commit, when this commit moved it

    @property
    def short(self) -> str:
        return self.commit[:10]

    @property
    def deleted(self) -> bool:
        """The note did not exist after this commit."""
        return self.status.startswith("D")


@dataclass
class MachineActivity:
    """What the git history says about one machine that wrote to this memory."""

    machine: str
    commits: int = 0
    first: str = ""
    last: str = ""
    last_message: str = ""
    last_sync: str = ""
    authors: set[str] = field(default_factory=set)
    peers: set[str] = field(default_factory=set)  # what its syncs merged from ("sync: merge <peer>")


def machine_of(author: str, message: str) -> str:
    """The machine a commit came from: `anamnesis@<machine>` author, else `<machine>:` prefix."""
    if author.startswith(AUTHOR_PREFIX) and len(author) > len(AUTHOR_PREFIX):
        return author[len(AUTHOR_PREFIX) :]
    head, sep, _ = message.partition(":")
    if sep and head and " " not in head.strip() and len(head) <= 64:
        return head.strip()
    return author or "unknown"


def check_commit(commit: str) -> str:
    """A commit id from the outside, refused unless it is plain hex (never an option)."""
    commit = commit.strip().lower()
    if not _COMMIT_RE.match(commit):
        raise UsageError(f"{commit!r} is not a commit id")
    return commit


def _safe_rel(store: Store, relpath: str) -> str:
    safe_path(store, relpath)
    return relpath


def note_history(store: Store, relpath: str, limit: int = 200) -> list[Version]:
    """Every commit that changed the note, newest first, following renames.

    A merge commit whose note differs from every parent (sync merged two
    machines' edits, or wrote a conflict block) is a version too: `--follow`
    alone drops every merge, since git shows no diff for one unless asked
    (`-c`: the paths a merge changed itself).
    """
    relpath = _safe_rel(store, relpath)
    proc = run_git(
        store.memory,
        "--literal-pathspecs",  # a name like "[draft] plan.md" is a file name, not a glob
        "log",
        "--follow",
        "-M",
        "-c",
        f"--max-count={int(limit)}",
        f"--format={_LOG_FORMAT}",
        "--name-status",
        "-z",  # paths as they are: git quotes non-ASCII names and quotes in the line format
        "--",
        relpath,
        check=False,
    )
    if proc.returncode != 0:
        return []
    versions: list[Version] = []
    for record in proc.stdout.split(_REC):
        if not record.strip("\0\n"):
            continue
        header, _, rest = record.partition("\0")
        parts = header.split(_SEP)
        if len(parts) < 5:
            continue
        commit, author, _email, date, message = parts[:5]
        status, path, old_path = "M", relpath, ""
        fields = rest.lstrip("\n\0").split("\0")  # a merge's header ends with one more NUL
        if len(fields) >= 2 and fields[0]:
            status = fields[0]
            path = fields[2] if status[:1] in "RC" and len(fields) >= 3 else fields[1]
            old_path = fields[1] if status[:1] in "RC" else ""
        versions.append(
            Version(
                commit=commit,
                author=author,
                machine=machine_of(author, message),
                date=date,
                message=message,
                path=path,
                status=status,
                old_path=old_path,
            )
        )
    return versions


def text_at(store: Store, commit: str, relpath: str) -> str:
    """The note's text as it was in `commit` (NoteNotFound if it did not exist there)."""
    commit = check_commit(commit)
    relpath = _safe_rel(store, relpath)
    proc = run_git(store.memory, "show", f"{commit}:{relpath}", check=False)
    if proc.returncode != 0:
        raise NoteNotFound(f"{relpath} does not exist in commit {commit[:10]}")
    return proc.stdout


def unified_diff(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> list[str]:
    """Lines of a unified diff between two texts (no trailing newlines)."""
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=old_label,
            tofile=new_label,
            n=context,
        )
    ]


def version_text(store: Store, version: Version) -> str:
    """The text a version left behind ('' when that commit deleted the note)."""
    return "" if version.deleted else text_at(store, version.commit, version.path)


def parent_text(store: Store, version: Version) -> tuple[str, str]:
    """(the note's text just before `version`, its diff label): in the commit's first parent, which
    for a merge is what the merging machine had; ('', '/dev/null') where it did not exist.

    Not the next older entry of the history: with merges, that may be another
    machine's edit made side by side, which this version never replaced.
    """
    before = version.old_path or version.path
    proc = run_git(store.memory, "rev-parse", "--verify", "-q", f"{version.commit}^", check=False)
    parent = proc.stdout.strip()
    if not parent:
        return "", "/dev/null"
    try:
        return text_at(store, parent, before), f"{parent[:10]}:{before}"
    except NoteNotFound:
        return "", "/dev/null"


def change_diff(store: Store, versions: list[Version], position: int) -> list[str]:
    """The diff that `versions[position]` made, against the note in that commit's parent."""
    new = versions[position]
    old_text, old_label = parent_text(store, new)
    return unified_diff(old_text, version_text(store, new), old_label, f"{new.short}:{new.path}")


@dataclass
class Change:
    """One entry of a note's history as the dashboard shows it: a title that says what happened,
    the diff against the note before it, and, for a resolution, a diff against each version of
    the conflict blocks it settled (so a version it dropped shows, not only the one it kept)."""

    version: Version
    title: str
    diff: list[str]
    replaced: list[tuple[str, list[str]]] = field(default_factory=list)  # (machine, diff)
    conflict: str = ""  # 'all 3 versions kept: a, b, c' when this version holds conflict blocks


def describe_change(store: Store, version: Version, note_title: str) -> Change:
    """The `Change` of one version (two blob reads, a diff per version replaced)."""
    old_text, old_label = parent_text(store, version)
    new_text = version_text(store, version)
    diff = unified_diff(old_text, new_text, old_label, f"{version.short}:{version.path}")
    old_blocks, new_blocks = block_labels_of(version.path, old_text), block_labels_of(version.path, new_text)
    conflict = ""
    if new_blocks:
        found = ConflictedNote(version.path, note_title, new_blocks)
        conflict = f"{found.kept}: {', '.join(found.machines)}"
    replaced: list[tuple[str, list[str]]] = []
    machines = ConflictedNote(version.path, note_title, old_blocks).machines
    left = set(ConflictedNote(version.path, note_title, new_blocks).machines)
    if old_blocks and (len(new_blocks) < len(old_blocks) or set(machines) - left) and not version.deleted:
        for name in machines:
            try:
                chosen = resolve_text(old_text, f"{KEEP_PREFIX}{name}")
            except UsageError:
                continue  # some block of it has no version of this machine
            replaced.append((name, unified_diff(chosen, new_text, f"{name}'s version", f"{version.short}:{version.path}")))
    return Change(version, entry_title(version, note_title, conflict), diff, replaced, conflict)


def entry_title(version: Version, note_title: str, conflict: str = "") -> str:
    """What a version did, in words: its commit message without the machine prefix, the note's path
    given as its title ('resolve conflict in “Deploy checklist”'), and the conflict it holds."""
    head, sep, rest = version.message.partition(":")
    text = rest.strip() if sep and head.strip() == version.machine else version.message
    named = f"“{note_title}”" if note_title else version.path
    if version.old_path and version.old_path != version.path and version.old_path in text:
        # a move: the title would stand on both sides ("move “X” to “X”"); say where from and to
        return text + (f" — conflict, {conflict}" if conflict else "")
    for path in {version.path, version.old_path} - {""}:
        text = text.replace(path, named)
    if conflict:
        text += f" — conflict, {conflict}"
    return text


def working_text(store: Store, relpath: str) -> str:
    """The note's text on disk now ('' if it is gone)."""
    path = safe_path(store, relpath)
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, IsADirectoryError):
        return ""


def diff_to_working(store: Store, relpath: str, commit: str) -> list[str]:
    """What changed from the note in `commit` to the note on disk now."""
    versions = note_history(store, relpath)
    match = next((v for v in versions if v.commit.startswith(check_commit(commit))), None)
    if match is None:
        raise NoteNotFound(f"commit {commit[:10]} is not in the history of {relpath}")
    return unified_diff(
        version_text(store, match), working_text(store, relpath), f"{match.short}:{match.path}", relpath
    )


def restore_version(store: Store, relpath: str, commit: str, *, expected_text: str | None = None) -> str:
    """Bring back the note as it was in `commit`, as a new committed save; returns the new text.

    `expected_text` is what the caller last saw on disk: a change made since
    is not overwritten (see `store.save_note`).
    """
    commit = check_commit(commit)
    with store_lock(store, "restore note"):
        versions = note_history(store, relpath)
        match = next((v for v in versions if v.commit.startswith(commit)), None)
        if match is None:
            raise NoteNotFound(f"commit {commit[:10]} is not in the history of {relpath}")
        if match.deleted:
            raise UsageError(f"commit {match.short} deleted {relpath}; pick an earlier version")
        old = parse_note(text_at(store, match.commit, match.path), relpath)
        old.updated = now_iso()
        old.machine = machine_id(store)
        save_note(
            store,
            old,
            message=f"{old.machine}: restore {relpath} to {match.short}",
            expected_text=expected_text,
        )
        return working_text(store, relpath)


@dataclass(frozen=True)
class Commit:
    """One commit of the memory repo, with the machine that made it."""

    commit: str
    author: str
    machine: str
    date: str
    message: str

    @property
    def short(self) -> str:
        return self.commit[:10]


def recent_commits(store: Store, limit: int = 50) -> list[Commit]:
    """The latest commits of the memory, newest first."""
    proc = run_git(store.memory, "log", f"--max-count={int(limit)}", f"--format={_LOG_FORMAT}", check=False)
    if proc.returncode != 0:
        return []
    found = []
    for record in proc.stdout.split(_REC):
        parts = record.strip("\n").split(_SEP)
        if len(parts) < 5:
            continue
        commit, author, _email, date, message = parts[:5]
        found.append(Commit(commit, author, machine_of(author, message), date, message))
    return found


def machine_activity(store: Store, limit: int = 20000) -> list[MachineActivity]:
    """Every machine that committed to the memory, most recently active first.

    A machine is known by its commits: authored `anamnesis@<machine>`, messages
    starting `<machine>:`. `last_sync` is its latest commit whose subject is
    one the sync engine writes (`<machine>: sync: ...`, when it records local
    changes or merges a peer); `peers` are the sources its sync merges named.
    """
    seen: dict[str, MachineActivity] = {}
    for item in recent_commits(store, limit):
        if item.message.startswith(JOIN_SUBJECT):
            continue  # made alike by every machine that joined the same two histories: none's own
        entry = seen.setdefault(item.machine, MachineActivity(machine=item.machine))
        entry.commits += 1
        entry.authors.add(item.author)
        if not entry.last:
            entry.last, entry.last_message = item.date, item.message
        entry.first = item.date
        if not entry.last_sync and _SYNC_RE.match(item.message):
            entry.last_sync = item.date
        merged = _MERGE_RE.match(item.message)
        if merged:
            entry.peers.add(merged.group(1))
    return sorted(seen.values(), key=lambda m: m.last, reverse=True)
