"""`anamnesis timeline`: what happened, was decided and is still open, by day, across machines."""

from __future__ import annotations

import typer

from anamnesis.cli._common import get_store, print_json


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Notes")(timeline)


def timeline(
    since: str = typer.Option(
        "7d", "--since", "-s", help="A span back from now (12h, 7d, 2w) or a date (2026-11-01)."
    ),
    project: str | None = typer.Option(None, "--project", "-p", help="Only this project key."),
    here: bool = typer.Option(False, "--here", help="Only the project of the current folder."),
    md: bool = typer.Option(False, "--md", help="Markdown (for a stand-up note or an agent)."),
    json_out: bool = typer.Option(False, "--json", help="JSON (the same the MCP tool returns)."),
) -> None:
    """What happened, what was decided and what is still open, day by day, on every machine.

    Built from the session notes (their outcome, decisions and open items) and
    every note added or changed in the span, so every machine that synced shows
    the same timeline. "Still open" is what the latest session of each project
    left open.

    Examples:
      anamnesis timeline                          the last 7 days, every project
      anamnesis timeline --since 2w --here --md   this project, two weeks, as markdown
      anamnesis timeline --since 2026-11-01 --json
    """
    from anamnesis.agents import build_timeline, render_markdown, render_text  # lazy: keeps --help fast
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.cli.notes import _project_option  # lazy: --help loads every command module

    if md and json_out:
        raise UsageError("give one of --md and --json")
    key = _project_option(project, here)
    result = build_timeline(get_store(), since=since, project=key)
    if json_out:
        print_json(result.to_dict())
    elif md:
        print(render_markdown(result), end="")
    else:
        print(render_text(result), end="")
