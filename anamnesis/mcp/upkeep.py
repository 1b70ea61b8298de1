"""MCP tools for keeping memory useful as it grows: the timeline, and (for the person to accept) a tidy.

Kept apart from `server.py` so that each side can change without the other;
`server.build_server` registers these beside its own tools and hands in
its error wrapper and project check, so every tool fails the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Annotated, Any, Protocol

from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from anamnesis.base.paths import Store

MAX_SINCE = 40
MAX_NOTES = 100

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
# tidy writes a plan file beside the store (never into memory/): nothing the user has is changed
PROPOSES = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)


class Host(Protocol):
    """What these tools need of the server's own tools: the store and the session's project."""

    store: Store

    def current_project(self) -> str | None: ...


class UpkeepTools:
    """Timeline and tidy tools bound to the server's store."""

    def __init__(
        self,
        host: Host,
        errors: Callable[[], AbstractContextManager[None]],
        check_project: Callable[[str | None], str | None],
    ) -> None:
        self.host = host
        self.errors = errors
        self.check_project = check_project

    def timeline(
        self,
        since: Annotated[
            str,
            Field(min_length=1, max_length=MAX_SINCE, description="A span back from now (12h, 7d, 2w) or a date (2026-11-01)."),
        ] = "7d",
        project: Annotated[
            Annotated[str, Field(max_length=200)] | None,
            Field(description="A project key such as github.com/acme/api; default: every project."),
        ] = None,
        this_project: Annotated[
            bool, Field(strict=True, description="Only the project of the folder the session runs in.")
        ] = False,
    ) -> dict[str, Any]:
        """What happened, what was decided and what is still open, day by day, on every machine:
        from session notes (outcome, decisions, open items) and notes added or changed. `since` is a
        span back from now (12h, 7d, 2w) or a date (2026-11-01); `project` a project key, or
        this_project=true for the current one. Good for a stand-up or for starting a week's work."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.agents import build_timeline

        with self.errors():
            if not isinstance(since, str) or not since.strip() or len(since) > MAX_SINCE:
                raise ToolError("since must be a span like 7d or a date like 2026-11-01")
            key = self.host.current_project() if this_project else self.check_project(project)
            self.host.store.require()
            return build_timeline(self.host.store, since=since, project=key).to_dict()

    def tidy(
        self,
        notes: Annotated[
            list[Annotated[str, Field(min_length=1, max_length=1000)]] | None,
            Field(max_length=MAX_NOTES, description="Paths or ids of the notes to keep proposals about (the ones you just read)."),
        ] = None,
        project: Annotated[
            Annotated[str, Field(max_length=200)] | None,
            Field(description="A project key such as github.com/acme/api; default: every project."),
        ] = None,
    ) -> dict[str, Any]:
        """Propose a tidy of memory for the user to accept: near-duplicates to merge, notes a later
        one replaces, old sessions whose content lives on in a fact note, each with its evidence.
        Give `notes` (paths or ids you just read) to keep only proposals about them, or a project
        key. Changes nothing: the plan is saved for the user, who applies it with the command
        returned in `accept` (tell them; never apply it yourself)."""
        # lazy: the first tool call loads the core, not MCP start
        from anamnesis.app import plan_tidy, save_proposed

        with self.errors():
            if notes is not None and (not isinstance(notes, list) or len(notes) > MAX_NOTES):
                raise ToolError(f"notes must be a list of at most {MAX_NOTES} note paths or ids")
            wanted = {str(n).strip() for n in notes or () if str(n).strip()}
            key = self.check_project(project)
            self.host.store.require()
            unknown = sorted(ref for ref in wanted if not self._is_note(ref))
            if unknown:
                raise ToolError(
                    f"no note has the path or id {', '.join(map(repr, unknown[:5]))}: give the ones `read` or `search` returned"
                )
            plan = plan_tidy(self.host.store, project=key)
            if wanted:
                plan.proposals = [
                    p for p in plan.proposals if wanted & {p.keep.id, p.keep.path, p.other.id, p.other.path}
                ]
            saved = save_proposed(self.host.store, plan) if plan.proposals else None
            return {
                **plan.to_dict(),
                "plan_file": str(saved) if saved else None,
                "accept": f"anamnesis tidy --apply {saved}" if saved else None,
            }

    def _is_note(self, ref: str) -> bool:
        """Whether `ref` is the id or the memory/-relative path of a note in the index."""
        from anamnesis.search import open_index  # lazy: as the tools above

        with open_index(self.host.store) as index:
            index.refresh()
            return index.path_of_id(ref) is not None or index.hit_at(ref) is not None

    def tools(self) -> list[tuple[Callable[..., Any], str, ToolAnnotations]]:
        """(function, name, annotations) of each tool, for the server to publish with closed schemas."""
        return [(self.timeline, "timeline", READ_ONLY), (self.tidy, "tidy", PROPOSES)]
