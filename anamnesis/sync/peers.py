"""The machines (or hub repos) this store syncs with.

A peer is a name and any git URL: `user@host.tailnet.ts.net:.anamnesis/memory`
over ssh, `ssh://host:2222/srv/memory.git`, or a local path. The list lives
in this machine's settings.json (never in memory/, so it never travels);
what sync learnt about each peer (last success, last error, whether it is a
bare hub or another machine's store) lives in state/peers.json.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from anamnesis.base import refs
from anamnesis.base.errors import AnamnesisError, ExitCode, GitError, UsageError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.git import (
    Failure,
    FailureKind,
    GitTimeout,
    explain,
    git_processes_in,
    is_local_url,
    run_git,
    ssh_config_names,
    ssh_target,
    user_ssh_command,
)
from anamnesis.base.lock import store_lock
from anamnesis.base.paths import Store
from anamnesis.base.settings import load_settings, save_settings
from anamnesis.base.text import plural

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


PeerKind = Literal["", "hub", "machine"]
"""hub: a bare repo, we push to its main; machine: another machine's store, we push to an incoming ref
there; '': not known yet."""
_KINDS: tuple[PeerKind, ...] = ("", "hub", "machine")


class PeerState(TypedDict, total=False):
    """What syncs learnt about one peer (state/peers.json); every key may be missing."""

    kind: PeerKind
    last_ok: str
    last_error: str  # the reason, then what to do
    last_hint: str
    last_error_at: str
    last_error_kind: FailureKind  # misconfigured: it will not work until a person acts
    failing_since: str  # the first failure since the last success
    last_push: str  # when a push there last succeeded


class PeerNotFound(AnamnesisError):
    """No peer of that name is configured."""

    exit_code = ExitCode.NOT_FOUND


class NoRepository(AnamnesisError):
    """`peers add` reached the peer and it holds no repository at that path, or the URL names no
    machine (`--force` keeps it)."""

    exit_code = ExitCode.PEER_MISCONFIGURED


@dataclass
class Peer:
    """A configured peer plus what the last syncs learnt about it."""

    name: str
    url: str
    kind: PeerKind = ""
    last_ok: str = ""
    last_error: str = ""  # the reason, then what to do (`last_hint`)
    last_error_at: str = ""
    failing_since: str = ""  # the first failure since the last success ('' while it syncs)
    last_hint: str = ""
    misconfigured: bool = False  # its last failure says it will not work until a person acts

    @property
    def failing(self) -> bool:
        """Whether the last sync that tried it failed (it has not synced since)."""
        return bool(self.last_error) and self.last_error_at >= self.last_ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "kind": self.kind or "unknown",
            "last_ok": self.last_ok or None,
            "last_error": self.last_error or None,
            "last_error_at": self.last_error_at or None,
            "failing_since": self.failing_since or None,
            "hint": self.last_hint or None,
            "misconfigured": self.misconfigured and self.failing,
        }


_SCP_WITH_PORT = re.compile(r"^([^@/:\s]+@)?([^@/:\s]+):(\d{1,5})(/.*)$")


_COMMAND_HELPER = re.compile(r"(?i)(ext|fd)::")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]*@)?([^/:]*)")


def normalize_url(url: str) -> str:
    """Local paths become absolute (git runs inside memory/, where relative paths would mislead)."""
    url = url.strip()
    if not url:
        raise UsageError("a peer needs a URL")
    scp_port = _SCP_WITH_PORT.match(url) if "://" not in url else None
    if scp_port:  # ssh would take the port for the start of the path and knock on port 22
        user, host, port, path = scp_port.groups()
        fixed = f"ssh://{user or ''}{host}:{port}/{path.lstrip('/')}"
        raise UsageError(
            f"{url}: an address written user@host:path cannot carry a port ({port} would be read as the start of"
            f" the path, on ssh's port 22); write it as {fixed}"
        )
    helper = _COMMAND_HELPER.match(url)
    if helper:  # git would run a command of the URL's choosing, on every sync
        raise UsageError(
            f"{url}: an address starting {helper.group(1)}:: runs a command rather than naming a repo; give an ssh address"
            " (user@host:path or ssh://host/path) or a folder"
        )
    if is_local_url(url) and not url.startswith("file://"):
        return str(Path(url).expanduser().absolute())
    scheme = _SCHEME.match(url)
    if scheme and scheme.group(1).lower() != "file" and not scheme.group(2):
        raise UsageError(f"{url}: the address names no host; write it as ssh://HOST/path or user@HOST:path")
    return url


def same_store_as(store: Store, url: str, name: str) -> str | None:
    """The other configured peer whose URL names the same repo as `url` (`m1:~/.anamnesis/memory`
    and `m1:.anamnesis/memory`, a folder given two ways), or None: syncing it twice is no harm,
    but two names for one machine muddle every report."""
    def key(address: str) -> tuple[str, str, str]:
        if is_local_url(address):
            return ("", "", str(Path(address.removeprefix("file://")).expanduser().resolve()).rstrip("/"))
        user, host, path = _url_parts(address)
        return (user, host.lower(), path.removeprefix("~/").removeprefix("./").rstrip("/").removesuffix(".git"))

    try:
        wanted = key(normalize_url(url))
        return next((p.name for p in list_peers(store) if p.name != name and key(p.url) == wanted), None)
    except (ValueError, AnamnesisError):
        return None


def name_from_url(url: str) -> str:
    """A readable default name: the host for ssh URLs (its first label; an IP address whole), the
    folder for paths."""
    if is_local_url(url):
        candidate = _folder_name(url.removeprefix("file://"))
    else:
        _user, host, _path = _url_parts(url)
        address = _address(host)
        candidate = host.split(".")[0] if address is None else host if address.version == 4 else f"ip6-{host}"
    return _as_name(candidate) or "peer"


def name_for(store: Store, url: str) -> str:
    """The name a peer at `url` gets when none is given: `name_from_url`, unless another peer of
    this store has that name (three machines on one host; two Tailscale addresses): then the URL's
    user or folder goes with it, then a number. A peer already at `url` keeps its name."""
    url = normalize_url(url)
    taken = {peer.name: peer.url for peer in list_peers(store)}
    first = name_from_url(url)
    candidates = [first]
    if not is_local_url(url):
        user, _host, path = _url_parts(url)
        candidates += [_as_name(f"{user}-{first}") if user else "", _as_name(f"{first}-{_folder_name(path)}")]
    candidates += [_as_name(f"{first}-{number}") for number in range(2, 100)]
    return next((name for name in candidates if name and taken.get(name, url) == url), first)


def _url_parts(url: str) -> tuple[str, str, str]:
    """(user, host, path) of an ssh URL, `ssh://user@host:port/path` or scp-like `user@host:path`."""
    target, path = ssh_target(url)
    user, _at, host = target.split(" ")[-1].rpartition("@")
    return user, host.strip("[]"), path


def _folder_name(path: str) -> str:
    """The folder a store's memory/ (or a hub) is in names it: `/home/me/machine-a/memory` → machine-a."""
    folder = Path(path.rstrip("/"))
    candidate = folder.parent.name if folder.name in ("memory", "memory.git") else folder.name
    return candidate.removesuffix(".git").lstrip(".")


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _as_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:63].rstrip("-.")


