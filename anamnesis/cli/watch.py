"""Real-time sync commands: `watch`, `peers discover`, and the discovery step of `init`.

Thin adapter over anamnesis.sync.watch and anamnesis.sync.discovery.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

from anamnesis.base.text import plural
from anamnesis.cli._common import ask, console, get_store, no_answer, print_json
from anamnesis.cli.sync import peers_app

if TYPE_CHECKING:
    from anamnesis.base.paths import Store



def register(app: typer.Typer) -> None:
    app.command(rich_help_panel="Sync")(watch)
    peers_app.command("discover")(peers_discover)


def watch(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print only warnings and errors (for services)."),
    debounce: float = typer.Option(
        0.5, "--debounce", metavar="S", help="Seconds of quiet after the last change before syncing."
    ),
    interval: float = typer.Option(
        300.0, "--interval", metavar="S", help="Safety-net sync when nothing synced for this many seconds."
    ),
    no_discovery: bool = typer.Option(
        False,
        "--no-discovery",
        help='Do not announce this machine on the LAN nor listen for peers (or set "discovery": false in settings.json).',
    ),
) -> None:
    """Sync seconds after every change to memory/, until stopped (Ctrl-C or SIGTERM).

    Watches memory/ (editors' temp and swap files are ignored), waits until a
    burst of edits is over, then runs the same sync as `anamnesis sync`. Also
    syncs every --interval seconds as a safety net, and at once when another
    machine of this memory announces on the LAN a change this one lacks.
    Errors (a peer down, a failed sync) are logged to logs/watch.log and
    retried; `anamnesis status` shows whether watch runs and when it last synced.
    Install it as a service with `anamnesis schedule install --watch`.

    Examples:
      anamnesis watch                         until Ctrl-C
      anamnesis watch --interval 60 --quiet   a safety-net sync each minute, log only
      anamnesis watch --no-discovery          no mDNS announcements on this network
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module
    from anamnesis.sync import Watcher, WatchOptions  # lazy: --help loads every command module

    if not 0 < debounce <= 60:
        raise UsageError("--debounce must be between 0 and 60 seconds")
    if not 5 <= interval <= 86400:  # inf, nan and 1e10 too: a sleep that long cannot be timed
        raise UsageError("--interval must be between 5 seconds and a day (86400)")
    store = get_store()
    _setup_logging(store, quiet)
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, request_stop)
    from anamnesis.base.settings import load_settings  # lazy: --help loads every command module

    announce = not no_discovery and load_settings(store).get("discovery", True) is not False
    options = WatchOptions(quiet=debounce, max_delay=max(5.0, 10 * debounce), interval=interval, discovery=announce)
    from anamnesis.app import with_intake  # lazy: --help loads every command module

    Watcher(store, options=with_intake(options)).run(stop)


def _setup_logging(store: Store, quiet: bool) -> None:
    """Everything to logs/watch.log (rotated); progress to stderr unless --quiet."""
    import logging  # lazy: --help loads every command module; logging only for `anamnesis watch`
    import logging.handlers  # lazy: --help loads every command module; logging only for `anamnesis watch`

    from anamnesis.sync import WATCH_LOG_NAME  # lazy: --help loads every command module

    store.log_dir.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    file_handler = logging.handlers.RotatingFileHandler(
        store.log_dir / WATCH_LOG_NAME, maxBytes=1_000_000, backupCount=3, encoding="utf-8"
    )
    file_handler.setFormatter(fmt)
    file_handler.setLevel(logging.INFO)
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    stderr.setLevel(logging.WARNING if quiet else logging.INFO)
    root = logging.getLogger("anamnesis")
    root.setLevel(logging.INFO)
    root.addHandler(file_handler)
    root.addHandler(stderr)
    logging.getLogger("zeroconf").setLevel(logging.ERROR)
    logging.getLogger("zeroconf").addHandler(file_handler)


