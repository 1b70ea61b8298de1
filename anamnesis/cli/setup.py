"""Store-level commands: init, status, doctor, reindex, project.

`init` is a sequence of steps; each area (sync, Claude Code, watch) adds its
own step below, and every step honours --print (plan only, write nothing).
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import typer

from anamnesis.base.text import plural
from anamnesis.cli._common import ask, console, counting, get_store, interactive, no_answer, print_json
from anamnesis.cli.semantic import embed_with_progress
from anamnesis.cli.sync import InitSyncStep
from anamnesis.cli.watch import init_discovery_step

if TYPE_CHECKING:
    from anamnesis.app import Installation
    from anamnesis.base.paths import Store


def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Setup")(init)
    app.command(rich_help_panel="Setup")(uninstall)
    app.command(rich_help_panel="Setup")(status)
    app.command(rich_help_panel="Setup")(doctor)
    app.command(rich_help_panel="Setup")(reindex)


def init(
    local_only: bool = typer.Option(
        False,
        "--local-only",
        help="Only create the store on this machine: no peers, no agents, no schedule (--semantic still turns"
        " on search by meaning).",
    ),
    print_only: bool = typer.Option(False, "--print", help="Show what would be done and write nothing."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
    no_claude: bool = typer.Option(
        False, "--no-claude", help="Do not register the MCP server, hooks and permission with Claude Code."
    ),
    agent: list[str] = typer.Option(
        None,
        "--agent",
        help="Set up only this agent (claude, codex, gemini, opencode; repeatable). Default: Claude Code "
        "and every other one found installed.",
    ),
    instructions: bool = typer.Option(
        None,
        "--instructions/--no-instructions",
        help="Add a short memory block to AGENTS.md / GEMINI.md of Codex, Gemini, OpenCode "
        "(default: ask when a terminal is attached, else yes).",
    ),
    peer: str = typer.Option(
        None, "--peer", help="Join an existing memory: any git URL (user@host:.anamnesis/memory, a hub repo, a path)."
    ),
    peer_name: str = typer.Option(None, "--peer-name", help="Name for --peer (default: from the URL's host or folder)."),
    schedule: bool = typer.Option(
        None, "--schedule/--no-schedule", help="Install the sync timer (default: ask when a terminal is attached)."
    ),
    no_enable: bool = typer.Option(
        False, "--no-enable", help="With the timer: write its files but do not activate them (no systemctl/launchctl)."
    ),
    semantic: bool = typer.Option(
        None,
        "--semantic/--no-semantic",
        help="Turn on search by meaning (a 90 MB model, offline) or not (default: ask in a terminal "
        "when the semantic extra is installed, else say how).",
    ),
    model_dir: Path = typer.Option(
        None, "--model-dir", help="With --semantic: a folder already holding the model, instead of downloading it."
    ),
    remove_old_hooks: bool = typer.Option(
        False,
        "--remove-old-hooks",
        help="Remove the hooks anamnesis-memory 0.1.3 left in Claude Code's settings.json, without asking "
        "(default: ask when a terminal is attached, else only warn).",
    ),
    move_old_store: bool = typer.Option(
        False,
        "--move-old-store",
        help="When ~/.anamnesis holds a store of anamnesis-memory 0.1.3: move it to ~/.anamnesis-0.1.3 and "
        "import its notes, without asking (default: ask when a terminal is attached, else refuse).",
    ),
) -> None:
    """Set up Anamnesis on this machine (safe to run again: it only does what is missing).

    Creates ~/.anamnesis (or $ANAMNESIS_HOME): the memory/ git repo, settings.json
    (mode 0600) and the search index; registers the MCP server, hooks and tool
    permission with Claude Code, and the MCP server with Codex CLI, Gemini CLI
    and OpenCode when they are installed (with a backup of each file it
    changes; see docs/agents.md); joins --peer (or offers machines found on
    the network); runs a first sync and offers a sync timer.

    Examples:
      anamnesis init --print                          show every change, write nothing
      anamnesis init --agent codex                    only register with Codex CLI
      anamnesis init --peer me@desk.tailnet.ts.net:.anamnesis/memory
      anamnesis init --local-only                     just the store
      anamnesis init --move-old-store                 a 0.1.3 store here: move it aside, import it
    """
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module
    from anamnesis.base.paths import open_store  # lazy: --help loads every command module
    from anamnesis.store import check_home  # lazy: --help loads every command module

    store = open_store()
    check_home(store)  # a file where the store should be: one line naming it, before any step
    asking = interactive() and not json_out
    plan: list[str] = []
    done: list[str] = []
    warnings: list[str] = []  # said at the end of the plan and of the report
    # -- old store step: a 0.1.3 store at the home is moved aside (asked first) and imported, or refused --
    old_store = _old_store_target(store, move_old_store, print_only or json_out)
    if old_store is not None:
        plan.append(f"move the anamnesis-memory 0.1.3 store at {store.home} to {old_store}")
    # -- end of the old store step --
    if not store.exists():
        plan.append(f"create store at {store.home} (memory/ git repo, settings.json 0600, index.db)")
    # -- agents step (anamnesis/agents): planned (and checked) before anything is written, applied after the store --
    agents_step = None
    if not local_only:
        # lazy: --help loads every command module
        from anamnesis.agents import (
            AgentsStep,
            chosen,
            dropping_old_hooks,
            lacking_instructions,
            old_claude_hooks,
            old_hooks_line,
        )

        agents = chosen(agent, with_claude=not no_claude)
        leftover = old_claude_hooks(agents)
        if leftover is not None:
            if not remove_old_hooks and not (print_only or json_out) and interactive():
                remove_old_hooks = bool(
                    ask(
                        f"{leftover[0]} still holds hooks of anamnesis-memory 0.1.3 ({', '.join(leftover[1])}),"
                        " which run that program against this store. Remove them?",
                        default=True,
                    )
                )
            if remove_old_hooks:
                agents = dropping_old_hooks(agents)
            else:
                warnings.append(old_hooks_line(*leftover))
        if instructions is None:
            instructions = True  # the default with no terminal
            lacking = lacking_instructions(agents)
            if lacking and not print_only and asking:
                answer = ask(
                    "Add a short block to " + ", ".join(str(p) for p in lacking)
                    + " telling those agents to search and write memory?",
                    default=True,
                )
                if answer is None:
                    done.append(no_answer("memory block added (the default)", "--instructions or --no-instructions"))
                else:
                    instructions = answer
        agents_step = AgentsStep(store, agents, with_instructions=instructions, named=bool(agent))
        if print_only and not json_out:
            for line in agents_step.planned(with_diff=True):
                print(line)
        plan.extend(agents_step.planned())
    # -- end of the agents step --
    if old_store is not None:  # old store step
        plan.append(f"import its notes: anamnesis import anamnesis-memory {old_store}")
    # -- sync step (anamnesis/cli/sync.py): join --peer, first sync, offer the schedule --
    sync_step = None
    if not local_only:
        from anamnesis.app import EVERY  # lazy: --help loads every command module

        sync_step = InitSyncStep(
            store, peer, peer_name, schedule, every=EVERY, enable=not no_enable, interactive=asking
        )
        plan.extend(sync_step.planned)
    # -- end of the sync step --
    if print_only:
        _report_init(plan + warnings or ["store exists; nothing to do for the store"], json_out, planned=True)
        return
    from anamnesis.store import init_store  # lazy: --help loads every command module

    steps: list[tuple[str, Callable[[], list[str]]]] = []
    if old_store is not None:  # old store step
        steps.append((f"move the anamnesis-memory 0.1.3 store to {old_store}", lambda: _move_old_store(store, old_store)))
    steps.append((f"create the store at {store.home}", lambda: init_store(store)))
    if agents_step is not None:  # agents step
        steps.append(("set up the agents (MCP server, hooks)", agents_step.apply))
    if old_store is not None:  # old store step
        steps.append((f"import the 0.1.3 notes from {old_store}", lambda: _import_old_store(store, old_store)))
    # -- discovery step (anamnesis/cli/watch.py): offer the machines found on the LAN / tailnet --
    if not local_only and not peer:
        steps.append(("look for your other machines", lambda: init_discovery_step(store, asking)))
    # -- end of the discovery step --
    if sync_step is not None:  # sync step
        steps.extend(sync_step.steps())
    if not local_only or semantic:  # semantic step: offered with what it costs; --local-only only when asked for
        from anamnesis.search import missing_dependencies  # lazy: --help loads every command module

        offered = semantic or (semantic is None and not missing_dependencies())
        steps.append(
            ("turn on search by meaning" if offered else "", lambda: _semantic_step(store, semantic, model_dir, asking))
        )
    for number, (_what, step) in enumerate(steps):
        try:
            done.extend(step())
        except (AnamnesisError, OSError, KeyboardInterrupt) as exc:
            _report_unfinished(done, [what for what, _step in steps[number:] if what], exc, json_out)
            raise
    done.extend(warnings)
    _report_init(done or [f"store at {store.home} is ready; nothing to change"], json_out, planned=False)


def uninstall(
    agent: list[str] = typer.Option(
        None, "--agent", help="Only this agent (claude, codex, gemini, opencode; repeatable); keeps the sync timer."
    ),
    everything: bool = typer.Option(
        False,
        "--everything",
        help="Also remove the program: the virtualenv and the ~/.local/bin link scripts/install made "
        "(installed some other way, it says which command removes it). Your notes are kept.",
    ),
    print_only: bool = typer.Option(False, "--print", help="Show what would be removed and change nothing."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Remove what `anamnesis init` added to your agents, and the sync timer (with --everything, the program too).

    The MCP server, Claude Code's hooks and permission, the memory block in
    AGENTS.md / GEMINI.md: each file goes back to what it was. The sync timer
    or watch service (systemd user units, LaunchAgents) is stopped and deleted,
    and so are an `anamnesis watch` started by hand, a running dashboard
    (`anamnesis web`), MCP server over HTTP (`anamnesis mcp --http`) and
    semantic query server of the store.

    Your notes are kept: ~/.anamnesis/memory is never deleted (nor the rest of
    ~/.anamnesis: this machine's settings, index and logs); `rm -rf ~/.anamnesis`
    deletes it, and every note with it that no other machine holds.

    Examples:
      anamnesis uninstall --print                   show every change, write nothing
      anamnesis uninstall --agent codex             only Codex CLI
      anamnesis uninstall --everything              agents, timer and the program; notes kept
    """
    from anamnesis.agents import AGENTS, chosen, plan_removal, remove_agents, titled  # lazy: as above
    from anamnesis.app import current_installation  # lazy: --help loads every command module
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.base.running import DASHBOARDS, MCP_SERVERS, held_in, holder, stop_holder  # lazy: as above
    from anamnesis.search import server_answering, stop_query_server  # lazy: as above
    from anamnesis.sync import schedule_files, stop_watch, watch_pid  # lazy: as above

    if everything and agent:
        raise UsageError("--everything removes what init added to every agent: leave out --agent")
    store = get_store(require=False)
    dashboards = store.state_dir / DASHBOARDS  # each running `anamnesis web` holds a file there
    mcp_servers = store.state_dir / MCP_SERVERS  # and each `anamnesis mcp --http`
    agents = chosen(agent) if agent else list(AGENTS.values())
    program = current_installation() if everything else None
    kept = _kept(store)
    if print_only:
        plans = plan_removal(store, agents)
        extra = [] if agent else [f"remove {path}" for path in schedule_files(store)]
        if not agent and (pid := watch_pid(store)):
            extra.append(f"stop `anamnesis watch` (pid {pid}), which syncs this store")
        if not agent:
            extra += [f"stop the dashboard (`anamnesis web`, pid {holder(p)})" for p in held_in(dashboards)]
            extra += [f"stop the MCP server (`anamnesis mcp --http`, pid {holder(p)})" for p in held_in(mcp_servers)]
        if not agent and server_answering(store):
            extra.append("stop the semantic query server of this store")
        extra += program.planned() if program else []
        if json_out:
            print_json({"planned": titled(plans) + extra, "kept": kept})
            return
        for line in [*titled(plans, with_diff=True), *extra, *_kept_lines(kept)]:
            print(line)
        return
    done = remove_agents(store, agents, named=bool(agent))
    if not agent:
        done.extend(_uninstall_schedule(store))
        stopped = [("anamnesis watch", stop_watch(store))]  # one started by hand: no more syncing by itself
        stopped += [("anamnesis web", stop_holder(path, wait=10)) for path in held_in(dashboards)]
        stopped += [("anamnesis mcp --http", stop_holder(path, wait=10)) for path in held_in(mcp_servers)]
        for what, outcome in stopped:
            if outcome is not None:
                pid, gone = outcome
                done.append(f"stopped `{what}` (pid {pid})" if gone else f"`{what}` (pid {pid}) did not stop: `kill {pid}`")
        if stop_query_server(store):  # started by a session's hook or a search; nothing would ask it now
            done.append("stopped the semantic query server of this store")
    if json_out:
        # the program goes last: the code running now is part of it
        done.extend(_remove_program(program) if program else [])
        print_json({"done": done, "program": program.to_dict() if program else None, "kept": kept})
        return
    out = console()
    for line in done or ["nothing of Anamnesis was registered with " + ", ".join(a.title for a in agents)]:
        out.print(f"  • {line}", markup=False)
    if program is not None:
        # the program goes last, and only plain print() after it: rich imports modules as it prints
        for line in _remove_program(program):
            print(f"  • {line}")
    for line in _kept_lines(kept):
        print(line)


