"""`anamnesis demo`: sync shown end to end on three throw-away machines and a hub.

Everything happens in a temporary folder with real git and real indexes,
through the same core functions the commands use; the user's own store is
never touched. It takes a few seconds and cleans up after itself.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from anamnesis.base.paths import Store, open_store
from anamnesis.base.text import plural
from anamnesis.search import MARK_END, MARK_START, open_index, search
from anamnesis.store import create_note, init_store, list_conflicts, resolve_note, update_note
from anamnesis.sync import SyncResult, add_peer, sync

if TYPE_CHECKING:
    from rich.console import Console

NOTES = (
    (
        "semantic",
        "Postgres connection pool sizing",
        "The API runs pgbouncer in transaction mode.\n\n"
        "- pool_size = 20 per instance; raising it past 40 starved the replicas\n"
        "- long transactions break prepared statements: keep them short\n",
        ["postgres", "ops"],
    ),
    (
        "procedural",
        "Deploy checklist",
        "1. Run the migrations with `make migrate`\n"
        "2. Deploy to staging and watch the error rate for 10 minutes\n"
        "3. Promote to production\n",
        ["deploy"],
    ),
    (
        "preference",
        "Code style",
        "Prefer small pure functions; type hints everywhere; no print debugging in commits.\n",
        ["style"],
    ),
)


def _machine(root: Path, name: str, hub: Path) -> Store:
    home = root / name
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"machine_id": name}))
    store = open_store(home)
    init_store(store)
    add_peer(store, "hub", str(hub))
    return store


def _sync_line(out: Console, name: str, result: SyncResult) -> None:
    colour = {0: "green", 10: "yellow", 11: "yellow"}.get(result.exit_code, "red")
    out.print(
        f"  [bold]{name}[/bold] $ anamnesis sync  →  [{colour}]{result.outcome}[/{colour}] "
        f"(exit {result.exit_code}): sent {result.sent}, received {plural(result.received, 'commit')}"
        f"  [dim]{result.seconds * 1000:.0f} ms[/dim]"
    )


def run_demo(out: Console, keep: bool = False) -> float:
    """Run the demo, printing as it goes; returns the seconds it took."""
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="anamnesis-demo-"))
    try:
        out.rule("[bold]Anamnesis demo[/bold]: memory that follows you across machines")
        out.print(f"Working in [cyan]{root}[/cyan] — your own store is not touched.\n")

        out.print("[bold]1. Three machines and a hub[/bold]")
        hub = root / "hub.git"
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(hub)], check=True)
        names = ("laptop", "desktop", "server")
        machines = {name: _machine(root, name, hub) for name in names}
        out.print("  hub.git: a bare git repo (for real: on an always-on machine of your tailnet)")
        out.print("  laptop, desktop, server: each with its own store and search index\n")

        out.print("[bold]2. The laptop learns three things[/bold]")
        laptop, desktop, server = (machines[n] for n in names)
        made = [
            create_note(laptop, type=t, title=title, body=body, tags=tags) for t, title, body, tags in NOTES
        ]
        for note in made:
            out.print(f"  + {note.type:<10} [bold]{note.title}[/bold]  [dim]{note.path}[/dim]")
        _sync_line(out, "laptop", sync(laptop))
        out.print()

        out.print("[bold]3. The desktop syncs and finds them by search[/bold]")
        _sync_line(out, "desktop", sync(desktop))
        with open_index(desktop) as index:
            hits = search(index, "pool size")
        out.print('  [bold]desktop[/bold] $ anamnesis search "pool size"')
        for hit in hits[:3]:
            line = Text("    → ")
            line.append(hit.title, style="bold")
            line.append("  ")
            flat = " ".join(hit.snippet.split())
            for i, chunk in enumerate(re.split(f"[{MARK_START}{MARK_END}]", flat)):
                line.append(chunk, style="bold magenta" if i % 2 else "dim")
            out.print(line)
        out.print()

        out.print("[bold]4. Both edit the same line before syncing[/bold]")
        checklist = made[1]
        update_note(laptop, checklist.id, body=checklist.body.replace("10 minutes", "30 minutes"))
        update_note(
            desktop, checklist.id, body=checklist.body.replace("10 minutes", "an hour, and check p99 latency")
        )
        out.print("  laptop:  step 2 says [italic]30 minutes[/italic]")
        out.print("  desktop: step 2 says [italic]an hour, and check p99 latency[/italic]")
        _sync_line(out, "laptop", sync(laptop))
        result = sync(desktop)
        _sync_line(out, "desktop", result)
        text = (desktop.memory / checklist.path).read_text(encoding="utf-8")
        out.print(Panel(Syntax(text, "markdown", word_wrap=True), title=checklist.path, expand=False))
        out.print("  Nothing was dropped and git is not stuck mid-rebase: the note holds both")
        out.print("  versions in standard conflict markers, committed and synced, so any machine")
        out.print("  can resolve it — unrelated notes keep syncing meanwhile.")
        found = list_conflicts(desktop)
        out.print(f"  [bold]desktop[/bold] $ anamnesis conflicts  →  {', '.join(c.title for c in found)}\n")

        out.print("[bold]5. Resolve it on the desktop, keeping both lines[/bold]")
        resolve_note(desktop, checklist.id, "both")
        out.print(f"  [bold]desktop[/bold] $ anamnesis resolve {checklist.id} --both")
        _sync_line(out, "desktop", sync(desktop))
        out.print()

        out.print("[bold]6. The server, which was off all along, catches up[/bold]")
        _sync_line(out, "server", sync(server))
        with open_index(server) as index:
            counts = index.counts()
            conflicted = index.conflicted()
        resolved = (server.memory / checklist.path).read_text(encoding="utf-8")
        body = resolved.split("---", 2)[-1].strip()
        out.print(Panel(Markdown(body), title="server: Deploy checklist", expand=False))
        out.print(f"  server has {plural(counts['notes'], 'note')}, {len(conflicted)} conflicted\n")

        elapsed = time.perf_counter() - started
        out.rule(f"[green]done in {elapsed:.1f} s[/green]")
        out.print("Try it for real:")
        out.print("  [bold]anamnesis init[/bold]                                   first machine (yes to its timer:")
        out.print("                                                   the others' notes pass through it)")
        out.print("  [bold]anamnesis init --peer you@desktop:.anamnesis/memory[/bold]  the others (the command init printed)")
        out.print("  [dim]docs/sync.md: hubs, meshes, Tailscale, conflicts, schedules[/dim]")
        if keep:
            out.print(f"\nKept {root} (ANAMNESIS_HOME={root}/laptop to look around).")
        return elapsed
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
