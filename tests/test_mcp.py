"""`anamnesis mcp` driven over stdio by the official MCP SDK client, through every tool."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from anamnesis.paths import Store

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


def _drive(store: Store, cwd: Path, script: Callable[[ClientSession, Call], Awaitable[None]]) -> None:
    """Start `python -m anamnesis mcp` for `store` in `cwd` and run `script` against it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "anamnesis", "mcp"], env=cli_env(store.home), cwd=str(cwd)
    )

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()

                async def call(name: str, args: dict[str, Any]) -> Any:
                    return await session.call_tool(name, args)

                await script(session, call)

    asyncio.run(asyncio.wait_for(main(), timeout=120))


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    if result.structured_content is not None:
        return dict(result.structured_content)
    return dict(json.loads(result.content[0].text))


def _error(result: Any) -> str:
    assert result.is_error, result
    return str(result.content[0].text)


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    repo = tmp_path / "api"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:acme/api.git"], check=True
    )
    return repo


def test_tools_are_listed_and_annotated(store: Store, project_dir: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"search", "read", "list", "write", "update", "delete", "sync", "status", "timeline", "tidy"}
        for name in ("search", "read", "list", "status"):
            assert tools[name].annotations is not None and tools[name].annotations.read_only_hint is True, (
                name
            )
        for name in ("write", "update", "delete", "sync"):
            assert tools[name].annotations is not None and not tools[name].annotations.read_only_hint, name
        assert tools["delete"].annotations is not None and tools["delete"].annotations.destructive_hint
        assert "query" in tools["search"].input_schema["properties"]

    _drive(store, project_dir, script)


