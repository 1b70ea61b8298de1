"""The one transaction engine every note write goes through: a unit of files written, indexed and
committed together, or put back as it was.

`write_unit` (one file) and `write_units` (several, one commit) are thin
calls of `_write_unit`: the old version of every file is kept first (a hard
link, so the way back needs no room on a full disk), then the files are
written atomically (`fsutil`), indexed and committed. A failure at any step
(a full disk, git, the index, Ctrl-C) puts back every file the unit reached,
removes the folders it made, restores git's index so nothing stays staged,
and raises one error naming the step and what was kept (`DiskFull`, exit 8,
for a full disk). Callers hold the store lock and began with
`store.require_writable`; `store` is where other modules find these.
"""

from __future__ import annotations

import errno
import os
import secrets
import sqlite3
from pathlib import Path

from anamnesis.base.errors import AnamnesisError, GitError
from anamnesis.base.fsutil import (
    atomic_write_bytes,
    folders_under,
    is_out_of_space,
    nearest_folder,
    no_space_error,
    unwritable_folders,
    unwritable_text,
    write_fix,
    write_problem,
)
from anamnesis.base.paths import Store
from anamnesis.base.text import plural
from anamnesis.search import index_error, open_index
from anamnesis.store.storepaths import safe_path


def _refresh_index(store: Store, paths: list[str]) -> int:
    """Index `paths`; how many rows changed.

    The index issues ROLLBACK only while SQLite still holds the transaction
    (`Connection.in_transaction`), so what is raised here is SQLite's own
    error (a full disk), never a failed ROLLBACK hiding it.
    """
    with open_index(store) as index:
        return index.refresh(paths).changed