def check_name(name: str) -> str:
    """Peer names become git ref names: letters, digits, '.', '_', '-'."""
    if not NAME_RE.match(name) or ".." in name or name.endswith((".lock", ".")):
        raise UsageError(f"peer name {name!r} must be letters, digits, '.', '_' or '-' (up to 63)")
    return name


def _state_path(store: Store) -> Path:
    return store.state_dir / "peers.json"


def load_state(store: Store) -> dict[str, PeerState]:
    """What sync learnt per peer; an unreadable file is treated as empty (it is only a cache)."""
    try:
        data = json.loads(_state_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(store: Store, state: dict[str, PeerState]) -> None:
    """Write the per-peer state atomically."""
    atomic_write_text(_state_path(store), json.dumps(state, indent=2, sort_keys=True) + "\n", mode=0o600)


def list_peers(store: Store) -> list[Peer]:
    """Configured peers, sorted by name, with what the last syncs learnt."""
    config = load_settings(store).get("peers") or {}
    state = load_state(store)
    peers: list[Peer] = []
    for name in sorted(config):
        entry = config[name]
        url = entry.get("url", "") if isinstance(entry, dict) else str(entry)
        info = state.get(name, {})
        peers.append(
            Peer(
                name=name,
                url=url,
                kind=next((k for k in _KINDS if k == info.get("kind")), ""),
                last_ok=info.get("last_ok", ""),
                last_error=info.get("last_error", ""),
                last_error_at=info.get("last_error_at", ""),
                failing_since=info.get("failing_since", ""),
                last_hint=info.get("last_hint", ""),
                misconfigured=info.get("last_error_kind") == "misconfigured",
            )
        )
    return peers


def get_peer(store: Store, name: str) -> Peer:
    """One configured peer by name."""
    for peer in list_peers(store):
        if peer.name == name:
            return peer
    raise PeerNotFound(f"no peer named {name!r} (see `anamnesis peers list`)")


def add_peer(store: Store, name: str, url: str) -> tuple[Peer, bool]:
    """Add (or re-point) a peer; (peer, changed). Refuses the store's own repo."""
    check_name(name)
    url = normalize_url(url)
    local = is_local_url(url) and not url.startswith("file://")
    if local and Path(url).resolve() in (store.memory.resolve(), store.home.resolve()):
        raise UsageError("a store cannot be its own peer")
    with store_lock(store, "peers"):
        settings = load_settings(store)
        peers = dict(settings.get("peers") or {})
        current = peers.get(name)
        if isinstance(current, dict) and current.get("url") == url:
            return get_peer(store, name), False
        peers[name] = {"url": url}
        settings["peers"] = peers
        save_settings(store, settings)
        state = load_state(store)
        if name in state:
            state.pop(name)  # a new URL may be a different kind of repo
            save_state(store, state)
        if current is not None:
            retire_refs(store, name)
    return get_peer(store, name), True


def remove_peer(store: Store, name: str) -> Peer:
    """Forget a peer (what was already synced stays; nothing is deleted anywhere)."""
    peer = get_peer(store, name)
    with store_lock(store, "peers"):
        settings = load_settings(store)
        peers = dict(settings.get("peers") or {})
        peers.pop(name, None)
        settings["peers"] = peers
        save_settings(store, settings)
        state = load_state(store)
        if state.pop(name, None) is not None:
            save_state(store, state)
        retire_refs(store, name)
    return peer


def retire_refs(store: Store, name: str) -> None:
    """Set aside what sync recorded about a peer's old URL (its branches, what was pushed there).

    Left in place, they would make sync believe a new repo under the same name
    already has everything and skip the push. They move to
    refs/anamnesis/retired/..., where they still mark that history as shared.
    """
    if not (store.memory / ".git").exists():
        return
    out = run_git(
        store.memory,
        "for-each-ref",
        "--format=%(objectname) %(refname)",
        refs.peer_branches(name),
        refs.pushed(name),
        check=False,
    ).stdout
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    commands = ""
    for line in out.splitlines():
        oid, _, ref = line.partition(" ")
        if ref == refs.pushed(name) or ref.startswith(refs.peer_branches(name)):
            commands += f"update {refs.retired(name, stamp, ref)} {oid}\ndelete {ref} {oid}\n"
    if commands:
        run_git(store.memory, "update-ref", "--stdin", input=commands)


def record(store: Store, updates: dict[str, PeerState]) -> None:
    """Merge what one sync learnt (kind, last_ok, last_error...) into the per-peer state.

    Also keeps `failing_since`: the first failure after the last success,
    which tells a peer that is off for an hour from one gone for a day.
    """
    if not updates:
        return
    state = load_state(store)
    for name, info in updates.items():
        entry: PeerState = {**state.get(name, {}), **info}
        if info.get("last_ok"):
            entry.pop("failing_since", None)
            entry.pop("last_error_kind", None)
        elif info.get("last_error_at") and not entry.get("failing_since"):
            entry["failing_since"] = info["last_error_at"]
        state[name] = entry
    save_state(store, state)


# -- machines that push here ------------------------------------------------------------------


@dataclass(frozen=True)
class IncomingMachine:
    """A machine that pushes into this store (this one is its peer), known by the refs it pushes
    to, refs/anamnesis/incoming/<machine>...: none of them is in settings.json here."""

    machine: str
    refs: tuple[str, ...]  # their short names: incoming/<machine>[-<commit>]
    last_commit: str  # when the newest commit it pushed here was made (ISO, UTC)
    waiting: int  # commits it pushed that main lacks: the next sync here integrates them

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "refs": list(self.refs),
            "last_commit": self.last_commit or None,
            "waiting": self.waiting,
        }

    def describe(self) -> str:
        """One line: who, when, and what waits."""
        waits = f", {plural(self.waiting, 'commit')} waiting to be integrated" if self.waiting else ""
        return f"{self.machine} (newest commit {ago(self.last_commit)}{waits})"