def _remove_program(program: Installation) -> list[str]:
    """remove_installation, with a failure (a folder we may not delete) told in one line."""
    from anamnesis.app import remove_installation  # lazy: --help loads every command module
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module

    try:
        return remove_installation(program)
    except OSError as exc:
        raise AnamnesisError(f"could not remove {program.prefix}: {exc.strerror or exc}; delete it by hand") from exc


def _kept(store: Store) -> dict[str, str] | None:
    """What uninstall never deletes (the notes), and the command that would."""
    if not store.memory.exists():
        return None
    return {"memory": str(store.memory), "delete_with": f"rm -rf {shlex.quote(str(store.home))}"}


def _kept_lines(kept: dict[str, str] | None) -> list[str]:
    if kept is None:
        return []
    return [
        f"kept {kept['memory']}: your notes, untouched.",
        f"  To delete them too, with this machine's settings, index and logs: {kept['delete_with']}",
    ]


def _old_store_target(store: Store, move: bool, quiet: bool) -> Path | None:
    """Where to move a 0.1.3 store found at the home (None: there is none). Asked in a terminal
    unless `move`; refused (one line: what it is, what to run) when not moved."""
    from anamnesis.base.paths import (  # lazy: --help loads every command module
        old_store_aside,
        old_store_error,
    )

    if not store.is_old():
        return None
    target = old_store_aside(store.home)
    if not move and not quiet and interactive():
        move = bool(
            ask(
                f"{store.home} holds a store of anamnesis-memory 0.1.3, which this program cannot use. "
                f"Move it to {target} and import its notes into a new store here?",
                default=True,
            )
        )
    if not move:
        raise old_store_error(
            store.home,
            f"run `anamnesis init --move-old-store` to move it to {target} and import its notes, or move it"
            " away yourself",
        )
    return target


