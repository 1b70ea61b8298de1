"""One rule for a project key given by hand, wherever it is given (here: the MCP tools)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from test_mcp import Call, _data, _drive, _error

from anamnesis.base.errors import UsageError
from anamnesis.base.paths import Store
from anamnesis.store.project import check_project_key

GOOD = [
    "github.com/acme/api",
    "  gitlab.example.org/team/sub/repo  ",
    "my project",
    ".dotfiles",
    "acme/.github",
]
BAD = [
    "/abs/path",
    "~/src/api",
    ".git",
    "acme/.git",
    "..",
    "acme/../api",
    "./api",
    "acme//api",
    "acme/api/",
    "C:\\src\\api",
    "acme\\api",
    "line\nbreak",
    "---",
    "",
    "x" * 201,
]


@pytest.mark.parametrize("key", GOOD)
def test_keys_that_name_a_project(key: str) -> None:
    assert check_project_key(key) == key.strip()


def test_a_key_with_a_host_is_spelt_as_a_remote_makes_it_and_others_keep_their_case() -> None:
    assert check_project_key("GitHub.com/Acme/API") == "github.com/acme/api"  # as from git@github.com:Acme/API.git
    assert check_project_key("Acme/API") == "Acme/API"  # no host: a name someone chose, kept as written
    assert check_project_key("My.Project") == "My.Project"  # one word: no host


@pytest.mark.parametrize("key", BAD)
def test_paths_and_odd_keys_are_refused(key: str) -> None:
    with pytest.raises(UsageError, match="project key"):
        check_project_key(key)


def test_the_mcp_tools_use_the_same_rule(store: Store, tmp_path: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        for key in ("/abs/path", ".git", "..", "acme/../api", "acme\\api"):
            for tool, args in (
                ("write", {"title": "T", "body": "b", "project": key}),
                ("search", {"query": "x", "project": key}),
                ("list", {"project": key}),
            ):
                assert "refused" in _error(await call(tool, args)), (tool, key)
        written = _data(await call("write", {"title": "T", "body": "b", "project": " acme/.github "}))
        assert written["project"] == "acme/.github"
        assert written["written"].startswith("projects/acme-.github/")

    _drive(store, tmp_path, script)
    assert not (store.memory / "projects" / "git").exists()
    assert not list((store.memory / "projects").glob("abs-*"))
