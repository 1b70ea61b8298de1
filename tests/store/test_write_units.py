"""A write unit that fails leaves nothing behind: no file half written, nothing staged, no commit.

Both entry points of the store's one transaction engine are driven into real
failures (git refusing the commit after it staged the files, a file that
cannot be written half way through a unit) and the store is compared with
what it was: every file, git's index, HEAD, the search index, no stray files.
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from anamnesis.base.errors import AnamnesisError
from anamnesis.base.paths import Store
from anamnesis.store.operations import create_note, require_writable, write_lock, write_unit, write_units


def git(store: Store, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(store.memory), *args], capture_output=True, text=True, check=True
    ).stdout


def snapshot(store: Store) -> dict[str, object]:
    """Everything a failed unit must leave as it was."""
    files = {
        p.relative_to(store.memory).as_posix(): p.read_bytes()
        for p in sorted(store.memory.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(store.memory).parts
    }
    folders = sorted(
        p.relative_to(store.memory).as_posix()
        for p in store.memory.rglob("*")
        if p.is_dir() and ".git" not in p.relative_to(store.memory).parts
    )
    conn = sqlite3.connect(str(store.index_path))
    try:
        indexed = sorted(conn.execute("SELECT path, title FROM notes").fetchall())
    finally:
        conn.close()
    return {
        "files": files,
        "folders": folders,
        "head": git(store, "rev-parse", "HEAD"),
        "staged": git(store, "diff", "--cached", "--name-status"),
        "status": git(store, "status", "--porcelain", "-uall"),
        "indexed": indexed,
    }


def refuse_commits(store: Store) -> Path:
    """Make git refuse to move the branch (its ref is locked), after `git add` has staged the files."""
    ref = git(store, "symbolic-ref", "HEAD").strip()
    lock = store.memory / ".git" / f"{ref}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    return lock


Unit = Callable[[Store, dict[str, bytes | None]], None]


def single(store: Store, changes: dict[str, bytes | None]) -> None:
    ((relpath, data),) = changes.items()
    write_unit(store, relpath, data, "test: single")


def multi(store: Store, changes: dict[str, bytes | None]) -> None:
    write_units(store, changes, "test: multi", "test unit")


def run_unit(store: Store, unit: Unit, changes: dict[str, bytes | None], *, refuse: bool = False) -> str:
    """Run the unit as a writer does (lock, `require_writable`); `refuse`: git refuses its commit
    (planted after `require_writable`, which clears lock files nobody holds)."""
    with write_lock(store, "test"):
        require_writable(store)
        lock = refuse_commits(store) if refuse else None
        try:
            with pytest.raises(AnamnesisError) as info:
                unit(store, changes)
        finally:
            if lock is not None:
                lock.unlink()
    return str(info.value)


def note_text(title: str) -> bytes:
    return f"---\ntype: semantic\ntitle: {title}\n---\n{title} body\n".encode()


@pytest.fixture
def notes(store: Store) -> tuple[str, str]:
    first = create_note(store, type="semantic", title="First note", body="one\n")
    second = create_note(store, type="semantic", title="Second note", body="two\n")
    return first.path, second.path


CHANGES: dict[str, Callable[[tuple[str, str]], dict[str, bytes | None]]] = {
    "replace": lambda n: {n[0]: note_text("Replaced")},
    "delete": lambda n: {n[0]: None},
    "create in a new folder": lambda n: {"fresh/folder/new.md": note_text("Brand new")},
    "several": lambda n: {
        n[0]: note_text("Replaced"),
        "fresh/folder/new.md": note_text("Brand new"),
        n[1]: None,
    },
}


@pytest.mark.parametrize(
    ("unit", "shape"),
    [*((single, shape) for shape in CHANGES if shape != "several"), *((multi, shape) for shape in CHANGES)],
    ids=lambda value: getattr(value, "__name__", value),
)
def test_a_commit_git_refuses_leaves_nothing_staged_or_written(
    store: Store, notes: tuple[str, str], unit: Unit, shape: str
) -> None:
    changes = CHANGES[shape](notes)
    before = snapshot(store)
    error = run_unit(store, unit, changes, refuse=True)
    assert "cannot lock ref" in error, error  # the failure is git's, after it staged the files
    assert "could not be put back" not in error and "may show the change" not in error, error
    assert snapshot(store) == before, error
    assert not list(store.memory.rglob(".*.tmp"))
    # and the same unit goes through once git lets it: nothing left over made it a no-op
    with write_lock(store, "test"):
        unit(store, changes)
    assert git(store, "status", "--porcelain", "-uall") == ""
    assert git(store, "rev-parse", "HEAD") != before["head"]


@pytest.mark.parametrize("unit", [single, multi], ids=["write_unit", "write_units"])
def test_a_file_that_cannot_be_written_undoes_the_files_written_before_it(
    store: Store, notes: tuple[str, str], unit: Unit
) -> None:
    """A file under a path that is a note, not a folder, fails: what the unit wrote before it goes."""
    blocked = f"{notes[1]}/under-a-file.md"
    changes: dict[str, bytes | None] = (
        {blocked: note_text("Blocked")}
        if unit is single
        else {notes[0]: note_text("Replaced"), "fresh/folder/new.md": note_text("Brand new"), blocked: b"x"}
    )
    before = snapshot(store)
    error = run_unit(store, unit, changes)
    assert "writing the note" in error and "could not be put back" not in error, error
    assert snapshot(store) == before, error
    assert not list(store.memory.rglob(".*.tmp"))