def incoming_machines(store: Store) -> list[IncomingMachine]:
    """The machines that push into this store, by name, with what of theirs main lacks.

    [] when memory/ is not a repository (yet). A machine's work "waits"
    from its push until the next sync here (the timer, `watch`, or by hand).
    """
    if not (store.memory / ".git").exists():
        return []
    out = run_git(
        store.memory,
        "for-each-ref",
        "--format=%(refname) %(objectname) %(committerdate:unix)",
        refs.INCOMING,
        check=False,
    ).stdout
    grouped: dict[str, list[tuple[str, str, int]]] = {}
    for line in out.splitlines():
        ref, oid, when = [*line.split(" "), "", ""][:3]
        grouped.setdefault(refs.incoming_machine(ref), []).append((refs.short(ref), oid, int(when or 0)))
    found = []
    for machine, rows in sorted(grouped.items()):
        proc = run_git(
            store.memory, "rev-list", "--count", *(oid for _, oid, _ in rows), "--not", "HEAD", check=False
        )
        newest = max(when for _, _, when in rows)
        stamp = dt.datetime.fromtimestamp(newest, dt.UTC).isoformat().replace("+00:00", "Z") if newest else ""
        waiting = int(proc.stdout.strip() or 0) if proc.returncode == 0 else 0
        found.append(IncomingMachine(machine, tuple(name for name, _, _ in rows), stamp, waiting))
    return found


