"""init's decisions about sync and peers, apart from the prompts (which stay in the CLI).

`anamnesis init` joins `--peer` or runs a first sync, decides whether to
install the sync timer (or ask, or only say how), and offers the machines
found on the LAN: join another machine's memory (this one is new) or add a
machine of this memory as a peer. Each decision is a function here that
returns what to do or ask; the CLI asks the questions and prints the lines.
(The agents' part of init lives in `anamnesis.agents.registry`.)
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from anamnesis.base.errors import AnamnesisError, UsageError
from anamnesis.base.git import stop_on_signals
from anamnesis.base.notes import is_note_path
from anamnesis.base.text import plural
from anamnesis.sync import (
    add_peer,
    check_name,
    list_peers,
    name_for,
    name_from_url,
    normalize_url,
    schedule_plan,
)
from anamnesis.sync import install_schedule as install_timer

if TYPE_CHECKING:
    from anamnesis.base.paths import Store

EVERY = "5m"  # the sync timer init offers
DISCOVERY_SECONDS = 2.0  # how long init listens for other machines


@dataclass(frozen=True)
class JoinPlan:
    """A peer given to `init --peer`: its normalised URL and the name it will have."""

    url: str
    name: str

    def describe(self) -> str:
        return (
            f"join {self.url} as peer {self.name!r}: a store without notes takes its history, "
            "one with notes merges them in"
        )


def plan_join(store: Store, peer: str | None, peer_name: str | None) -> JoinPlan | None:
    """The join `--peer` asks for (None without one); the name defaults to the URL's host or
    folder, made unique among this store's peers (`name_for`), so a second machine on the same
    host never takes the first one's place."""
    if not peer:
        return None
    url = normalize_url(peer)
    return JoinPlan(url, peer_name or name_for(store, url))


def first_sync(store: Store, join: JoinPlan | None) -> list[str]:
    """Join the peer, or sync with the peers already configured (none: nothing); lines for the report."""
    # lazy: sync (merge, transport) runs only when init syncs; `peers discover` and `init --print` skip it
    from anamnesis.app.syncing import sync_store
    from anamnesis.sync import join as join_peer  # lazy: as the line above: only when init syncs

    if join is not None:
        before = next((peer.url for peer in list_peers(store) if peer.name == join.name), join.url)
        with stop_on_signals("init"):
            result = join_peer(store, join.url, join.name)
        moved = f" (it was {before}, no longer synced)" if before != join.url else ""
        lines = [
            f"joined {join.url} as peer {join.name!r}{moved}: received {plural(result.received, 'commit')}, "
            f"{plural(len(result.changed), 'note')}; {result.outcome}"
        ]
        if result.conflicts:  # the memory joined holds notes in conflict: say which, and what to do
            shown = ", ".join(result.conflicts[:3]) + (", …" if len(result.conflicts) > 3 else "")
            lines.append(
                f"{plural(len(result.conflicts), 'note')} in conflict ({shown}): see `anamnesis conflicts`"
            )
        return lines
    if not list_peers(store):
        return []
    with stop_on_signals("init"):
        result = sync_store(store)
    return [f"first sync: {result.outcome} (received {result.received}, sent {result.sent})"]


ScheduleChoice = Literal["install", "ask", "hint", "skip"]


def schedule_choice(store: Store, wanted: bool | None, interactive: bool) -> ScheduleChoice:
    """Whether to install the sync timer: as asked; else ask in a terminal, else only say how.

    The first machine, with no peer yet, is asked too: the others will push
    into it, and only its own syncs integrate what they push (and pass it on).
    """
    if wanted is not None:
        return "install" if wanted else "skip"
    return "ask" if interactive else "hint"


def timer_installed(store: Store) -> bool:
    """Whether this store's sync timer (or LaunchAgent) files are there: a second `init` leaves them be."""
    return all(path.exists() for path in schedule_plan(store).files)


def schedule_question(every: str = EVERY) -> str:
    """The question the CLI asks when `schedule_choice` says "ask"."""
    return f"Sync automatically every {every} (systemd user timer / LaunchAgent)?"


def schedule_hint() -> str:
    """The line for the report when `schedule_choice` says "hint"."""
    return "to sync automatically: `anamnesis schedule install` (every 5 min)"


