"""One way to run git: a lock another git holds for a moment is waited for, not a failure."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from anamnesis.base.errors import GitError
from anamnesis.base.git import run_git


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.md").write_text("a\n")
    return repo


def test_a_commit_waits_for_an_index_lock_someone_holds_a_moment(tmp_path: Path) -> None:
    """`git status` in a terminal takes index.lock while our sync commits: the commit runs once
    the lock is gone, instead of failing the sync."""
    repo = _repo(tmp_path)
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    threading.Timer(0.5, lock.unlink).start()
    run_git(repo, "add", "-A")
    assert "a.md" in run_git(repo, "ls-files").stdout


def test_a_lock_that_stays_still_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from anamnesis.base import git

    monkeypatch.setattr(git, "LOCK_WAIT", 0.3)
    repo = _repo(tmp_path)
    (repo / ".git" / "index.lock").write_text("")
    started = time.monotonic()
    with pytest.raises(GitError, match=r"index\.lock"):
        run_git(repo, "add", "-A")
    assert time.monotonic() - started < 5
