"""`updated:` and `machine:` stamped on notes edited by hand, when sync commits them.

Anamnesis's own writers stamp the notes they write. A note edited in an
editor is not written by Anamnesis: it reaches git when sync commits it, and
without this its `updated:` and `machine:` would still say who changed it
before, so `list`, the dashboard and the merge of two machines' versions
(where the later `updated:` wins) would all be told something false.

Only the two lines change (added at the end of the front matter when
missing); every other byte of the file stays as the person wrote it. Left
alone: notes without front matter (or with front matter that is not a
mapping, or holds conflict markers), notes whose edit already set
`updated:` itself, and new files whose `updated:` is no older than the file.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from anamnesis.base.fsutil import atomic_write_bytes
from anamnesis.base.git import read_blobs, run_git_bytes, tree_entries
from anamnesis.base.notes import (
    front_matter_fields,
    has_conflict_markers,
    is_note_path,
    now_iso,
    split_front_matter,
    stamp,
    stamp_time,
)
from anamnesis.store import stray_lines

__all__ = ["stamp_edits"]

# A writer stamps `updated:` to the second just before it writes the file.
WRITER_SLACK = 2.0


def stamp_edits(repo: Path, machine: str) -> list[str]:
    """Stamp the notes changed in the working tree since HEAD (what sync is about to commit)
    with the time of the edit (the file's modification time, never later than now) and
    `machine`; the paths it rewrote. Runs under the store lock."""
    out = run_git_bytes(repo, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames").stdout
    changed: dict[str, bool] = {}  # path -> tracked
    for record in out.decode("utf-8", "surrogateescape").split("\0"):
        path = record[3:]
        if is_note_path(path) and "D" not in record[:2]:
            changed[path] = record[:2] != "??"
    if not changed:
        return []
    committed = _committed(repo, [p for p, tracked in changed.items() if tracked])
    stamped: list[str] = []
    for path, tracked in changed.items():
        full = repo / path
        try:
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode):
                continue
            data = full.read_bytes()
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        if has_conflict_markers(text) and stray_lines(path, text):
            continue  # resolved half way: sync holds it back as the person left it (conflicts.half_resolved)
        new = _stamped(data, committed.get(path) if tracked else None, tracked, st.st_mtime, machine)
        if new is None:
            continue
        try:
            if full.read_bytes() != data:
                continue  # saved again this instant: the next sync stamps that
            atomic_write_bytes(full, new)
        except OSError:
            continue  # a file that cannot be written is committed as it is
        stamped.append(path)
    return stamped


def _stamped(data: bytes, before: bytes | None, tracked: bool, mtime: float, machine: str) -> bytes | None:
    """The stamped bytes of one note, or None if it is left as it is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    fm_text, _body = split_front_matter(text.removeprefix("\ufeff"))
    fields = front_matter_fields(fm_text) if fm_text is not None else None
    if fields is None or "\0" in text:
        return None
    if tracked:
        old_fm = split_front_matter(before.decode("utf-8", "replace").removeprefix("\ufeff"))[0] if before else None
        old = front_matter_fields(old_fm) if old_fm is not None else None
        if old is not None and str(old.get("updated")) != str(fields.get("updated")):
            return None  # the edit set `updated:` itself (a writer, or the person)
    else:
        written = stamp_time(fields.get("updated"))
        if written is not None and written.timestamp() >= mtime - WRITER_SLACK:
            return None  # a new note its writer stamped (or one moved without an edit)
    new = stamp(text, now_iso(min(mtime, time.time())), machine)
    return None if new is None or new == text else new.encode("utf-8")


def _committed(repo: Path, paths: list[str]) -> dict[str, bytes]:
    """HEAD's bytes of these paths (absent ones left out)."""
    oids = {path: oid for path, (_mode, oid) in tree_entries(repo, "HEAD", paths, check=False).items()}
    blobs = read_blobs(repo, list(oids.values()))
    return {path: blobs[oid] for path, oid in oids.items() if oid in blobs}
