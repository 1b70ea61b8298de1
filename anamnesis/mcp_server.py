"""`anamnesis mcp`: the memory as MCP tools over stdio (official `mcp` SDK, 2.x).

A thin adapter: every tool calls the same core functions as the CLI, so a
write here is atomic, locked, committed and indexed exactly like
`anamnesis new`. Tool input is validated before it reaches the core, paths
can never leave memory/ (the core's `safe_path` refuses traversal and
symlinks), and every failure comes back as a tool error the model can read,
never as a crashed server.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from anamnesis import __version__
from anamnesis.errors import AnamnesisError, UsageError
from anamnesis.mcp_upkeep import UpkeepTools
from anamnesis.paths import Store, open_store

if TYPE_CHECKING:
    from anamnesis.refresh import PeriodicRefresh

MAX_QUERY = 2000
MAX_LIMIT = 100
MAX_TAGS = 20
MAX_TAG = 60
MAX_PROJECT = 200
MAX_REF = 1000
MAX_SUPERSEDES = 20
REFRESH_EVERY = 5.0  # seconds between index scans that pick up hand edits
SYNC_LOCK_TIMEOUT = 60.0

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
SYNCS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)

INSTRUCTIONS = (
    "Anamnesis is the user's long-term memory across sessions and machines: markdown notes "
    "(types: semantic = facts and decisions, procedural = how-tos, episodic = what happened in a "
    "session, preference = the user's standing rules). Search before answering questions about "
    "past work; write a note when you learn something durable the user will want next time. "
    "Notes are tied to the current project unless made global."
)

# The core's store lock is re-entrant per process, and the SDK runs tools in worker
# threads: serialise tool bodies here so two calls never interleave their writes.
_serial = threading.Lock()


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Turn what a caller can cause into a tool error with a one-line message."""
    try:
        with _serial:
            yield
    except AnamnesisError as exc:
        raise ToolError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