def _semantic_step(store: Store, wanted: bool | None, model_dir: Path | None, asking: bool) -> list[str]:
    """Offer search by meaning with what it costs; turn it on when wanted (the decisions live in
    setup_plan, the question here)."""
    from anamnesis.app import (  # lazy: --help loads every command module
        SEMANTIC_MISSING,
        enable_semantic,
        semantic_choice,
        semantic_hint,
        semantic_question,
    )

    choice = semantic_choice(store, wanted, asking)
    if choice == "ask":
        answer = ask(semantic_question(store), default=True)
        if answer is None:
            return [no_answer("search by meaning not turned on", "--semantic or --no-semantic")]
        choice = "enable" if answer else "skip"
    if choice == "enable":
        return enable_semantic(store, model_dir)
    if choice == "hint":
        return [semantic_hint(store)]
    if choice == "missing" and wanted:
        return [SEMANTIC_MISSING]
    return []


def _move_old_store(store: Store, target: Path) -> list[str]:
    store.home.rename(target)
    return [f"moved the anamnesis-memory 0.1.3 store at {store.home} to {target}"]


def _import_old_store(store: Store, old: Path) -> list[str]:
    from anamnesis.importers import run_import  # lazy: --help loads every command module

    return [run_import(store, "anamnesis-memory", old).summary()]


