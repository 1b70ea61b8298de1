"""`anamnesis mcp`: the memory as MCP tools over stdio (official `mcp` SDK, 2.x).

A thin adapter: every tool calls the same core functions as the CLI, so a
write here is atomic, locked, committed and indexed exactly like
`anamnesis new`. Tool input is validated before it reaches the core, paths
can never leave memory/ (the core's `safe_path` refuses traversal and
symlinks), and every failure comes back as a tool error the model can read,
never as a crashed server.
"""

from __future__ import annotations

import difflib
import inspect
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    Completion,
    ErrorData,
    JSONRPCError,
    PromptReference,
    ResourceTemplateReference,
    ToolAnnotations,
)
from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, with_config
from typing_extensions import TypedDict  # below 3.12 pydantic reads nested TypedDicts only from here

from anamnesis import __version__
from anamnesis.base.errors import AnamnesisError, NoteNotFound, UsageError
from anamnesis.base.notes import GLOBAL_TYPES, MAX_TITLE, TAG_INPUT_PATTERN, NoteType, normalize_tags
from anamnesis.base.paths import Store, open_store
from anamnesis.mcp.upkeep import UpkeepTools

if TYPE_CHECKING:
    from anamnesis.search import PeriodicRefresh

NOTE_URI = "anamnesis://note/{note_id}"
MAX_COMPLETIONS = 100  # the most values a completion may carry
MAX_QUERY = 2000
MAX_LIMIT = 100
MAX_TAGS = 20
MAX_TAG = 60
MAX_PROJECT = 200
MAX_REF = 1000
MAX_BODY = 1_000_000
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

# -- the arguments, as tight in the schema as the checks behind them ------------------------
# Every constraint here is published in tools/list, so an agent sees the rule before it calls;
# the few a schema cannot say (a blank title, a NUL byte) are checked in the tool body.

Text = Annotated[str, Field(min_length=1)]
QueryArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY,
        description="What to look for: plain words, keywords, code words (parse_config) or a "
        'command line; "quoted phrases", prefix* and NOT word work.',
    ),
]
RefArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_REF,
        description="The note: its path as search returns it, its id, an id prefix or its file name.",
    ),
]
ProjectArg = Annotated[
    Annotated[str, Field(max_length=MAX_PROJECT)] | None,
    Field(description="A project key such as github.com/acme/api (the status tool shows the current one)."),
]
TypeArg = Annotated[
    NoteType | None,
    Field(
        description="semantic = facts and decisions, procedural = how-tos, episodic = what happened, "
        "preference = the user's standing rules."
    ),
]
TagArg = Annotated[
    Annotated[str, Field(min_length=1, max_length=MAX_TAG)] | None,
    Field(description="Only notes with this tag."),
]
Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG, pattern=TAG_INPUT_PATTERN)]  # gives a tag: notes.normalize_tags
TagsArg = Annotated[
    list[Tag] | None,
    Field(
        max_length=MAX_TAGS, description="Tags, one word each; an item with spaces or commas is several tags ('a b' is a and b); a leading # is dropped."
    ),
]
SupersedesArg = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_REF)]] | None,
    Field(
        max_length=MAX_SUPERSEDES,
        description="Notes this one replaces (paths or ids, as search returns them); search then ranks "
        "them below it.",
    ),
]
TitleArg = Annotated[str, Field(min_length=1, max_length=MAX_TITLE, description="A short title.")]
BodyArg = Annotated[str, Field(min_length=1, max_length=MAX_BODY, description="The note, in markdown.")]


def _limit(default: int, what: str) -> Any:
    return Field(default, ge=1, le=MAX_LIMIT, strict=True, description=f"How many {what} at most.")


