"""Conflicted notes in a store: list them, and resolve them (keep one machine's version, or every version).

The merging itself, and the format of conflict blocks, is `merge.py`; this
module is what `anamnesis conflicts` / `anamnesis resolve`, the web UI and the
demo use on a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anamnesis import repo
from anamnesis.errors import UsageError
from anamnesis.fsutil import atomic_write_text
from anamnesis.git import run_git_bytes
from anamnesis.index import open_index
from anamnesis.lock import store_lock
from anamnesis.merge import Block, Stray, marker_of, parse_blocks, resolve_body, resolve_text
from anamnesis.notes import has_conflict_markers, now_iso, parse_note, split_front_matter, stamp
from anamnesis.paths import Store
from anamnesis.settings import machine_id
from anamnesis.store import require_writable, resolve_ref, safe_path


@dataclass
class ConflictedNote:
    """A file in memory/ that still carries conflict markers: its blocks' labels, and the line
    numbers of marker lines outside any complete block (a block half removed by hand)."""

    path: str
    title: str
    labels: list[list[str]]
    strays: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "title": self.title, "blocks": self.labels, "stray_markers": self.strays}


def list_conflicts(store: Store) -> list[ConflictedNote]:
    """Every text file in memory/ with a conflict marker line (git grep, then a real check)."""
    proc = run_git_bytes(
        store.memory, "grep", "-l", "-z", "--untracked", "-I",
        "-e", "^<<<<<<<", "-e", "^>>>>>>>", "-e", "^======= ", check=False,
    )
    found: list[ConflictedNote] = []
    for path in sorted(p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p):
        try:
            text = (store.memory / path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if not has_conflict_markers(text):
            continue
        title = parse_note(text, path).title if path.endswith(".md") else path
        fm_text, body = split_front_matter(text) if path.endswith(".md") else (None, text)
        first_line = text[: len(text) - len(body)].count("\n") + 1
        pieces = parse_blocks(body, first_line)
        labels = [p.labels for p in pieces if isinstance(p, Block)]
        strays = [p.number for p in pieces if isinstance(p, Stray)]
        if fm_text is not None and has_conflict_markers(fm_text):
            strays = [n + 2 for n, line in enumerate(fm_text.splitlines()) if marker_of(line)] + strays
        found.append(ConflictedNote(path, title, labels, strays))
    return found


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
    except UsageError:
        relpath = ref.strip().replace("\\", "/")
        if safe_path(store, relpath).is_file():
            return relpath
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


def _changed(store: Store, relpath: str) -> bool:
    """Whether the file differs from its committed version (or is not committed at all)."""
    out = run_git_bytes(store.memory, repo.LITERAL, "status", "--porcelain", "-z", "--", relpath).stdout
    return bool(out.strip(b"\0"))