UNTAKEN_SECONDS = (
    3600.0  # a machine's store that leaves our push out of its main this long syncs by itself no more
)


@dataclass(frozen=True)
class UntakenPush:
    """A peer's store (kind machine) whose main, fetched since, still lacks what this machine pushed there."""

    peer: Peer
    pushed_at: str


def untaken_pushes(store: Store, older_than: float = UNTAKEN_SECONDS) -> list[UntakenPush]:
    """Peers that are machines' stores and have not integrated what this machine pushed into them,
    although their main was fetched more than `older_than` seconds after that push.

    Such a machine integrates what others push only when it syncs itself:
    the evidence here is that nothing there does (no timer, no `watch`).
    """
    state = load_state(store)
    found = []
    for peer in list_peers(store):
        pushed_at = state.get(peer.name, {}).get("last_push", "")
        if peer.kind != "machine" or not pushed_at or not peer.last_ok:
            continue
        since_push, since_fetch = _age(pushed_at), _age(peer.last_ok)
        if since_push is None or since_fetch is None or since_push - since_fetch < older_than:
            continue
        proc = run_git(
            store.memory,
            "merge-base",
            "--is-ancestor",
            refs.pushed(peer.name),
            refs.peer_main(peer.name),
            check=False,
        )
        if proc.returncode == 1:  # 0: taken in; 128: a ref is missing, nothing to tell
            found.append(UntakenPush(peer, pushed_at))
    return found


def probe(url: str, timeout: float = 20.0, repo: Path | None = None) -> Failure | None:
    """None if `url` answers as a git repository, else why not and what to do, and whether waiting
    can fix it (`Failure.kind`: a peer that is off is an outage, one with no repository there is not).

    `repo` (the store's memory/) is where git reads core.sshCommand from.
    """
    url = normalize_url(url)
    where = repo if repo is not None and repo.is_dir() else Path.cwd()
    try:
        proc = run_git(where, "ls-remote", "--heads", url, timeout=timeout, check=False)
    except GitTimeout as exc:
        return reach_failure("", url, user_ssh_command(where), stopped=str(exc))
    except GitError as exc:
        return Failure(str(exc))
    if proc.returncode == 0:
        return None
    failure = reach_failure(proc.stderr or proc.stdout, url, user_ssh_command(where))
    return failure if failure.reason else Failure("no answer")