def _whole(value: Any) -> Any:
    """3.0 is the integer 3 in JSON (and JSON Schema); `true` stays a boolean, which is refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


Whole = BeforeValidator(_whole)


# -- what the tools return, published as their outputSchema ----------------------------------


class NoteHit(TypedDict):
    """One note as the index knows it (a search result or a listing row)."""

    path: str
    id: str
    title: str
    type: str
    project: str | None
    tags: list[str]
    created: str
    updated: str
    machine: str
    conflicted: bool
    superseded_by: list[str]
    supersedes: NotRequired[list[str]]
    snippet: NotRequired[str]
    score: NotRequired[float]
    problems: NotRequired[list[str]]


class SearchResult(TypedDict):
    query: str
    count: int
    results: list[NoteHit]


class Listing(TypedDict):
    count: int
    notes: list[NoteHit]


@with_config(ConfigDict(extra="allow"))
class FullNote(TypedDict):
    """A whole note: its front matter (any extra fields too), its body and what is wrong with it."""

    path: str
    id: str
    type: str
    title: str
    project: str | None
    tags: list[str]
    created: str
    updated: str
    machine: str
    source: str
    supersedes: list[str]
    conflicted: bool
    body: str
    problems: NotRequired[list[str]]


class StoreStatus(TypedDict):
    memory: str
    machine: str | None
    current_project: str | None
    notes: int
    by_type: dict[str, int]
    by_project: dict[str, int]
    conflicted: list[str]
    peers: list[str]
    pushes_here: list[dict[str, Any]]


class Written(TypedDict):
    written: str
    id: str
    project: str | None
    type: str
    supersedes: list[str]


class Updated(TypedDict):
    updated: str
    id: str
    title: str
    updated_at: str
    supersedes: list[str]


class Deleted(TypedDict):
    deleted: str
    id: str


@with_config(ConfigDict(extra="allow"))
class SyncReport(TypedDict):
    """What one sync did (the same fields as `anamnesis sync --json`)."""

    machine: str
    outcome: str
    exit_code: int
    committed: list[str]
    received: int
    sent: int
    changed: list[str]
    conflicts: list[str]
    peers: list[dict[str, Any]]


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
        raise ToolError(_for_agents(str(exc))) from None
    except (OSError, ValueError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


@contextmanager
def _resource_errors() -> Iterator[None]:
    """A resource read's failure as one line: a note that is not there is "not found" (invalid
    params), anything else the store refuses says why; the SDK wraps any other exception in
    "Error creating resource from template" and prints its traceback instead."""
    try:
        with _serial:
            yield
    except NoteNotFound as exc:
        raise ResourceNotFoundError(_for_agents(str(exc))) from None
    except (AnamnesisError, OSError, ValueError) as exc:
        raise ResourceError(_for_agents(str(exc))) from None


def _for_agents(message: str) -> str:
    """The core speaks to a person at a shell; an agent has tools, not commands."""
    return message.replace("`anamnesis search`", "the search tool").replace(
        "`anamnesis list`", "the list tool"
    )


def _check_text(name: str, value: str | None, *, required: bool = False) -> str | None:
    """What the schema cannot say: no NUL byte, and not only spaces where text is required."""
    if value is None:
        return None
    if "\0" in value:
        raise ToolError(f"{name} contains a NUL character")
    if required and not value.strip():
        raise ToolError(f"{name} must not be empty")
    return value


def _check_tag(tag: str | None) -> str | None:
    """A tag to filter by: one the notes could hold (`#ops` is `ops`), not blank or only marks."""
    tag = _check_text("tag", tag)
    if tag is None:
        return None
    if not normalize_tags(tag):
        raise ToolError(f"tag {tag!r} is no tag (tags are words like `postgres`); give one, or leave tag out")
    return tag


def _check_tags(tags: list[str] | None) -> list[str] | None:
    """Tags as stored, a secret among them made `redacted` while its case still shows it."""
    from anamnesis.store import redact_tags  # lazy: the first tool call loads the core, not MCP start

    return None if tags is None else normalize_tags(redact_tags(tags))


def _check_project(project: str | None) -> str | None:
    """A project key given by the model, checked by the same rule as everywhere else."""
    from anamnesis.store import check_project_key  # lazy: the first tool call loads the core, not MCP start

    project = _check_text("project", project)
    if project is None:
        return None
    if not project.strip():
        raise ToolError("project is blank: give a key like github.com/acme/api, or leave project out")
    try:
        return check_project_key(project)
    except UsageError as exc:
        raise ToolError(f"{exc} (the status tool shows the current one)") from None


def describe_invalid(tool: str, exc: ValidationError, accepted: list[str]) -> str:
    """One line an agent can act on, for arguments the schema refused (pydantic's own text runs
    over several lines and ends in a link to its docs)."""
    parts: list[str] = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        kind = error["type"]
        if kind == "extra_forbidden":
            close = difflib.get_close_matches(where, accepted, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            parts.append(f"unknown argument {where!r} ({hint}{tool} takes {', '.join(accepted) or 'none'})")
        elif kind == "missing":
            parts.append(f"{where} is required")
        elif kind == "literal_error":
            parts.append(f"{where} must be one of {error.get('ctx', {}).get('expected', '')}")
        else:
            parts.append(f"{where}: {error['msg'].rstrip('.')}")
    return f"invalid arguments for {tool}: " + "; ".join(parts)


class StrictTool(Tool):
    """A tool whose arguments are exactly its schema: an unknown or misspelled argument is an
    error (not silently dropped), and a refused argument comes back as one line."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                accepted = list(self.parameters.get("properties", {}))
                raise ToolError(describe_invalid(self.name, exc.__cause__, accepted)) from None
            raise


