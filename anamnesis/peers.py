"""The machines (or hub repos) this store syncs with.

A peer is a name and any git URL: `user@host.tailnet.ts.net:.anamnesis/memory`
over ssh, `ssh://host:2222/srv/memory.git`, or a local path. The list lives
in this machine's settings.json (never in memory/, so it never travels);
what sync learnt about each peer (last success, last error, whether it is a
bare hub or another machine's store) lives in state/peers.json.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anamnesis.errors import AnamnesisError, UsageError
from anamnesis.fsutil import atomic_write_text
from anamnesis.paths import Store

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_SCP_RE = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:]+):(?P<path>.*)$")


class PeerNotFound(AnamnesisError):
    """No peer of that name is configured."""

    exit_code = 4


@dataclass
class Peer:
    """A configured peer plus what the last syncs learnt about it."""

    name: str
    url: str
    kind: str = ""  # "hub" (bare: we push to its main) or "machine" (we push to an incoming ref)
    last_ok: str = ""
    last_error: str = ""
    last_error_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "kind": self.kind or "unknown",
            "last_ok": self.last_ok or None,
            "last_error": self.last_error or None,
            "last_error_at": self.last_error_at or None,
        }


def is_local_url(url: str) -> bool:
    """Whether a git URL names a path on this machine (not ssh, not a URL scheme)."""
    if url.startswith("file://"):
        return True
    if "://" in url:
        return False
    if url.startswith(("/", "./", "../", "~")) or url in (".", ".."):
        return True
    match = _SCP_RE.match(url)
    return match is None or "/" in url.split(":", 1)[0]


def normalize_url(url: str) -> str:
    """Local paths become absolute (git runs inside memory/, where relative paths would mislead)."""
    url = url.strip()
    if not url:
        raise UsageError("a peer needs a URL")
    if is_local_url(url) and not url.startswith("file://"):
        return str(Path(url).expanduser().absolute())
    return url


def name_from_url(url: str) -> str:
    """A readable default name: the host for ssh URLs, the folder for paths."""
    if is_local_url(url):
        path = Path(url.removeprefix("file://").rstrip("/"))
        candidate = path.parent.name if path.name in ("memory", "memory.git") else path.name
        candidate = candidate.removesuffix(".git").lstrip(".")
    elif "://" in url:
        host = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1].split(":")[0]
        candidate = host.split(".")[0]
    else:
        match = _SCP_RE.match(url)
        candidate = (match.group("host") if match else url).split(".")[0]
    candidate = re.sub(r"[^A-Za-z0-9._-]+", "-", candidate).strip("-.")
    return candidate[:63] or "peer"


def check_name(name: str) -> str:
    """Peer names become git ref names: letters, digits, '.', '_', '-'."""
    if not NAME_RE.match(name) or ".." in name or name.endswith((".lock", ".")):
        raise UsageError(f"peer name {name!r} must be letters, digits, '.', '_' or '-' (up to 63)")
    return name


def _state_path(store: Store) -> Path:
    return store.state_dir / "peers.json"


def load_state(store: Store) -> dict[str, dict[str, str]]:
    """What sync learnt per peer; an unreadable file is treated as empty (it is only a cache)."""
    try:
        data = json.loads(_state_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(store: Store, state: dict[str, dict[str, str]]) -> None:
    """Write the per-peer state atomically."""
    atomic_write_text(_state_path(store), json.dumps(state, indent=2, sort_keys=True) + "\n", mode=0o600)


def list_peers(store: Store) -> list[Peer]:
    """Configured peers, sorted by name, with what the last syncs learnt."""
    from anamnesis.settings import load_settings

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
                kind=info.get("kind", ""),
                last_ok=info.get("last_ok", ""),
                last_error=info.get("last_error", ""),
                last_error_at=info.get("last_error_at", ""),
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
    from anamnesis.lock import store_lock
    from anamnesis.settings import load_settings, save_settings

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
    from anamnesis.lock import store_lock
    from anamnesis.settings import load_settings, save_settings

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
    import time

    from anamnesis.git import run_git

    if not (store.memory / ".git").exists():
        return
    out = run_git(
        store.memory, "for-each-ref", "--format=%(objectname) %(refname)",
        f"refs/anamnesis/peers/{name}/", f"refs/anamnesis/pushed/{name}", check=False,
    ).stdout
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    commands = ""
    for line in out.splitlines():
        oid, _, ref = line.partition(" ")
        if ref == f"refs/anamnesis/pushed/{name}" or ref.startswith(f"refs/anamnesis/peers/{name}/"):
            kept = f"refs/anamnesis/retired/{name}-{stamp}/{ref.removeprefix('refs/anamnesis/')}"
            commands += f"update {kept} {oid}\ndelete {ref} {oid}\n"
    if commands:
        run_git(store.memory, "update-ref", "--stdin", input=commands)


def record(store: Store, updates: dict[str, dict[str, str]]) -> None:
    """Merge what one sync learnt (kind, last_ok, last_error...) into the per-peer state."""
    if not updates:
        return
    state = load_state(store)
    for name, info in updates.items():
        entry = dict(state.get(name, {}))
        entry.update({k: v for k, v in info.items() if v is not None})
        state[name] = entry
    save_state(store, state)


def probe(url: str, timeout: float = 20.0) -> str | None:
    """None if `url` answers as a git repository, else git's reason (for a warning)."""
    from anamnesis.errors import GitError
    from anamnesis.git import run_git
    from anamnesis.sync import git_reason

    try:
        proc = run_git(Path.cwd(), "ls-remote", "--heads", normalize_url(url), timeout=timeout, check=False)
    except GitError as exc:
        return str(exc)
    return None if proc.returncode == 0 else (git_reason(proc.stderr or proc.stdout) or "no answer")
