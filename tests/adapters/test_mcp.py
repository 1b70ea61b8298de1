"""`anamnesis mcp` driven over stdio by the official MCP SDK client, through every tool."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_env
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from anamnesis.base.paths import Store

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
        assert "pool size 20" in found["results"][0]["snippet"]
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
        assert status["pushes_here"] == []  # no machine pushes into this store (tests/sync/test_relay.py has some)

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
        assert "needs 4 characters" in _error(await call("read", {"ref": "ce7"}))  # a prefix too short to match
        for ref in ("../../etc/passwd", "/etc/passwd", "global/../../secret.md", ".git/config"):
            message = _error(await call("read", {"ref": ref}))
            assert "is outside the store" in message, (ref, message)  # refused as a path, not merely not found
        for tool, extra in (("read", {}), ("update", {"body": "x"}), ("delete", {})):
            assert "outside" in _error(await call(tool, {"ref": "global/link.md", **extra}))
            assert "symlink" in _error(await call(tool, {"ref": "global/alias.md", **extra}))
        assert "outside" in _error(await call("delete", {"ref": "../secret.md"}))
        huge = "x" * 1_500_000
        assert "body" in _error(await call("write", {"title": "Huge", "body": huge}))
        assert "at most 200" in _error(await call("write", {"title": "t" * 300, "body": "b"}))
        assert "type must be one of" in _error(
            await call("write", {"title": "T", "body": "b", "type": "gossip"})
        )
        assert "empty" in _error(await call("write", {"title": "  ", "body": "b"}))
        assert "tags.0" in _error(await call("write", {"title": "T", "body": "b", "tags": [" # "]}))  # gives no tag: "two words" is two tags (notes.md#tags)
        assert "less than or equal to 100" in _error(await call("search", {"query": "x", "limit": 1000}))
        assert "query" in _error(await call("search", {"query": ""}))
        assert "query" in _error(await call("search", {"query": 5}))  # wrong type: schema validation
        assert "title is required" in _error(await call("write", {"body": "no title"}))
        assert "nothing to change" in _error(await call("update", {"ref": "x"}))
        assert _error(await call("no_such_tool", {}))
        # after all that, the server still works
        assert _data(await call("status", {}))["notes"] == 1  # global/inside.md

    _drive(store, project_dir, script)
    assert outside.read_text().startswith("---\ntitle: outside")
    assert (store.memory / "global" / "link.md").is_symlink()
    assert (store.memory / "global" / "alias.md").is_symlink()
    assert (store.memory / "global" / "inside.md").read_text() == "# Inside\n\ntext\n"


def test_a_projects_note_cannot_be_turned_into_a_preference_for_every_project(
    store: Store, project_dir: Path
) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        made = _data(await call("write", {"title": "Pool size is 20", "body": "pool_size = 20"}))
        refused = _error(await call("update", {"ref": made["id"], "type": "preference"}))
        assert "holds in every project" in refused and "\n" not in refused.strip(), refused
        assert _data(await call("update", {"ref": made["id"], "type": "procedural"}))  # another project type is fine

    _drive(store, project_dir, script)
    (note,) = [p for p in store.memory.rglob("*.md") if "pool-size" in p.name]
    assert "type: procedural" in note.read_text() and "project: github.com/acme/api" in note.read_text()


def test_a_secret_given_as_a_tag_or_a_project_never_reaches_a_file_or_git(store: Store, project_dir: Path) -> None:
    """Tags are lower-cased and keys too: judged before that, or `AKIA…` passes as `akia…`."""
    aws, github = "AKIAIOSFODNN7EXAMPLF", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"

    async def script(session: ClientSession, call: Call) -> None:
        made = _data(await call("write", {"title": "Tagged", "body": "b", "tags": ["ops", aws, f"x, {aws}"]}))
        assert made["id"]
        updated = _data(await call("update", {"ref": made["id"], "tags": [github, "ci"]}))
        assert updated
        refused = _error(await call("write", {"title": "p", "body": "b", "project": f"github.com/acme/{github}"}))
        assert "looks like a secret" in refused and "\n" not in refused.strip() and github not in refused, refused
        filed = _data(await call("write", {"title": "Remote given", "body": "b", "project": "git@gitlab.com:Acme/infra.git"}))
        assert filed["project"] == "gitlab.com/acme/infra", filed

    _drive(store, project_dir, script)
    log = subprocess.run(["git", "-C", str(store.memory), "log", "-p", "--all"], capture_output=True, text=True).stdout
    files = "\n".join(p.read_text() + str(p) for p in store.memory.rglob("*.md"))
    for secret in (aws, github):
        for form in (secret, secret.lower()):
            assert form not in log and form not in files, form
    assert "- redacted" in files and "- ci" in files


def test_arguments_that_would_be_silently_ignored_are_one_line_errors(store: Store, project_dir: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        made = _data(await call("write", {"title": "Pool size", "body": "pool_size = 20"}))
        for name, args, said in (
            ("list", {"project": "   "}, "project is blank"),
            ("search", {"query": "pool", "tag": "#"}, "is no tag"),
            ("write", {"title": "t", "body": "b", "project": "github.com/acme/infra", "global_note": True}, "not both"),
            ("tidy", {"notes": ["../x", "zzzzzzzzzz"]}, "no note has the path or id"),
        ):
            error = _error(await call(name, args))
            assert said in error and "\n" not in error.strip(), (name, error)
        assert _data(await call("tidy", {"notes": [made["id"]]}))["proposals"] == []  # a real note: fine

    _drive(store, project_dir, script)
    assert not [p for p in store.memory.rglob("*.md") if p.name.startswith("t-")]


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
    from anamnesis.base.paths import open_store

    empty = open_store(tmp_path / "nothing-here")

    async def script(session: ClientSession, call: Call) -> None:
        assert "anamnesis init" in _error(await call("status", {}))
        assert "anamnesis init" in _error(await call("search", {"query": "x"}))

    _drive(empty, project_dir, script)


def test_sync_tool_pushes_to_a_peer(store: Store, project_dir: Path, tmp_path: Path) -> None:
    """`sync` runs the real sync core: the note written over MCP reaches a bare peer repo."""
    from anamnesis.sync.peers import add_peer

    bare = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    add_peer(store, "hub", str(bare))
    (tmp_path / "usb").mkdir()  # the disk of the other peer is not mounted: an outage
    add_peer(store, "gone", str(tmp_path / "usb" / "no-such-peer.git"))

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


def test_tools_list_publishes_schemas_as_tight_as_the_checks(store: Store, project_dir: Path) -> None:
    """What an agent reads in tools/list: closed argument objects, enums, bounds, lengths,
    a description on every parameter, dedented tool descriptions and an output schema."""
    from anamnesis.base.notes import NOTE_TYPES

    listed: dict[str, Any] = {}

    async def script(session: ClientSession, call: Call) -> None:
        for tool in (await session.list_tools()).tools:
            listed[tool.name] = tool

    _drive(store, project_dir, script)
    assert set(listed) == {
        "search", "read", "list", "write", "update", "delete", "sync", "status", "timeline", "tidy"
    }

    def branches(prop: dict[str, Any]) -> list[dict[str, Any]]:
        return [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]

    for name, tool in listed.items():
        schema = tool.input_schema
        assert schema.get("additionalProperties") is False, name
        assert tool.description and not any(line.startswith(" ") for line in tool.description.splitlines()), (
            name
        )
        assert tool.output_schema and tool.output_schema.get("type") == "object", name
        for arg, prop in schema.get("properties", {}).items():
            assert prop.get("description"), (name, arg)
            for branch in branches(prop):
                if branch.get("type") == "string" and arg != "type":
                    assert "maxLength" in branch, (name, arg)
                if branch.get("type") == "array":
                    assert "maxItems" in branch and "maxLength" in branch["items"], (name, arg)
        if "type" in schema.get("properties", {}):
            (kinds,) = branches(schema["properties"]["type"])
            assert tuple(kinds["enum"]) == NOTE_TYPES, name
        if "limit" in schema.get("properties", {}):
            limit = schema["properties"]["limit"]
            assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, 100), name
    assert "any_terms" not in listed["search"].input_schema["properties"]
    assert set(listed["search"].output_schema["properties"]) == {"query", "count", "results"}


def test_misspelled_or_mistyped_arguments_are_one_line_errors(store: Store, project_dir: Path) -> None:
    """A misspelled argument is refused (not silently ignored), and every refusal is one line an
    agent can act on, naming the tool's own words, not a CLI command or a library's docs."""

    async def script(session: ClientSession, call: Call) -> None:
        await call("write", {"title": "Docker tips", "body": "Use docker compose.", "type": "procedural"})
        await call("write", {"title": "Docker preference", "body": "Never docker.", "type": "preference"})
        messages = {
            "tpye": _error(await call("search", {"query": "docker", "tpye": "preference"})),
            "limt": _error(await call("list", {"limt": 2})),
            "bool": _error(await call("list", {"limit": True})),
            "missing": _error(await call("write", {"body": "no title"})),
            "enum": _error(await call("search", {"query": "docker", "type": "facts"})),
            "tool": _error(await call("serach", {"query": "docker"})),
        }
        assert "'tpye'" in messages["tpye"] and "did you mean 'type'" in messages["tpye"]
        assert "'limt'" in messages["limt"] and "did you mean 'limit'" in messages["limt"]
        assert "limit" in messages["bool"] and "integer" in messages["bool"]
        assert "title is required" in messages["missing"]
        assert "'semantic', 'procedural', 'episodic' or 'preference'" in messages["enum"]
        assert "did you mean 'search'" in messages["tool"] and "read, search, status" in messages["tool"]
        for text in messages.values():
            assert "\n" not in text and "pydantic" not in text and "http" not in text, text
        missing = _error(await call("read", {"ref": "does-not-exist"}))
        assert "the search tool" in missing and "anamnesis search" not in missing
        # the real filter still works when spelled right
        only = _data(await call("search", {"query": "docker", "type": "preference"}))
        assert [r["title"] for r in only["results"]] == ["Docker preference"]
        assert _data(await call("list", {"limit": 1}))["count"] == 1
        assert _data(await call("list", {"limit": 1.0}))["count"] == 1  # JSON's 1.0 is the integer 1
        assert "integer" in _error(await call("list", {"limit": 1.5}))

    _drive(store, project_dir, script)


def test_resources_and_prompts_have_something_behind_them(store: Store, project_dir: Path) -> None:
    async def script(session: ClientSession, call: Call) -> None:
        written = _data(await call("write", {"title": "Orders use pg_bouncer", "body": "Pool size 20."}))
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["anamnesis://note/{note_id}"]
        note = await session.read_resource(f"anamnesis://note/{written['id']}")
        text = note.contents[0].text  # type: ignore[union-attr]
        assert text.startswith("---\n") and "Pool size 20." in text
        resources = (await session.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["anamnesis://context"]
        context = (await session.read_resource("anamnesis://context")).contents[0].text  # type: ignore[union-attr]
        assert "Orders use pg_bouncer" in context
        prompts = {p.name: p for p in (await session.list_prompts()).prompts}
        assert set(prompts) == {"recall", "remember"}
        recalled = await session.get_prompt("recall", {"topic": "pg_bouncer pool"})
        assert "Orders use pg_bouncer" in recalled.messages[0].content.text  # type: ignore[union-attr]
        remember = await session.get_prompt("remember", {})
        assert "write tool" in remember.messages[0].content.text  # type: ignore[union-attr]
        # What a caller gets wrong comes back as an error it can act on, one line, a JSON-RPC code.
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError) as missing:
            await session.read_resource("anamnesis://note/zzzz")
        assert missing.value.code == -32602 and "no note matches 'zzzz'" in missing.value.message
        with pytest.raises(MCPError) as no_topic:
            await session.get_prompt("recall", {})
        assert no_topic.value.code == -32602 and "needs a topic" in no_topic.value.message

    _drive(store, project_dir, script)


def test_note_ids_and_recall_topics_are_completed_as_typed(store: Store, project_dir: Path) -> None:
    """`completion/complete`: a note id from the start of an id or a word of a title; a recall
    topic from a tag or a title; no suggestion for what the server does not offer."""
    from mcp_types import PromptReference, ResourceTemplateReference

    note_ref = ResourceTemplateReference(type="ref/resource", uri="anamnesis://note/{note_id}")
    recall_ref = PromptReference(type="ref/prompt", name="recall")

    async def script(session: ClientSession, call: Call) -> None:
        argo = _data(await call("write", {"title": "Deploy with Argo", "body": "x", "tags": ["deploy", "argo"]}))
        pool = _data(await call("write", {"title": "Orders use pg_bouncer", "body": "Pool size 20."}))
        by_id = await session.complete(note_ref, {"name": "note_id", "value": argo["id"][:4]})
        assert argo["id"] in by_id.completion.values and pool["id"] not in by_id.completion.values
        by_title = await session.complete(note_ref, {"name": "note_id", "value": "bouncer"})
        assert by_title.completion.values == [pool["id"]]
        topics = await session.complete(recall_ref, {"name": "topic", "value": "de"})
        assert topics.completion.values == ["deploy", "Deploy with Argo"], topics
        assert topics.completion.total == 2 and not topics.completion.has_more
        other = await session.complete(PromptReference(type="ref/prompt", name="remember"), {"name": "x", "value": "d"})
        assert other.completion.values == []

    _drive(store, project_dir, script)


def test_lines_that_are_not_json_rpc_get_an_error_reply(store: Store, project_dir: Path) -> None:
    """JSON-RPC answers text that is not JSON (-32700) and JSON that is no request (-32600); the
    SDK's stdio transport drops both, leaving a client waiting. The server goes on after them."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    lines = [
        json.dumps(hello),
        "this is not json",
        '{"jsonrpc": "2.0", "id": 7}',
        '{"jsonrpc":"2.0","id":8,"method":"ping"}',
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "anamnesis", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=cli_env(store.home),
        cwd=project_dir,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n".join(lines) + "\n")
    proc.stdin.flush()
    answers: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [answers.put(line) for line in proc.stdout], daemon=True).start()
    replies: list[dict[str, Any]] = []
    with contextlib.suppress(queue.Empty):
        while len(replies) < 4:
            replies.append(json.loads(answers.get(timeout=60)))
    proc.stdin.close()
    proc.wait(timeout=30)
    errors = [(r["id"], r["error"]["code"]) for r in replies if "error" in r]
    assert errors == [(None, -32700), (7, -32600)], replies
    assert any(r.get("id") == 8 and r.get("result") == {} for r in replies), replies
