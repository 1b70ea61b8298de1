"""The published anamnesis-memory 0.1.3 package on the recall sets, for `bench_recall.py --baseline-013`.

0.1.3 is another program with the same command name and the same distribution
name, so it lives in a venv of its own (scripts/test makes one in the test
cache). Its command line has no `search`: searching is its MCP server's
`memory_search` tool (`anamnesis serve`, stdio), keyword only (FTS5 BM25 over
title, body and tags, the query's words OR-ed). So a set is run against it the
way an agent meets it:

- the set's notes are written as a 0.1.3 store: `ANAMNESIS_HOME/memory/<type>/<id>.md`,
  front matter `id`, `type`, `title`, `project` (`global` for none), `machine_id`,
  `scope`, `created_at`, `updated_at`, `tags` and `supersedes` (a list, whose notes
  its search hides), and the body exactly as ours. It knows three types:
  a `preference` note is written as `semantic`, where 0.1.3 files preferences;
- its `anamnesis reindex` builds the index;
- each query goes to `memory_search` through the official `mcp` client, with `k` =
  the bench's limit and `project` when the query names one (an exact filter in
  0.1.3, as `--project` is in ours).

HOME is a temporary folder too, FastMCP's banner and update check are off, so
nothing outside the temporary folder is read or written and nothing leaves
the machine.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from anyio.from_thread import start_blocking_portal
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

VERSION = "0.1.3"
MODE = "0.1.3: keyword, its MCP memory_search"
OLD_TYPES = {
    "semantic": "semantic",
    "procedural": "procedural",
    "episodic": "episodic",
    "preference": "semantic",
}


def command_for(given: str) -> Path:
    """0.1.3's `anamnesis` from its venv's python or the command itself; exit when it is not 0.1.3."""
    path = Path(given).expanduser()
    command = path if path.name == "anamnesis" else path.parent / "anamnesis"
    python = command.parent / "python"
    if not command.is_file() or not python.is_file():
        raise SystemExit(
            f"bench_recall: no 0.1.3 package at {given} (give its venv's bin/python or bin/anamnesis;"
            f" `python -m venv DIR && DIR/bin/pip install anamnesis-memory=={VERSION}` makes one)"
        )
    proc = subprocess.run(
        [str(python), "-P", "-c", "import importlib.metadata as m; print(m.version('anamnesis-memory'))"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or proc.stdout.strip() != VERSION:
        found = proc.stdout.strip() or "not installed"
        raise SystemExit(f"bench_recall: {python} has anamnesis-memory {found}, not {VERSION}")
    return command


def stamp(value: object) -> str:
    """A created/updated value as 0.1.3 writes it: ISO 8601 text."""
    if isinstance(value, dt.datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def old_note(fm: dict[str, Any], body: str) -> tuple[str, str]:
    """(path under memory/, text) of one of our notes as 0.1.3 stores it."""
    tags = fm.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    meta: dict[str, Any] = {
        "id": str(fm["id"]),
        "type": OLD_TYPES[str(fm["type"])],
        "title": str(fm["title"]),
        "project": fm.get("project") or "global",
        "machine_id": str(fm.get("machine") or "unknown"),
        "scope": "portable",
        "created_at": stamp(fm.get("created")),
        "updated_at": stamp(fm.get("updated")),
        "tags": [str(t) for t in tags],
    }
    replaced = fm.get("supersedes") or []
    if replaced:
        meta["supersedes"] = [str(r) for r in (replaced if isinstance(replaced, list) else [replaced])]
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True)
    return f"{meta['type']}/{meta['id']}.md", f"---\n{front}---\n{body}"


@dataclass
class OldStore:
    """A 0.1.3 store and HOME in a temporary folder, and its command."""

    tmp: Path
    command: Path

    @property
    def root(self) -> Path:
        return self.tmp / "anamnesis-013"

    def env(self) -> dict[str, str]:
        home = self.tmp / "home-013"
        home.mkdir(exist_ok=True)
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "ANAMNESIS_HOME": str(self.root),
            "ANAMNESIS_MACHINE_ID": "bench",
            "GIT_CONFIG_NOSYSTEM": "1",
            "FASTMCP_SHOW_SERVER_BANNER": "false",
            "FASTMCP_CHECK_FOR_UPDATES": "off",
        }

    def build(self, notes: list[tuple[dict[str, Any], str]]) -> int:
        """Write the notes ((front matter, body) each), run 0.1.3's reindex; the count it indexed."""
        for fm, body in notes:
            rel, text = old_note(fm, body)
            path = self.root / "memory" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        proc = subprocess.run(
            [str(self.command), "reindex"],
            env=self.env(),
            cwd=self.tmp,
            capture_output=True,
            text=True,
            timeout=600,
        )
        found = re.search(r"indexed (\d+) note", proc.stdout)
        if proc.returncode != 0 or not found:
            raise SystemExit(
                f"bench_recall: 0.1.3's `anamnesis reindex` failed (exit {proc.returncode}):"
                f" {(proc.stderr or proc.stdout).strip()[-500:]}"
            )
        return int(found.group(1))

    @contextmanager
    def searching(self, limit: int) -> Iterator[Callable[[str, str | None], list[dict[str, Any]]]]:
        """Its MCP server over stdio, for the time of the block; a search function that asks it."""
        params = StdioServerParameters(
            command=str(self.command), args=["serve"], env=self.env(), cwd=str(self.tmp)
        )
        with (
            open(self.tmp / "serve-013.log", "w") as errlog,
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(stdio_client(params, errlog=errlog)) as (read, write),
            portal.wrap_async_context_manager(ClientSession(read, write)) as session,
        ):
            portal.call(session.initialize)

            def run(q: str, project: str | None) -> list[dict[str, Any]]:
                args: dict[str, Any] = {"query": q, "k": limit}
                if project:
                    args["project"] = project
                try:
                    result = portal.call(session.call_tool, "memory_search", args)
                except Exception as exc:  # the server's failure is this query's error, not the run's
                    raise RuntimeError(f"memory_search: {exc}") from exc
                text = " ".join(getattr(c, "text", "") for c in result.content)
                if result.is_error:
                    raise RuntimeError(f"memory_search: {text[:300]}")
                data = result.structured_content
                hits = data.get("result") if isinstance(data, dict) else json.loads(text)
                if not isinstance(hits, list):
                    raise RuntimeError(f"memory_search: not a list of notes: {text[:300]}")
                return hits

            yield run
