"""`anamnesis import`: a thin adapter over anamnesis.importers."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from anamnesis.cli._common import console, counting, get_store, print_json

SOURCES_HELP = (
    "anamnesis-memory (a 0.1.3 store), claude-md (CLAUDE.md files), "
    "claude-auto-memory (Claude Code's own memory), markdown (a folder or Obsidian vault)"
)


def register(app: typer.Typer) -> None:
    app.command(name="import", rich_help_panel="Notes")(import_)


def import_(
    source: str = typer.Argument(..., help=SOURCES_HELP),
    path: Path | None = typer.Argument(
        None,
        help="What to import: the 0.1.3 store's folder; a CLAUDE.md or project folder; a project folder"
        " or auto-memory folder; a markdown folder. Default: the current project (claude-*).",
    ),
    project: str | None = typer.Option(
        None, "--project", "-p", help="Project key for the notes (replaces the folder's; fills in where a note names none)."
    ),
    tag: list[str] | None = typer.Option(None, "--tag", "-g", help="A tag for every note; repeat, or separate with commas or spaces."),
    print_only: bool = typer.Option(False, "--print", help="Show what would be imported; write nothing."),
    mirror: bool | None = typer.Option(
        None,
        "--mirror/--no-mirror",
        help="claude-auto-memory: keep importing its changes at every sync and in watch (or stop).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the outcome as JSON."),
) -> None:
    """Import notes from another memory: idempotent, one commit, secrets redacted.

    Running it again changes nothing; a source that changed updates the notes
    it made (found by the source and a content hash, never duplicated).
    Malformed files are reported and skipped.

    Examples:
      anamnesis import anamnesis-memory ~/.anamnesis-0.1.3
      anamnesis import claude-md                     your CLAUDE.md and this project's
      anamnesis import claude-auto-memory --mirror   and keep it mirrored at every sync
      anamnesis import markdown ~/vault -p github.com/acme/api -g vault --print
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.importers import (  # lazy: --help loads every command module
        SOURCES,
        ImportInterrupted,
        run_import,
        set_mirror,
    )

    if source not in SOURCES:
        raise UsageError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    if mirror is not None and source != "claude-auto-memory":
        raise UsageError("--mirror works with claude-auto-memory only")
    if mirror and (project or tag):  # the mirror re-imports as the folder says: other keys would make copies
        raise UsageError("--mirror imports with the folder's own project key and no extra tags; drop --project/--tag")
    store = get_store()
    if mirror is False and not print_only:  # stopping imports nothing: the folder may be gone already
        folder = (path or Path.cwd()).absolute()
        changed = set_mirror(store, source, folder, False)
        if json_out:
            print_json({"mirror": False, "folder": str(folder), "changed": changed})
        else:
            console().print(f"mirroring off for {folder}" if changed else f"{folder} was not mirrored", markup=False)
        return
    stopped: list[int] = []
    try:
        with _terminations_interrupt(stopped), counting(f"importing {source}", json_out) as progress:
            report = run_import(
                store, source, path, project=project, tags=tag or [], dry_run=print_only, progress=progress
            )
    except KeyboardInterrupt:
        interrupted = ImportInterrupted("interrupted: nothing was imported (every note is as it was)")
        if stopped:  # SIGTERM, SIGHUP: the exit status a shell gives a command that signal stopped
            interrupted.exit_code = 128 + stopped[0]
        raise interrupted from None
    mirrored = None
    if mirror is not None and not print_only:
        set_mirror(store, source, path or Path.cwd(), mirror)
        mirrored = mirror
    if json_out:
        data = report.to_dict()
        if mirrored is not None:
            data["mirror"] = mirrored
        print_json(data)
        return
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    out = console()
    for step in report.steps:
        if step.action != "unchanged" or print_only:
            out.print(f"{step.action:9} {escape(step.path)}  [dim]{escape(step.item.origin)}[/dim]")
            if step.note:
                out.print(f"          [yellow]{escape(step.note)}[/yellow]")
    for skip in report.skipped:
        out.print(f"[yellow]skipped[/yellow]   {escape(skip.origin)}: {escape(skip.reason)}")
    out.print(escape(report.summary()))
    if mirrored is not None:
        where = escape(str((path or Path.cwd()).absolute()))
        out.print(f"mirroring {'on' if mirrored else 'off'}: `anamnesis sync` and `watch` import {where}"
                  if mirrored else f"mirroring off for {where}")


@contextmanager
def _terminations_interrupt(stopped: list[int]) -> Iterator[None]:
    """SIGTERM and SIGHUP stop an import as Ctrl-C does (the notes it was writing are taken back:
    one unit or nothing), not by killing it mid-write; each is noted in `stopped`. A signal the
    process was started ignoring (`nohup`) stays ignored; a second one while the first is being
    handled is ignored too."""
    names = ("SIGTERM", "SIGHUP")
    wanted = [getattr(signal, name) for name in names if hasattr(signal, name)]

    def handler(signum: int, _frame: object) -> None:
        stopped.append(signum)
        if len(stopped) == 1:
            raise KeyboardInterrupt

    previous = {}
    for sig in wanted:
        if signal.getsignal(sig) == signal.SIG_DFL:
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
