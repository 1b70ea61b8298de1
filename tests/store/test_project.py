"""The project key is the same wherever the checkout lives."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from anamnesis.base.paths import Store
from anamnesis.store.project import MARKER, detect_project, normalize_remote, project_key


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:Acme/API.git",
        "https://github.com/acme/api",
        "https://user:secret@github.com/acme/api.git/",
        "ssh://git@github.com/acme/api.git",
        "ssh://git@github.com:22/acme/api",
    ],
)
def test_remote_urls_normalise_to_one_key(url: str) -> None:
    assert normalize_remote(url) == "github.com/acme/api"


def _clone_with_remote(where: Path, url: str) -> Path:
    where.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    subprocess.run(["git", "-C", str(where), "remote", "add", "origin", url], check=True)
    (where / "src").mkdir()
    return where


def test_two_checkouts_at_different_paths_share_the_key(tmp_path: Path) -> None:
    a = _clone_with_remote(tmp_path / "laptop" / "code" / "api", "git@github.com:acme/api.git")
    b = _clone_with_remote(tmp_path / "desk" / "work" / "acme-api", "https://github.com/Acme/api")
    assert project_key(a / "src") == project_key(b) == "github.com/acme/api"


def test_marker_file_overrides_remote(tmp_path: Path) -> None:
    repo = _clone_with_remote(tmp_path / "r", "git@github.com:acme/api.git")
    (repo / MARKER).write_text("acme-backend\n")
    assert project_key(repo / "src") == "acme-backend"


@pytest.mark.parametrize("written", ["../../etc\n", "/etc/passwd\n", "x" * 300 + "\n", "a\\b\n"])
def test_a_marker_that_holds_no_key_is_passed_over_for_the_remote(tmp_path: Path, written: str) -> None:
    """A key given in a marker file follows the rule of one given by hand (`-p`): `../../etc`
    would make notes no command can rename or merge afterwards."""
    repo = _clone_with_remote(tmp_path / "r", "git@github.com:acme/api.git")
    (repo / MARKER).write_text(written)
    assert project_key(repo / "src") == "github.com/acme/api"


def test_repo_without_remote_uses_folder_name_and_no_repo_is_none(tmp_path: Path) -> None:
    repo = tmp_path / "MyTool"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    assert project_key(repo) == "mytool"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert detect_project(plain) is None
    assert project_key(plain) == "plain"


def test_the_memory_repo_itself_is_no_project(store: Store) -> None:
    subprocess.run(["git", "-C", str(store.memory), "remote", "add", "desk", "me@desk:.anamnesis/memory"], check=True)
    (store.memory / "global").mkdir(exist_ok=True)
    assert detect_project(store.memory) is None
    assert detect_project(store.memory / "global") is None