def _uninstall_schedule(store: Store) -> list[str]:
    """Remove the sync timer / LaunchAgent that init installed, if there is one."""
    from anamnesis.sync import remove_schedule  # lazy: --help loads every command module

    outcome = remove_schedule(store)
    done = [f"removed {path}" for path in outcome.removed]
    return done + [note for note in outcome.notes if outcome.removed]


def _report_init(lines: list[str], json_out: bool, planned: bool) -> None:
    if json_out:
        print_json({"planned" if planned else "done": lines})
        return
    out = console()
    title = "Would do:" if planned else "Done:"
    out.print(f"[bold]{title}[/bold]")
    for line in lines:
        out.print(f"  • {line}")


def _report_unfinished(done: list[str], left: list[str], exc: BaseException, json_out: bool) -> None:
    """What a failed `init` did and did not do, and that running it again finishes the job
    (every step skips what is there already). The error itself follows on stderr."""
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module
    from anamnesis.sync import NoRepository  # lazy: as above

    args = list(sys.argv[1:])
    if isinstance(exc, NoRepository):
        # the address is what is wrong (a typo, no repo there): not to be run again as it was
        for i, arg in enumerate(args):
            if arg == "--peer" and i + 1 < len(args):
                args[i + 1] = "HOST:PATH"
            elif arg.startswith("--peer="):
                args[i] = "--peer=HOST:PATH"
    again = " ".join(["anamnesis", *(a if a.endswith("HOST:PATH") else shlex.quote(a) for a in args)])
    if json_out:
        code = exc.exit_code if isinstance(exc, AnamnesisError) else 130 if isinstance(exc, KeyboardInterrupt) else 1
        print_json({"done": done, "not_done": left, "error": str(exc) or type(exc).__name__, "exit_code": code,
                    "finish_with": again})
        return
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    out = console()
    if done:
        out.print("[bold]Done:[/bold]")
        for line in done:
            out.print(f"  • {escape(line)}")
    out.print("[bold]Not done[/bold] (stopped by the error below):")
    for line in left:
        out.print(f"  • {escape(line)}")
    out.print(f"[dim]once it is fixed, run `{escape(again)}` again: it does only what is missing[/dim]")