def setup_schedule(store: Store, every: str = EVERY, activate: bool = True) -> list[str]:
    """Install the sync timer (`activate`: enable it too); lines for the report."""
    outcome = install_timer(store, every, activate=activate)
    done = [f"wrote {path}" for path in outcome.written]
    done.extend(outcome.notes)
    if outcome.activated:
        done.append(f"sync runs every {every}")
    return done


def join_command(store: Store, host: str) -> str:
    """What another machine runs to sync with this one: `anamnesis init --peer USER@HOST:PATH`,
    USER this machine's (the other may be another), PATH relative to the home folder (as ssh reads
    it) when memory/ is inside it."""
    import getpass  # lazy: only the first machine's init names its user

    memory = store.memory.absolute()
    try:
        path = str(memory.relative_to(Path.home().absolute()))
    except ValueError:
        path = str(memory)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid: let ssh take the other machine's own
        user = ""
    at = f"{user}@" if user and "@" not in host else ""
    return f"anamnesis init --peer {at}{host}:{shlex.quote(path)}"


def first_machine_lines(store: Store) -> list[str]:
    """For the first machine (no peer): the command its other machines run to sync through it."""
    if list_peers(store):
        return []
    # lazy: discovery brings zeroconf (~90 ms): only the first machine's init needs the tailnet name
    from anamnesis.sync import reachable_name

    return [
        f"on your other machines, run: {join_command(store, reachable_name())} "
        "(they push their notes here; this machine's syncs integrate them and pass them on)"
    ]


# -- discovery: the machines found on the LAN and the tailnet --


def configured_urls(store: Store) -> dict[str, str]:
    """The peers already configured, by URL."""
    return {p.url: p.name for p in list_peers(store)}


def discovery_report(store: Store, seconds: float, any_store: bool = False) -> dict[str, Any]:
    """LAN peers and Tailscale candidates, each marked with the configured peer it already is."""
    # lazy: discovery brings zeroconf (~90 ms): only the LAN search needs it
    from anamnesis.sync import connectable_url, discover, tailscale_candidates

    configured = configured_urls(store)
    try:
        seen = discover(store, seconds, any_store=any_store)
    except OSError as exc:
        raise AnamnesisError(f"LAN discovery failed: {exc}") from exc
    found = tailscale_candidates()
    lan = []
    for machine in seen:
        peer = machine.to_dict()
        peer["suggested_url"] = connectable_url(machine.url, machine.addresses, found) if machine.url else ""
        peer["configured_as"] = configured.get(peer["url"]) or configured.get(peer["suggested_url"])
        lan.append(peer)
    tailscale = None
    if found is not None:
        tailscale = []
        for cand in found:
            data = cand.to_dict()
            data["configured_as"] = next(
                (
                    name
                    for url, name in configured.items()
                    if cand.name in url or (cand.hostname and f"{cand.hostname}:" in url)
                ),
                None,
            )
            tailscale.append(data)
    return {"lan": lan, "tailscale": tailscale}


@dataclass(frozen=True)
class PeerOffer:
    """A machine found on the LAN that init offers: add it as a peer, or join its memory."""

    action: Literal["add", "join"]  # add: a machine of this memory; join: another memory
    machine: str
    url: str
    name: str

    @property
    def question(self) -> str:
        if self.action == "add":
            return f"Sync with {self.machine} ({self.url}), a machine of this memory?"
        return f"Join the memory of {self.machine} ({self.url})? Your notes here, if any, are merged in."

    @property
    def default(self) -> bool:
        """Adding a machine of the same memory is safe; merging into another memory is asked with no."""
        return self.action == "add"


def discovery_wanted(store: Store) -> bool:
    """Whether init should look for other machines: only while no peer is configured."""
    return not configured_urls(store)


DISCOVER_HINT = (
    "to find your other machines: `anamnesis peers discover` "
    "(they announce themselves while `anamnesis watch` runs)"
)


def peer_offers(report: dict[str, Any]) -> list[PeerOffer]:
    """The LAN machines to offer, in the order found (those without a URL cannot be offered)."""
    offers: list[PeerOffer] = []
    for peer in report["lan"]:
        url, machine = peer.get("suggested_url") or peer.get("url"), peer["machine_id"]
        if url:
            action: Literal["add", "join"] = "add" if peer["same_store"] else "join"
            offers.append(PeerOffer(action, machine, url, _peer_name(machine, url)))
    return offers