def reach_failure(said: str, url: str, ssh_command: str, stopped: str = "") -> Failure:
    """Why a git that talked to the peer at `url` failed (`base.git.explain`), where a host name
    that does not resolve and is a letter off a name this machine knows is called the typo it is:
    it will never work by waiting."""
    failure = explain(said, url, ssh_command, stopped=stopped)
    if not failure.unresolved:
        return failure
    host = failure.unresolved.lower().rstrip(".")
    known = known_machine_names(ssh_command)
    if known is None or host in known:
        return failure  # tailscale is down, or a name this machine knows: an outage
    close = sorted((_typo_distance(host, name), name) for name in known)
    if not close or close[0][0] > (1 if len(host) < 8 else 2):
        return failure
    meant = close[0][1]
    fixed = url.replace(failure.unresolved, meant, 1) if failure.unresolved in url else "URL"
    return Failure(
        failure.reason,
        f"no machine is called {host}: did you mean {meant} (named in {known[meant]})? "
        f"give the right URL with `anamnesis peers add NAME {fixed}`",
        "misconfigured",
        bad_url=True,
        unresolved=failure.unresolved,
    )


def known_machine_names(ssh_command: str = "ssh") -> dict[str, str] | None:
    """The names this machine knows other machines by (`ssh_config_names`, and the machines of the
    tailnet, online or not), each with where it is named; None when tailscale is installed but not
    running: then any tailnet name fails to resolve, and a name that does cannot be told from a typo."""
    # lazy: discovery (mDNS, zeroconf) stays off every sync that has no host name to check
    from anamnesis.sync.discovery import tailscale_status

    names = ssh_config_names(ssh_command)
    status = tailscale_status(timeout=3.0)
    if status is None:
        return None if shutil.which("tailscale") else names
    peers = status.get("Peer")
    for node in [status.get("Self"), *(peers.values() if isinstance(peers, dict) else ())]:
        if not isinstance(node, dict):
            continue
        dns = str(node.get("DNSName") or "").rstrip(".").lower()
        for name in (str(node.get("HostName") or "").lower(), dns, dns.split(".", 1)[0]):
            if name:
                names.setdefault(name, "`tailscale status`")
    return names


def _typo_distance(typed: str, name: str) -> int:
    """Edits (a letter put in, left out, changed, or two swapped) from `name` to `typed`; names
    that differ in a digit are other machines of a numbered set (`node1`, `node2`), never a typo."""
    changed = [(a, b) for a, b in zip(typed, name, strict=False) if a != b] if len(typed) == len(name) else []
    if len(changed) == 1 and changed[0][0].isdigit() and changed[0][1].isdigit():
        return 99
    if len(typed) != len(name) and re.sub(r"\d", "", typed) == re.sub(r"\d", "", name):
        return 99
    rows = [list(range(len(name) + 1))]
    for i, a in enumerate(typed, 1):
        row = [i]
        for j, b in enumerate(name, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (a != b))
            if i > 1 and j > 1 and a == name[j - 2] and typed[i - 2] == b:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]


# -- peers in trouble: unreachable for long, or a lock file that blocks every push ------------

DAY = 86400.0
STALE_LOCK_SECONDS = 300.0  # a ref lock older than this, with no git working there, was left by a killed git
EXIT_STALE = ExitCode.STALE_PEER  # `sync --fail-after`: a peer has been unreachable for longer than that
GONE_FOR_GOOD = 3 * DAY  # failing this long, `doctor` suggests forgetting the peer


@dataclass(frozen=True)
class StalePeer:
    """A peer that no sync has reached since `since` (the first failure after its last success)."""

    name: str
    url: str
    since: str
    last_ok: str
    last_error: str
    hint: str = ""

    def describe(self) -> str:
        """One line: which peer, since when, why."""
        was = f"last synced {self.last_ok}" if self.last_ok else "never synced"
        return f"{self.name}: unreachable since {ago(self.since)}, {was} — {self.last_error}"