def _check_text(name: str, value: str | None, limit: int, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise ToolError(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string")
    if "\0" in value:
        raise ToolError(f"{name} contains a NUL character")
    if required and not value.strip():
        raise ToolError(f"{name} must not be empty")
    if len(value) > limit:
        raise ToolError(f"{name} is {len(value)} characters; the limit is {limit}")
    return value


def _check_type(kind: str | None) -> str | None:
    from anamnesis.notes import check_type  # lazy: the first tool call loads the core, not MCP start

    if kind is None or kind == "":
        return None
    try:
        return check_type(kind)
    except UsageError as exc:
        raise ToolError(str(exc)) from None


def _check_tags(tags: list[str] | None) -> list[str] | None:
    if tags is None:
        return None
    if len(tags) > MAX_TAGS:
        raise ToolError(f"at most {MAX_TAGS} tags")
    from anamnesis.notes import normalize_tags  # lazy: the first tool call loads the core, not MCP start

    for tag in tags:
        word = (_check_text("tag", tag, MAX_TAG) or "").strip().lstrip("#")
        if not word or any(c.isspace() for c in word) or "," in word:
            raise ToolError(f"invalid tag {word!r}: one word, no spaces or commas")
    return normalize_tags(tags)


def _check_refs(refs: list[str] | None) -> list[str] | None:
    if refs is None:
        return None
    if len(refs) > MAX_SUPERSEDES:
        raise ToolError(f"a note can supersede at most {MAX_SUPERSEDES} notes at once")
    return [_check_text("supersedes", ref, MAX_REF, required=True) or "" for ref in refs]


def _check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f"limit must be between 1 and {MAX_LIMIT}")
    return limit


def _check_project(project: str | None) -> str | None:
    """A project key given by the model, checked by the same rule as everywhere else."""
    from anamnesis.project import check_project_key  # lazy: the first tool call loads the core, not MCP start

    project = _check_text("project", project, MAX_PROJECT)
    if project is None or not project.strip():
        return None
    try:
        return check_project_key(project)
    except UsageError as exc:
        raise ToolError(f"{exc} (the status tool shows the current one)") from None


class MemoryTools:
    """The tools, bound to one store; `register` adds them to a server."""

    def __init__(self, store: Store, cwd: str | None = None) -> None:
        self.store = store
        self.cwd = cwd or os.getcwd()
        self._refresh: PeriodicRefresh | None = None
        self._project: str | bool | None = False  # False: not looked up yet

    def _fresh_index(self) -> Any:
        # lazy: the server answers `initialize` before the index code is loaded
        from anamnesis.refresh import PeriodicRefresh

        self.store.require()
        if self._refresh is None:
            self._refresh = PeriodicRefresh(self.store, REFRESH_EVERY, vectors=True)
        return self._refresh.open()

    def current_project(self) -> str | None:
        """The project of the folder the client started us in (None outside any project)."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.project import detect_project

        if self._project is False:
            try:
                self._project = detect_project(self.cwd)
            except OSError:
                self._project = None
        return self._project if isinstance(self._project, str) else None

    # -- read-only tools ---------------------------------------------------------------

    def search(
        self,
        query: str,
        project: str | None = None,
        type: str | None = None,
        tag: str | None = None,
        limit: int = 10,
        require_all: bool = False,
        any_terms: bool = False,
    ) -> dict[str, Any]:
        """Search the memory, best match first. Ask in plain words ("how do we deploy the API?")
        or give keywords, code words or a command line (`docker run --rm -it`): no word is
        required, stop words are ignored, and notes of the current project (and global notes)
        rank first. "quoted phrases", prefix*, and NOT word work; require_all=true keeps only
        notes holding every word. Filters: project key, type (semantic, procedural, episodic,
        preference), tag. Results carry paths, titles, snippets, scores and `superseded_by`
        (a newer note replaces this one: prefer it); use `read` for a whole note."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.search import search as run_search

        del any_terms  # ranked any-word search is the default now; kept so old callers still validate
        with _tool_errors():
            _check_text("query", query, MAX_QUERY, required=True)
            with self._fresh_index() as index:
                hits = run_search(
                    index,
                    query,
                    project=_check_project(project),
                    type=_check_type(type),
                    tag=_check_text("tag", tag, MAX_TAG) or None,
                    near_project=self.current_project(),
                    limit=_check_limit(limit),
                    require_all=require_all,
                )
            return {"query": query, "count": len(hits), "results": [h.to_dict() for h in hits]}

    def read(self, ref: str) -> dict[str, Any]:
        """Read one note in full: by path (as search returns it), id, id prefix or file name."""
        from anamnesis.store import read_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("ref", ref, MAX_REF, required=True)
            self.store.require()
            return read_note(self.store, ref).to_dict(with_body=True)

    def list_notes(
        self, project: str | None = None, type: str | None = None, tag: str | None = None, limit: int = 20
    ) -> dict[str, Any]:
        """List notes, most recently updated first, optionally filtered by project key, type and tag."""
        with _tool_errors(), self._fresh_index() as index:
            hits = index.list_notes(
                project=_check_project(project),
                type=_check_type(type),
                tag=_check_text("tag", tag, MAX_TAG) or None,
                limit=_check_limit(limit),
            )
            return {"count": len(hits), "notes": [h.to_dict() for h in hits]}

    def status(self) -> dict[str, Any]:
        """Where the memory lives, how many notes of each kind, the current project, conflicts, peers."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.settings import load_settings

        with _tool_errors(), self._fresh_index() as index:
            counts = index.counts()
            conflicted = [h.path for h in index.conflicted()]
            settings = load_settings(self.store)
            info: dict[str, Any] = {
                "memory": str(self.store.memory),
                "machine": settings.get("machine_id"),
                "current_project": self.current_project(),
                "notes": counts["notes"],
                "by_type": counts["by_type"],
                "by_project": counts["by_project"],
                "conflicted": conflicted,
                "peers": sorted(settings.get("peers") or {}),
            }
            return info

    # -- tools that write --------------------------------------------------------------

    def write(
        self,
        title: str,
        body: str,
        type: str = "semantic",
        tags: list[str] | None = None,
        project: str | None = None,
        global_note: bool = False,
        supersedes: list[str] | None = None,
    ) -> dict[str, Any]:
        """Save a new note (committed and indexed at once). type: semantic (facts, decisions),
        procedural (how-tos), episodic (what happened), preference (the user's standing rules,
        always global). The note belongs to the current project unless `project` names another
        or global_note is true. supersedes: notes this one replaces (paths or ids, as search
        returns them) when it corrects or updates them; search then ranks the old ones lower."""
        from anamnesis.notes import GLOBAL_TYPES  # lazy: the first tool call loads the core, not MCP start
        from anamnesis.store import create_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("title", title, 200, required=True)
            _check_text("body", body, 2_000_000, required=True)
            kind = _check_type(type) or "semantic"
            key = (
                None
                if global_note or kind in GLOBAL_TYPES
                else (_check_project(project) or self.current_project())
            )
            self.store.require()
            note = create_note(
                self.store,
                type=kind,
                title=title,
                body=body,
                project=key,
                tags=_check_tags(tags) or [],
                source="mcp",
                supersedes=_check_refs(supersedes) or [],
            )
            return {
                "written": note.path,
                "id": note.id,
                "project": note.project,
                "type": note.type,
                "supersedes": note.supersedes,
            }

    def update(
        self,
        ref: str,
        title: str | None = None,
        body: str | None = None,
        tags: list[str] | None = None,
        type: str | None = None,
        supersedes: list[str] | None = None,
    ) -> dict[str, Any]:
        """Change an existing note in place (it keeps its path and id): any of title, body
        (replaces the whole body), tags (replaces the list), type, supersedes (the notes this
        one replaces, as paths or ids; replaces the list, [] removes every link)."""
        from anamnesis.store import update_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("ref", ref, MAX_REF, required=True)
            _check_text("title", title, 200)
            _check_text("body", body, 2_000_000)
            if title is None and body is None and tags is None and type is None and supersedes is None:
                raise ToolError("nothing to change: give title, body, tags, type or supersedes")
            self.store.require()
            note = update_note(
                self.store,
                ref,
                title=title,
                body=body,
                tags=_check_tags(tags),
                type=_check_type(type),
                supersedes=_check_refs(supersedes),
            )
            return {
                "updated": note.path,
                "id": note.id,
                "title": note.title,
                "updated_at": note.updated,
                "supersedes": note.supersedes,
            }

    def delete(self, ref: str) -> dict[str, Any]:
        """Delete a note (removed from disk and the index; git history keeps it)."""
        from anamnesis.store import delete_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("ref", ref, MAX_REF, required=True)
            self.store.require()
            note = delete_note(self.store, ref)
            return {"deleted": note.path, "id": note.id}

    def sync(self) -> dict[str, Any]:
        """Sync the memory with the user's other machines now (commit, pull --rebase from every
        peer, push), as `anamnesis sync` does. Reports what came in and went out, conflicts
        recorded (both sides kept in the note) and peers that could not be reached."""
        from anamnesis.sync import sync  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            self.store.require()
            result = sync(self.store, lock_timeout=SYNC_LOCK_TIMEOUT)
            if self._refresh is not None:
                self._refresh.expire()
            return result.to_dict()

    def register(self, server: MCPServer[Any]) -> None:
        """Add every tool to `server`, annotated read-only or not."""
        server.add_tool(self.search, name="search", annotations=READ_ONLY)
        server.add_tool(self.read, name="read", annotations=READ_ONLY)
        server.add_tool(self.list_notes, name="list", annotations=READ_ONLY)
        server.add_tool(self.status, name="status", annotations=READ_ONLY)
        server.add_tool(self.write, name="write", annotations=WRITES)
        server.add_tool(self.update, name="update", annotations=WRITES)
        server.add_tool(self.delete, name="delete", annotations=DESTRUCTIVE)
        server.add_tool(self.sync, name="sync", annotations=SYNCS)


def build_server(store: Store, cwd: str | None = None) -> MCPServer[Any]:
    """An MCP server with the memory tools for `store`."""
    server: MCPServer[Any] = MCPServer(
        name="anamnesis", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )
    tools = MemoryTools(store, cwd)
    tools.register(server)
    UpkeepTools(tools, _tool_errors, _check_project).register(server)  # timeline, tidy: mcp_upkeep.py
    return server


def serve(store: Store) -> None:
    """Run the server on stdin/stdout until the client closes it."""
    build_server(store).run("stdio")


def main() -> None:
    """`python -m anamnesis mcp`, as Claude Code starts it: the store at ANAMNESIS_HOME (or
    ~/.anamnesis), opened by the first tool call, not before (a missing store is a tool error)."""
    try:
        serve(open_store())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