def strict_tool(fn: Any, name: str, annotations: ToolAnnotations) -> StrictTool:
    """`fn` as a tool whose input schema forbids extra properties, with its docstring dedented."""
    tool = StrictTool.from_function(
        fn, name=name, description=inspect.cleandoc(fn.__doc__ or ""), annotations=annotations
    )
    assert isinstance(tool, StrictTool)
    loose = tool.fn_metadata.arg_model
    closed: type[ArgModelBase] = type(loose.__name__, (loose,), {"model_config": ConfigDict(extra="forbid")})
    tool.fn_metadata.arg_model = closed
    tool.parameters = closed.model_json_schema(by_alias=True)
    return tool


class MemoryTools:
    """The tools, bound to one store; `register` adds them to a server."""

    def __init__(self, store: Store, cwd: str | None = None) -> None:
        self.store = store
        self.cwd = cwd or os.getcwd()
        self._refresh: PeriodicRefresh | None = None
        self._project: str | bool | None = False  # False: not looked up yet

    def _fresh_index(self) -> Any:
        # lazy: the server answers `initialize` before the index code is loaded
        from anamnesis.search import PeriodicRefresh

        self.store.require()
        if self._refresh is None:
            self._refresh = PeriodicRefresh(self.store, REFRESH_EVERY, vectors=True)
        return self._refresh.open()

    def current_project(self) -> str | None:
        """The project of the folder the client started us in (None outside any project)."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.store import detect_project

        if self._project is False:
            try:
                self._project = detect_project(self.cwd)
            except OSError:
                self._project = None
        return self._project if isinstance(self._project, str) else None

    # -- read-only tools ---------------------------------------------------------------

    def search(
        self,
        query: QueryArg,
        project: ProjectArg = None,
        type: TypeArg = None,
        tag: TagArg = None,
        limit: Annotated[int, _limit(10, "results"), Whole] = 10,
        require_all: Annotated[
            bool, Field(strict=True, description="Keep only notes holding every word of the query.")
        ] = False,
    ) -> SearchResult:
        """Search the memory, best match first.

        Ask in plain words ("how do we deploy the API?") or give keywords, code words or a
        command line: no word is required, stop words are ignored, and notes of the current
        project (and global notes) rank first. Results carry paths, titles, snippets, scores and
        `superseded_by` (a newer note replaces this one: prefer it); use `read` for a whole note.
        """
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.search import search as run_search

        with _tool_errors():
            _check_text("query", query, required=True)
            with self._fresh_index() as index:
                hits = run_search(
                    index,
                    query,
                    project=_check_project(project),
                    type=type,
                    tag=_check_tag(tag),
                    near_project=self.current_project(),
                    limit=limit,
                    require_all=require_all,
                )
            results: list[NoteHit] = [h.to_dict() for h in hits]  # type: ignore[misc]
            return {"query": query, "count": len(hits), "results": results}

    def read(self, ref: RefArg) -> FullNote:
        """Read one note in full: its front matter and body."""
        from anamnesis.store import read_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("ref", ref, required=True)
            self.store.require()
            note: FullNote = read_note(self.store, ref).to_dict(with_body=True)  # type: ignore[assignment]
            return note

    def list_notes(
        self,
        project: ProjectArg = None,
        type: TypeArg = None,
        tag: TagArg = None,
        limit: Annotated[int, _limit(20, "notes"), Whole] = 20,
    ) -> Listing:
        """List notes, most recently updated first, optionally filtered by project, type and tag."""
        with _tool_errors(), self._fresh_index() as index:
            hits = index.list_notes(
                project=_check_project(project),
                type=type,
                tag=_check_tag(tag),
                limit=limit,
            )
            notes: list[NoteHit] = [h.to_dict() for h in hits]  # type: ignore[misc]
            return {"count": len(hits), "notes": notes}

    def status(self) -> StoreStatus:
        """Where the memory lives, how many notes of each kind, the current project, notes in
        conflict, the peers it syncs with and the machines that push into this store."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.base.settings import load_settings
        from anamnesis.sync import incoming_machines  # lazy: as the line above

        with _tool_errors(), self._fresh_index() as index:
            counts = index.counts()
            conflicted = [h.path for h in index.conflicted()]
            settings = load_settings(self.store)
            return {
                "memory": str(self.store.memory),
                "machine": settings.get("machine_id"),
                "current_project": self.current_project(),
                "notes": counts["notes"],
                "by_type": counts["by_type"],
                "by_project": counts["by_project"],
                "conflicted": conflicted,
                "peers": sorted(settings.get("peers") or {}),
                "pushes_here": [m.to_dict() for m in incoming_machines(self.store)],
            }

    # -- tools that write --------------------------------------------------------------

    def write(
        self,
        title: TitleArg,
        body: BodyArg,
        type: Annotated[NoteType, Field(description=TypeArg.__metadata__[0].description)] = "semantic",
        tags: TagsArg = None,
        project: ProjectArg = None,
        global_note: Annotated[
            bool, Field(strict=True, description="File the note under no project (it holds everywhere).")
        ] = False,
        supersedes: SupersedesArg = None,
    ) -> Written:
        """Save a new note, committed and indexed at once.

        Write one when you learn something durable the user will want next time. The note
        belongs to the current project unless `project` names another or `global_note` is true;
        preferences are always global. Give `supersedes` when it corrects or updates older notes.
        """
        from anamnesis.store import create_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("title", title, required=True)
            _check_text("body", body, required=True)
            if global_note and project is not None:
                raise ToolError("give project or global_note, not both: a global note belongs to no project")
            key = (
                None
                if global_note or type in GLOBAL_TYPES
                else (_check_project(project) or self.current_project())
            )
            self.store.require()
            note = create_note(
                self.store,
                type=type,
                title=title,
                body=body,
                project=key,
                tags=_check_tags(tags) or [],
                source="mcp",
                supersedes=supersedes or [],
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
        ref: RefArg,
        title: Annotated[str | None, Field(max_length=MAX_TITLE, description="A new title.")] = None,
        body: Annotated[
            str | None, Field(max_length=MAX_BODY, description="A new body: it replaces the whole body.")
        ] = None,
        tags: TagsArg = None,
        type: TypeArg = None,
        supersedes: SupersedesArg = None,
    ) -> Updated:
        """Change an existing note in place; it keeps its path and id.

        Give any of title, body, tags (replaces the list), type, supersedes (replaces the list;
        [] removes every link).
        """
        from anamnesis.store import update_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("ref", ref, required=True)
            _check_text("title", title, required=True)
            _check_text("body", body)
            if title is None and body is None and tags is None and type is None and supersedes is None:
                raise ToolError("nothing to change: give title, body, tags, type or supersedes")
            self.store.require()
            note = update_note(
                self.store,
                ref,
                title=title,
                body=body,
                tags=_check_tags(tags),
                type=type,
                supersedes=supersedes,
            )
            return {
                "updated": note.path,
                "id": note.id,
                "title": note.title,
                "updated_at": note.updated,
                "supersedes": note.supersedes,
            }

    def delete(self, ref: RefArg) -> Deleted:
        """Delete a note: removed from disk and the index; git history keeps it."""
        from anamnesis.store import delete_note  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            _check_text("ref", ref, required=True)
            self.store.require()
            note = delete_note(self.store, ref)
            return {"deleted": note.path, "id": note.id}

    def sync(self) -> SyncReport:
        """Sync the memory with the user's other machines now, as `anamnesis sync` does.

        Commits, integrates every peer, pushes. Reports what came in and went out, the notes in
        conflict it recorded or brought in (every version kept in the note), notes held back as
        half resolved, and peers that could not be reached.
        """
        from anamnesis.app import sync_store  # lazy: the first tool call loads the core, not MCP start

        with _tool_errors():
            self.store.require()
            result = sync_store(self.store, lock_timeout=SYNC_LOCK_TIMEOUT)
            if self._refresh is not None:
                self._refresh.expire()
            report: SyncReport = result.to_dict()  # type: ignore[assignment]
            return report

    # -- resources and prompts ---------------------------------------------------------

    def note_text(self, note_id: str) -> str:
        """A note's file as it is on disk, front matter and all."""
        from anamnesis.store import read_note  # lazy: the first read loads the core, not MCP start

        with _resource_errors():
            self.store.require()
            note = read_note(self.store, note_id)
            return (self.store.memory / note.path).read_text(encoding="utf-8")

    def project_context(self) -> str:
        """What SessionStart would show for the current folder."""
        from anamnesis.agents import build_context  # lazy: the first read loads the core, not MCP start

        with _tool_errors():
            self.store.require()
            text, _paths = build_context(self.store, self.cwd)
            return text or "The memory holds nothing about this project yet."

    def recall_prompt(self, topic: str = "") -> str:
        """A message that puts what the memory holds about `topic` in front of the model.

        `topic` has a default so that leaving it out reaches this check, an invalid-params error
        an agent can act on; the SDK's own check answers a missing argument with error code 0."""
        if not topic.strip():
            raise MCPError(code=INVALID_PARAMS, message="recall needs a topic: what to bring back from memory")
        found = self.search(topic[:MAX_QUERY], limit=5)
        if not found["results"]:
            return f"My memory (Anamnesis) holds no note about: {topic}. Say so if it matters."
        lines = [f"Here is what my memory (Anamnesis) holds about: {topic}", ""]
        for hit in found["results"]:
            newer = " (superseded by a newer note)" if hit["superseded_by"] else ""
            lines.append(f"- {hit['title']} [{hit['path']}]{newer}: {hit.get('snippet', '')}")
        lines += ["", "Use the read tool for a whole note. Prefer newer notes over superseded ones."]
        return "\n".join(lines)

    async def complete(self, ref: Any, argument: Any, _context: Any) -> Completion | None:
        """What a note id or a recall topic could be, from what has been typed so far.

        A note id: ids that start with it, then the ids of notes with a title word that starts
        with it. A recall topic: tags that start with it, then such titles. Anything else: no
        suggestion."""
        typed = str(argument.value or "")[:MAX_TITLE].strip()
        starts = re.compile(r"(?<![^\W_])" + re.escape(typed), re.IGNORECASE)  # at the start of a word
        note_ref = isinstance(ref, ResourceTemplateReference) and ref.uri == NOTE_URI
        topic_ref = isinstance(ref, PromptReference) and ref.name == "recall"
        if not (note_ref and argument.name == "note_id") and not (topic_ref and argument.name == "topic"):
            return None
        try:
            with self._fresh_index() as index:
                if note_ref:
                    found = index.ids_starting(typed, MAX_COMPLETIONS) + [
                        note_id
                        for note_id, title, _path, _project in index.titles_like(typed, MAX_COMPLETIONS)
                        if starts.search(title)
                    ]
                else:
                    low = typed.lower()
                    found = [tag for tag, _count in index.tags() if tag.lower().startswith(low)] + [
                        title
                        for _id, title, _path, _project in index.titles_like(typed, MAX_COMPLETIONS)
                        if starts.search(title)
                    ]
        except AnamnesisError:
            return None  # no store yet: nothing to suggest
        values = list(dict.fromkeys(value for value in found if value))
        return Completion(
            values=values[:MAX_COMPLETIONS], total=len(values), has_more=len(values) > MAX_COMPLETIONS
        )

    def tools(self) -> list[Tool]:
        """Every tool, annotated read-only or not, with a closed input schema."""
        tools = (
            (self.search, "search", READ_ONLY),
            (self.read, "read", READ_ONLY),
            (self.list_notes, "list", READ_ONLY),
            (self.status, "status", READ_ONLY),
            (self.write, "write", WRITES),
            (self.update, "update", WRITES),
            (self.delete, "delete", DESTRUCTIVE),
            (self.sync, "sync", SYNCS),
        )
        return [strict_tool(fn, name, annotations) for fn, name, annotations in tools]

    def register(self, server: MCPServer[Any]) -> None:
        """Add the resources and prompts to `server`."""
        server.resource(
            NOTE_URI,
            name="note",
            description="One note's markdown file, by id (as search and list return it).",
            mime_type="text/markdown",
        )(self.note_text)
        server.resource(
            "anamnesis://context",
            name="context",
            description="What the memory holds for the current project, as a session starts with it.",
            mime_type="text/markdown",
        )(self.project_context)
        server.prompt(
            name="recall",
            description="Bring what the memory holds about a topic into the conversation.",
        )(self.recall_prompt)
        server.prompt(
            name="remember",
            description="Ask the model to save what this conversation settled as notes.",
        )(remember_prompt)
        server.completion()(self.complete)  # type: ignore[no-untyped-call]  # the SDK leaves it untyped


