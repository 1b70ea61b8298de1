"""Importing a store the published anamnesis-memory 0.1.3 package wrote, and every importer's notes
reaching a second machine through a bare hub where search finds them.

The 0.1.3 store is made by the real package (installed by scripts/test into its own venv, named by
ANAMNESIS_TEST_OLDPKG_PY): notes through its MCP server's `memory_write` tool driven by the official
MCP client, a session note through its `capture` command. Missing package: a failure in CI, a skip
elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fleet import Fleet, fleet  # noqa: F401
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from anamnesis.base.notes import parse_note
from anamnesis.base.paths import Store
from anamnesis.importers import run_import
from anamnesis.search.engine import search
from anamnesis.search.index import open_index
from anamnesis.store.operations import read_note, resolve_ref

pytestmark = pytest.mark.e2e

TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"  # a fake GitHub token
OLD_MACHINE = "desk-old"


def old_cli() -> Path:
    """The 0.1.3 package's `anamnesis` command in its own venv."""
    python = os.environ.get("ANAMNESIS_TEST_OLDPKG_PY") or str(Path.home() / ".cache/anamnesis-test/oldpkg/bin/python")
    command = Path(python).parent / "anamnesis"
    ok = command.is_file() and subprocess.run(
        [python, "-P", "-c", "import importlib.metadata as m; assert m.version('anamnesis-memory') == '0.1.3'"],
        capture_output=True,
    ).returncode == 0
    if not ok:
        message = f"anamnesis-memory 0.1.3 is not installed at {python}; scripts/test installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return command


def old_env(root: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(root.parent),
        "ANAMNESIS_HOME": str(root),
        "ANAMNESIS_MACHINE_ID": OLD_MACHINE,
        "GIT_CONFIG_NOSYSTEM": "1",
    }


OLD_NOTES: list[dict[str, Any]] = [
    dict(type="semantic", title="Pgbouncer pool size", body="pool_size is 20 per instance",
         project="github.com/acme/api", tags=["postgres", "pool"]),
    dict(type="procedural", title="Release checklist", body=f"Run make lint, then tag. Token {TOKEN}", tags=["release"]),
    dict(type="episodic", title="Flaky login test", body="The login test raced the session cache.",
         project="github.com/acme/web"),
    dict(type="semantic", title="Laptop only", body="The VPN config lives in the vault.", scope="machine-local"),
]


def make_old_store(root: Path, tmp: Path) -> dict[str, dict[str, Any]]:
    """A 0.1.3 store written by the real package; returns what its MCP tool said it wrote, by title."""
    command = old_cli()
    params = StdioServerParameters(command=str(command), args=["serve"], env=old_env(root), cwd=str(tmp))
    written: dict[str, dict[str, Any]] = {}

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                for args in OLD_NOTES:
                    result = await session.call_tool("memory_write", args)
                    assert not result.is_error, result.content
                    data = dict(result.structured_content or json.loads(result.content[0].text))
                    written[data["title"]] = data

    asyncio.run(asyncio.wait_for(main(), timeout=120))
    transcript = tmp / "session.jsonl"
    lines = [
        {"type": "user", "sessionId": "sess-42", "cwd": str(tmp),
         "message": {"role": "user", "content": "Fix the cache eviction bug in the session store"}},
        {"type": "assistant", "sessionId": "sess-42", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "The TTL was read in seconds but stored in milliseconds; fixed in cache.py."}]}},
        {"type": "user", "sessionId": "sess-42", "message": {"role": "user", "content": "Document it too."}},
        {"type": "assistant", "sessionId": "sess-42", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Documented the TTL units in docs/cache.md."}]}},
    ]
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    proc = subprocess.run(
        [str(command), "capture", "--transcript", str(transcript), "--project", "github.com/acme/api", "--no-sync"],
        env=old_env(root), cwd=tmp, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
    )
    assert proc.returncode == 0 and "wrote episodic note" in proc.stdout, proc.stderr
    written["session"] = {"id": proc.stdout.split("wrote episodic note ", 1)[1].split()[0]}
    return written


def imported(store: Store) -> dict[str, Any]:
    out = {}
    for path in store.memory.rglob("*.md"):
        rel = path.relative_to(store.memory).as_posix()
        note = parse_note(path.read_text(encoding="utf-8"), rel)
        if "import_key" in note.extra:
            out[note.extra["import_key"]] = note
    return out


def found(store: Store, query: str) -> list[str]:
    with open_index(store) as index:
        return [hit.path for hit in search(index, query, limit=20)]