def peers_discover(
    seconds: float = typer.Option(3.0, "--seconds", "-s", metavar="N", help="How long to listen on the LAN."),
    all_stores: bool = typer.Option(
        False, "--all", help="Also list machines of other memories (what a machine that has not joined yet sees)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Report as JSON."),
) -> None:
    """Find the other machines of this memory: on the LAN (mDNS) and on your tailnet.

    LAN machines announce themselves while they run `anamnesis watch`; only
    those of this memory are listed (same root commit). Tailscale carries no
    multicast, so tailnet machines come from `tailscale status` and are only
    candidates. Nothing is added: use `anamnesis peers add NAME URL`.

    Examples:
      anamnesis peers discover
      anamnesis peers discover --json
    """
    from anamnesis.base.errors import UsageError  # lazy: --help loads every command module

    if not 0 < seconds <= 60:
        raise UsageError("--seconds must be between 0 and 60")
    store = get_store()
    report = discovery_report(store, seconds, any_store=all_stores)
    if json_out:
        print_json(report)
        return
    out = console()
    lan: list[dict[str, Any]] = report["lan"]
    if lan:
        out.print(f"[bold]On the LAN[/bold] ({plural(len(lan), 'machine')}):")
    else:
        out.print(f"[bold]On the LAN[/bold]: no machine of this memory answered within {seconds:g} s")
        out.print("  [dim](machines announce themselves while `anamnesis watch` runs there)[/dim]")
    for peer in lan:
        _print_peer(out, peer)
    candidates = report["tailscale"]
    if candidates is None:
        out.print("[bold]Tailscale[/bold]: not installed or not running")
    elif not candidates:
        out.print("[bold]Tailscale[/bold]: no other machine online")
    else:
        out.print(f"[bold]Tailscale[/bold] candidates ({len(candidates)} online, not checked for this memory):")
        for cand in candidates:
            mine = "" if cand["same_user"] else " [dim](another user's)[/dim]"
            out.print(f"  • {cand['name']} ({cand['os']}){mine}")
            if cand.get("configured_as"):
                out.print(f"    already a peer: {cand['configured_as']}")
            else:
                out.print(f"    [dim]anamnesis peers add {cand['hostname'] or 'NAME'} {cand['suggested_url']}[/dim]")


def _print_peer(out: Any, peer: dict[str, Any]) -> None:
    other = "" if peer["same_store"] else " [yellow](another memory)[/yellow]"
    head = (peer.get("head") or "")[:10] or "empty"
    addresses = ", ".join(peer.get("addresses") or [])
    out.print(f"  • [bold]{peer['machine_id']}[/bold]{other} at {addresses or '?'} — HEAD {head}")
    if peer.get("configured_as"):
        out.print(f"    already a peer: {peer['configured_as']}")
    elif peer.get("url"):
        verb = "anamnesis peers add" if peer["same_store"] else "anamnesis init --peer"
        name = peer["machine_id"] if peer["same_store"] else ""
        url = peer.get("suggested_url") or peer["url"]
        out.print(f"    [dim]{verb} {name + ' ' if name else ''}{url}[/dim]")
        if url != peer["url"]:
            out.print(f"    [dim](it announces {peer['url']}; no ssh alias here knows that name)[/dim]")


def discovery_report(store: Store, seconds: float, any_store: bool = False) -> dict[str, Any]:
    """LAN peers and Tailscale candidates (see anamnesis.app.setup_plan)."""
    from anamnesis.app import discovery_report as report  # lazy: --help loads every command module

    return report(store, seconds, any_store)


def init_discovery_step(
    store: Store,
    interactive: bool,
    confirm: Callable[[str, bool], bool | None] | None = None,
    seconds: float | None = None,
) -> list[str]:
    """`init`'s discovery step: the prompts over anamnesis.setup_plan's offers.

    Only when no peer is configured yet. In a terminal (`interactive`) it
    listens for a moment and asks about each machine found; otherwise it
    only says how to look. Returns the lines for init's report.
    """
    from anamnesis.app import (  # lazy: --help loads every command module
        DISCOVER_HINT,
        DISCOVERY_SECONDS,
        accept_offer,
        discovery_notes,
        discovery_report,
        discovery_wanted,
        peer_offers,
    )
    from anamnesis.base.errors import AnamnesisError  # lazy: --help loads every command module

    if not discovery_wanted(store):
        return []
    if not interactive:
        return [DISCOVER_HINT]
    if confirm is None:
        confirm = ask
    seconds = DISCOVERY_SECONDS if seconds is None else seconds
    console(stderr=True).print(f"[dim]looking for your other machines on the LAN ({seconds:g} s)…[/dim]")
    try:
        report = discovery_report(store, seconds, any_store=True)
    except (AnamnesisError, OSError) as exc:
        return [f"LAN discovery skipped: {exc}"]
    done: list[str] = []
    for offer in peer_offers(report):
        answer = confirm(offer.question, offer.default)
        if answer is None:  # stdin closed: no more questions; what a run without a terminal says instead
            done += [no_answer(f"{offer.machine} not added", "--peer URL"), DISCOVER_HINT]
            break
        if answer:
            done.append(accept_offer(store, offer))
            if offer.action == "join":
                break  # this machine now belongs to that memory: offer no other
    return done + discovery_notes(report)
