"""Picking up hand edits in long-running processes: the index refreshed at most every few seconds.

The MCP server and the web dashboard stay up for hours while a person edits
notes in an editor, `git pull`s, or another process writes. Each of their
reads opens the index through one `PeriodicRefresh`, which scans the store
for changes when the last scan is older than its period (a scan costs a stat
of every note, so not on every call), and never makes a second thread wait
for a scan already running.
"""

from __future__ import annotations

import threading
import time

from anamnesis.base.paths import Store
from anamnesis.search.index import Index, open_index
from anamnesis.search.semantic import start_background_update


class PeriodicRefresh:
    """Opens the index of `store`, brought up to date with hand edits at most every `every` seconds."""

    def __init__(self, store: Store, every: float, *, vectors: bool = False) -> None:
        self.store = store
        self.every = every
        self.vectors = vectors  # also start the background embedding of what changed (semantic search)
        self._lock = threading.Lock()
        self._at = 0.0

    def open(self, fresh: bool = True) -> Index:
        """The open index; with `fresh`, refreshed first when the last refresh is older than the period."""
        index = open_index(self.store)
        if fresh and time.monotonic() - self._at > self.every and self._lock.acquire(blocking=False):
            try:
                if index.refresh().changed and self.vectors:
                    start_background_update(self.store)
                self._at = time.monotonic()
            except BaseException:
                index.close()
                raise
            finally:
                self._lock.release()
        return index

    def expire(self) -> None:
        """Make the next `open` refresh (after a sync, which moved files the index has not seen)."""
        self._at = 0.0
