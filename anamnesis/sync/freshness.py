"""Whether a reader of the index may skip its scan of memory/: a running watch vouches for it.

Every command that reads the index first brings it up to date with a full
refresh: one lstat per note (40-60 ms at 10,000 notes, ~200 ms at 50,000).
`anamnesis watch` already sees every change to memory/ as it happens and
marks the index behind for each (`anamnesis.search.index.mark_behind`); a full scan
clears that mark unless a change came in while it ran. So a reader may skip
its scan when all of these hold (`watch_vouches`):

- the mark is absent;
- a live `anamnesis watch` holds this store's watch lock (a heartbeat file
  copied from elsewhere, or left by a dead process, vouches for nothing);
- its heartbeat is fresh and says since when its file watcher runs;
- the index's last full scan started after that (changes made while no
  watcher ran are found by that scan).

Anything unsure means a scan, exactly as without watch.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from anamnesis.search import RefreshReport, behind_path, last_scan
from anamnesis.sync.watch import read_heartbeat, watch_running

if TYPE_CHECKING:
    from anamnesis.search import Index

T = TypeVar("T")

WATCH_FRESH = 15.0  # seconds: a heartbeat older than this (three beats missed) vouches for nothing


def watch_vouches(index: Index) -> bool:
    """Whether a running watch guarantees that no file changed since the index's last full scan."""
    store = index.store
    if os.path.exists(behind_path(store)):
        return False
    beat = read_heartbeat(store)
    if not beat or beat.get("stopped"):
        return False
    watching, last_beat = beat.get("watching"), beat.get("beat")
    if not isinstance(watching, (int, float)) or not isinstance(last_beat, (int, float)):
        return False  # an older watch, or one whose file watcher is down
    if not 0 <= time.time() - last_beat < WATCH_FRESH:
        return False
    if last_scan(index) <= watching:
        return False  # files may have changed before the watcher started
    return watch_running(store) and not os.path.exists(behind_path(store))


def read_current(index: Index, read: Callable[[], T]) -> tuple[T, RefreshReport]:
    """`read()` answered as if `catch_up(index)` had run first, and what that refresh did.

    The read runs while the scan is under way (on a big store a child process
    does most of the scanning meanwhile) and again only if the scan found a
    change: nothing on disk changed in the common case, so the first answer
    stands, and a search at 50,000 notes does not wait for both in turn.
    """
    if watch_vouches(index):
        return read(), RefreshReport()
    pending = index.start_refresh(reading=True)
    try:
        answer = read()
    finally:
        report = pending.finish()  # also when the read failed: the child is always waited for
    return (read() if report.changed else answer), report


def catch_up(index: Index) -> RefreshReport:
    """Make the index current before reading it: a full refresh, unless `watch_vouches`.

    What `search` and `list` call: with watch running, a 50,000-note store is
    not stat-ed file by file on every command.
    """
    if watch_vouches(index):
        return RefreshReport()
    return index.refresh()
