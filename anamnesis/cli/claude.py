"""Claude Code commands: mcp, hook, inject, capture, uninstall — and init's Claude Code step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from anamnesis.cli._common import console, get_store, print_json

if TYPE_CHECKING:
    from anamnesis.paths import Store


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Claude Code")(mcp)
    app.command(rich_help_panel="Claude Code")(hook)
    app.command(rich_help_panel="Claude Code")(inject)
    app.command(rich_help_panel="Claude Code")(capture)
    app.command(rich_help_panel="Setup")(uninstall)


class ClaudeStep:
    """init's Claude Code step: register the MCP server, hooks and permission.

    Planned when made, so a Claude Code config file that cannot be safely
    edited stops init before anything at all is written; applied after the
    store exists.
    """

    def __init__(self, store: Store, show_diff: bool) -> None:
        from anamnesis import claude_setup

        self.store = store
        self.changes = claude_setup.plan_install(store)  # raises ClaudeConfigError, writes nothing
        if show_diff:
            for line in claude_setup.describe(self.changes, with_diff=True):
                print(line)
        self.planned = [f"Claude Code: {line}" for line in claude_setup.describe(self.changes)]

    def apply(self) -> list[str]:
        """Write the changes (idempotent: nothing when all is already in place)."""
        from anamnesis import claude_setup

        done = claude_setup.install(self.store)
        return [f"Claude Code: {line}" for line in done] or ["Claude Code: already set up, nothing to change"]


def mcp() -> None:
    """Run the MCP server on stdin/stdout (Claude Code starts this itself after `anamnesis init`)."""
    from anamnesis.mcp_server import serve

    serve(get_store(require=False))


def hook(
    event: str = typer.Argument(..., help="session-start, user-prompt-submit, pre-compact or session-end."),
) -> None:
    """Run a Claude Code hook by hand (reads the event JSON on stdin; what Claude Code runs is
    `python -P -m anamnesis.hooks EVENT`, which starts faster)."""
    from anamnesis.hooks.run import main

    raise typer.Exit(main([event]))


def inject(
    cwd: Path = typer.Option(Path("."), "--cwd", help="The project folder to build the context for."),
    budget: int | None = typer.Option(
        None, "--budget", help="Characters (default: settings, 6000; max 9500)."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print JSON: the text, its length and the notes it shows."
    ),
) -> None:
    """Print what the SessionStart hook would inject for a session in this folder."""
    from anamnesis.inject import build_context

    store = get_store()
    text, shown = build_context(store, cwd.resolve(), budget=budget)
    if json_out:
        print_json({"chars": len(text), "notes": shown, "additionalContext": text})
    elif text:
        print(text, end="")
    else:
        console(stderr=True).print("nothing to inject for this project")


def capture(
    transcript: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="A Claude Code transcript (.jsonl)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Write (or update) the session note of a transcript, as the SessionEnd hook does."""
    from anamnesis.capture import capture as run_capture

    store = get_store()
    result = run_capture(store, transcript, event="manual")
    if json_out:
        print_json({"action": result.action, "path": result.path, "reason": result.reason})
    elif result.path:
        console().print(f"[green]✔[/green] {result.action} {store.memory / result.path}")
    else:
        console().print(f"nothing written: {result.reason}")


def uninstall(
    print_only: bool = typer.Option(False, "--print", help="Show what would be removed and change nothing."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Remove what `anamnesis init` added to Claude Code (MCP server, hooks, permission).

    Your notes and the store are left alone; delete ~/.anamnesis yourself if you want them gone.
    """
    from anamnesis import claude_setup

    store = get_store(require=False)
    if print_only:
        changes = claude_setup.plan_uninstall(store)
        if json_out:
            print_json({"planned": claude_setup.describe(changes)})
            return
        for line in claude_setup.describe(changes, with_diff=True):
            print(line)
        return
    done = claude_setup.uninstall(store)
    done.extend(_uninstall_schedule(store))
    if json_out:
        print_json({"done": done})
        return
    out = console()
    for line in done or ["nothing of Anamnesis was registered with Claude Code"]:
        out.print(f"  • {line}", markup=False)


def _uninstall_schedule(store: Store) -> list[str]:
    """Remove the sync timer / LaunchAgent that init installed, if there is one."""
    from anamnesis import schedule

    outcome = schedule.remove(store)
    done = [f"removed {path}" for path in outcome.removed]
    return done + [note for note in outcome.notes if outcome.removed]
