"""Sync commands: sync, peers, conflicts, resolve, schedule, demo.

Thin adapter: every command calls one core function (anamnesis.sync,
.peers, .conflicts, .schedule, .demo) and prints its result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from anamnesis.base.text import plural
from anamnesis.cli._common import ask, console, get_store, no_answer, print_json, run_editor

if TYPE_CHECKING:
    from anamnesis.sync import SyncResult

peers_app = typer.Typer(
    help=(
        "The machines and hub repos this store syncs with.\n\n"
        "Examples:\n\n"
        "  anamnesis peers add desk me@desk.tailnet.ts.net:.anamnesis/memory\n\n"
        "  anamnesis peers list                   last sync with each, and why one fails\n\n"
        "  anamnesis peers discover               machines of this memory on the LAN and tailnet"
    ),
    no_args_is_help=True,
)
schedule_app = typer.Typer(
    help=(
        "Run `anamnesis sync` on a timer (systemd on Linux, launchd on macOS).\n\n"
        "Examples:\n\n"
        "  anamnesis schedule install             every 5 minutes\n\n"
        "  anamnesis schedule install --watch     sync seconds after a change\n\n"
        "  anamnesis schedule status"
    ),
    no_args_is_help=True,
)

SYNC_EPILOG = (
    "Exit codes: 0 synced; 10 a note is in conflict: this sync recorded a same-line conflict or brought one "
    "in (every version kept in the note), or held back a half-resolved note (left uncommitted); "
    "11 some peer could not be reached now, or refused the push (retried next sync); "
    "14 a peer's answer says it will never work as set up: no repository at that path, a host key "
    "unknown or changed, a refused key (fix the setting; the timer reports it at once); "
    "12 refused: memory/ was left mid-rebase/merge by hand (the message says how to get out); "
    "13 (only with --fail-after) a peer has been unreachable for longer than that; "
    "8 this machine's disk is full; 9 this machine cannot write its own store (read-only, no permission): "
    "no peer is blamed; 3 no store; 4 no such peer; 5 the store was busy; 6 a local git failed; "
    "1 this machine's settings.json cannot be read (the message names the line). "
    "14 outranks 13, 13 outranks 10, 10 outranks 11. Stopped by SIGTERM/SIGINT/SIGHUP: 143/130/129, "
    "with the git and ssh processes it started."
)


MAX_CONFLICT_LINES = 10  # a sync that records more lists the first ones; `anamnesis conflicts` has them all


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Sync", epilog=SYNC_EPILOG)(sync)
    app.add_typer(peers_app, name="peers", rich_help_panel="Sync")
    app.command(rich_help_panel="Sync")(conflicts)
    app.command(rich_help_panel="Sync")(resolve)
    app.add_typer(schedule_app, name="schedule", rich_help_panel="Sync")
    app.command(rich_help_panel="Sync")(demo)
    peers_app.command("add")(peers_add)
    peers_app.command("list")(peers_list)
    peers_app.command("rm")(peers_rm)
    schedule_app.command("install")(schedule_install)
    schedule_app.command("remove")(schedule_remove)
    schedule_app.command("status")(schedule_status)


def sync(
    peer: list[str] = typer.Option(None, "--peer", "-p", help="Only sync with this peer (repeatable)."),
    no_push: bool = typer.Option(False, "--no-push", help="Fetch and integrate, but push nothing."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only problems (for timers)."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
    fail_after: str = typer.Option(
        None,
        "--fail-after",
        metavar="DURATION",
        help="Exit 13 when a peer has been unreachable for longer than this (24h, 90m...): the timer's health check.",
    ),
) -> None:
    """Commit local changes, merge every peer's (both sides' edits kept), push, update the index.

    Nothing is ever force-pushed and the repo is never left mid-rebase: a
    same-line conflict is written into the note as standard conflict markers
    and committed, so every machine sees it and unrelated notes keep syncing.

    Examples:
      anamnesis sync                      every peer; exit 10 if a note is in conflict
      anamnesis sync --peer laptop        one peer only
      anamnesis sync --no-push --json     take in, send nothing, report for a script
      anamnesis sync --quiet              only problems (what the timer runs)
    """
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    from anamnesis.app import sync_store as run_sync  # lazy: --help loads every command module
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module
    from anamnesis.base.git import stop_on_signals  # lazy: --help loads every command module
    from anamnesis.store import SyncRefused  # lazy: --help loads every command module
    from anamnesis.sync import (  # lazy: --help loads every command module
        EXIT_STALE,
        parse_duration,  # lazy: --help loads every command module
        stale_peers,
    )

    limit = parse_duration(fail_after) if fail_after else None
    store = get_store()
    try:
        with stop_on_signals("sync"):
            result = run_sync(store, peers=peer or None, push=not no_push)
    except AnamnesisError as exc:
        if json_out:
            outcome = "refused" if isinstance(exc, SyncRefused) else "failed"
            print_json({"outcome": outcome, "exit_code": exc.exit_code, "error": str(exc)})
        raise
    skipped = [p.name for p in result.unreachable]
    stale = stale_peers(store, limit, skipped) if limit is not None and skipped else []
    code = EXIT_STALE if stale and not result.misconfigured else result.exit_code  # 14 outranks 13
    if json_out:
        data = result.to_dict()
        if stale:
            data["stale_peers"] = [
                {"name": s.name, "since": s.since, "last_ok": s.last_ok or None} for s in stale
            ]
        data["exit_code"] = code
        print_json(data)
    else:
        _print_result(result, quiet)
        for item in stale:
            console().print(
                f"  [red]{escape(item.name)}[/red]: no sync has reached it since {escape(item.since)} "
                f"(over --fail-after {escape(fail_after)})",
                highlight=False,
            )
    if code:
        raise typer.Exit(code)


def _print_result(result: SyncResult, quiet: bool) -> None:
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    out = console()
    older = [path for path in result.unresolved if path not in result.conflicts]
    problems = bool(result.conflicts or result.held_back or result.unreachable)
    if quiet and not problems:  # the timer is told news only: a conflict from before was said already
        return
    mark = (
        "[green]✔[/green]"
        if not problems and not older  # a note still in conflict from before: no all-clear (exit 0)
        else "[red]✘[/red]"
        if result.misconfigured
        else "[yellow]![/yellow]"
    )
    out.print(f"{mark} [bold]{result.outcome}[/bold] [dim]({result.seconds:.2f} s)[/dim]")
    for line in result.repaired:
        out.print(f"  [dim]repaired:[/dim] {line}")
    for path in result.left_out:
        out.print(
            f"  [yellow]left out:[/yellow] {escape(path)} is a symbolic link: notes are plain files inside "
            "memory/, so it stays here and is not synced"
        )
    for item in [] if quiet else result.imported:  # the mirrored sources (`anamnesis import ... --mirror`)
        out.print(
            f"  imported from {item['source']} ({escape(item['from'])}): {item['created']} new,"
            f" {item['updated']} updated notes", highlight=False,
        )
    if result.committed and not quiet:
        out.print(f"  committed {plural(result.local_changes, 'local change')}")
    for path, problem in result.malformed.items():
        out.print(
            f"  [yellow]malformed[/yellow]: {escape(path)} — {escape(problem)}; committed as written, so every "
            "machine gets it so (`anamnesis doctor` says how to fix it)", highlight=False,
        )
    if not result.peers and not result.incoming:
        out.print("  [dim]no peers yet: add one with `anamnesis peers add NAME URL`[/dim]")
    _print_incoming(result, quiet)
    for report in result.peers:
        if report.status == "misconfigured":
            out.print(
                f"  [red]{report.name}[/red]: misconfigured — {escape(report.detail)} "
                "[dim](waiting will not fix it)[/dim]",
                highlight=False,
            )
        elif report.status in ("unreachable", "rejected"):
            out.print(
                f"  [yellow]{report.name}[/yellow]: {report.status} — {escape(report.detail)} "
                "[dim](will retry next sync)[/dim]",
                highlight=False,
            )
        elif not quiet:
            moved = (
                f"received {report.received}, sent {report.sent}" if (report.received or report.sent) else ""
            )
            out.print(f"  {report.name}: {report.status}{' — ' + moved if moved else ''}")
    # what came in changed here: a note only this sync committed (a hand edit, stamped) is no news
    brought = [path for path in result.changed if path not in result.committed] if result.received else []
    if brought and not quiet:
        out.print(f"  {plural(len(brought), 'note')} changed here")
    notes = result.conflict_notes
    shown = notes if len(notes) <= MAX_CONFLICT_LINES else notes[: MAX_CONFLICT_LINES - 1]
    for note in shown:
        title = f" ({escape(note.title)})" if note.title != note.path else ""
        if note.beside:
            what = f"both versions kept, the other one beside it as {escape(note.beside)}"
        else:
            what = note.kept + (f": {', '.join(note.machines)}" if note.machines else "")
        here = "recorded here" if note.path in result.recorded else "brought in"
        out.print(
            f"  [red]conflict[/red] in {escape(note.path)}{title} — {what} [dim]({here})[/dim]; "
            "see `anamnesis conflicts`", highlight=False,
        )
    if len(shown) < len(notes):
        more = plural(len(notes) - len(shown), "more note")
        out.print(f"  [red]{more} in conflict[/red] — see `anamnesis conflicts`")
    for held in result.held_back:
        out.print(
            f"  [red]held back[/red]: {escape(held.path)} — conflict marker outside a complete block at "
            f"{escape(held.where)}; your edit stays in the file, not committed, until no marker line is "
            "left outside a whole block (finish it, or `anamnesis resolve NOTE --edit`)", highlight=False,
        )
    if older and not quiet:  # not news (said by the sync that brought them): a reminder, exit 0
        out.print(
            f"  [yellow]still in conflict[/yellow]: {plural(len(older), 'note')} from before"
            f" ({escape(', '.join(older[:3]))}{', …' if len(older) > 3 else ''}) — see `anamnesis conflicts`",
            highlight=False,
        )


def _print_incoming(result: SyncResult, quiet: bool) -> None:
    """What the machines that push here sent and this sync integrated (they are no peers of ours)."""
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    received: dict[str, int] = {}
    for item in result.incoming:
        received[item.machine] = received.get(item.machine, 0) + item.received
    if quiet or not received:
        return
    for machine, count in received.items():
        if count:
            console().print(f"  {escape(machine)} (pushes here): integrated {plural(count, 'commit')}")
    if not result.peers and not any(received.values()):
        console().print(
            f"  pushed here by {escape(', '.join(received))}: nothing new to integrate", highlight=False
        )


# -- peers --------------------------------------------------------------------------------


def peers_add(
    name: str = typer.Argument(..., help="A short name: letters, digits, '.', '_', '-'."),
    url: str = typer.Argument(
        ..., help="Any git URL: user@host.tailnet.ts.net:.anamnesis/memory, ssh://..., a path."
    ),
    no_check: bool = typer.Option(False, "--no-check", help="Do not try to reach the peer now."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Keep the peer even if it answers that there is no repository at that path, or its URL names no machine.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Add a peer (stored in this machine's settings, never in memory/).

    The peer is tried first: one that answers that it holds no repository at
    that path (a typo), or a URL that names no machine (a port that is not a
    number), is refused (exit 14) unless --force; one that cannot
    be reached now (off, asleep) is kept with a warning.

    Examples:
      anamnesis peers add laptop ssh://me@laptop.tailnet.ts.net/home/me/.anamnesis/memory
      anamnesis peers add desk me@desk:.anamnesis/memory       scp form (no port)
      anamnesis peers add usb /media/me/stick/anamnesis.git      a bare repo on a disk
    """
    from anamnesis.base.git import stop_on_signals  # lazy: --help loads every command module
    from anamnesis.sync import (  # lazy: --help loads every command module
        NoRepository,
        PeerNotFound,
        add_peer,
        check_name,
        get_peer,
        probe,
        same_store_as,
    )

    store = get_store()
    check_name(name)
    try:  # what is wrong here (a broken settings.json) is said before anything is asked of the peer
        before: str | None = get_peer(store, name).url
    except PeerNotFound:
        before = None
    with stop_on_signals("peers add"):
        problem = None if no_check else probe(url, repo=store.memory)
    if problem is not None and (problem.no_repository or problem.bad_url) and not force:
        raise NoRepository(f"{problem.text}; nothing was saved (`--force` keeps it anyway)")
    peer, changed = add_peer(store, name, url)
    if json_out:
        print_json(
            {
                **peer.to_dict(),
                "changed": changed,
                "previous_url": before if changed else None,
                "reachable": None if no_check else problem is None,
                "problem": problem.text if problem else None,
                "will_retry": None if problem is None else problem.kind == "outage",
            }
        )
        return
    out = console()
    if changed and before is not None:
        out.print(
            f"changed peer [bold]{peer.name}[/bold] → {peer.url} [dim](was {before})[/dim]", highlight=False
        )
    else:
        out.print(f"{'added' if changed else 'already had'} peer [bold]{peer.name}[/bold] → {peer.url}")
    twin = same_store_as(store, url, name) if changed else None
    if twin:
        out.print(
            f"[yellow]warning:[/yellow] peer [bold]{twin}[/bold] is that same store already: one machine under two "
            f"names muddles every report (`anamnesis peers rm {name}` or `anamnesis peers rm {twin}`)",
            highlight=False,
        )
    if problem:
        from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

        if problem.kind == "outage":
            out.print(
                f"[yellow]warning:[/yellow] cannot reach it now: {escape(problem.text)} (sync will keep trying)",
                highlight=False,
            )
        else:
            out.print(
                f"[red]warning:[/red] {'' if problem.bad_url else 'it answered, but '}this will not work: "
                f"{escape(problem.text)} "
                "(every sync fails with exit 14 until it is fixed)",
                highlight=False,
            )
    out.print("[dim]next: `anamnesis sync`[/dim]")


