"""The sync as the program runs it: the engine, with what other domains have waiting.

The sync engine knows nothing of agents or importers; before it commits it runs
the `Intake` functions it is given. Here they are named once, for every way a
sync starts (the CLI, the timer, `watch`, the MCP tool, the dashboard, `init`):
the session notes capture queued while memory/ could not be written, then the
sources mirrored into the store (docs/import.md).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anamnesis.base.paths import Store
    from anamnesis.sync import Intake, SyncResult, WatchOptions


def take_in_captured(store: Store) -> list[dict[str, Any]]:
    """Write the session notes capture queued while memory/ could not be written."""
    from anamnesis.agents import flush_queued  # lazy: only a sync that starts loads capture

    flush_queued(store)
    return []


def take_in_mirrored(store: Store) -> list[dict[str, Any]]:
    """Import what changed in the mirrored sources; what each import did. Logs, never raises."""
    try:
        # lazy: inside the try, so a broken importer never costs a sync
        from anamnesis.importers import mirror_all

        return [report.brief() for report in mirror_all(store)]
    except Exception as exc:  # an importer's bug must never cost a sync
        logging.getLogger("anamnesis.importers").warning("mirroring failed: %s", exc)
        return []


def sources_changed(store: Store) -> bool:
    """Whether a mirrored source has something new (what `watch` checks each beat); never raises."""
    from anamnesis.importers import mirror_changed  # lazy: as take_in_mirrored

    return mirror_changed(store)


INTAKE: tuple[Intake, ...] = (take_in_captured, take_in_mirrored)


def sync_store(
    store: Store, *, peers: list[str] | None = None, push: bool = True, lock_timeout: float = 120.0
) -> SyncResult:
    """`sync.sync` with the program's intake: what every command that syncs calls."""
    from anamnesis.sync import sync  # lazy: importing app costs a hook nothing

    return sync(store, peers=peers, push=push, lock_timeout=lock_timeout, intake=INTAKE)


def with_intake(options: WatchOptions) -> WatchOptions:
    """A watcher's options with the program's intake and its check of the mirrored sources."""
    return dataclasses.replace(options, intake=INTAKE, sources_changed=sources_changed)
