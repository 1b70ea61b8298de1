"""Note commands: new, search, show, list, edit, rm, mv."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from anamnesis.cli._common import ask, console, get_store, print_json, read_stdin_if_piped, run_editor

if TYPE_CHECKING:
    from anamnesis.base.paths import Store
    from anamnesis.search import Hit

TYPES_HELP = "semantic (facts, decisions), procedural (how-tos), episodic (what happened), preference (global rules)"


def register(app: typer.Typer) -> None:
    for command in (new, search, show, list_, edit, rm, mv):
        name = "list" if command is list_ else command.__name__
        app.command(name=name, rich_help_panel="Notes")(command)


def _check_type(kind: str | None) -> None:
    from anamnesis.base.notes import check_type  # lazy: --help loads every command module

    if kind is not None:
        check_type(kind)


def _project_option(project: str | None, here: bool, global_: bool = False, optional: bool = False) -> str | None:
    if global_ and project:
        from anamnesis.base.errors import UsageError  # lazy: --help loads every command module

        raise UsageError("--global and --project contradict each other: a note is either for every project or for one")
    if global_:
        return None
    if project:
        from anamnesis.store import check_project_key, resolve_alias  # lazy: as above

        key = check_project_key(project)  # the rule MCP applies too: a key, never a path
        target = resolve_alias(key.lower())  # an alias (a renamed project's old key) finds the new one
        if target.lower() == key.lower():
            return key
        print(f"({key} is an alias of {target}: its notes are filed there)", file=sys.stderr)
        return target
    if here:
        from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
        from anamnesis.store import detect_project  # lazy: --help loads every command module

        here_key = detect_project(Path.cwd())
        if here_key is None and not optional:  # as a filter, None would match every note
            raise UsageError("--here: this folder is in no project (no git repo or .anamnesis-project); use -p KEY")
        return here_key
    return None


def new(
    title: str = typer.Argument(..., help="The note's title (one line)."),
    type: str = typer.Option("semantic", "--type", "-t", help=TYPES_HELP),
    project: str | None = typer.Option(
        None, "--project", "-p", help="Project key (see `anamnesis project`). Default: the project of the current folder."
    ),
    global_: bool = typer.Option(False, "--global", "-G", help="A note for every project (not tied to this one)."),
    tag: list[str] | None = typer.Option(None, "--tag", "-g", help="Tags; repeat, or separate with commas or spaces ('a b' is two tags)."),
    body: str | None = typer.Option(None, "--body", "-b", help="The body; else read from stdin, else open $EDITOR."),
    supersedes: list[str] | None = typer.Option(
        None, "--supersedes", metavar="REF", help="A note this one replaces (id, id prefix, file name); repeatable."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the new note as JSON."),
) -> None:
    """Write a new note (committed to memory/ and indexed at once).

    Examples:
      anamnesis new "Use pg_bouncer in transaction mode" -t semantic -g postgres
      echo "Run make lint before pushing" | anamnesis new "Lint first" -t procedural
      anamnesis new "Answer in British English" -t preference
      anamnesis new "Pool size is now 40" -b "Raised for Black Friday." --supersedes 7k2m
    """
    from anamnesis.base.errors import AnamnesisError, UsageError  # lazy: --help loads every command module
    from anamnesis.base.notes import GLOBAL_TYPES, check_type  # lazy: --help loads every command module
    from anamnesis.store import (  # lazy: --help loads every command module
        check_writable,
        create_note,
        resolve_supersedes,
    )

    store = get_store()
    check_type(type)
    check_writable(store)  # a repo left mid-rebase or a broken settings.json: say so before any typing
    replaced = resolve_supersedes(store, supersedes or [])  # a bad reference fails before any typing
    typed = False
    if body is None:
        body = read_stdin_if_piped() or None
    if body is None:
        body, typed = _body_from_editor(type, title), True
    if not body.strip():
        raise UsageError("empty body; nothing was written")
    key = _project_option(project, here=not global_ and type not in GLOBAL_TYPES, global_=global_, optional=True)
    try:
        note = create_note(
            store, type=type, title=title, body=body, project=key, tags=tag or [], source="cli", supersedes=replaced
        )
    except AnamnesisError as exc:
        if typed:  # a sync holding the store, a full disk: what was typed is not lost with the note
            copy = _edit_copy(store, "new-note.md", body.encode("utf-8"))
            exc.args = (f"{exc}; your text is kept in {copy}",)
        raise
    if json_out:
        print_json(note.to_dict(with_body=False))
    else:
        console().print(f"[green]✔[/green] wrote {_escape(str(store.memory / note.path))}")


def _body_from_editor(kind: str, title: str) -> str:
    import tempfile  # lazy: --help loads every command module; tempfile only for the editor

    from anamnesis.base.resources import read_template  # lazy: --help loads every command module

    try:
        seed = read_template(f"note-{kind}.md")
    except FileNotFoundError:
        seed = "\n"
    seed = seed.replace("{title}", title)
    fd, tmp = tempfile.mkstemp(prefix="anamnesis-", suffix=".md")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(seed)
        run_editor(Path(tmp))
        text = Path(tmp).read_text(encoding="utf-8")
    finally:
        os.unlink(tmp)
    def kept(raw: str) -> str:
        return "\n".join(line for line in raw.splitlines() if not line.startswith("<!--")).strip()

    if kept(text) == kept(seed):
        return ""  # the template saved unchanged (or the editor quit): nothing to write
    return kept(text) + "\n"


def _hits_table(hits: list[Hit], with_snippet: bool) -> None:
    """Search results, three lines each; styled by rich in a terminal, plain text into a pipe
    (an agent's shell, a script), where rich's start-up would be most of the command's time."""
    lines: list[list[tuple[str, str]]] = []  # each line as (text, rich style) pieces
    if not hits:
        lines.append([("no notes found", "dim")])
    for hit in hits:
        first = [(hit.title, "bold")]
        if hit.conflicted:
            first.append((" (conflict)", "red"))
        if hit.superseded_by:
            first.append((f" (superseded by {', '.join(hit.superseded_by)})", "yellow"))
        first.append((f"  {hit.type} · {hit.project or 'global'} · {hit.updated[:10]}", "dim"))
        lines.append(first)
        lines.append([("  ", ""), (hit.path, "cyan")])
        if with_snippet and hit.snippet:
            parts = [(text, "bold yellow" if is_match else "") for text, is_match in hit.snippet_parts()]
            flat = "".join(text for text, _ in parts)
            lines.append([("  ", ""), *_squeezed(parts)] if flat.strip() else [("  ", "")])
    if not sys.stdout.isatty():
        sys.stdout.write("".join("".join(text for text, _ in line) + "\n" for line in lines))
        return
    out = console()
    for line in lines:
        out.print("".join(f"[{style}]{_escape(text)}[/{style}]" if style else _escape(text) for text, style in line))


def _squeezed(parts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Snippet pieces with every run of white space made one space, ends trimmed (matches keep their style)."""
    out: list[tuple[str, str]] = []
    pending_space = False
    for text, style in parts:
        words = text.split()
        if not words:
            pending_space = pending_space or bool(text)
            continue
        lead = text[0].isspace()
        piece = " ".join(words)
        if out and (pending_space or lead):
            piece = " " + piece
        out.append((piece, style))
        pending_space = text[-1].isspace()
    return out


def _escape(text: str) -> str:
    """Text from notes, shown literally (a `[/red]` in a title or project is not markup)."""
    from rich.markup import escape  # lazy: rich stays off --help and off piped search output

    return escape(text)


def search(
    query: str = typer.Argument(
        ..., help='What to find, in plain words or keywords. "exact phrase", prefix*, NOT word; code words and command lines match as written.'
    ),
    project: str | None = typer.Option(None, "--project", "-p", help="Only this project key."),
    here: bool = typer.Option(False, "--here", help="Only the project of the current folder."),
    type: str | None = typer.Option(None, "--type", "-t", help="Only this note type."),
    tag: str | None = typer.Option(None, "--tag", "-g", help="Only notes with this tag."),
    since: str | None = typer.Option(None, "--since", help="Updated on/after: YYYY-MM-DD or 7d, 2w, 3m."),
    until: str | None = typer.Option(None, "--until", help="Updated on/before: YYYY-MM-DD or 7d, 2w, 3m."),
    limit: int = typer.Option(10, "--limit", "-n", min=1, max=1000, help="At most this many results."),
    require_all: bool = typer.Option(False, "--all", help="Only notes holding every word (no ranking by meaning)."),
    any_terms: bool = typer.Option(False, "--any", hidden=True, help="Kept for old scripts: ranked search is the default."),
    json_out: bool = typer.Option(False, "--json", help="Results as JSON."),
) -> None:
    """Search notes, best match first.

    Ranked, not boolean: no word is required and stop words are ignored, so a
    plain question works. Notes covering more of the query, with words in the
    title or tags, of this folder's project (or global), and not superseded by
    a newer note, come first. With semantic search on (`anamnesis semantic
    enable`), notes that mean the same in other words are found too.

    Examples:
      anamnesis search "how do we rotate the staging certificates?"
      anamnesis search 'docker run --rm -it'        a command line, matched as written
      anamnesis search parse_config --here          a code word, this project only
      anamnesis search deploy -t procedural --since 2w
      anamnesis search 'redis NOT cluster' --json
      anamnesis search "connection pool" --all      only notes with every word
    """
    from anamnesis.search import (  # lazy: --help loads every command module
        SEARCH_SERVE_IDLE,
        catch_up,
        open_index,
        start_background_update,
        start_query_server,
    )
    from anamnesis.search import search as run_search  # lazy: --help loads every command module
    from anamnesis.store import detect_project  # lazy: --help loads every command module
    from anamnesis.sync import read_current  # lazy: --help loads every command module

    store = get_store()
    _check_type(type)
    try:
        near = detect_project(os.getcwd())  # only ranks: a folder that cannot be read is no error
    except OSError:
        near = None
    with open_index(store) as index:
        hits, refreshed = read_current(  # with `watch` running, no stat of every file
            index,
            lambda: run_search(
                index,
                query,
                project=_project_option(project, here),
                type=type,
                tag=tag,
                since=since,
                until=until,
                near_project=near,
                limit=limit,
                require_all=require_all,
            ),
        )
        if refreshed.changed:
            start_background_update(store)
        else:
            with contextlib.suppress(Exception):  # notes that waited for the model (it was away)
                catch_up(store, index)
    if json_out:  # the same keys on every result, so scripts need no guards
        print_json([{"snippet": "", "score": round(h.score, 4), "problems": [], **h.to_dict()} for h in hits])
    else:
        _hits_table(hits, with_snippet=True)
    if not require_all:
        # with semantic search on and no query server (watch, a session's hook), this search
        # loaded the model itself: keep it loaded for the searches that follow, detached
        with contextlib.suppress(Exception):
            start_query_server(store, idle=SEARCH_SERVE_IDLE)


def show(
    ref: str = typer.Argument(..., help="A note id, id prefix, file name or path."),
    json_out: bool = typer.Option(False, "--json", help="The note as JSON (fields, body, problems)."),
) -> None:
    """Print a note (its file text as is).

    Examples:
      anamnesis show 7k2m                           by id prefix (4+ characters)
      anamnesis show global/facts/use-pg-bouncer-7k2m9q4x1c.md
      anamnesis show 7k2m9q4x1c --json              fields, body and problems
    """
    from anamnesis.store import read_note, resolve_ref, safe_path  # lazy: --help loads every command module

    store = get_store()
    if json_out:
        print_json({"problems": [], **read_note(store, ref).to_dict()})
        return
    path = safe_path(store, resolve_ref(store, ref))
    sys.stdout.write(path.read_text(encoding="utf-8", errors="replace"))


def list_(
    project: str | None = typer.Option(None, "--project", "-p", help="Only this project key."),
    here: bool = typer.Option(False, "--here", help="Only the project of the current folder."),
    type: str | None = typer.Option(None, "--type", "-t", help="Only this note type."),
    tag: str | None = typer.Option(None, "--tag", "-g", help="Only notes with this tag."),
    since: str | None = typer.Option(None, "--since", help="Updated on/after: YYYY-MM-DD or 7d, 2w, 3m."),
    until: str | None = typer.Option(None, "--until", help="Updated on/before: YYYY-MM-DD or 7d, 2w, 3m."),
    conflicts: bool = typer.Option(False, "--conflicts", help="Only notes with unresolved conflicts."),
    limit: int = typer.Option(50, "--limit", "-n", min=1, max=100000, help="At most this many notes."),
    json_out: bool = typer.Option(False, "--json", help="As JSON."),
) -> None:
    """List notes, most recently updated first.

    Examples:
      anamnesis list --here -n 20
      anamnesis list -t preference
      anamnesis list -g postgres --since 2026-11-01 --until 2026-11-30
      anamnesis list --conflicts
    """
    from anamnesis.search import open_index  # lazy: --help loads every command module
    from anamnesis.sync import catch_up  # lazy: --help loads every command module

    store = get_store()
    _check_type(type)
    with open_index(store) as index:
        catch_up(index)
        hits = index.list_notes(
            project=_project_option(project, here),
            type=type,
            tag=tag,
            since=since,
            until=until,
            limit=limit,
            conflicted=True if conflicts else None,
        )
    if json_out:
        print_json([{"problems": [], **h.to_dict()} for h in hits])
        return
    from rich.table import Table  # lazy: rich stays off --help, which loads every command module

    table = Table(box=None, padding=(0, 2), header_style="bold")
    for column in ("updated", "type", "project", "title", "id"):
        table.add_column(column)
    for hit in hits:
        title = _escape(hit.title) + (" [red](conflict)[/red]" if hit.conflicted else "")
        table.add_row(*(_escape(v) for v in (hit.updated[:10], hit.type, hit.project or "global")), title, _escape(hit.id))
    console().print(table)


def edit(
    ref: str = typer.Argument(..., help="A note id, id prefix, file name or path."),
    supersedes: list[str] | None = typer.Option(
        None,
        "--supersedes",
        metavar="REF",
        help="Record that this note replaces the note REF (no editor is opened); repeatable.",
    ),
    no_supersedes: bool = typer.Option(
        False, "--no-supersedes", help="Remove every `supersedes` link of this note (no editor is opened)."
    ),
) -> None:
    """Open a note in $EDITOR; when you save, it is re-indexed and committed.

    With --supersedes or --no-supersedes, only the note's `supersedes` links
    change (both together replace them) and no editor is opened.

    Examples:
      anamnesis edit 7k2m
      EDITOR="code --wait" anamnesis edit ./facts/use-pg-bouncer-7k2m9q4x1c.md
      anamnesis edit 9x8w --supersedes 7k2m           9x8w replaces 7k2m
      anamnesis edit 9x8w --no-supersedes
    """
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module
    from anamnesis.store import (  # lazy: --help loads every command module
        check_writable,
        resolve_ref,
        safe_path,
        save_edited_text,
        update_note,
    )

    store = get_store()
    if supersedes or no_supersedes:
        note = update_note(store, ref, supersedes=[] if no_supersedes else None, add_supersedes=supersedes or [])
        links = ", ".join(note.supersedes) or "no other note"
        console().print(f"[green]✔[/green] {_escape(note.path)} now supersedes {_escape(links)}")
        return
    check_writable(store)  # refused before the editor opens, not after the typing
    relpath = resolve_ref(store, ref)
    path = safe_path(store, relpath)
    before = path.read_bytes()
    copy = _edit_copy(store, path.name, before)
    try:
        run_editor(copy)
        after = copy.read_bytes()
        if after == before:
            console().print("[dim]no change[/dim]")
        else:
            save_edited_text(store, relpath, after, expected=before)
            console().print(f"[green]✔[/green] saved {_escape(str(path))}")
    except AnamnesisError as exc:
        if copy.exists() and copy.read_bytes().strip() and copy.read_bytes() != before:
            exc.args = (f"{exc}; your text is kept in {copy}",)
            raise
        _drop_copy(copy)
        raise
    _drop_copy(copy)


def _edit_copy(store: Store, name: str, data: bytes) -> Path:
    """A private copy of a note for the editor (state/edit/<random>/<name>).

    The note itself is only written once the edit passed every check, through
    the same path as every write; when a check fails, the person's text stays
    in this copy and the error names it.
    """
    import tempfile  # lazy: --help loads every command module; tempfile only for the editor

    from anamnesis.base.errors import DiskFull  # lazy: --help loads every command module
    from anamnesis.base.fsutil import (  # lazy: --help loads every command module
        free_bytes,
        human_bytes,
        is_out_of_space,
    )

    folder = store.state_dir / "edit"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        copy = Path(tempfile.mkdtemp(dir=folder)) / name
        copy.write_bytes(data)
    except OSError as exc:
        if is_out_of_space(exc):
            free = free_bytes(store.home)
            room = f", {human_bytes(free)} free" if free is not None else ""
            raise DiskFull(
                f"no space left on the disk of {store.home}{room} for the copy to edit ({exc.strerror}); "
                "nothing was changed — free some space and try again"
            ) from None
        raise
    return copy


def _drop_copy(copy: Path) -> None:
    shutil.rmtree(copy.parent, ignore_errors=True)


def record_hand_edit(store: Store, relpath: str) -> None:
    """After a person edited a file in place: stamp `updated`, re-index it, commit it (or none of that)."""
    from anamnesis.store import safe_path, save_edited_text  # lazy: --help loads every command module

    save_edited_text(store, relpath, safe_path(store, relpath).read_bytes())


def rm(
    ref: str = typer.Argument(..., help="A note id, id prefix, file name or path."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Delete a note (the deletion is committed; git history keeps the old text).

    Examples:
      anamnesis rm 7k2m                             asks first when run in a terminal
      anamnesis rm 7k2m9q4x1c -y --json
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.store import (  # lazy: --help loads every command module
        check_writable,
        delete_note,
        read_note,
    )

    store = get_store()
    note = read_note(store, ref)
    check_writable(store)  # refused before asking
    if not yes and sys.stdin.isatty():
        answer = ask(f"Delete {note.path} ({note.title})?", default=False)
        if answer is None:
            raise UsageError("no answer (stdin was closed): nothing was deleted; pass --yes to delete without a question")
        if not answer:
            console().print("nothing was deleted")
            raise typer.Exit(1)
    delete_note(store, note.path)
    if json_out:
        print_json({"deleted": note.path, "id": note.id})
    else:
        console().print(f"[green]✔[/green] deleted {_escape(note.path)}")


def mv(
    ref: str = typer.Argument(..., help="A note id, id prefix, file name or path."),
    new_path: str = typer.Argument(..., metavar="NEWPATH", help="Where it goes, relative to memory/ (a .md file)."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Move or rename a note; it keeps its id, and links to it in other notes follow.

    Links by file name (a wiki link to use-pg-bouncer) or by path (a markdown
    link to ../facts/x.md) are rewritten to the new place; links by id or
    title need no change. The move and every rewritten note are one commit.

    Examples:
      anamnesis mv 7k2m global/facts/pool-settings-7k2m9q4x1c.md
      anamnesis mv 7k2m projects/github.com-acme-api/facts/use-pg-bouncer-7k2m9q4x1c.md --json
    """
    from anamnesis.store import move_note  # lazy: --help loads every command module

    store = get_store()
    moved = move_note(store, ref, new_path)
    if json_out:
        print_json({"moved": moved.old_path, "to": moved.note.path, "id": moved.note.id, "rewritten": moved.rewritten})
        return
    console().print(f"[green]✔[/green] moved {_escape(moved.old_path)} to {_escape(moved.note.path)}")
    for path in moved.rewritten:
        console().print(f"  links updated in {_escape(path)}")