def accept_offer(store: Store, offer: PeerOffer) -> str:
    """Do what an accepted offer says; the line for the report."""
    if offer.action == "add":
        add_peer(store, offer.name, offer.url)
        return f"added peer {offer.name!r} → {offer.url} (found on the LAN)"
    from anamnesis.sync import join  # lazy: sync (merge, transport) only when an offer to join is accepted

    result = join(store, offer.url, offer.name)
    return f"joined the memory of {offer.machine} ({offer.url}) as peer {offer.name!r}: {result.outcome}"


def discovery_notes(report: dict[str, Any]) -> list[str]:
    """Lines for the report besides the offers: nobody found; tailnet machines that could be peers."""
    notes: list[str] = []
    if not report["lan"]:
        notes.append(
            "no other machine of yours announced itself on the LAN (they do while `anamnesis watch` runs)"
        )
    for cand in report["tailscale"] or []:
        if cand["same_user"] and not cand.get("configured_as"):
            notes.append(
                f"tailnet machine {cand['name']} could be a peer: "
                f"`anamnesis peers add {cand['hostname'] or 'NAME'} {cand['suggested_url']}`"
            )
    return notes


def _peer_name(machine: str, url: str) -> str:
    try:
        return check_name(machine)
    except UsageError:
        return name_from_url(url)


# -- semantic search: offered by init, with what it costs --------------------------------------

MODEL_DOWNLOAD_MB = 90  # all-MiniLM-L6-v2's weights and tokenizer, fetched once
VECTOR_BYTES = 384 * 2  # one float16 vector a note, in the index
EMBED_NOTES_PER_SECOND = 20.0  # a note a 256-token window, one core: 31-46 with onnxruntime here (docs/search.md); a slower laptop
SemanticChoice = Literal["enable", "ask", "hint", "skip", "missing"]


def semantic_choice(store: Store, wanted: bool | None, interactive: bool) -> SemanticChoice:
    """Whether init turns on search by meaning: as asked; else ask in a terminal, else say how.

    "missing" when the semantic extra is not installed (init then names the install line);
    "skip" when it is on already or the person said no."""
    from anamnesis.search import (
        missing_dependencies,  # lazy: the extra's lookup stays off init's other steps
        settings_of,  # lazy: as the line above
    )

    if wanted is False or settings_of(store)["enabled"]:
        return "skip"
    if missing_dependencies():
        return "missing"
    if wanted:
        return "enable"
    return "ask" if interactive else "hint"


def semantic_cost(store: Store) -> str:
    """What turning it on costs on this machine: the download, the disk, the time to embed the notes."""
    memory = store.memory
    found = memory.rglob("*.md") if memory.is_dir() else ()
    notes = sum(1 for p in found if is_note_path(p.relative_to(memory).as_posix()))
    disk = max(1, round(notes * VECTOR_BYTES / 1e6))
    seconds = notes / EMBED_NOTES_PER_SECOND
    took = f"about {round(seconds / 60)} min" if seconds >= 90 else f"about {max(1, round(seconds))} s"
    return (
        f"a {MODEL_DOWNLOAD_MB} MB model downloaded once, about {disk} MB of vectors on this machine, "
        f"and {took} in the background to embed {plural(notes, 'note')}"
    )


def semantic_question(store: Store) -> str:
    """The question the CLI asks when `semantic_choice` says "ask"."""
    return (
        "Turn on search by meaning (finds notes asked about in other words; runs offline on this "
        f"machine)? It costs {semantic_cost(store)}."
    )


def semantic_hint(store: Store) -> str:
    """The line for init's report when it did not ask."""
    return f"to search by meaning too: `anamnesis semantic enable` ({semantic_cost(store)})"


SEMANTIC_MISSING = (
    "search by meaning is not installed: `./scripts/install --semantic` in your clone adds it, "
    "then `anamnesis semantic enable`"
)


def enable_semantic(store: Store, model_dir: Path | None) -> list[str]:
    """Turn semantic search on and embed in the background; a model that cannot be had is a line
    for the report, not a failed init (the rest of the setup stands)."""
    # lazy: the model code loads only when it is turned on
    from anamnesis.search import SemanticError, start_background_update
    from anamnesis.search import enable_semantic as turn_on  # lazy: as the line above

    try:
        folder = turn_on(store, model_dir)
    except SemanticError as exc:
        return [f"search by meaning not turned on: {exc} (`anamnesis semantic enable` tries again)"]
    started = start_background_update(store)
    return [
        f"search by meaning on (model in {folder}); "
        + ("embedding the notes in the background" if started else "every note is embedded")
    ]