def test_a_store_of_the_published_package_moves_over_with_its_ids(fleet: Fleet, tmp_path: Path) -> None:
    old = tmp_path / "old-home" / ".anamnesis"
    old.mkdir(parents=True)
    written = make_old_store(old, tmp_path)
    broken = old / "memory" / "semantic" / "01BROKENBROKENBROKENBROKEN.md"
    broken.write_text("---\nid: [x\n---\nbody\n")

    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    plan = run_import(a.store, "anamnesis-memory", old, dry_run=True)
    assert plan.count("create") == 4 and a.git("log", "--oneline").count("\n") == 0  # --print wrote nothing

    report = run_import(a.store, "anamnesis-memory", old)
    assert report.count("create") == 4 and report.commit == a.git("rev-parse", "HEAD")  # one commit, the last
    reasons = {Path(s.origin).name: s.reason for s in report.skipped}
    assert "machine-local" in reasons[written["Laptop only"]["id"] + ".md"]
    assert "not valid YAML" in reasons["01BROKENBROKENBROKENBROKEN.md"]

    pool = read_note(a.store, written["Pgbouncer pool size"]["id"])  # the old id still finds the note
    assert pool.id == written["Pgbouncer pool size"]["id"] and pool.type == "semantic"
    assert pool.project == "github.com/acme/api" and pool.tags == ["postgres", "pool"]
    assert pool.machine == OLD_MACHINE and pool.source == "import:anamnesis-memory"
    assert pool.created == written["Pgbouncer pool size"]["created_at"].replace("+00:00", "Z")
    assert pool.extra["scope"] == "portable" and pool.extra["prov_source"] == "human"
    assert pool.extra["confidence"] == 1.0 and pool.extra["workspace_id"] == "personal"
    release = read_note(a.store, written["Release checklist"]["id"].lower()[:12])  # a prefix, any case
    assert release.type == "procedural" and release.project is None
    assert TOKEN not in (a.memory / release.path).read_text() and "[REDACTED" in release.body
    session = read_note(a.store, written["session"]["id"])
    assert session.type == "episodic" and session.extra["prov_session"] == "sess-42"
    assert session.extra["prov_source"] == "session-end" and "session" in session.tags

    again = run_import(a.store, "anamnesis-memory", old)
    assert (again.count("create"), again.count("update"), again.count("unchanged")) == (0, 0, 4)
    assert again.commit is None

    # The old package re-keys a project (its `migrate`): the same note is updated, not doubled.
    broken.unlink()  # 0.1.3 itself cannot read it
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"projects": {"github.com/acme/web": "github.com/acme/frontend"}}))
    proc = subprocess.run(
        [str(old_cli()), "migrate", "--map", str(mapping), "--apply", "--no-sync"],
        env=old_env(old), cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    moved = run_import(a.store, "anamnesis-memory", old)
    assert (moved.count("create"), moved.count("update")) == (0, 1)
    flaky = read_note(a.store, written["Flaky login test"]["id"])
    assert flaky.project == "github.com/acme/frontend" and len(imported(a.store)) == 4

    assert a.sync().exit_code == 0 and b.sync().exit_code == 0
    assert found(b.store, "pool_size") == [pool.path]
    assert resolve_ref(b.store, written["session"]["id"]) == session.path


def test_every_importer_reaches_a_second_machine(
    fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_import import MEMORIES, make_project, make_vault, write_memories

    from anamnesis.importers.claude_auto_memory import sanitise

    config = tmp_path / "claude-config"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    config.mkdir()
    (config / "CLAUDE.md").write_text("# Answers\nAlways cite the runbook page.\n")
    project = make_project(tmp_path / "work" / "api")
    (project / "CLAUDE.md").write_text("# API\n\n## Migrations\nAlembic revisions are squashed monthly.\n")
    write_memories(config / "projects" / sanitise(str(project.resolve())) / "memory", MEMORIES)
    vault = tmp_path / "vault"
    make_vault(vault)
    old = tmp_path / "old-home" / ".anamnesis"
    old.mkdir(parents=True)
    make_old_store(old, tmp_path)

    hub = fleet.hub()
    a = fleet.machine("a", {"hub": fleet.url(hub)})
    b = fleet.machine("b", {"hub": fleet.url(hub)})
    monkeypatch.chdir(project)
    sources = (
        ("claude-md", None), ("claude-auto-memory", None), ("markdown", vault), ("anamnesis-memory", old)
    )
    for source, path in sources:
        first = run_import(a.store, source, path)
        assert first.count("create") >= 1, source
        head = a.git("rev-parse", "HEAD")
        second = run_import(a.store, source, path)
        assert second.written == 0 and a.git("rev-parse", "HEAD") == head, source
    assert a.sync().exit_code == 0 and b.sync().exit_code == 0
    for query in ("runbook", "Alembic", "compose", "HAProxy", "pool_size"):
        hits = found(b.store, query)
        assert len(hits) == 1, (query, hits)
        assert "import_key" in (b.memory / hits[0]).read_text(), query
    assert imported(b.store).keys() == imported(a.store).keys()