def peers_list(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """List peers with their last successful sync and, for those failing now, since when, why, and what to do.

    Then the machines that push here (they have this one as their peer), with
    the work of theirs the next sync here integrates. In --json, those come
    last, with "configured": false and "kind": "incoming".

    Examples:
      anamnesis peers list
      anamnesis peers list --json | jq '.[] | select(.last_error != "")'
    """
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    from anamnesis.sync import ago, incoming_machines, list_peers  # lazy: --help loads every command module

    store = get_store()
    peers = list_peers(store)
    pushers = incoming_machines(store)
    if json_out:
        print_json(
            [{**p.to_dict(), "configured": True} for p in peers]
            + [
                {"name": m.machine, "url": None, "kind": "incoming", "configured": False, **m.to_dict()}
                for m in pushers
            ]
        )
        return
    out = console()
    if not peers:
        out.print(
            "no peers yet — add one with `anamnesis peers add NAME URL`"
            if not pushers
            else "no peers configured"
        )
        _print_pushers(pushers)
        return
    from rich.table import Table  # lazy: rich stays off --help, which loads every command module

    table = Table(box=None, padding=(0, 2))
    for column in ("name", "url", "kind", "last synced", "state"):
        table.add_column(column)
    failing = [p for p in peers if p.failing]
    rows = []
    for p in peers:
        since = escape(p.failing_since or p.last_error_at)
        state = (
            ("ok" if p.last_ok else "not reached yet")
            if p not in failing
            else (
                f"[red]misconfigured since {since}[/red]"
                if p.misconfigured
                else f"[yellow]failing since {since}[/yellow]"
            )
        )
        rows.append((escape(p.name), escape(p.url), p.kind or "?", p.last_ok or "never", state))
        table.add_row(*rows[-1])
    if out.measure(table, options=out.options.update_width(10_000)).maximum <= out.width:
        out.print(table)
    else:  # a table this wide would cut URLs and times: one block per peer, every value whole
        for name, url, kind, last, state in rows:
            out.print(f"[bold]{name}[/bold]  {url}", highlight=False)
            out.print(
                f"  {'kind ?' if kind == '?' else kind} · last synced {last} · {state}", highlight=False
            )
    for p in failing:
        out.print(
            f"[yellow]{escape(p.name)}[/yellow] ({escape(ago(p.last_error_at))}): {escape(p.last_error)}",
            highlight=False,
        )
    _print_pushers(pushers)


def _print_pushers(pushers: list[Any]) -> None:
    """The machines that push here (`peers.IncomingMachine`), one line each."""
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    if not pushers:
        return
    out = console()
    out.print("machines that push here [dim](this machine is their peer)[/dim]:")
    for machine in pushers:
        out.print(f"  {escape(machine.describe())}", highlight=False)
    if any(m.waiting for m in pushers):
        out.print(
            "[dim]the next sync here integrates the waiting work (the timer, `anamnesis watch`, or `anamnesis sync`)[/dim]"
        )


def peers_rm(name: str = typer.Argument(..., help="The peer's name.")) -> None:
    """Forget a peer (nothing is deleted there or here).

    Examples:
      anamnesis peers rm laptop
    """
    from anamnesis.sync import remove_peer  # lazy: --help loads every command module

    peer = remove_peer(get_store(), name)
    console().print(f"removed peer [bold]{peer.name}[/bold] ({peer.url})")


# -- conflicts ----------------------------------------------------------------------------


def conflicts(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """List notes that still carry conflict markers (resolve with `anamnesis resolve`).

    Examples:
      anamnesis conflicts
      anamnesis conflicts --json
    """
    # lazy: --help loads every command module
    from anamnesis.store import binary_conflicts, list_conflicts

    store = get_store()
    found = list_conflicts(store)
    binaries = binary_conflicts(store)
    if json_out:
        print_json(
            [c.to_dict() for c in found]
            + [{"path": path, "title": path, "blocks": [], "other_version": side} for path, side in binaries]
        )
        return
    out = console()
    if not found and not binaries:
        out.print("[green]✔[/green] no conflicts")
        return
    for item in found:
        sides = "; ".join(" ↔ ".join(labels) for labels in item.labels)
        out.print(f"[red]•[/red] [bold]{item.title}[/bold]  {item.path}  [dim]{sides}[/dim]", highlight=False)
        if item.strays:
            lines = ", ".join(str(n) for n in item.strays[:8]) + (", ..." if len(item.strays) > 8 else "")
            out.print(
                f"  [yellow]marker lines outside a complete block[/yellow] (line {lines}): part of a block "
                f"was removed by hand; finish with `anamnesis resolve {item.path} --edit`",
                highlight=False,
            )
    for path, side in binaries:
        out.print(f"[red]•[/red] {path}  [dim]the other version is {side}[/dim]", highlight=False)
    if found:
        out.print(
            "[dim]resolve: edit the note and remove the markers, then `anamnesis sync`; "
            "or `anamnesis resolve NOTE --ours|--keep MACHINE|--theirs|--both|--edit`[/dim]"
        )
    if binaries:
        out.print(
            "[dim]binary files: keep the version you want under the file's name, delete the "
            "`.conflict` one, then `anamnesis sync`[/dim]"
        )


def resolve(
    note: str = typer.Argument(..., help="Path, id or id prefix of the conflicted note."),
    keep_machine: str = typer.Option(
        None,
        "--keep",
        metavar="MACHINE",
        help="Keep MACHINE's version in every conflict block (the start of its id will do: server for server-61ef).",
    ),
    ours: bool = typer.Option(False, "--ours", help="Keep this machine's version in every conflict block."),
    theirs: bool = typer.Option(
        False, "--theirs", help="Keep the other machine's version (blocks of two versions only)."
    ),
    both: bool = typer.Option(False, "--both", "--all", help="Keep every version, one after the other."),
    edit: bool = typer.Option(
        False, "--edit", help="Open the note in $VISUAL/$EDITOR, then check the markers are gone."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Resolve a conflicted note and commit it (the next sync sends the resolution).

    Versions are named by the machine that wrote them, as the block's labels
    and `anamnesis conflicts` show: --keep MACHINE keeps that one, --ours this
    machine's, --theirs the other of two, --both all of them.

    Examples:
      anamnesis conflicts                          which notes, and whose versions
      anamnesis resolve pool-size --keep laptop    keep the laptop's version
      anamnesis resolve pool-size --both           keep every version, one after the other
      anamnesis resolve pool-size                  open it in $EDITOR
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.store import (
        KEEP_PREFIX,  # lazy: --help loads every command module
        resolve_note,  # lazy: --help loads every command module
    )

    chosen = [
        name
        for name, flag in (
            ("keep", keep_machine is not None),
            ("ours", ours),
            ("theirs", theirs),
            ("both", both),
            ("edit", edit),
        )
        if flag
    ]
    if len(chosen) > 1:
        raise UsageError("choose one of --keep MACHINE, --ours, --theirs, --both, --edit")
    store = get_store()
    keep = chosen[0] if chosen else None
    if keep == "keep":
        if not (keep_machine or "").strip():
            raise UsageError("--keep needs a machine name, as `anamnesis conflicts` shows them")
        keep = KEEP_PREFIX + keep_machine
    if keep == "edit":
        _edit(store, note)
        keep = None
    path = resolve_note(store, note, keep)
    if json_out:
        print_json({"resolved": path})
    else:
        from anamnesis.sync import watch_running  # lazy: --help loads every command module

        sent = "the running `anamnesis watch` sends it" if watch_running(store) else "run `anamnesis sync` to send it"
        console().print(f"[green]✔[/green] resolved {path} [dim]({sent})[/dim]")


def _edit(store: Any, ref: str) -> None:
    from anamnesis.store import (
        conflicted_ref,  # lazy: --help loads every command module
        safe_path,  # lazy: --help loads every command module
    )

    run_editor(safe_path(store, conflicted_ref(store, ref)), unchanged="nothing was committed")


# -- schedule -----------------------------------------------------------------------------


def schedule_install(
    every: str = typer.Option("5m", "--every", help="How often: 30s, 5m, 1h..."),
    print_only: bool = typer.Option(False, "--print", help="Show the files and commands; write nothing."),
    no_enable: bool = typer.Option(False, "--no-enable", help="Write the files but do not activate them."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
    watch: bool = typer.Option(
        False,
        "--watch",
        help="Keep `anamnesis watch` running instead (syncs seconds after a change; --every is its safety net).",
    ),
) -> None:
    """Install a systemd user timer (Linux) or LaunchAgent (macOS) that runs `anamnesis sync`.

    With --watch: a systemd user service / LaunchAgent that keeps `anamnesis
    watch` running (restarted if it fails) instead of the timer.

    Examples:
      anamnesis schedule install                 sync every 5 minutes
      anamnesis schedule install --every 15m
      anamnesis schedule install --watch         sync seconds after each change
      anamnesis schedule install --print         show the unit files, install nothing
    """
    from anamnesis.sync import install_schedule, schedule_plan  # lazy: --help loads every command module

    store = get_store()
    if print_only:
        rendered = schedule_plan(store, every, watch=watch)
        if json_out:
            print_json(rendered.to_dict())
            return
        out = console()
        for path, text in rendered.files.items():
            out.print(f"[bold]# {path}[/bold]")
            out.print(text, markup=False, highlight=False)
        out.print("[bold]# then run[/bold]")
        for cmd in rendered.activate:
            out.print(" ".join(cmd), markup=False)
        return
    outcome = install_schedule(store, every, activate=not no_enable, watch=watch)
    if json_out:
        print_json(outcome.to_dict())
        return
    out = console()
    for written in outcome.written:
        out.print(f"wrote {written}")
    for removed in outcome.removed:
        out.print(f"removed {removed}")
    if outcome.activated:
        what = (
            f"watch runs as a service (safety-net sync every {every})"
            if watch
            else f"sync runs every {every}"
        )
        out.print(f"[green]✔[/green] {what}")
    for note in outcome.notes:
        out.print(f"[yellow]note:[/yellow] {note}")


def schedule_remove(
    no_enable: bool = typer.Option(
        False, "--no-enable", help="Only delete the files (do not call systemctl/launchctl)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Stop and remove the sync timer/agent.

    Examples:
      anamnesis schedule remove
      anamnesis schedule remove --json
    """
    from anamnesis.sync import remove_schedule  # lazy: --help loads every command module

    outcome = remove_schedule(get_store(), activate=not no_enable)
    if json_out:
        print_json(outcome.to_dict())
        return
    out = console()
    for removed in outcome.removed:
        out.print(f"removed {removed}")
    for note in outcome.notes:
        out.print(note)


def schedule_status(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Is the timer installed and active, how often, and how did the last sync go.

    Examples:
      anamnesis schedule status
      anamnesis schedule status --json
    """
    from anamnesis.sync import schedule_status, watch_pid  # lazy: --help loads every command module

    store = get_store()
    info = schedule_status(store)
    service = info.get("watch_service") or {}
    by_hand = watch_pid(store) if not service.get("active") else None  # the service's own is not by hand
    info["watch_by_hand"] = by_hand
    if json_out:
        print_json(info)
        return
    out = console()
    state = "installed" if info["installed"] else "not installed"
    out.print(
        f"{info['kind']} {info['name']}: [bold]{state}[/bold]"
        + (f", every {info['every']}" if info["every"] else "")
    )
    for key in ("enabled", "active", "last_run", "last_sync", "last_error", "unreachable", "warning"):
        if info.get(key):
            out.print(f"  {key.replace('_', ' ')}: {info[key]}", markup=False, highlight=False)
    if service.get("installed"):
        state = f", {service['active']}" if service.get("active") else ""
        out.print(f"watch service {service['name']}: [bold]installed[/bold]{state}")
    if by_hand:
        out.print(f"`anamnesis watch` started by hand: [bold]running[/bold] (pid {by_hand}), syncing this store")
    if not info["installed"]:
        hint = " as a safety net for when that watch stops" if by_hand else ""
        out.print(f"[dim]install with `anamnesis schedule install [--every 5m]`{hint}[/dim]")


# -- demo ---------------------------------------------------------------------------------


def demo(
    keep: bool = typer.Option(False, "--keep", help="Keep the temporary folder to look around afterwards."),
) -> None:
    """Watch sync work: three machines and a hub in a temporary folder, in a few seconds.

    Writes notes on one machine, syncs, finds them by search on another,
    makes a same-line conflict, shows it surfaced and resolved, and cleans up.
    Your own store is not touched.

    Examples:
      anamnesis demo
      anamnesis demo --keep          look around the three machines afterwards
    """
    from anamnesis.app import run_demo  # lazy: --help loads every command module

    run_demo(console(), keep=keep)


# -- the sync step of `anamnesis init` ----------------------------------------------------


class InitSyncStep:
    """`init`'s sync part: the prompt over anamnesis.app.setup_plan (join --peer, first sync, the timer)."""

    def __init__(
        self,
        store: Any,
        peer: str | None,
        peer_name: str | None,
        schedule: bool | None,
        every: str,
        enable: bool = True,
        interactive: bool = False,
    ) -> None:
        from anamnesis.app import plan_join  # lazy: --help loads every command module

        self.store = store
        self.join = plan_join(store, peer, peer_name)
        self.schedule = schedule
        self.every = every
        self.enable = enable
        self.interactive = interactive
        self.planned: list[str] = [self.join.describe()] if self.join else []
        if schedule:
            self.planned.append(f"install a timer that runs `anamnesis sync` every {every}")

    def steps(self) -> list[tuple[str, Callable[[], list[str]]]]:
        """(what it does, do it) in order: init runs them, and names those not reached when one fails
        (a step with no name is not worth naming)."""
        first = (
            f"join {self.join.url} as peer {self.join.name!r} and sync"
            if self.join
            else "sync with the peers, if any"
        )
        # with --no-schedule the last step only says what the first machine does next: nothing to name
        return [(first, self.first_sync), ("the sync timer" if self.schedule is not False else "", self.timer)]

    def first_sync(self) -> list[str]:
        """Join --peer, or sync with the peers there are; the lines for init's report."""
        from anamnesis.app import first_sync  # lazy: --help loads every command module

        return first_sync(self.store, self.join)

    def timer(self) -> list[str]:
        """Install the timer, ask, or say how (a closed stdin is no answer: say how, and the flag)."""
        from anamnesis.app import (  # lazy: --help loads every command module
            first_machine_lines,
            schedule_choice,
            schedule_hint,
            schedule_question,
            setup_schedule,
            timer_installed,
        )

        if self.schedule is None and timer_installed(self.store):
            from anamnesis.sync import schedule_inactive  # lazy: --help loads every command module

            first = first_machine_lines(self.store) if self.join is None else []
            why = schedule_inactive(self.store)
            if why:
                return [f"sync timer installed but not running ({why}): `anamnesis doctor` says what to do", *first]
            return ["sync timer already installed (`anamnesis schedule status`)", *first]
        choice = schedule_choice(self.store, self.schedule, self.interactive)
        notes: list[str] = []
        if choice == "ask":
            answer = ask(schedule_question(self.every), default=True)
            if answer is None:
                choice = "hint"
                notes.append(no_answer("sync timer not installed", "--schedule or --no-schedule"))
            else:
                choice = "install" if answer else "skip"
        if choice == "install":
            notes += setup_schedule(self.store, self.every, activate=self.enable)
        elif choice == "hint":
            notes.append(schedule_hint())
        if self.join is None:
            notes += first_machine_lines(self.store)
        return notes