def test_every_tool_round_trip(store: Store, project_dir: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        written = _data(
            await call(
                "write",
                {
                    "title": "Orders use pg_bouncer",
                    "body": "Transaction mode, pool size 20.",
                    "type": "semantic",
                    "tags": ["postgres", "#perf"],
                },
            )
        )
        assert written["project"] == "github.com/acme/api"
        path = written["written"]
        assert path.startswith("projects/github.com-acme-api/facts/orders-use-pg-bouncer-")
        pref = _data(await call("write", {"title": "Use tabs", "body": "Always tabs.", "type": "preference"}))
        assert pref["project"] is None and pref["written"].startswith("global/preferences/")
        glob = _data(
            await call("write", {"title": "Global fact", "body": "Everywhere.", "global_note": True})
        )
        assert glob["project"] is None

        found = _data(await call("search", {"query": "pg_bouncer"}))
        assert found["count"] == 1 and found["results"][0]["path"] == path
        assert "**" in found["results"][0]["snippet"] or found["results"][0]["title"]
        filtered = _data(await call("search", {"query": "tabs", "type": "preference"}))
        assert [r["path"] for r in filtered["results"]] == [pref["written"]]

        note = _data(await call("read", {"ref": path}))
        assert note["body"].strip() == "Transaction mode, pool size 20."
        assert note["tags"] == ["postgres", "perf"] and note["source"] == "mcp"
        assert _data(await call("read", {"ref": written["id"]}))["path"] == path

        listed = _data(await call("list", {"project": "github.com/acme/api"}))
        assert [n["path"] for n in listed["notes"]] == [path]
        assert _data(await call("list", {"type": "preference"}))["count"] == 1

        updated = _data(await call("update", {"ref": path, "body": "Session mode now.", "tags": ["pg"]}))
        assert updated["updated"] == path
        again = _data(await call("read", {"ref": path}))
        assert again["body"].strip() == "Session mode now." and again["tags"] == ["pg"]

        status = _data(await call("status", {}))
        assert status["notes"] == 3 and status["current_project"] == "github.com/acme/api"
        assert status["conflicted"] == [] and status["memory"] == str(store.memory)

        deleted = _data(await call("delete", {"ref": path}))
        assert deleted["deleted"] == path
        assert "no note" in _error(await call("read", {"ref": path}))

    _drive(store, project_dir, script)
    assert not (store.memory / "projects/github.com-acme-api/facts").exists() or not list(
        (store.memory / "projects/github.com-acme-api/facts").iterdir()
    )
    log = subprocess.run(
        ["git", "-C", str(store.memory), "log", "--format=%s"], capture_output=True, text=True
    )
    assert "delete projects/github.com-acme-api/facts/" in log.stdout
    assert "update projects/github.com-acme-api/facts/" in log.stdout
    status = subprocess.run(
        ["git", "-C", str(store.memory), "status", "--porcelain"], capture_output=True, text=True
    )
    assert status.stdout.strip() == ""


def test_bad_input_comes_back_as_tool_errors(store: Store, project_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("---\ntitle: outside\n---\nTOP SECRET OUTSIDE\n")
    (store.memory / "global").mkdir(exist_ok=True)
    (store.memory / "global" / "link.md").symlink_to(outside)
    (store.memory / "global" / "inside.md").write_text("# Inside\n\ntext\n")
    (store.memory / "global" / "alias.md").symlink_to(store.memory / "global" / "inside.md")

    async def script(session: ClientSession, call: Call) -> None:
        assert "no note matches" in _error(await call("read", {"ref": "does-not-exist"}))
        for ref in ("../../etc/passwd", "/etc/passwd", "global/../../secret.md", ".git/config"):
            message = _error(await call("read", {"ref": ref}))
            assert "outside" in message or "no note" in message, (ref, message)
        for tool, extra in (("read", {}), ("update", {"body": "x"}), ("delete", {})):
            assert "outside" in _error(await call(tool, {"ref": "global/link.md", **extra}))
            assert "symlink" in _error(await call(tool, {"ref": "global/alias.md", **extra}))
        assert "outside" in _error(await call("delete", {"ref": "../secret.md"}))
        huge = "x" * 1_500_000
        assert "limit" in _error(await call("write", {"title": "Huge", "body": huge}))
        assert "limit" in _error(await call("write", {"title": "t" * 300, "body": "b"}))
        assert "unknown type" in _error(await call("write", {"title": "T", "body": "b", "type": "gossip"}))
        assert "empty" in _error(await call("write", {"title": "  ", "body": "b"}))
        assert "tag" in _error(await call("write", {"title": "T", "body": "b", "tags": ["two words"]}))
        assert "limit" in _error(await call("search", {"query": "x", "limit": 1000}))
        assert "empty" in _error(await call("search", {"query": ""}))
        assert _error(await call("search", {"query": 5}))  # wrong type: schema validation
        assert _error(await call("write", {"body": "no title"}))  # missing argument
        assert "nothing to change" in _error(await call("update", {"ref": "x"}))
        assert _error(await call("no_such_tool", {}))
        # after all that, the server still works
        assert _data(await call("status", {}))["notes"] == 1  # global/inside.md

    _drive(store, project_dir, script)
    assert outside.read_text().startswith("---\ntitle: outside")
    assert (store.memory / "global" / "link.md").is_symlink()
    assert (store.memory / "global" / "alias.md").is_symlink()
    assert (store.memory / "global" / "inside.md").read_text() == "# Inside\n\ntext\n"


def test_hand_edits_are_seen(store: Store, project_dir: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        note = store.memory / "global" / "facts" / "hand-written.md"
        note.parent.mkdir(parents=True)
        note.write_text("# Hand written\n\nA note about zeppelins.\n")
        await asyncio.sleep(0)
        found = _data(await call("search", {"query": "zeppelins"}))
        assert [r["path"] for r in found["results"]] == ["global/facts/hand-written.md"]

    _drive(store, project_dir, script)


def test_missing_store_is_a_tool_error(tmp_path: Path, project_dir: Path) -> None:
    from anamnesis.paths import open_store

    empty = open_store(tmp_path / "nothing-here")

    async def script(session: ClientSession, call: Call) -> None:
        assert "anamnesis init" in _error(await call("status", {}))
        assert "anamnesis init" in _error(await call("search", {"query": "x"}))

    _drive(empty, project_dir, script)


def test_sync_tool_pushes_to_a_peer(store: Store, project_dir: Path, tmp_path: Path) -> None:
    """`sync` runs the real sync core: the note written over MCP reaches a bare peer repo."""
    from anamnesis.peers import add_peer

    bare = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    add_peer(store, "hub", str(bare))
    add_peer(store, "gone", str(tmp_path / "no-such-peer.git"))

    async def script(session: ClientSession, call: Call) -> None:
        written = _data(await call("write", {"title": "Synced fact", "body": "Travels to the hub."}))
        report = _data(await call("sync", {}))
        peers = {p["name"]: p for p in report["peers"]}
        assert peers["hub"]["status"] not in ("unreachable", "rejected"), peers
        assert peers["gone"]["status"] in ("unreachable", "rejected"), peers
        assert report["outcome"] == "some peers unreachable"
        files = subprocess.run(
            ["git", "--git-dir", str(bare), "ls-tree", "-r", "--name-only", "main"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert written["written"] in files

    _drive(store, project_dir, script)
