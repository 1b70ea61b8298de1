"""The dashboard's link to the sync engine: run a sync, read the sync log and the peers.

Sync lives in its own core modules (`sync`, `synclog`, `peers`); the
dashboard calls their public functions, exactly as `anamnesis sync` and
`anamnesis status` do, and turns results into plain dicts for the views.
"""

from __future__ import annotations

from typing import Any

from anamnesis.app import sync_store
from anamnesis.base.errors import AnamnesisError
from anamnesis.base.paths import Store
from anamnesis.sync import LogEntry, Summary, describe_sync, incoming_machines, last_sync_summary, list_peers


def run_sync(store: Store) -> dict[str, Any]:
    """Run the same sync as `anamnesis sync`; its report as a dict (with `exit_code`, `outcome`)."""
    return sync_store(store).to_dict()


def last_sync(store: Store) -> Summary | None:
    """The sync log's summary: last_sync, last_ok, last_error entries (None if never synced)."""
    try:
        summary = last_sync_summary(store)
    except AnamnesisError as exc:
        return {"last_sync": None, "last_ok": None, "last_error": {"error": str(exc)}}
    return summary if any(summary.values()) else None


def describe_entry(entry: LogEntry | None) -> str:
    """One line for a sync log entry (the same words `anamnesis status` uses)."""
    return describe_sync(entry) if entry else "never"


def peers(store: Store) -> list[dict[str, Any]]:
    """Configured peers with what the last syncs learnt about each (name, url, kind, last_ok, last_error)."""
    return [peer.to_dict() for peer in list_peers(store)]


def pushers(store: Store) -> list[dict[str, Any]]:
    """The machines that push into this store (machine, refs, last_commit, waiting), as `peers list` shows them."""
    return [machine.to_dict() for machine in incoming_machines(store)]
