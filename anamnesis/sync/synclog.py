"""The machine-local sync log: one JSON line per sync, summarised by `anamnesis status`.

It lives in logs/sync.log (never in memory/) and is kept small by rotating
to sync.log.1 past a size limit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypedDict, cast

from anamnesis.base.paths import Store
from anamnesis.base.text import plural
from anamnesis.sync.peers import DAY, ago, list_peers, stale_peers

LOG_NAME = "sync.log"
MAX_BYTES = 512 * 1024
_TAIL_BYTES = 64 * 1024


class UnreachablePeer(TypedDict, total=False):
    """A peer a sync could not sync with, as the log keeps it."""

    peer: str
    detail: str
    status: str  # unreachable, rejected or misconfigured (sync.PeerStatus); older lines lack it


class LogEntry(TypedDict, total=False):
    """One line of the sync log (what `sync` writes; lines read back may lack any key)."""

    at: str
    machine: str
    outcome: str  # SyncResult.outcome, or "failed"
    exit_code: int
    committed: int
    received: int
    sent: int
    changed: int
    conflicts: list[str]  # notes in conflict after the sync among those it changed (SyncResult.conflicts)
    held_back: list[str]  # half-resolved notes it did not commit
    unreachable: list[UnreachablePeer]
    repaired: list[str]
    seconds: float
    error: str  # only when the sync raised


class Summary(TypedDict):
    """The newest entry, the newest that exited 0, the newest with an error or a skipped peer."""

    last_sync: LogEntry | None
    last_ok: LogEntry | None
    last_error: LogEntry | None


def log_path(store: Store) -> Path:
    """Where this machine's sync log is."""
    return store.log_dir / LOG_NAME


def append(store: Store, entry: LogEntry) -> None:
    """Add one entry (a line of JSON); rotate the file when it grows past MAX_BYTES."""
    path = log_path(store)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > MAX_BYTES:
            os.replace(path, path.with_name(LOG_NAME + ".1"))
    except FileNotFoundError:
        pass
    line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def recent(store: Store, limit: int = 20) -> list[LogEntry]:
    """The last `limit` entries, oldest first (unparseable lines are skipped)."""
    path = log_path(store)
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    entries: list[LogEntry] = []
    for line in tail.splitlines()[-limit:]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            entries.append(cast(LogEntry, data))
    return entries


def last_sync_summary(store: Store, *, unfixed: bool = False) -> Summary:
    """The last sync and the last error from the log, for `status` and the dashboard.

    Keys: last_sync (the newest entry or None), last_ok (newest entry that
    exited 0), last_error (newest entry with an error or a skipped peer;
    with `unfixed`, only one newer than last_ok: a clean sync since fixed it).
    """
    entries = recent(store, limit=200)
    last = entries[-1] if entries else None
    ok_at = next((i for i in range(len(entries) - 1, -1, -1) if entries[i].get("exit_code") == 0), None)
    last_ok = entries[ok_at] if ok_at is not None else None
    if unfixed and ok_at is not None:
        entries = entries[ok_at + 1 :]
    try:
        peers: set[str] | None = {peer.name for peer in list_peers(store)}
    except Exception:  # a broken settings.json is reported elsewhere; status must still show the rest
        peers = None
    last_error = None
    for entry in reversed(entries):
        if entry.get("error"):
            last_error = entry
            break
        missed = [u for u in entry.get("unreachable") or [] if peers is None or _peer_of(u) in peers]
        if missed:  # a peer since removed (`peers rm`) is no error to show any more
            last_error = cast(LogEntry, {**entry, "unreachable": missed})
            break
    return {"last_sync": last, "last_ok": last_ok, "last_error": last_error}


def _peer_of(unreachable: object) -> object:
    return unreachable.get("peer") if isinstance(unreachable, dict) else None


def describe_sync(entry: LogEntry) -> str:
    """One line for a log entry: when, outcome, what moved."""
    parts = [ago(str(entry.get("at", "")))]
    if entry.get("error"):
        parts.append(f"failed: {entry['error']}")
    else:
        parts.append(str(entry.get("outcome", "synced")))
        moved = []
        for key in ("committed", "received", "sent"):
            if entry.get(key):
                moved.append(f"{key} {entry[key]}")
        for key, noun in (("conflicts", "in conflict"), ("held_back", "held back")):
            count = len(entry.get(key) or [])  # type: ignore[arg-type]
            if count:
                moved.append(f"{plural(count, 'note')} {noun}")
        if moved:
            parts.append(", ".join(moved))
    return " — ".join(parts)


def sync_log_summary(store: Store) -> dict[str, object]:
    """The lines `anamnesis status` shows: last sync, last error (only while no sync has gone
    through cleanly since), and `sync`, the same as fields for scripts."""
    summary = last_sync_summary(store, unfixed=True)
    out: dict[str, object] = {}
    last, ok, err = summary["last_sync"], summary["last_ok"], summary["last_error"]
    out["last_sync"] = describe_sync(last) if last else "never"
    out["sync"] = {
        "last_at": last.get("at") if last else None,
        "outcome": last.get("outcome") if last else None,
        "exit_code": last.get("exit_code") if last else None,
        "last_ok_at": ok.get("at") if ok else None,
        "last_error_at": err.get("at") if err else None,
    }
    if err:
        detail = err.get("error") or "; ".join(
            f"{u.get('peer')}: {u.get('detail')}" for u in err.get("unreachable", []) if isinstance(u, dict)
        )
        out["last_error"] = f"{ago(str(err.get('at', '')))} — {detail}"
    stale = unreachable_line(store)
    if stale:
        out["unreachable"] = stale
    return out


def unreachable_line(store: Store, older_than: float | None = None) -> str:
    """Peers that no sync has reached for over a day (or `older_than` seconds), with why; '' if none."""
    try:
        stale = stale_peers(store, DAY if older_than is None else older_than)
    except Exception:  # a broken settings.json is reported elsewhere; status must still show the rest
        return ""
    return "; ".join(peer.describe() for peer in stale)