def remember_prompt() -> str:
    """The standing request to write down what lasts."""
    return (
        "Look back over this conversation and save what the user will want next time with the "
        "Anamnesis write tool: decisions and facts (type semantic), how-tos (procedural), the "
        "user's standing rules (preference). One note per subject, a short title, the reason "
        "behind a decision. Search first: when a note on the subject exists, update it, or write "
        "the new one with `supersedes` naming the old. Never save secrets."
    )


class MemoryServer(MCPServer[Any]):
    """The SDK's server, but a call to a tool it does not have names the ones it has."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        names = [tool.name for tool in self._tool_manager.list_tools()]
        if name not in names:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ToolError(f"no tool named {name!r}; {hint}the tools are: {', '.join(sorted(names))}")
        return await super().call_tool(name, arguments, context)


def build_server(store: Store, cwd: str | None = None) -> MCPServer[Any]:
    """An MCP server with the memory tools, resources and prompts for `store`."""
    memory = MemoryTools(store, cwd)
    upkeep = UpkeepTools(memory, _tool_errors, _check_project)  # timeline, tidy: upkeep.py
    server: MCPServer[Any] = MemoryServer(
        name="anamnesis",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        tools=[*memory.tools(), *(strict_tool(fn, name, kind) for fn, name, kind in upkeep.tools())],
    )
    memory.register(server)
    return server


class AnsweringReader:
    """The stdio read stream, answering what is not JSON-RPC instead of dropping it.

    The SDK's stdio transport hands a line it cannot parse to the server as an exception, and
    the server logs it and says nothing, so a client that sent it waits forever. JSON-RPC
    wants an error back: -32700 for text that is not JSON, -32600 for JSON that is no request
    (with the request's id when one can be read)."""

    def __init__(self, inner: Any, replies: Any) -> None:
        self._inner = inner
        self._replies = replies

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> SessionMessage:
        while True:
            item = await self._inner.__anext__()
            if not isinstance(item, Exception):
                return item  # type: ignore[no-any-return]
            await self._replies.send(SessionMessage(refusal(item)))

    async def receive(self) -> SessionMessage:
        return await self.__anext__()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringReader:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result


def refusal(exc: Exception) -> JSONRPCError:
    """The JSON-RPC error for a line the transport could not read as a message."""
    errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else []
    if any(error["type"] == "json_invalid" for error in errors):
        return JSONRPCError(
            jsonrpc="2.0",
            id=None,
            error=ErrorData(code=PARSE_ERROR, message="Parse error: the line is not JSON"),
        )
    request_id = None
    for error in errors:
        sent = error.get("input")
        if (
            isinstance(sent, dict)
            and isinstance(sent.get("id"), int | str)
            and not isinstance(sent["id"], bool)
        ):
            request_id = sent["id"]
            break
    return JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=ErrorData(
            code=INVALID_REQUEST, message="Invalid request: not a JSON-RPC 2.0 request or notification"
        ),
    )


async def serve_stdio(server: MCPServer[Any]) -> None:
    """`server` on stdin/stdout, answering lines that are not JSON-RPC (see `AnsweringReader`)."""
    async with stdio_server() as (read_stream, write_stream):
        lowlevel = server._lowlevel_server  # the SDK offers no public way to run its server on our streams
        await lowlevel.run(
            AnsweringReader(read_stream, write_stream),
            write_stream,
            lowlevel.create_initialization_options(),
        )


def serve(store: Store) -> None:
    """Run the server on stdin/stdout until the client closes it."""
    anyio.run(serve_stdio, build_server(store))


def main() -> None:
    """`python -m anamnesis mcp`, as Claude Code starts it: the store at ANAMNESIS_HOME (or
    ~/.anamnesis), opened by the first tool call, not before (a missing store is a tool error)."""
    try:
        serve(open_store())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