def status(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Show the store: where it is, how many notes, index freshness, last sync.

    Examples:
      anamnesis status
      ANAMNESIS_HOME=/tmp/try anamnesis status --json
    """
    from anamnesis.base.settings import load_settings  # lazy: --help loads every command module
    from anamnesis.search import open_index  # lazy: --help loads every command module
    from anamnesis.sync import incoming_machines  # lazy: --help loads every command module

    store = get_store()
    settings = load_settings(store)
    pushers = incoming_machines(store)
    from anamnesis.app import note_problems  # lazy: --help loads every command module

    with open_index(store) as index:
        report = index.refresh()
        counts = index.counts()
        problems = len(note_problems(store, index)) + counts["skipped"]  # what `doctor` lists
        read_only = index.in_memory
    info: dict[str, object] = {
        "home": str(store.home),
        "memory": str(store.memory),
        "index": str(store.index_path),
        "machine": settings.get("machine_id"),
        "peers": sorted(settings.get("peers", {})),
        "pushes_here": [m.to_dict() for m in pushers],
        "notes": counts["notes"],
        "by_type": counts["by_type"],
        "by_project": counts["by_project"],
        "conflicted": counts["conflicted"],
        "problems": problems,
        "index_updated_now": report.changed,
        "index_in_memory": read_only,
    }
    for extra in _status_extras(store):
        info.update(extra)
    from anamnesis.search import semantic_status  # lazy: --help loads every command module
    from anamnesis.sync import schedule_inactive, schedule_installed  # lazy: as above

    info["semantic"] = semantic_status(store)
    stopped = schedule_inactive(store)
    info["schedule"] = "not running" if stopped else "installed" if schedule_installed(store) else "none"
    if stopped:
        info["schedule_problem"] = stopped
    if json_out:
        print_json(info)
        return
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module
    from rich.table import Table  # lazy: rich stays off --help, which loads every command module

    out = console()
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_row("home", str(store.home))
    table.add_row("machine", str(info["machine"]))
    table.add_row("notes", f"{counts['notes']}  " + ", ".join(f"{k} {v}" for k, v in counts["by_type"].items()))
    table.add_row("projects", str(len([k for k in counts["by_project"] if k != "(global)"])))
    if read_only:
        table.add_row("index", f"[yellow]in memory[/yellow]: {store.index_path} may not be written (read-only store)")
    else:
        table.add_row(
            "index", f"up to date ({time.strftime('%Y-%m-%d %H:%M:%S')}), {plural(report.changed, 'note')} refreshed just now"
        )
    table.add_row("peers", ", ".join(info["peers"]) or ("none" if pushers else "none (local only)"))  # type: ignore[arg-type]
    if pushers:
        table.add_row("pushes here", escape("; ".join(m.describe() for m in pushers)))
    for key in ("last_sync", "last_error", "watch"):
        if info.get(key):
            table.add_row(key.replace("_", " "), escape(str(info[key])))
    if info.get("unreachable"):
        table.add_row("[red]unreachable[/red]", escape(str(info["unreachable"])))
    if stopped:
        table.add_row("schedule", f"[yellow]installed, not running[/yellow]: {escape(stopped)} (`anamnesis doctor`)")
    elif info["schedule"] == "none" and not info.get("watch"):
        table.add_row("schedule", "none: sync by hand, or `anamnesis schedule install`")
    else:
        table.add_row("schedule", "installed (`anamnesis schedule status`)" if info["schedule"] == "installed" else "watch")
    table.add_row("semantic", _semantic_line(info["semantic"]))  # type: ignore[arg-type]
    if counts["conflicted"]:
        table.add_row("[red]conflicts[/red]", f"{plural(counts['conflicted'], 'note')} — run `anamnesis conflicts`")
    if info["problems"]:
        table.add_row("[yellow]problems[/yellow]", f"{plural(problems, 'file')} — run `anamnesis doctor`")
    out.print(table)


def _semantic_line(info: dict[str, object]) -> str:
    if not info["enabled"]:
        return "off (keyword search only)"
    if not info["active"]:
        return "[yellow]unavailable[/yellow]: keyword search only (`anamnesis semantic status`)"
    served = "; queries answered by a running server" if info.get("query_server") else ""
    if not info.get("pending"):
        return f"on: vectors complete ({info['embedded']} of {plural(cast(int, info['notes']), 'note')} embedded){served}"
    then = "embedding now" if info.get("embedding_now") else "`anamnesis semantic update` embeds them"
    return (
        f"on: [yellow]vectors incomplete[/yellow]: {info['embedded']} of {plural(cast(int, info['notes']), 'note')} embedded,"
        f" {info['pending']} pending ({then}){served}"
    )


def _status_extras(store: Store) -> list[dict[str, object]]:
    """Lines other areas contribute to `status` (sync log, watch heartbeat), when present."""
    from anamnesis.sync import sync_log_summary, watch_summary  # lazy: --help loads every command module

    return [sync_log_summary(store), watch_summary(store)]


def doctor(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Find problems and explain them: malformed notes, stale index, git trouble, permissions.

    Also suggests notes that look alike and may need a `supersedes` link.
    Exits 1 when anything needs attention, 0 when all is well (suggestions
    alone do not count).

    Examples:
      anamnesis doctor
      anamnesis doctor --json || echo "needs attention"
    """
    from anamnesis.app import SUGGESTION, run_checks  # lazy: --help loads every command module

    store = get_store(require=False)
    found = run_checks(store)
    findings = [f for f in found if f.level != SUGGESTION]
    suggestions = [f for f in found if f.level == SUGGESTION]
    if json_out:
        print_json(
            {
                "ok": not findings,
                "findings": [f.to_dict() for f in findings],
                "suggestions": [f.to_dict() for f in suggestions],
            }
        )
    else:
        from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

        out = console()
        if not findings:
            out.print("[green]✔[/green] no problems found")
        for finding in findings:
            out.print(f"[yellow]•[/yellow] [bold]{escape(finding.where)}[/bold]: {escape(finding.problem)}")
            if finding.fix:
                out.print(f"    [dim]fix: {escape(finding.fix)}[/dim]")
        if suggestions:
            out.print(f"\n[bold]suggestions[/bold] [dim]({len(suggestions)}; nothing is wrong)[/dim]")
        for finding in suggestions:
            out.print(f"[cyan]∘[/cyan] [bold]{escape(finding.where)}[/bold]: {escape(finding.problem)}")
            if finding.fix:
                out.print(f"    [dim]{escape(finding.fix)}[/dim]")
    if findings:
        raise typer.Exit(1)


def reindex(json_out: bool = typer.Option(False, "--json", help="Report as JSON.")) -> None:
    """Rebuild the search index from the notes on disk (never needed for correctness: it is automatic).

    With semantic search on, also brings every note's vector up to date
    before it returns (vectors of unchanged notes are kept).

    Examples:
      anamnesis reindex
      anamnesis reindex --json                      counts and files that could not be indexed
    """

    from anamnesis.base.lock import store_lock  # lazy: --help loads every command module
    from anamnesis.search import (
        Index,  # lazy: --help loads every command module
        engine_for,  # lazy: --help loads every command module
    )

    store = get_store()
    with store_lock(store, "reindex"):
        index = Index(store)  # not open_index: that would fill a new index only for rebuild to redo it
        with counting("indexing notes", json_out) as progress, index:
            report = index.rebuild(
                progress=progress,
                keep_vectors=True,
            )
    embedded = None
    if engine_for(store) is not None:
        embedded = embed_with_progress(quiet=json_out)
    if json_out:
        data = report.to_dict()
        if embedded is not None:
            data["embedded"] = embedded
        print_json(data)
        return
    from rich.markup import escape  # lazy: rich stays off --help, which loads every command module

    out = console()
    out.print(f"indexed {plural(report.added, 'note')} in {report.seconds:.2f}s")
    if embedded is not None:
        out.print(f"embedded {plural(embedded, 'note')} for semantic search")
    for path, problem in report.problems:
        out.print(f"[yellow]•[/yellow] {escape(path)}: {escape(problem)}")


def project(
    path: Path = typer.Argument(Path("."), help="A folder inside the project (default: here)."),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Print the project key notes are filed under (the same on every machine).

    From a `.anamnesis-project` file in the project, else the git remote URL,
    else (outside any project) the folder name, which only session notes
    captured there use: `new` and the agent's `remember` file notes as global.

    Examples:
      anamnesis project                             github.com/acme/api
      anamnesis project ~/src/api --json
      echo acme/api > .anamnesis-project            pin the key (commit this file)
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.store import detect_project, project_key  # lazy: --help loads every command module

    if not path.exists():
        raise UsageError(f"no such folder: {path}")
    if not path.is_dir():
        path = path.parent  # a file: the project of the folder it is in
    key = project_key(path)
    found = detect_project(path) is not None
    if json_out:
        print_json({"project": key, "path": str(path.resolve()), "in_a_project": found})
        return
    print(key)
    if not found:  # the folder's name stands in: say where each kind of note goes from here
        print(
            f"(no git repo or .anamnesis-project here: `anamnesis new` and the agent's `remember` file notes "
            f"as global; session notes captured here go under {key!r}, this folder's name)",
            file=sys.stderr,
        )
