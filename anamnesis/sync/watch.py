"""`anamnesis watch`: sync seconds after an edit instead of minutes after it.

A long-running process that

- watches memory/ with watchdog and turns a burst of file events (an editor's
  save is several, a `git checkout` hundreds) into one sync once the folder
  has been quiet for a moment (at the latest `max_delay` after the first);
- ignores editors' temp, swap and backup files and git's internals, except
  the refs, so a push another machine makes into this store is noticed;
- skips a sync when nothing git would see changed (its own syncs' events);
- syncs on a slow timer as a safety net (watchers can miss events);
- syncs at once when a peer announces a HEAD this store lacks (discovery);
- survives every error (a failed sync, a peer down, memory/ removed and
  recreated) and logs it, retrying with a back-off;
- writes a heartbeat in state/ that `anamnesis status` reports;
- with semantic search on, keeps the model loaded and answers the hooks' and
  searches' similarity questions on a unix socket (`anamnesis.search.semantic_server`),
  so they do not each load the model.

The sync itself is `anamnesis.sync.engine.sync`, the same function `anamnesis sync`
runs, under the same store lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from anamnesis.base.errors import AnamnesisError, ExitCode
from anamnesis.base.notes import is_note_path
from anamnesis.base.paths import Store
from anamnesis.base.running import AlreadyHeld, code_stamp, hold, holder, is_held, stop_holder
from anamnesis.base.text import plural
from anamnesis.search import mark_behind

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

    from anamnesis.search import QueryServer
    from anamnesis.sync.discovery import Announcer, Peer
    from anamnesis.sync.engine import Intake

log = logging.getLogger("anamnesis.watch")

QUIET = 0.5  # seconds without events before a sync
MAX_DELAY = 5.0  # a stream of events still syncs this long after the first
INTERVAL = 300.0  # safety-net sync when nothing else synced for this long
BEAT = 5.0  # heartbeat period
STALE = 30.0  # a heartbeat older than this means the watcher hangs
NETWORK_CHECK = 10.0  # how often to look for new network addresses to announce on
RETRY_FIRST = 5.0  # first retry after a failed sync; doubles up to `interval`
RETRY_UNREACHED_MAX = 30.0  # a peer out of reach is tried at least this often: back within seconds
HEARTBEAT_NAME = "watch.json"
LOCK_NAME = "watch.lock"
WATCH_LOG_NAME = "watch.log"

# Names editors and tools write next to the file they save; never worth a sync.
_IGNORED_SUFFIXES = (
    ".swp",
    ".swo",
    ".swx",
    ".swn",
    "~",
    ".tmp",
    ".part",
    ".crdownload",
    "___jb_tmp___",
    "___jb_old___",
)
_IGNORED_NAMES = frozenset(("4913", ".DS_Store", "Thumbs.db"))
_IGNORED_PREFIXES = (".#", ".~lock.")
# Inside .git/ only the refs matter: HEAD moved by hand, or another machine pushed to us.
_GIT_RELEVANT = ("HEAD", "packed-refs")

SyncFn = Callable[[str], Any]
"""Runs one sync; gets a one-line reason, returns what the sync returns (or raises)."""


def is_relevant(relpath: str) -> bool:
    """Whether a change to this memory/-relative path may need a sync."""
    parts = [p for p in relpath.replace("\\", "/").split("/") if p and p != "."]
    if not parts:
        return False
    name = parts[-1]
    if parts[0] == ".git":
        if name.endswith(".lock"):
            return False
        return (len(parts) == 2 and name in _GIT_RELEVANT) or (len(parts) > 2 and parts[1] == "refs")
    if ".git" in parts:
        return False
    if name in _IGNORED_NAMES or name.endswith(_IGNORED_SUFFIXES) or name.startswith(_IGNORED_PREFIXES):
        return False
    return not (name.startswith("#") and name.endswith("#"))  # emacs auto-save


@dataclass
class WatchOptions:
    """Knobs of one watcher (the CLI sets them from its options)."""

    quiet: float = QUIET
    max_delay: float = MAX_DELAY
    interval: float = INTERVAL
    discovery: bool = True
    beat: float = BEAT
    initial_sync: bool = True
    retry: float = RETRY_FIRST
    retry_unreached_max: float = RETRY_UNREACHED_MAX
    # what each sync takes in first (engine.Intake), and whether a source outside memory/ has
    # something new for it; the program fills them in (app.syncing.watch_options)
    intake: tuple[Intake, ...] = ()
    sources_changed: Callable[[Store], bool] | None = None


class WatchRunning(AnamnesisError):
    """Another `anamnesis watch` already watches this store."""

    exit_code = ExitCode.BUSY


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 90:
        return f"{seconds} s ago"
    if seconds < 5400:
        return f"{seconds // 60} min ago"
    if seconds < 172800:
        return f"{seconds // 3600} h ago"
    return f"{seconds // 86400} days ago"


def describe_result(result: Any) -> tuple[str, str | None]:
    """(one line for the log, a warning or None) for what a sync function returned."""
    if result is None or not hasattr(result, "exit_code"):
        return ("done" if result is None else str(result)), None
    moved = [
        f"{k} {n}"
        for k, n in (
            ("committed", len(result.committed)),
            ("received", result.received),
            ("sent", result.sent),
        )
        if n
    ]
    line = f"{result.outcome}" + (f" ({', '.join(moved)})" if moved else "") + f" in {result.seconds:.2f}s"
    problems = [f"peer {p.name} {p.status}: {p.detail}" for p in result.unreachable]
    problems += [f"conflict in {path}" for path in result.conflicts]
    problems += [f"held back {h.path} ({h.where})" for h in getattr(result, "held_back", [])]
    return line, "; ".join(problems) or None


class _Handler:
    """watchdog handler: relevant paths go to `changed`, everything else is dropped."""

    def __init__(self, root: Path, changed: Callable[[str], None], root_gone: Callable[[], None]) -> None:
        self.root = str(root)
        self.changed = changed
        self.root_gone = root_gone

    def dispatch(self, event: Any) -> None:
        kind = event.event_type
        if kind in ("opened", "closed", "closed_no_write"):
            return
        if event.is_directory and kind in ("modified", "created"):
            return  # a folder's mtime moves with every temp file inside; its files report themselves
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = os.fsdecode(raw) if raw else ""
            if not path:
                continue
            if path == self.root:
                if kind in ("deleted", "moved"):
                    self.root_gone()
                return
            if not path.startswith(self.root + os.sep):
                continue
            rel = path[len(self.root) + 1 :]
            if is_relevant(rel):  # both ends of a move: `sed -i` renames its temporary file over the note
                self.changed(rel)


class Watcher:
    """One running watch over one store; `start()` it, `stop()` it (or `run()` until told to stop)."""

    def __init__(self, store: Store, sync: SyncFn | None = None, options: WatchOptions | None = None) -> None:
        self.store = store
        self.options = options or WatchOptions()
        self._sync = sync or self._real_sync
        self._cond = threading.Condition()
        self._stopping = False
        self._first_event: float | None = None
        self._last_event: float | None = None
        self._changed: set[str] = set()
        self._urgent: list[str] = []
        self._retry_at: float | None = None
        self._unreached = 0  # syncs in a row that found a peer out of reach
        self._retry_reason = ""
        self._failures = 0
        self._after_sync: _Snapshot | None = None
        self._last_ok = False
        self._observer: BaseObserver | None = None
        self._watched_inode: tuple[int, int] | None = None
        self._memory_missing_logged = False
        self._announcer: Announcer | None = None
        self._announced_head: str | None = None
        self._announce_lock = threading.Lock()
        self._discovery_retry_at = 0.0
        self._notified: dict[str, str] = {}
        self._threads: list[threading.Thread] = []
        self._lock_fd: int | None = None
        self._query_server: QueryServer | None = None
        self.started = time.time()
        self.code = code_stamp()  # the code this watch runs, to tell it from what is installed later
        self.syncs = 0
        self.skipped = 0
        self.errors = 0
        self.syncing_since: float | None = None
        self.last_sync: float | None = None
        self.last_sync_monotonic: float | None = None
        self.last_reason = ""
        self.last_result = ""
        self.last_error = ""
        self.last_error_at: float | None = None
        self.last_clean: float | None = None  # when a sync last went through with nothing to report
        self.peers_seen: dict[str, dict[str, Any]] = {}
        self.watching_since: float | None = None  # the file watcher's start; readers of the index rely on it

    # -- life cycle -------------------------------------------------------------------

    def start(self) -> None:
        """Take the per-store watch lock and start watching, syncing and announcing."""
        self.store.state_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self._arm_observer()
        self._check_query_server()
        if self.options.initial_sync:
            self.sync_now("watch started")
        for target, name in ((self._worker, "anamnesis-sync"), (self._housekeeping, "anamnesis-beat")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)
        self._write_heartbeat()
        log.info(
            "watching %s (quiet %.1fs, max delay %.1fs, safety-net sync every %.0fs)",
            self.store.memory,
            self.options.quiet,
            self.options.max_delay,
            self.options.interval,
        )

    def stop(self) -> None:
        """Stop every thread this watcher started, wait for a running sync, leave a final heartbeat."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=150)
        self._disarm_observer()
        if self._query_server is not None:
            self._query_server.stop()
            self._query_server = None
        if self._announcer is not None:
            with contextlib.suppress(Exception):
                self._announcer.stop()
            self._announcer = None
        self._write_heartbeat(stopped=True)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("watch stopped")

    def run(self, stop: threading.Event) -> None:
        """Start, block until `stop` is set (the CLI sets it on SIGINT/SIGTERM), then stop."""
        self.start()
        try:
            while not stop.wait(1.0):
                pass
        finally:
            self.stop()

    def _take_lock(self) -> None:
        try:
            self._lock_fd = hold(self.store.state_dir / LOCK_NAME)
        except AlreadyHeld as held:
            raise WatchRunning(
                f"`anamnesis watch` already runs for {self.store.home} (pid {held.pid or '?'})"
            ) from None

    # -- requests ---------------------------------------------------------------------

    def changed(self, relpath: str) -> None:
        """A relevant path changed: sync once things are quiet."""
        now = time.monotonic()
        with self._cond:
            if self._first_event is None:
                self._first_event = now
            self._last_event = now
            if len(self._changed) < 1000:
                self._changed.add(relpath)
            self._cond.notify_all()
        if not relpath.startswith(".git/"):
            self._index_behind()

    def _index_behind(self) -> None:
        """Tell readers of the index that a file changed (see anamnesis.sync.freshness)."""
        try:
            mark_behind(self.store)
        except OSError as exc:
            log.warning("cannot mark the index behind: %s", exc)

    def sync_now(self, reason: str) -> None:
        """Sync as soon as the running sync (if any) is done, with no debounce and no skip."""
        with self._cond:
            self._urgent.append(reason)
            self._cond.notify_all()

    # -- the sync worker --------------------------------------------------------------

    def _next_job(self) -> tuple[str, bool] | None:
        """Block until a sync is due: (reason, may be skipped when nothing changed), or None to stop."""
        opts = self.options
        next_periodic = (self.last_sync_monotonic or time.monotonic()) + opts.interval
        with self._cond:
            while not self._stopping:
                now = time.monotonic()
                if self._urgent:
                    reasons = list(dict.fromkeys(self._urgent))
                    self._urgent.clear()
                    self._take_changes()
                    return "; ".join(reasons), False
                due = float("inf")
                if self._first_event is not None and self._last_event is not None:
                    due = min(
                        self._last_event + opts.quiet, self._first_event + max(opts.max_delay, opts.quiet)
                    )
                    if now >= due:
                        return self._take_changes(), True
                if self._retry_at is not None:
                    if now >= self._retry_at:
                        self._retry_at = None
                        if self._failures:
                            return f"retry after {plural(self._failures, 'failed sync')}", False
                        return f"retry: {self._retry_reason}", False
                    due = min(due, self._retry_at)
                if now >= next_periodic:
                    return "safety-net sync", False
                self._cond.wait(max(0.01, min(due, next_periodic) - now))
        return None

    def _take_changes(self) -> str:
        # the notes, not an editor's temporary files (`sed -i` writes `sedH1Oghd` beside the note)
        paths = sorted(p for p in self._changed if is_note_path(p)) or sorted(
            p for p in self._changed if p.startswith(".git/")  # what another machine pushed here
        )
        self._changed.clear()
        self._first_event = self._last_event = None
        if not paths:
            return "files changed"
        shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
        return f"changed: {shown}"

    def _worker(self) -> None:
        while True:
            job = self._next_job()
            if job is None:
                return
            reason, may_skip = job
            try:
                self._run_sync(reason, may_skip)
            except Exception:  # the worker must outlive any bug in one round
                log.exception("unexpected error in the sync loop")

    def _run_sync(self, reason: str, may_skip: bool) -> None:
        if may_skip and self._nothing_new():
            self.skipped += 1
            log.debug("nothing git can see changed (%s); no sync", reason)
            return
        self.syncing_since = time.time()
        self.syncs += 1
        log.info("sync: %s", reason)
        ok = False
        retry = True
        out_of_reach: list[str] = []
        try:
            result = self._sync(reason)
            # a peer off or out of reach now (not one set up wrong): tried again soon, with a back-off,
            # so what was written meanwhile goes out within seconds of it coming back
            out_of_reach = [p.name for p in getattr(result, "unreachable", []) if p.status in ("unreachable", "rejected")]
            line, warning = describe_result(result)
            log.info("sync %s", line)
            if warning:
                log.warning("sync: %s", warning)
                self._error(warning)
            else:
                self.last_clean = time.time()  # what went wrong before is over
            ok = True
        except AnamnesisError as exc:
            log.error("sync failed: %s", exc)
            self._error(str(exc))
            retry = not _needs_a_person(exc)
        except Exception as exc:
            log.exception("sync crashed")
            self._error(f"{type(exc).__name__}: {exc}")
        finally:
            self.syncing_since = None
            self.last_sync = time.time()
            self.last_sync_monotonic = time.monotonic()
            self.last_reason = reason
            self._after_sync = _snapshot(self.store)
            self._last_ok = ok
            with self._cond:
                if ok and out_of_reach:
                    self._unreached += 1
                    delay = self._backoff(self._unreached, cap=self.options.retry_unreached_max)
                    self._failures = 0
                    self._retry_at = time.monotonic() + delay
                    self._retry_reason = f"{', '.join(out_of_reach)} out of reach at the last sync"
                    log.info("will try %s again in %.0fs", ", ".join(out_of_reach), delay)
                elif ok:
                    self._failures = self._unreached = 0
                    self._retry_at = None
                elif retry:
                    self._failures += 1
                    delay = self._backoff(self._failures)
                    self._retry_at = time.monotonic() + delay
                    log.info("will retry in %.0fs", delay)
                else:
                    log.info("waiting for the next change before trying again")
            self.last_result = "ok" if ok else "failed"
            self._announce_head()
            self._write_heartbeat()

    def _backoff(self, times: int, cap: float | None = None) -> float:
        """Seconds before trying again after `times` syncs in a row that did not get through
        (doubling, up to `--interval`, or `cap` when that is shorter)."""
        most = self.options.interval if cap is None else min(cap, self.options.interval)
        return float(min(self.options.retry * 2.0 ** (times - 1), most))

    def _nothing_new(self) -> bool:
        """True when the events since the last sync were that sync's own (or changed nothing git tracks).

        That is: the last sync succeeded and left a clean tree, memory/ looks
        to git exactly as it did then, and nobody pushed anything into it since.
        """
        before = self._after_sync
        if not self._last_ok or before is None or before.dirty:
            return False
        return _snapshot(self.store) == before and not _unintegrated_incoming(self.store)

    def _error(self, message: str) -> None:
        self.errors += 1
        self.last_error = message
        self.last_error_at = time.time()

    def _real_sync(self, reason: str) -> Any:
        # lazy: sync (git, merge) is for the running watcher; search and list only read its heartbeat
        from anamnesis.sync.engine import sync

        return sync(self.store, intake=self.options.intake)

    # -- the file watcher --------------------------------------------------------------

    def _arm_observer(self) -> bool:
        """Start watching memory/ (again); False if it does not exist right now."""
        # lazy: watchdog is for the running watcher; search and list only read its heartbeat
        from watchdog.observers import Observer

        # watchdog warns when git creates and removes its temporary object folders quickly; harmless.
        warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning)
        self._disarm_observer()
        memory = self.store.memory
        try:
            info = memory.stat()
        except OSError:
            return False
        observer = Observer()
        handler = _Handler(memory, self.changed, self._root_gone)
        try:
            observer.schedule(handler, str(memory), recursive=True)  # type: ignore[arg-type]
            observer.start()
        except OSError as exc:
            log.error("cannot watch %s: %s (only the safety-net sync will run)", memory, exc)
            self._error(f"cannot watch memory/: {exc}")
            with contextlib.suppress(Exception):
                observer.stop()
            return False
        self._observer = observer
        self._watched_inode = (info.st_dev, info.st_ino)
        self.watching_since = time.time()
        return True

    def _disarm_observer(self) -> None:
        observer, self._observer = self._observer, None
        self._watched_inode = None
        if self.watching_since is not None:  # changes go unseen from here: readers scan again
            self.watching_since = None
            self._index_behind()
        if observer is not None:
            with contextlib.suppress(Exception):
                observer.stop()
                observer.join(timeout=5)

    def _root_gone(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _observer_healthy(self) -> bool:
        observer = self._observer
        if observer is None or not observer.is_alive():
            return False
        if not all(emitter.is_alive() for emitter in observer.emitters):
            return False
        try:
            info = self.store.memory.stat()
        except OSError:
            return False
        return (info.st_dev, info.st_ino) == self._watched_inode

    def _check_observer(self) -> None:
        """Re-arm the watch when memory/ was removed, replaced or the observer died."""
        if self._observer_healthy():
            return
        if not self.store.memory.is_dir():
            if not self._memory_missing_logged:
                log.error("%s is gone; waiting for it to come back", self.store.memory)
                self._error("memory/ was removed")
                self._memory_missing_logged = True
                self._disarm_observer()
            return
        if self._arm_observer():
            what = "came back" if self._memory_missing_logged else "was replaced or its watch stopped"
            log.warning("%s %s; watching it again", self.store.memory, what)
            self._memory_missing_logged = False
            self.sync_now("memory/ is back")

    # -- discovery --------------------------------------------------------------------

    def _start_discovery(self) -> None:
        # lazy: discovery (zeroconf) is for the running watcher; search and list only read its heartbeat
        from anamnesis.sync.discovery import Announcer

        self._discovery_retry_at = time.monotonic() + 60
        announcer = Announcer(self.store, on_peer=self._on_peer)
        try:
            announcer.start(_head(self.store))
        except Exception as exc:  # no network yet, no multicast: try again later
            log.warning("LAN discovery unavailable: %s (retrying in a minute)", exc)
            return
        with self._cond:
            if self._stopping:
                announcer.stop()
                return
            self._announcer = announcer
        self._announced_head = announcer.head
        log.info("announcing %s on the LAN as %s", announcer.service_type, announcer.instance_name)

    def _announce_head(self) -> None:
        announcer = self._announcer
        if announcer is None:
            return
        with self._announce_lock:
            head = _head(self.store)
            if head != self._announced_head:
                self._announced_head = head
                announcer.set_head(head)

    def _on_peer(self, peer: Peer) -> None:
        """A machine of this store announced itself: sync now if it has a commit we lack."""
        self.peers_seen[peer.machine_id] = {
            "head": peer.head,
            "url": peer.url,
            "addresses": list(peer.addresses),
            "seen": time.time(),
        }
        if not peer.head or self._notified.get(peer.machine_id) == peer.head:
            return
        self._notified[peer.machine_id] = peer.head
        # lazy: repo is for the running watcher; search and list only read its heartbeat
        from anamnesis.base.repo import contains_commit

        if self.store.memory.is_dir() and not contains_commit(self.store.memory, peer.head):
            log.info("%s announced %s, which this store lacks", peer.machine_id, peer.head[:10])
            self.sync_now(f"{peer.machine_id} announced {peer.head[:10]}")

    # -- housekeeping -------------------------------------------------------------------

    def _housekeeping(self) -> None:
        beat = self.options.beat
        next_beat = time.monotonic() + beat
        next_network = time.monotonic() + NETWORK_CHECK
        first = True
        while True:
            with self._cond:
                if self._stopping:
                    return
                if not first:
                    self._cond.wait(1.0)
                first = False
                if self._stopping:
                    return
            try:
                self._check_observer()
                if (
                    self.options.discovery
                    and self._announcer is None
                    and time.monotonic() >= self._discovery_retry_at
                ):
                    self._start_discovery()
                if self._announcer is not None and time.monotonic() >= next_network:
                    next_network = time.monotonic() + NETWORK_CHECK
                    self._announcer.check_network()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + beat
                    self._write_heartbeat()
                    self._check_query_server()
                    changed = self.options.sources_changed
                    if changed is not None and changed(self.store):  # a mirrored source changed: the sync imports it
                        self.sync_now("a mirrored source changed (docs/import.md)")
            except Exception:
                log.exception("housekeeping failed")

    def _check_query_server(self) -> None:
        """Answer similarity questions while semantic search is on here (turned on or off
        while watch runs included); cheap when it is off (one settings read). Never raises:
        without a server, hooks and searches load the model themselves."""
        try:
            self._update_query_server()
        except Exception:
            log.exception("query server check failed")

    def _update_query_server(self) -> None:
        # lazy: the semantic settings and the query server only for a running watch
        from anamnesis.search import engine_for

        wanted = engine_for(self.store)
        server = self._query_server
        if server is not None and (
            wanted is None
            or not server.running
            or wanted.fingerprint != getattr(server.engine, "fingerprint", None)
        ):
            server.stop()
            self._query_server = server = None
        if wanted is not None and server is None:
            from anamnesis.search import QueryServer  # lazy: only with semantic search on

            server = QueryServer(self.store)
            if server.start():
                self._query_server = server
                log.info("answering semantic queries on %s", server.path)

    def _write_heartbeat(self, stopped: bool = False) -> None:
        # lazy: fsutil is off the `list` path, which loads watch only to read the heartbeat
        from anamnesis.base.fsutil import atomic_write_text

        data = {
            "pid": os.getpid(),
            "started": self.started,
            "code": self.code,
            "beat": time.time(),
            "stopped": stopped,
            "syncs": self.syncs,
            "skipped": self.skipped,
            "errors": self.errors,
            "syncing_since": self.syncing_since,
            "last_sync": self.last_sync,
            "last_reason": self.last_reason,
            "last_result": self.last_result,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "last_clean": self.last_clean,
            "announcing": self._announcer is not None,
            "semantic_queries": self._query_server is not None,
            "head": self._announced_head,
            "peers_seen": self.peers_seen,
            "watching": self.watching_since,
            "options": {
                "quiet": self.options.quiet,
                "interval": self.options.interval,
                "discovery": self.options.discovery,
            },
        }
        try:
            atomic_write_text(heartbeat_path(self.store), json.dumps(data, indent=1) + "\n")
        except OSError as exc:
            log.warning("cannot write heartbeat: %s", exc)


def _needs_a_person(exc: AnamnesisError) -> bool:
    """Errors no retry can fix (memory/ left mid-rebase, on another branch): wait for the user's next change."""
    # lazy: recovery is for the running watcher; search and list only read its heartbeat
    from anamnesis.store import SyncRefused

    return isinstance(exc, SyncRefused)


def _head(store: Store) -> str | None:
    # lazy: repo is for the running watcher; search and list only read its heartbeat
    from anamnesis.base.repo import head

    try:
        return head(store.memory) if store.memory.is_dir() else None
    except AnamnesisError:
        return None


class _Snapshot(NamedTuple):
    """What git can see of memory/: the branch, HEAD, every ref, and the changed files."""

    branch: str
    head: str | None
    refs: str
    dirty: tuple[str, ...]


def _snapshot(store: Store) -> _Snapshot | None:
    """memory/ as git sees it now; None when git cannot tell (memory/ gone, not a repo)."""
    # lazy: git is for the running watcher; search and list only read its heartbeat
    from anamnesis.base.git import run_git

    repo = store.memory
    try:
        refs = run_git(repo, "for-each-ref", "--format=%(refname) %(objectname)", check=False, timeout=30)
        branch = run_git(repo, "symbolic-ref", "-q", "HEAD", check=False, timeout=30)
        # Outside the store lock, so it must not write: a status free to refresh the index takes
        # .git/index.lock, and a writer's `git add` at that moment fails ("index.lock: File exists").
        status = run_git(
            repo, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all",
            check=False, timeout=30,
        )
    except AnamnesisError:
        return None
    if refs.returncode or status.returncode:
        return None
    dirty = tuple(
        entry[3:] for entry in status.stdout.split("\0") if len(entry) > 3 and is_relevant(entry[3:])
    )
    return _Snapshot(branch.stdout.strip(), _head(store), refs.stdout, dirty)


def _unintegrated_incoming(store: Store) -> bool:
    """Whether another machine pushed commits into this store (refs/anamnesis/incoming/*) not yet in HEAD."""
    # lazy: refs and git are for the running watcher; search and list only read its heartbeat
    from anamnesis.base import refs
    from anamnesis.base.git import run_git  # lazy: git is for the running watcher

    try:
        proc = run_git(
            store.memory, "rev-list", "--count", refs.INCOMING_GLOB, "^HEAD", check=False, timeout=30
        )
    except AnamnesisError:
        return True
    return proc.returncode != 0 or proc.stdout.strip() not in ("", "0")


# -- heartbeat and status --------------------------------------------------------------


def heartbeat_path(store: Store) -> Path:
    """Where a running watch writes its heartbeat."""
    return store.state_dir / HEARTBEAT_NAME


def read_heartbeat(store: Store) -> dict[str, Any] | None:
    """The last heartbeat, or None if watch never ran here (or the file is unreadable)."""
    try:
        data = json.loads(heartbeat_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def watch_running(store: Store) -> bool:
    """Whether a live `anamnesis watch` holds this store's watch lock."""
    return is_held(store.state_dir / LOCK_NAME)


def watch_pid(store: Store) -> int | None:
    """The pid of the `anamnesis watch` holding this store's watch lock (it writes it there), or None."""
    return holder(store.state_dir / LOCK_NAME)


def stop_watch(store: Store, wait: float = 30.0) -> tuple[int, bool] | None:
    """Stop the `anamnesis watch` of this store, by hand or by a service: (its pid, whether it
    is gone), or None when none runs. SIGTERM lets it finish the sync it is in (`wait` seconds)."""
    return stop_holder(store.state_dir / LOCK_NAME, wait)


def watch_summary(store: Store) -> dict[str, object]:
    """The `watch` line of `anamnesis status`, e.g. "running (pid 812), last sync 4 s ago"."""
    beat = read_heartbeat(store)
    if beat is None:
        return {}
    now = time.time()
    pid = int(beat.get("pid") or 0)
    alive = bool(pid) and not beat.get("stopped") and _pid_alive(pid) and watch_running(store)
    if not alive:
        how = "stopped" if beat.get("stopped") else "last heartbeat"
        return {"watch": f"not running ({how} {_ago(now - float(beat.get('beat') or 0))})"}
    parts = [f"running (pid {pid})"]
    if beat.get("syncing_since"):
        parts.append(f"syncing since {_ago(now - float(beat['syncing_since']))}")
    if beat.get("last_sync"):
        parts.append(
            f"last sync {_ago(now - float(beat['last_sync']))}"
            + (" (failed)" if beat.get("last_result") == "failed" else "")
        )
    else:
        parts.append("no sync yet")
    if now - float(beat.get("beat") or 0) > STALE:
        parts.append(
            f"no heartbeat for {_ago(now - float(beat.get('beat') or 0)).removesuffix(' ago')}: it may hang"
        )
    error_at = float(beat.get("last_error_at") or 0)
    if beat.get("last_error") and error_at and now - error_at < 3600 and error_at > float(beat.get("last_clean") or 0):
        parts.append(f"last error {_ago(now - error_at)}: {beat['last_error']}")
    seen = beat.get("peers_seen") or {}
    if seen:
        parts.append(f"{plural(len(seen), 'peer')} seen on the LAN")
    if outdated(beat):
        parts.append("started before an upgrade: restart it to run the new code")
    return {"watch": ", ".join(parts)}


def outdated(beat: dict[str, Any]) -> bool:
    """Whether the watch of this heartbeat runs other code than is installed now."""
    return bool(beat.get("code")) and beat.get("code") != code_stamp()


def outdated_watch(store: Store) -> int | None:
    """The pid of a running `anamnesis watch` started before the installed code changed, or None."""
    beat = read_heartbeat(store)
    if beat is None or beat.get("stopped") or not watch_running(store) or not outdated(beat):
        return None
    return int(beat.get("pid") or 0) or None
