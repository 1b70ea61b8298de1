"""This machine's settings (settings.json, mode 0600): never synced.

Holds the machine id, the peers to sync with and the knobs of the hooks.
Unknown keys are kept so newer versions can add fields without losing them.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from anamnesis.base.errors import AnamnesisError
from anamnesis.base.fsutil import atomic_write_text
from anamnesis.base.paths import Store

DEFAULTS: dict[str, Any] = {
    "machine_id": "",
    "peers": {},
    "inject_budget": 6000,
    "recall": {"enabled": True, "budget": 2000, "min_score": 2.0, "max_notes": 3},
    "capture": {"enabled": True},
    "mirror": {"claude-auto-memory": []},  # folders whose Claude Code auto-memory `sync` imports first
    # the opt-in model-written session summary (anamnesis/agents/summarize_model.py): off unless enabled
    "summary": {
        "enabled": False,
        "provider": "claude",
        "model": "",
        "claude_bin": "",
        "base_url": "",
        "key_env": "ANTHROPIC_API_KEY",
        "key_file": "",
        "timeout": 120,
    },
}


def new_machine_id() -> str:
    """A readable, unique machine name: hostname plus a short random suffix."""
    import socket  # lazy: only a new machine id needs it; keeps socket off the hooks and search

    host = socket.gethostname().split(".")[0].lower() or "machine"
    host = "".join(c if c.isalnum() or c == "-" else "-" for c in host)[:24]
    return f"{host}-{secrets.token_hex(2)}"


_FIX = "fix it by hand (this machine's own settings: its machine id, its peers); nothing was changed"


def load_settings(store: Store) -> dict[str, Any]:
    """Settings merged over the defaults; a broken file is an error, not a reset."""
    data: dict[str, Any] = {}
    if store.settings_path.exists():
        try:
            data = json.loads(store.settings_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise AnamnesisError(f"cannot read {store.settings_path}: {exc} — {_FIX}") from exc
        if not isinstance(data, dict):
            raise AnamnesisError(f"{store.settings_path} must hold a JSON object — {_FIX}")
    _check_kinds(store, data, DEFAULTS, "")
    merged: dict[str, Any] = json.loads(json.dumps(DEFAULTS))
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key].update(value)
        else:
            merged[key] = value
    return merged


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, dict):
        return "a JSON object"
    if isinstance(value, list):
        return "a list"
    return "a string" if isinstance(value, str) else "null"


def _check_kinds(store: Store, data: dict[str, Any], defaults: dict[str, Any], prefix: str) -> None:
    """A known field of the wrong kind (peers as a list, a budget as text) is an error naming it."""
    for key, default in defaults.items():
        if key not in data:
            continue
        want, got = _kind(default), _kind(data[key])
        if want != got:
            raise AnamnesisError(f'{store.settings_path}: "{prefix}{key}" must be {want}, not {got}')
        if isinstance(default, dict) and key != "peers":
            _check_kinds(store, data[key], default, f"{prefix}{key}.")
    if not prefix and isinstance(data.get("peers"), dict):
        for name, entry in data["peers"].items():
            url = entry.get("url") if isinstance(entry, dict) else entry
            if not isinstance(url, str) or not url.strip():
                raise AnamnesisError(
                    f'{store.settings_path}: peer "{name}" has no URL ("url" must be a non-empty string) — '
                    "give it one, or remove that entry, by hand"
                )


def save_settings(store: Store, settings: dict[str, Any]) -> None:
    """Write settings atomically with mode 0600 (they name peers and hosts)."""
    store.home.mkdir(parents=True, exist_ok=True)
    atomic_write_text(store.settings_path, json.dumps(settings, indent=2, sort_keys=True) + "\n", mode=0o600)


def update_section(store: Store, key: str, **fields: Any) -> None:
    """Set `fields` in the settings object `key` (one feature's settings), keeping its other fields:
    turning a feature off keeps what a later enable reuses."""
    settings = load_settings(store)
    current = settings.get(key)
    settings[key] = {**(current if isinstance(current, dict) else {}), **fields}
    save_settings(store, settings)


def writer_machine_id(store: Store) -> str:
    """This machine's id for a write: a broken settings.json or a missing id is an error, never 'unknown'.

    Every note and commit a writer makes carries this id, so a note must not
    be written under a made-up one.
    """
    settings = load_settings(store)  # a broken file: its error says how to fix it, and that nothing changed
    machine = settings.get("machine_id")
    if not isinstance(machine, str) or not machine.strip():
        raise AnamnesisError(
            f"{store.settings_path} has no machine_id; run `anamnesis init` to give this machine one"
            " (nothing was written)"
        )
    return machine


def machine_id(store: Store) -> str:
    """This machine's id, or 'unknown' before init (for display; writers use `writer_machine_id`)."""
    try:
        return str(load_settings(store).get("machine_id") or "unknown")
    except AnamnesisError:
        return "unknown"
