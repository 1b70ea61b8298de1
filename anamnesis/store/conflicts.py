"""Conflicted notes in a store: list them, tell which ones a sync changed or must hold back, and resolve
them (keep one machine's version, or every version).

The merging itself, and the format of conflict blocks, is `merge.py`; this
module is what `anamnesis conflicts` / `anamnesis resolve`, the web UI and the
demo use on a store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from anamnesis.base import repo
from anamnesis.base.errors import NoteNotFound, UsageError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.git import read_blobs, run_git_bytes
from anamnesis.base.lock import store_lock
from anamnesis.base.notes import has_conflict_markers, now_iso, parse_note, split_front_matter, stamp
from anamnesis.base.paths import Store
from anamnesis.base.settings import machine_id
from anamnesis.search import open_index
from anamnesis.store.merge import (
    Block,
    label_names,
    lines_named,
    marker_of,
    new_strays,
    parse_blocks,
    resolve_body,
    resolve_text,
    stray_lines,
)
from anamnesis.store.operations import require_writable, resolve_ref, safe_path


@dataclass
class ConflictedNote:
    """A file in memory/ that still carries conflict markers: its blocks' labels, and the line
    numbers of marker lines outside any complete block (a block half removed by hand).
    `beside` is set instead for a binary file, whose other version lies beside it."""

    path: str
    title: str
    labels: list[list[str]]
    strays: list[int] = field(default_factory=list)
    beside: str = ""

    @property
    def versions(self) -> int:
        """How many versions its largest block keeps (2 for a binary file and its other version)."""
        return max((len(labels) for labels in self.labels), default=2)

    @property
    def machines(self) -> list[str]:
        """Every machine named in its blocks, in order."""
        return list(dict.fromkeys(n for labels in self.labels for label in labels for n in label_names(label)))

    @property
    def kept(self) -> str:
        """'both versions kept' or 'all 3 versions kept', as its blocks are."""
        return "both versions kept" if self.versions == 2 else f"all {self.versions} versions kept"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "title": self.title,
            "blocks": self.labels,
            "versions": self.versions,
            "machines": self.machines,
            "stray_markers": self.strays,
            **({"beside": self.beside} if self.beside else {}),
        }


def describe_conflict(path: str, text: str) -> ConflictedNote | None:
    """What the conflict markers in `text` (the file `path`) are, or None when it has none."""
    if not has_conflict_markers(text):
        return None
    title = parse_note(text, path).title if path.endswith(".md") else path
    return ConflictedNote(path, title, block_labels_of(path, text), [n for n, _line in stray_lines(path, text)])


def block_labels_of(path: str, text: str) -> list[list[str]]:
    """The section labels of each complete block (front matter aside, for a note)."""
    body = split_front_matter(text)[1] if path.endswith(".md") else text
    return [p.labels for p in parse_blocks(body) if isinstance(p, Block)]


def list_conflicts(store: Store) -> list[ConflictedNote]:
    """Every text file in memory/ with a conflict marker line (git grep, then a real check)."""
    proc = run_git_bytes(store.memory, "grep", "-l", "-z", "--untracked", "-I", *_GREP, check=False)
    found: list[ConflictedNote] = []
    for path in sorted(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p):
        try:
            text = (store.memory / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        note = describe_conflict(path, text)
        if note is not None:
            found.append(note)
    return found


_GREP = ("-e", "^<<<<<<<", "-e", "^>>>>>>>", "-e", "^======= ")
_FEW_PATHS = 200  # more changed paths than this: grep the whole tree rather than name them all


def conflicted_at(store: Store, commit: str, paths: Iterable[str]) -> list[ConflictedNote]:
    """Which of `paths` are in conflict in `commit`: text files holding conflict markers, and
    binary files whose other version lies beside them (`<file>.<machine>.conflict`).

    What sync reports: the notes in conflict after it, among those whose conflict it recorded or
    brought in.
    """
    wanted = set(paths)
    if not wanted:
        return []
    named = sorted(wanted) if len(wanted) <= _FEW_PATHS else []
    proc = run_git_bytes(
        store.memory, "--literal-pathspecs", "grep", "-l", "-z", "-I", *_GREP, commit, "--", *named, check=False
    )
    prefix = f"{commit}:"
    hits = [h.removeprefix(prefix) for h in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if h]
    hits = [p for p in hits if p in wanted and "\n" not in p]
    blobs = read_blobs(store.memory, [f"{commit}:{p}" for p in hits])  # one git process for them all
    found: dict[str, ConflictedNote] = {}
    for path in hits:
        note = describe_conflict(path, blobs.get(f"{commit}:{path}", b"").decode("utf-8", "replace"))
        if note is not None:
            found[path] = note
    for original, side in binary_conflicts(store):
        if (side in wanted or original in wanted) and original not in found:
            found[original] = ConflictedNote(original, original, [], beside=side)
    return [found[p] for p in sorted(found)]


def binary_conflicts(store: Store) -> list[tuple[str, str]]:
    """(file, its other version) for binary files both sides changed: sync keeps one in place
    and the other beside it as `<file>.<machine>.conflict` (markers cannot go into a binary).
    """
    out = run_git_bytes(store.memory, "ls-files", "-z", "--", "*.conflict", check=False).stdout
    found: list[tuple[str, str]] = []
    for side in sorted(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p):
        stem = side.removesuffix(".conflict")
        cuts = [i for i, c in enumerate(stem) if c == "."]
        original = next((stem[:i] for i in cuts if (store.memory / stem[:i]).is_file()), stem.rsplit(".", 1)[0])
        found.append((original, side))
    return found


def conflicted_ref(store: Store, ref: str) -> str:
    """The memory/-relative path `resolve` works on: a note (path, id, id prefix), or
    another text file of memory/ by its path, as `anamnesis conflicts` lists it
    (an `.obsidian/` setting both machines changed)."""
    try:
        return resolve_ref(store, ref)
    except (UsageError, NoteNotFound):
        relpath = ref.strip().replace("\\", "/")
        if safe_path(store, relpath).is_file():
            return relpath
        # a note the index does not hold (one tidy archived under .archive/) is named by its id too
        named = [c.path for c in list_conflicts(store) if c.path.rsplit(".", 1)[0].endswith(f"-{relpath}")]
        if len(named) == 1:
            return named[0]
        raise


def resolve_note(store: Store, ref: str, keep: str | None) -> str:
    """Resolve one note: with `keep` ('both', 'ours', 'theirs', 'keep:MACHINE'; see
    resolve_text) rewrite it; with None just check a hand edit removed every marker line.
    Then commit and index it. Returns its path.
    """
    with store_lock(store, "resolve"):
        require_writable(store)  # never "resolve" on another branch or mid-rebase: refused like sync
        me = machine_id(store)
        relpath = conflicted_ref(store, ref)
        path = safe_path(store, relpath)
        text = original = path.read_text(encoding="utf-8", errors="surrogateescape")
        if keep is not None:
            if not has_conflict_markers(text):
                raise UsageError(f"{relpath} has no conflict markers")
            try:
                # A note's front matter can take a version's values; other files are text throughout.
                if relpath.endswith(".md"):
                    text = resolve_text(text, keep, me=me)
                else:
                    text = resolve_body(text, keep, me)[0]
            except UsageError as exc:
                raise UsageError(f"{relpath}: {exc}") from None
            if has_conflict_markers(text):  # e.g. a hand merge left markers inside the front matter
                raise UsageError(f"{relpath} has conflict markers that keeping a version cannot remove; edit it")
        elif has_conflict_markers(text):
            lines = [n for n, line in enumerate(text.splitlines(), 1) if marker_of(line) and marker_of(line) != ("sep", "")]
            shown = ", ".join(str(n) for n in lines[:8]) + (", ..." if len(lines) > 8 else "")
            raise UsageError(
                f"{relpath} still has conflict markers (line {shown}); remove them, or use "
                "--ours, --keep MACHINE, --both or --edit"
            )
        elif not _changed(store, relpath):
            raise UsageError(f"{relpath} has no conflict markers and no change to commit: nothing to resolve")
        if relpath.endswith(".md"):  # the resolution is this machine's new version of the note
            text = stamp(text, now_iso(), me) or text
        if text != original:
            atomic_write_text(path, text)
        with open_index(store) as index:
            index.refresh([relpath])
        repo.commit_paths(store, [relpath], f"{me}: resolve conflict in {relpath}")
    return relpath


@dataclass
class HeldNote:
    """A file sync leaves uncommitted: the edit made in it leaves conflict marker lines outside a
    complete block (a resolution done half way), which its committed version did not have."""

    path: str
    title: str
    lines: list[tuple[int, str]]  # (line number, marker line) of the new leftover marker lines

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "lines": [{"line": n, "text": t} for n, t in self.lines]}

    @property
    def where(self) -> str:
        """'line 12 `>>>>>>> server`' (the first few), for a one-line message."""
        return lines_named(self.lines)


def half_resolved(store: Store, paths: Iterable[str], commit: str = "HEAD") -> list[HeldNote]:
    """The files among `paths` (changed in the working tree) that must not be committed yet:
    their text has marker lines outside a complete block that their version in `commit` had
    not. A note that quotes a lone marker line on purpose (a note about git) and was committed
    so keeps syncing; only a new leftover holds a note back."""
    held: list[HeldNote] = []
    for path in paths:
        file = store.memory / path
        try:
            if file.is_symlink() or not file.is_file():
                continue
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue  # binary: never has markers
        text = data.decode("utf-8", "replace")
        if not has_conflict_markers(text):
            continue
        if not stray_lines(path, text):
            continue
        before = run_git_bytes(store.memory, "cat-file", "blob", f"{commit}:{path}", check=False)
        new = new_strays(path, text, before.stdout.decode("utf-8", "replace"))
        if new:
            title = parse_note(text, path).title if path.endswith(".md") else path
            held.append(HeldNote(path, title, new))
    return held


def _changed(store: Store, relpath: str) -> bool:
    """Whether the file differs from its committed version (or is not committed at all)."""
    out = run_git_bytes(store.memory, repo.LITERAL, "status", "--porcelain", "-z", "--", relpath).stdout
    return bool(out.strip(b"\0"))