def ago(stamp: str) -> str:
    """An ISO time stamp followed by how long ago it was: `2025-03-02T10:15:00Z (3 h ago)`."""
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return stamp
    seconds = int((dt.datetime.now(dt.UTC) - when).total_seconds())
    if seconds < 90:
        text = f"{max(seconds, 0)} s ago"
    elif seconds < 5400:
        text = f"{seconds // 60} min ago"
    elif seconds < 172800:
        text = f"{seconds // 3600} h ago"
    else:
        text = f"{seconds // 86400} days ago"
    return f"{stamp} ({text})"


def _age(stamp: str) -> float | None:
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (dt.datetime.now(dt.UTC) - when).total_seconds()


def stale_peers(store: Store, older_than: float = DAY, names: list[str] | None = None) -> list[StalePeer]:
    """Peers (of `names`, or all) that every sync has failed to reach for more than `older_than` seconds."""
    found = []
    for peer in list_peers(store):
        if names is not None and peer.name not in names:
            continue
        age = _age(peer.failing_since) if peer.failing_since else None
        if age is not None and age > older_than:
            found.append(
                StalePeer(
                    peer.name, peer.url, peer.failing_since, peer.last_ok, peer.last_error, peer.last_hint
                )
            )
    return found


def _local_git_dir(url: str) -> Path | None:
    """The git directory of a peer on a local path (bare hub or another store), if it is one."""
    if not is_local_url(url):
        return None
    path = Path(url.removeprefix("file://")).expanduser()
    if (path / ".git").is_dir():
        return path / ".git"
    return path if (path / "HEAD").is_file() and (path / "refs").is_dir() else None


def _work_tree_of(git_dir: Path) -> Path:
    """The folder git processes of a local peer work in: a store's, above its .git; a bare hub itself."""
    return git_dir.parent if git_dir.name == ".git" else git_dir


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * DAY:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / DAY:.0f} days"


def lock_hint(url: str, lock: str) -> str:
    """What to do about `lock`, a lock file in the peer at `url` that made a push fail."""
    git_dir = _local_git_dir(url)
    if git_dir is None:
        target = ssh_target(url)[0] or "the peer"
        return (
            f"if no git is working on {target.split(' ')[-1]} now, the file was left by a git that was killed: "
            f"remove it with `ssh {target} rm {shlex.quote(lock)}`, then run `anamnesis sync`"
        )
    repo = _work_tree_of(git_dir)
    try:
        age = time.time() - Path(lock).stat().st_mtime
    except OSError:
        return "the lock file is gone now; the next sync pushes"
    pids = git_processes_in(repo)
    if pids:
        return (
            f"a git process (pid {', '.join(map(str, pids))}) is working in {repo}; the next sync tries again"
        )
    if age >= STALE_LOCK_SECONDS:
        return (
            f"it was left by a git that was killed: it is {_duration(age)} old and no git process is working "
            f"in {repo}; remove it with `rm {shlex.quote(lock)}`, then run `anamnesis sync`"
        )
    return (
        f"no git process is working in {repo} now; if the file is still there in a few minutes, "
        f"it was left by a git that was killed: remove it with `rm {shlex.quote(lock)}`"
    )


PUSH_LOCK_NAME = "anamnesis-push.lock"  # in a local peer's git directory: see `push_lock_path`
LEFT_LOCK_SECONDS = 1.0  # git holds a ref lock for milliseconds: one that stays this long was left


def push_lock_path(url: str) -> Path | None:
    """The file every push from this host to the peer on a local path at `url` locks, or None (ssh).

    A git that is killed while it pushes to a path (a power cut takes the
    whole process group, `git receive-pack` with it) leaves its ref lock in
    the peer, and every later push there fails until the lock is gone. Over
    ssh the remote git is not killed with ours and removes its own lock.
    """
    git_dir = _local_git_dir(url)
    return None if git_dir is None else git_dir / PUSH_LOCK_NAME


