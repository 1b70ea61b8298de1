"""watch reads memory/ with `git status` outside the store lock: that read must not write.
A status free to refresh a stale index takes .git/index.lock, and a writer's `git add` at
that moment fails ("index.lock: File exists")."""

from __future__ import annotations

import os
import subprocess
import time

from anamnesis.base.paths import Store
from anamnesis.store.operations import create_note
from anamnesis.sync.watch import _snapshot


def _stale(store: Store) -> int:
    """A committed note whose stat data in git's index is stale (same text, a new mtime): a
    plain `git status` refreshes the index and writes it. The index's mtime before."""
    note = create_note(store, type="semantic", title="A note", body="one\n")
    later = time.time() + 5
    os.utime(store.memory / note.path, (later, later))
    return (store.memory / ".git" / "index").stat().st_mtime_ns


def test_watchs_snapshot_leaves_the_index_alone(store: Store) -> None:
    before = _stale(store)
    snapshot = _snapshot(store)
    assert snapshot is not None and snapshot.dirty == ()
    assert (store.memory / ".git" / "index").stat().st_mtime_ns == before  # no index.lock taken, nothing written


def test_a_plain_git_status_would_have_written_it(store: Store) -> None:
    """The control: a plain status refreshes the index (so the test above can fail)."""
    before = _stale(store)
    subprocess.run(["git", "-C", str(store.memory), "status", "--porcelain"], check=True, capture_output=True)
    assert (store.memory / ".git" / "index").stat().st_mtime_ns != before