class _Undo:
    """The version of one file a write replaces, kept so a failed write can put it back.

    A hard link to the old file costs no space, so the way back still works
    on a full disk; where links are refused, the old bytes are kept in memory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.existed = os.path.lexists(path)
        self.link: Path | None = None
        self.data: bytes | None = None
        if not self.existed:
            return
        link = path.with_name(f".{path.name}.{secrets.token_hex(4)}.undo.tmp")  # ignored by git, index, watch
        try:
            os.link(path, link, follow_symlinks=False)
            self.link = link
        except OSError:
            self.data = path.read_bytes()

    def changed(self) -> bool:
        """Whether the file is no longer the version kept (a failed unit may not have reached it)."""
        try:
            if not self.existed:
                return os.path.lexists(self.path)
            if self.link is not None:
                return not os.path.samestat(os.lstat(self.path), os.lstat(self.link))
            return self.path.read_bytes() != self.data
        except OSError:
            return True

    def restore(self) -> str | None:
        """Put the old version back (or remove a new file); None, or why that failed.

        A file the unit never reached is left alone: nothing to write, so
        nothing that a full disk could refuse.
        """
        if not self.changed():
            return None
        try:
            if self.link is not None:
                os.replace(self.link, self.path)
                self.link.unlink(missing_ok=True)  # still there if nothing had replaced the file
                self.link = None
            elif self.data is not None:
                atomic_write_bytes(self.path, self.data)
            elif not self.existed:
                self.path.unlink(missing_ok=True)
        except OSError as exc:
            return exc.strerror or str(exc)
        return None

    def discard(self) -> None:
        """The write is complete: forget the old version."""
        if self.link is not None:
            self.link.unlink(missing_ok=True)
            self.link = None


def write_unit(store: Store, relpath: str, data: bytes | None, message: str | None) -> None:
    """Write `data` at `relpath` (None deletes the file), index it and commit it as one unit.

    Called under the store lock, after `require_writable`. When a step fails
    (the disk is full, git or the index fails, Ctrl-C), the file is put back
    as it was, the index follows it, and the error says what was kept, so a
    failed write leaves nothing for the next sync to commit and running the
    command again makes no duplicate. A full disk is `DiskFull` (exit 8).
    `message` None: written and indexed, the commit is left to the next sync.
    """
    deleting = data is None
    _write_unit(
        store,
        {relpath: data},
        message,
        relpath,
        first="deleting the note" if deleting else "writing the note",
        nothing="nothing was deleted" if deleting else "nothing was written",
    )


def write_units(store: Store, changes: dict[str, bytes | None], message: str, what: str) -> None:
    """`write_unit` for several files in one commit: every file written (None deletes), indexed
    and committed, or every file put back as it was. Called under the store lock."""
    _write_unit(store, changes, message, what, first="writing the notes", nothing="nothing was changed")


_COMMITTING = "committing to git"


def _write_unit(
    store: Store, changes: dict[str, bytes | None], message: str | None, what: str, *, first: str, nothing: str
) -> None:
    """The one transaction engine behind `write_unit` and `write_units`: write, index, commit, or undo.

    Every file's old version is kept first (`_Undo`), and git's index before
    the commit stages anything; a failure at any step puts back every file
    the unit reached, removes the folders it made, restores git's index (so
    nothing stays staged) and re-indexes, then raises one error naming the
    step (`first` for the files) and what was kept (`nothing` when all was
    undone). A commit git made before failing counts as done.
    """
    # lazy: git is for writers; keeps it off the SessionStart and UserPromptSubmit hooks
    from anamnesis.base import repo

    paths = list(changes)
    try:
        undos = [_Undo(safe_path(store, p)) for p in paths]
    except OSError as exc:
        raise _failed(store, f"reading {plural(len(paths), 'note')}", exc, nothing, what) from None
    made: list[Path] = []  # folders this unit created, removed again if it fails
    before = repo.head(store.memory)
    git_index = store.memory / ".git" / "index"
    staged: _Undo | None = None  # git's index as it was: a failed commit may have staged the change
    stage = first
    changed = 0
    try:
        for relpath, data in changes.items():
            full = safe_path(store, relpath)
            if data is None:
                full.unlink()
                continue
            made.extend(p for p in (full.parent, *full.parent.parents) if not p.exists())
            atomic_write_bytes(full, data)
        stage = "updating the search index"
        changed = _refresh_index(store, paths)
        if message is not None:
            stage = _COMMITTING
            staged = _Undo(git_index) if git_index.is_file() else None
            repo.commit_paths(store, paths, message)
    except BaseException as exc:
        if stage != _COMMITTING or not _committed(store, paths, before):  # else git committed, then failed
            kept = _put_back(store, changes, undos, made, staged, stage == first, stage == _COMMITTING, nothing)
            if not isinstance(exc, Exception):
                raise
            raise _failed(store, stage, exc, kept, what) from None
    finally:
        for undo in undos:
            undo.discard()
        if staged is not None:
            staged.discard()
    if changed:
        from anamnesis.search import start_background_update  # lazy: keeps semantic off the SessionEnd hook

        start_background_update(store)


def _put_back(
    store: Store,
    changes: dict[str, bytes | None],
    undos: list[_Undo],
    made: list[Path],
    staged: _Undo | None,
    files_only: bool,
    committing: bool,
    nothing: str,
) -> str:
    """Undo a failed unit: files, the folders it made, git's staging, the search index; what was kept.

    `files_only`: the unit failed while writing files, before the index or
    git saw any of them. Where a file cannot be put back, its new version
    stays on disk, uncommitted, for the next sync to commit.
    """
    paths = list(changes)
    problems = [(path, problem) for path, undo in zip(paths, undos, strict=True) if (problem := undo.restore()) is not None]
    for folder in sorted(made, key=lambda folder: len(folder.parts), reverse=True):  # deepest first
        try:
            folder.rmdir()
        except OSError:
            pass
    if problems:
        path, problem = problems[0]
        who = path if len(problems) == 1 else f"{plural(len(problems), 'file')} ({path} first)"
        return (
            f"{who} could not be put back as {'it was' if len(problems) == 1 else 'they were'} ({problem}):"
            " the new version is on disk but not committed, and the next sync commits it"
        )
    kept = nothing
    if len(paths) > 1:
        kept += " (every note is as it was)"
    elif undos[0].existed and changes[paths[0]] is not None:
        kept += " (the note is as it was)"
    if files_only:
        return kept
    if committing and (staged is None or staged.restore() is not None):
        for relpath in paths:
            _forget_staged(store, relpath)
    try:
        _refresh_index(store, paths)
    except Exception:  # it compares files' sizes and times before every search and list
        kept += "; the search index may show the change until its next refresh"
    return kept


def _committed(store: Store, paths: list[str], before: str | None) -> bool:
    """Whether HEAD moved past `before` and holds every one of `paths` exactly as it is on disk now."""
    # lazy: git is for writers; keeps it off the SessionStart and UserPromptSubmit hooks
    from anamnesis.base import repo
    from anamnesis.base.git import run_git  # lazy: as repo above, for writers only

    try:
        after = repo.head(store.memory)
        if after is None or after == before:
            return False
        proc = run_git(store.memory, repo.LITERAL, "diff", "--quiet", "HEAD", "--", *paths, check=False)
        return proc.returncode == 0
    except Exception:
        return False


def _forget_staged(store: Store, relpath: str) -> None:
    """Unstage what a failed commit staged for `relpath` (best effort: sync's `add -A` redoes it anyway)."""
    # lazy: git is for writers; keeps it off the SessionStart and UserPromptSubmit hooks
    from anamnesis.base import repo
    from anamnesis.base.git import run_git  # lazy: as repo above, for writers only

    try:
        if repo.head(store.memory) is not None:
            run_git(store.memory, repo.LITERAL, "reset", "-q", "--", relpath, check=False)
    except Exception:
        pass


def _failed(store: Store, stage: str, exc: BaseException, kept: str, relpath: str) -> AnamnesisError:
    """The one-line error for a write that failed at `stage`, saying what was kept."""
    # git's "unable to write new index file" does not say why: on a disk with under a
    # mebibyte left, a failed write of git, SQLite or the file system is taken for want of space.
    if is_out_of_space(exc, store.home if isinstance(exc, (GitError, sqlite3.Error, OSError)) else None):
        return no_space_error(store.home, stage, exc, kept)
    if isinstance(exc, GitError):
        git_dir = store.memory / ".git"
        blocked = unwritable_folders(folders_under(git_dir))
        if blocked:  # git's own words ("insufficient permission for adding an object") name no fix
            what, fix = unwritable_text(blocked, git_dir)
            return AnamnesisError(f"{stage} {relpath} failed: {what}; {kept} — fix: {fix}")
    if isinstance(exc, AnamnesisError):
        exc.args = (f"{exc}; {kept}",)
        return exc
    if isinstance(exc, sqlite3.Error):
        named = index_error(exc)  # by SQLite's result code: busy or locked, damaged
        if isinstance(named, AnamnesisError):
            named.args = (f"{named}; {kept}",)
            return named
        return AnamnesisError(f"the search index failed ({exc}); {kept} — run `anamnesis reindex`")
    if isinstance(exc, OSError):
        if exc.errno == errno.EROFS:
            return AnamnesisError(f"{store.memory} is on a read-only file system ({stage} {relpath}); {kept}")
        if exc.errno in (errno.EACCES, errno.EPERM):
            folder = nearest_folder(Path(exc.filename).parent if exc.filename else store.memory / relpath, store.home)
            fix = problem.fix if (problem := write_problem(folder)) else write_fix(folder, "denied")
            return AnamnesisError(
                f"{stage} {relpath} failed: {folder} cannot be written ({exc.strerror}); {kept} — fix: {fix}"
            )
        return AnamnesisError(f"{stage} {relpath} failed: {exc.strerror or exc}; {kept}")
    return AnamnesisError(f"{stage} failed: {type(exc).__name__}: {exc}; {kept}")