def remove_left_lock(url: str, lock: str) -> bool:
    """Remove `lock`, a lock file in the peer on a local path at `url`, if a killed git left it.

    Only with the peer's push lock held (`push_lock_path`): then no push from
    this host is under way there. The file must also stay the same file for
    a second by this machine's clock (a git anywhere holds a ref lock for
    milliseconds; a file's time on a shared disk may come from another
    clock) with no git process working in that repository.
    """
    git_dir = _local_git_dir(url)
    if git_dir is None or not lock.endswith(".lock"):
        return False
    path = Path(lock)
    repo = _work_tree_of(git_dir)
    try:
        if not path.parent.resolve().is_relative_to(git_dir.resolve()):
            return False
        first = _identity(path)
        time.sleep(LEFT_LOCK_SECONDS)
        if _identity(path) != first or git_processes_in(repo):
            return False
        path.unlink()
    except FileNotFoundError:
        return True  # gone: whoever held it is done
    except OSError:
        return False
    return True


def _identity(path: Path) -> tuple[int, int, int, int]:
    st = path.lstat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def peer_lock_files(store: Store) -> list[tuple[Peer, Path, float]]:
    """(peer, lock file, age in seconds) of ref lock files in peers on local paths (a hub on a disk...)."""
    found = []
    for peer in list_peers(store):
        git_dir = _local_git_dir(peer.url)
        if git_dir is None:
            continue
        locks = [git_dir / name for name in ("packed-refs.lock", "HEAD.lock") if (git_dir / name).exists()]
        if (git_dir / "refs").is_dir():
            locks.extend(sorted((git_dir / "refs").rglob("*.lock")))
        for lock in locks:
            try:
                found.append((peer, lock, time.time() - lock.stat().st_mtime))
            except OSError:
                continue
    return found


@dataclass(frozen=True)
class PeerProblem:
    """A problem with a peer, in the form of a doctor finding: where, what, how to fix it."""

    where: str
    problem: str
    fix: str


def peer_problems(store: Store, older_than: float = DAY) -> list[PeerProblem]:
    """What `anamnesis doctor` reports about peers.

    - a peer that no sync has reached for more than `older_than` seconds,
      with the last reason and what to do (and, after days, `peers rm`);
    - a peer whose last answer says it will never work as set up (no
      repository there, a refused key...), at once;
    - a lock file in a peer on a local path (a hub on a mounted disk) that
      is older than a few minutes with no git process working there: every
      push to that peer fails until it is removed.
    """
    problems = []
    stale = {item.name: item for item in stale_peers(store, older_than)}
    for peer in list_peers(store):
        if not peer.failing or not (peer.misconfigured or peer.name in stale):
            continue
        reason = peer.last_error.removesuffix(f" — {peer.last_hint}") if peer.last_hint else peer.last_error
        fix = peer.last_hint or f"check that it is on and reachable, then `anamnesis sync --peer {peer.name}`"
        age = _age(peer.failing_since) if peer.failing_since else None
        if peer.misconfigured:  # it will not work by itself: said at once, not after a day
            problem = f"its setting does not work (every sync fails until it is fixed): {reason}"
            fix += f"; or, if that machine is gone, forget it: `anamnesis peers rm {peer.name}`"
        else:
            problem = f"no sync has reached it since {ago(peer.failing_since)}: {reason}"
            if age is not None and age > GONE_FOR_GOOD:
                fix += (
                    f"; gone for {_duration(age)}: if that machine is gone for good, forget it: "
                    f"`anamnesis peers rm {peer.name}`"
                )
        problems.append(PeerProblem(f"peer {peer.name} ({peer.url})", problem, fix))
    for peer, lock, age in peer_lock_files(store):
        if age < STALE_LOCK_SECONDS:
            continue
        git_dir = _local_git_dir(peer.url)
        repo = _work_tree_of(git_dir) if git_dir is not None else lock.parent
        if git_processes_in(repo):
            continue
        problems.append(
            PeerProblem(
                str(lock),
                f"a lock file in peer {peer.name}'s repository, {_duration(age)} old, with no git process "
                "working there: left by a git that was killed, it makes every push to that peer fail "
                '("cannot lock ref")',
                f"rm {shlex.quote(str(lock))}",
            )
        )
    return problems
