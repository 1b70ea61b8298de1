"""Project commands: `project [PATH]` (the key here), list, rename, merge, alias, unalias."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
import typer.core

from anamnesis.base.text import plural
from anamnesis.cli._common import console, get_store, print_json
from anamnesis.cli.setup import project as show_key


class _KeyOrCommand(typer.core.TyperGroup):
    """`anamnesis project [PATH] [--json]` still prints the key; a known word runs that subcommand."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            if args and not args[0].startswith("-") and not Path(args[0]).exists():
                import difflib  # lazy: only for a word that is neither a folder nor a command

                from anamnesis.base.errors import UsageError  # lazy: as above

                near = difflib.get_close_matches(args[0], [c for c in self.commands if c != "show"], n=1, cutoff=0.6)
                if near:
                    raise UsageError(f"no such folder or command: {args[0]} — did you mean `anamnesis project {near[0]}`?")
            args = ["show", *args]
        result: list[str] = super().parse_args(ctx, args)
        return result


project_app = typer.Typer(
    cls=_KeyOrCommand,
    help=(
        "The project key of a folder, and projects as a whole: list, rename, merge, alias.\n\n"
        "Examples:\n\n"
        "  anamnesis project                      the key notes here are filed under\n\n"
        "  anamnesis project list                 every project, its notes and remotes\n\n"
        "  anamnesis project rename OLD NEW       move every note of OLD to NEW (one commit)\n\n"
        "  anamnesis project alias --here KEY     this moved checkout finds KEY's notes"
    ),
    no_args_is_help=False,
)


def register(app: typer.Typer) -> None:
    project_app.command("show")(show_key)
    for command in (list_, rename, merge, alias, unalias):
        project_app.command(name=command.__name__.rstrip("_"))(command)
    app.add_typer(project_app, name="project", rich_help_panel="Setup")


def list_(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Every project: its notes, last activity, machines, and the remotes and aliases seen for it.

    Examples:
      anamnesis project list
      anamnesis project list --json
    """
    from rich.table import Table  # lazy: --help loads every command module

    from anamnesis.store import list_projects  # lazy: --help loads every command module

    infos = list_projects(get_store())
    if json_out:
        print_json([info.to_dict() for info in infos])
        return
    table = Table(box=None, pad_edge=False)
    # A key is read whole: its column takes the room it needs, and the others wrap at spaces
    # (a remote that is the key itself says nothing more, so only other remotes are listed).
    widest = max((len(info.key) for info in infos), default=7)
    table.add_column("project", overflow="fold", min_width=min(widest, max(20, console().width // 2)))
    for column in ("notes", "last activity", "machines", "other remotes / aliases"):
        table.add_column(column, overflow="fold")
    for info in infos:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(info.types.items()))
        table.add_row(
            info.key,
            f"{info.notes} ({kinds})" if kinds else "0",
            info.last_activity[:16].replace("T", " ") or "-",
            ", ".join(info.machines) or "-",
            "\n".join(remote for remote in info.remotes if remote != info.key) or "-",
        )
    console().print(table)


def rename(
    old: str = typer.Argument(..., help="The project key its notes carry now."),
    new: str = typer.Argument(
        ..., help="The key they should carry (a new key; see `project merge` otherwise)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Move every note of project OLD to project NEW, in one commit, and alias OLD to NEW.

    Notes move from projects/<old folder>/ to projects/<new folder>/, their
    `project` field changes, and links to them by path follow; supersessions
    name ids and follow by themselves. A checkout whose remote still says OLD
    keeps finding the notes (the alias). Nothing is deleted.

    Examples:
      anamnesis project rename github.com/acme/api github.com/newco/api
    """
    _rename(old, new, merge=False, json_out=json_out)


def merge(
    source: str = typer.Argument(..., help="The project whose notes move."),
    target: str = typer.Argument(..., help="The project they join (it has notes already)."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Put every note of project SOURCE into project TARGET, in one commit, and alias SOURCE to TARGET.

    Examples:
      anamnesis project merge api-old github.com/acme/api
    """
    _rename(source, target, merge=True, json_out=json_out)


def _rename(old: str, new: str, *, merge: bool, json_out: bool) -> None:
    from anamnesis.store import rename_project  # lazy: --help loads every command module

    done = rename_project(get_store(), old, new, merge=merge)
    if json_out:
        print_json(done.to_dict())
        return
    verb = "merged" if merge else "renamed"
    print(
        f"{verb} {done.old} -> {done.new}: {plural(len(done.moved), 'note')} moved, {plural(len(done.updated), 'other note')} updated"
    )
    print(f"{done.old} is now an alias of {done.new} ({done.alias}); run `anamnesis sync` to share it")


def alias(
    key: str = typer.Argument(..., help="The key that should find PROJECT's notes (with --here: PROJECT)."),
    project: str = typer.Argument(None, help="The existing project the notes are under."),
    here: bool = typer.Option(
        False, "--here", help="KEY is the current folder's key (its marker or remote)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Make KEY find the notes of PROJECT, moving nothing: for a repo that moved or was renamed.

    After this, SessionStart, recall, capture and `--here` in a checkout whose
    key is KEY use PROJECT. The alias is a file under memory/aliases/ and
    syncs to every machine.

    Examples:
      anamnesis project alias gitlab.com/newco/api github.com/acme/api
      anamnesis project alias --here github.com/acme/api     this checkout's new remote
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.store import set_alias  # lazy: --help loads every command module

    if here:
        from anamnesis.store import raw_project  # lazy: --help loads every command module

        if project is not None:
            raise UsageError("with --here, give only PROJECT (the key is this folder's)")
        project, found = key, raw_project(Path.cwd())
        if found is None:
            raise UsageError("--here: this folder is in no project (no git repo or .anamnesis-project)")
        key = found
    if project is None:
        raise UsageError("give the KEY and the PROJECT it should find (or --here PROJECT)")
    path = set_alias(get_store(), key, project)
    if json_out:
        print_json({"alias": key.strip().lower(), "project": project.strip(), "file": path})
    else:
        print(f"{key.strip().lower()} -> {project.strip()} ({path}); run `anamnesis sync` to share it")


def unalias(
    key: str = typer.Argument(..., help="The alias to forget."),
) -> None:
    """Forget an alias (the notes stay where they are).

    Examples:
      anamnesis project unalias gitlab.com/newco/api
    """
    from anamnesis.store import remove_alias  # lazy: --help loads every command module

    path = remove_alias(get_store(), key)
    print(f"removed {path}")
