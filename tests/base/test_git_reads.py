"""Our git reads never write: a `git status` that watch runs outside the store lock must not
take .git/index.lock, or a writer's `git add` at that moment fails ("index.lock: File exists")."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from anamnesis.base.git import run_git


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "note.md").write_text("one\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "one"], check=True, env=env)
    return repo


def _stale(repo: Path) -> int:
    """Make the index's stat data of note.md stale (same content, a new mtime): a plain `git status`
    then refreshes the index and writes it. The index's mtime before."""
    time.sleep(0.01)
    later = time.time() + 5
    os.utime(repo / "note.md", (later, later))
    return (repo / ".git" / "index").stat().st_mtime_ns


def test_our_git_status_leaves_the_index_alone(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = _stale(repo)
    assert run_git(repo, "status", "--porcelain").stdout == ""
    assert (repo / ".git" / "index").stat().st_mtime_ns == before  # no index.lock taken, nothing written


def test_a_plain_git_status_would_have_written_it(tmp_path: Path) -> None:
    """The control: without our environment, git refreshes the index (so the test above can fail)."""
    repo = _repo(tmp_path)
    before = _stale(repo)
    env = {k: v for k, v in os.environ.items() if k != "GIT_OPTIONAL_LOCKS"}
    subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], check=True, capture_output=True, env=env)
    assert (repo / ".git" / "index").stat().st_mtime_ns != before
