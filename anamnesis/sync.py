"""`anamnesis sync`: commit, integrate every peer (pull --rebase), push, update the index.

One plain function, `sync(store)`, used by the CLI, the MCP server, the web UI
and `watch`. Under the store lock it:

1. repairs what a killed sync left, or refuses a repo a person left
   mid-rebase/merge (`recovery.prepare`);
2. commits local changes ("<machine>: sync: N notes changed");
3. fetches every peer into refs/anamnesis/peers/<name>/*;
4. integrates each peer's main, and whatever other machines pushed into
   refs/anamnesis/incoming/*: commits only this machine has and never gave
   away are replayed on top of the peer's (pull --rebase); history already
   shared with someone is merged instead, because rewriting it would
   duplicate it elsewhere. All of it is built with plumbing (`treemerge`), so
   a conflict becomes markers in the note, never a stopped rebase;
5. moves the branch and the working tree to the result in one step;
6. pushes, never forced: a bare hub gets our main (if the hub moved on
   meanwhile: fetch, integrate, push again); another machine's store, whose
   main is checked out, gets refs/anamnesis/incoming/<our machine>, which it
   integrates on its own next sync;
7. updates the index from the paths that changed between the old and new HEAD.

What was fetched from or pushed to anyone is "published" (every ref under
refs/anamnesis/ marks it; their names are in `refs`) and is never rewritten.

Fetching and pushing (steps 3 and 6) go through the peer's `Transport`
(`transport.py`: git for every URL today); this module decides what to
integrate, when to push again, and what a peer's answer means for the report.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from anamnesis import peers as peers_mod
from anamnesis import recovery, refs, synclog
from anamnesis.capture import flush_queued
from anamnesis.errors import AnamnesisError, GitError
from anamnesis.git import Failure, git_out, run_git, run_git_bytes
from anamnesis.index import open_index
from anamnesis.lock import store_lock
from anamnesis.notes import now_iso
from anamnesis.paths import Store
from anamnesis.peers import (
    Peer,
    PeerKind,
    PeerNotFound,
    PeerState,
    add_peer,
    get_peer,
    list_peers,
    name_from_url,
    remove_peer,
)
from anamnesis.recovery import SyncRefused
from anamnesis.repo import changed_paths
from anamnesis.semantic import start_background_update
from anamnesis.settings import machine_id
from anamnesis.stamping import stamp_edits
from anamnesis.transport import FetchFailed, transport_for
from anamnesis.treemerge import TreeMerger, private_index

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_REFUSED",
    "EXIT_SYNCED",
    "EXIT_UNREACHABLE",
    "PeerReport",
    "SyncRefused",
    "SyncResult",
    "join",
    "sync",
]

EXIT_SYNCED = 0
EXIT_CONFLICT = 10
EXIT_UNREACHABLE = 11
EXIT_REFUSED = SyncRefused.exit_code  # 12
MAX_PUSH_ATTEMPTS = 5
LOCK_RETRIES = 3  # pushes tried against a locked ref before reporting the lock file

PeerStatus = Literal["synced", "up to date", "unreachable", "rejected", "skipped"]
Outcome = Literal["synced", "conflict recorded", "some peers unreachable"]


@dataclass
class PeerReport:
    """What happened with one peer (or one incoming ref) during a sync."""

    name: str
    url: str = ""
    status: PeerStatus = "skipped"
    detail: str = ""  # the reason, then what to do: one line for people and the log
    received: int = 0
    sent: int = 0
    reason: str = ""  # what went wrong, in ssh's or git's own words
    hint: str = ""  # what to do about it

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "status": self.status,
            "detail": self.detail,
            "reason": self.reason,
            "hint": self.hint,
            "received": self.received,
            "sent": self.sent,
        }


@dataclass
class SyncResult:
    """What one sync did; `exit_code` is what `anamnesis sync` exits with."""

    machine: str
    started: str = ""
    head_before: str | None = None
    head_after: str | None = None
    committed: list[str] = field(default_factory=list)
    received: int = 0
    sent: int = 0
    changed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    peers: list[PeerReport] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    index_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def unreachable(self) -> list[PeerReport]:
        return [p for p in self.peers if p.status in ("unreachable", "rejected")]

    @property
    def exit_code(self) -> int:
        """0 synced; 10 a conflict was recorded; 11 some peer was skipped (conflict wins)."""
        if self.conflicts:
            return EXIT_CONFLICT
        if self.unreachable:
            return EXIT_UNREACHABLE
        return EXIT_SYNCED

    @property
    def outcome(self) -> Outcome:
        if self.conflicts:
            return "conflict recorded"
        return "some peers unreachable" if self.unreachable else "synced"

    def to_dict(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "started": self.started,
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "head_before": self.head_before,
            "head_after": self.head_after,
            "committed": self.committed,
            "received": self.received,
            "sent": self.sent,
            "changed": self.changed,
            "conflicts": self.conflicts,
            "peers": [p.to_dict() for p in self.peers],
            "repaired": self.repaired,
            "index_seconds": round(self.index_seconds, 4),
            "seconds": round(self.seconds, 4),
        }


class _Sync:
    """The state of one sync run (under the store lock)."""

    def __init__(self, store: Store, result: SyncResult) -> None:
        self.store = store
        self.repo = store.memory
        self.result = result
        self.machine = result.machine
        self.merger = TreeMerger(self.repo, private_index(store.state_dir))
        self.peer_updates: dict[str, PeerState] = {}

    def _kind(self, peer: Peer) -> PeerKind:
        """What this sync (or an earlier one) learnt the peer is: a hub, a machine's store, or ''."""
        return self.peer_updates.get(peer.name, {}).get("kind") or peer.kind

    # -- git helpers ----------------------------------------------------------------

    def head(self) -> str:
        return git_out(self.repo, "rev-parse", "--verify", "HEAD")

    def ref(self, name: str) -> str | None:
        proc = run_git(self.repo, "rev-parse", "--verify", "-q", f"{name}^{{commit}}", check=False)
        return proc.stdout.strip() or None

    def is_ancestor(self, older: str, newer: str) -> bool:
        if older == newer:
            return True
        return run_git(self.repo, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0

    def count(self, *revs: str) -> int:
        return int(git_out(self.repo, "rev-list", "--count", *revs) or 0)

    # -- step 2: commit what changed locally ------------------------------------------

    def commit_local(self) -> list[str]:
        """Commit every change in the working tree, hand-edited notes stamped first; the paths committed."""
        status = run_git_bytes(self.repo, "status", "--porcelain", "-z", "--untracked-files=all").stdout
        if not status.strip(b"\0"):
            return []
        stamp_edits(self.repo, self.machine)  # hand edits say when and where they were made
        run_git(self.repo, "add", "-A")
        out = run_git_bytes(self.repo, "diff", "--cached", "--name-only", "-z", "--no-renames").stdout
        paths = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
        if not paths:
            return []
        notes = sum(1 for p in paths if p.endswith(".md")) or len(paths)
        noun = "note" if notes == 1 else "notes"
        run_git(self.repo, "commit", "-q", "--no-verify", "-m", f"{self.machine}: sync: {notes} {noun} changed")
        return paths

    # -- step 3: fetch ----------------------------------------------------------------

    def fetch(self, peer: Peer, report: PeerReport) -> str | None:
        """Fetch a peer's branches through its transport; its main, or None (empty peer).

        Raises FetchFailed if unreachable, with ssh's (or git's) own reason
        and what to do, which also go into `report`.
        """
        try:
            return transport_for(self.repo, peer).fetch(peer)
        except FetchFailed as exc:
            report.reason, report.hint = exc.failure.reason, exc.failure.hint
            raise

    # -- step 4: integrate --------------------------------------------------------------

    def integrate(self, head: str, source: str, tip: str) -> tuple[str, int]:
        """Bring commit `tip` into `head`; (new head, commits received). Builds commits only."""
        received = self.count(tip, f"^{head}")
        if received == 0:
            return head, 0  # tip is already part of our history
        if self.is_ancestor(head, tip):
            return tip, received  # fast-forward
        if self.merger.merge_base(head, tip) is None and not _has_own_files(self.store, head):
            return tip, received  # a fresh store joining: take the peer's history as it is
        local = self._unpublished(head, tip)
        if local is not None:
            current = tip
            for commit, parent in local:
                built = self.merger.pick(current, commit, parent)
                if built is not None:
                    current = built.commit
                    self._conflicts(built.conflicts, built.notices)
            return current, received
        built = self.merger.merge(head, tip, f"{self.machine}: sync: merge {source}")
        self._conflicts(built.conflicts, built.notices)
        return built.commit, received

    def _unpublished(self, head: str, tip: str) -> list[tuple[str, str]] | None:
        """(commit, parent) of our never-shared commits if they can be replayed onto `tip`, else None.

        They can when they form one straight line whose base is already in
        `tip`'s history: then `tip` plus them replayed is exactly pull --rebase.
        """
        out = git_out(
            self.repo, "rev-list", "--reverse", "--topo-order", "--parents", head, "--not", tip, refs.PUBLISHED_GLOB
        )
        rows = [line.split() for line in out.splitlines() if line]
        if not rows or any(len(row) != 2 for row in rows):
            return None
        for before, row in itertools.pairwise(rows):
            if row[1] != before[0]:
                return None
        if rows[-1][0] != head or not self.is_ancestor(rows[0][1], tip):
            return None
        return [(row[0], row[1]) for row in rows]

    def _conflicts(self, paths: Iterable[str], notices: Iterable[str] = ()) -> None:
        for path in paths:
            if path not in self.result.conflicts:
                self.result.conflicts.append(path)
        for notice in notices:  # what the merge settled on its own (a note moved to two places)
            if notice not in self.result.repaired:
                self.result.repaired.append(notice)

    # -- step 5: move the branch and the working tree -------------------------------------

    def checkout(self, old: str, new: str) -> bool:
        """Move main and the working tree from `old` to `new`; False if an edit made meanwhile is in the way.

        The marker written first lets whoever takes the store next finish a
        move cut short by a kill (`recovery.finish_checkout`). One checkout
        worker, so git writes the files one at a time in path order, which
        recovery relies on to tell a file git had written from one it had
        not reached. A git that failed after it began writing (a full disk)
        is finished the same way at once, never committed as edits.
        """
        if old == new:
            return True
        recovery.start_checkout(self.store, old, new)
        proc = run_git(self.repo, "-c", "checkout.workers=1", "reset", "-q", "--keep", new, check=False)
        if proc.returncode != 0 and self.head() == old and recovery.checkout_started(self.store):
            recovery.finish_checkout(self.store, self.result.conflicts)  # raises (the marker stays) if still failing
            return self.head() == new
        recovery.clear_marker(self.store, recovery.CHECKOUT_MARKER)
        return proc.returncode == 0

    def integrate_all(self, sources: list[tuple[str, str, PeerReport | None]]) -> None:
        """Integrate every source and move the working tree; commit edits that raced us and retry."""
        for _attempt in range(3):
            old = self.head()
            head = old
            received: dict[str, int] = {}
            for name, tip, _report in sources:
                head, got = self.integrate(head, name, tip)
                received[name] = got
            if self.checkout(old, head):
                for name, _tip, report in sources:
                    if report is not None:
                        report.received += received.get(name, 0)
                    self.result.received += received.get(name, 0)
                return
            self.result.committed.extend(self.commit_local())
        raise AnamnesisError("files in memory/ kept changing during sync; run `anamnesis sync` again")

    # -- step 6: push -------------------------------------------------------------------

    def push(self, peer: Peer, report: PeerReport) -> None:
        """Push main to the peer without force; re-integrate and retry when it moved on.

        A ref there that stays locked (a lock file a killed git left) is not
        retried like a peer that moved on: the report names the file and
        what to do about it.
        """
        transport = transport_for(self.repo, peer)
        locked = 0
        for _attempt in range(MAX_PUSH_ATTEMPTS):
            head = self.head()
            tip = self.ref(refs.peer_main(peer.name))
            kind = self._kind(peer)
            pushed = self.ref(refs.pushed(peer.name))
            if (tip and self.is_ancestor(head, tip)) or (kind == "machine" and pushed == head):
                return  # the peer has everything already
            sent = self.count(head, "--not", *[r for r in (tip, pushed) if r])
            outcome = transport.push(peer, kind, self.machine, head)
            status, reason = outcome.status, outcome.failure
            if status == "ok":
                self._pushed(peer, head, outcome.to_main, sent, report)
                return
            if status == "locked":
                locked += 1
                if locked < LOCK_RETRIES:  # another push holds it for a moment; a leftover stays
                    time.sleep(0.5 * locked)
                    continue
                lock = reason.reason.rsplit(": ", 1)[-1].removesuffix(" exists")
                self._unreachable(peer, report, Failure(reason.reason, transport.lock_hint(peer, lock)), "rejected")
                return
            if status == "checked-out":
                self.peer_updates.setdefault(peer.name, {})["kind"] = "machine"
                continue  # a machine's store: push to its incoming ref instead
            if status == "rejected":
                # The peer moved on since we fetched: fetch, integrate, try again.
                try:
                    tip = self.fetch(peer, report)
                except GitError as exc:
                    self._unreachable(peer, report, _why(exc))
                    return
                if tip:
                    self.integrate_all([(peer.name, tip, report)])
                continue
            self._unreachable(peer, report, reason, status="rejected" if status == "refused" else "unreachable")
            return
        self._unreachable(peer, report, f"push still rejected after {MAX_PUSH_ATTEMPTS} attempts", "rejected")

    def _pushed(self, peer: Peer, head: str, to_main: bool, sent: int, report: PeerReport) -> None:
        run_git(self.repo, "update-ref", refs.pushed(peer.name), head)
        if to_main:  # a hub: its main is ours now
            run_git(self.repo, "update-ref", refs.peer_main(peer.name), head)
            self.peer_updates.setdefault(peer.name, {}).setdefault("kind", "hub")
        report.sent += sent
        self.result.sent += sent

    def _unreachable(
        self, peer: Peer, report: PeerReport, detail: str | Failure, status: PeerStatus = "unreachable"
    ) -> None:
        """Mark the peer skipped: the reason and hint (a fetch already put them in `report`) in the
        report, the log and the peer's state."""
        if isinstance(detail, Failure):
            report.reason, report.hint = detail.reason, detail.hint
        elif not report.reason or not detail.startswith(report.reason):
            report.reason, report.hint = detail, ""
        report.status = status
        report.detail = Failure(report.reason, report.hint).text
        self.peer_updates.setdefault(peer.name, {}).update(
            {"last_error": report.detail, "last_hint": report.hint, "last_error_at": now_iso()}
        )

    # -- the whole run ------------------------------------------------------------------

    def run(self, peers: list[Peer], push: bool) -> None:
        result = self.result
        result.committed = self.commit_local()
        reachable: list[tuple[Peer, PeerReport]] = []
        sources: list[tuple[str, str, PeerReport | None]] = []
        for peer in peers:
            report = PeerReport(peer.name, peer.url)
            result.peers.append(report)
            try:
                tip = self.fetch(peer, report)
            except GitError as exc:
                self._unreachable(peer, report, _why(exc))
                continue
            reachable.append((peer, report))
            if tip:
                sources.append((peer.name, tip, report))
        for ref, oid in self._incoming():
            sources.append((refs.short(ref), oid, None))
        sources.sort(key=lambda s: s[0])
        self.integrate_all(sources)
        for peer, report in reachable:
            if push:
                self.push(peer, report)
            if report.status == "skipped":
                report.status = "synced" if (report.sent or report.received) else "up to date"
                self.peer_updates.setdefault(peer.name, {})["last_ok"] = now_iso()

    def _incoming(self) -> list[tuple[str, str]]:
        out = git_out(self.repo, "for-each-ref", "--format=%(refname) %(objectname)", refs.INCOMING)
        return [tuple(line.split(" ", 1)) for line in out.splitlines() if line]  # type: ignore[misc]


def _why(exc: GitError) -> Failure | str:
    """Why a peer could not be fetched: the transport's reason and hint, or, for another git
    failure, git's last words without the 'git ... failed:' prefix."""
    if isinstance(exc, FetchFailed):
        return exc.failure
    return str(exc).split(" failed: ", 1)[-1]


def _select(store: Store, only: list[str] | None) -> list[Peer]:
    if only:
        return [get_peer(store, name) for name in only]
    return list_peers(store)


def sync(
    store: Store,
    *,
    peers: list[str] | None = None,
    push: bool = True,
    lock_timeout: float = 120.0,
) -> SyncResult:
    """Sync the store with its peers (or only `peers`); see the module docstring for the steps.

    Raises SyncRefused (exit 12) for a repo a person left mid-rebase/merge,
    LockTimeout when another writer held the store too long, GitError for
    local git failures. Unreachable peers do not raise: they are in the result.
    """
    store.require()
    started = time.perf_counter()
    result = SyncResult(machine=machine_id(store), started=now_iso())
    error: BaseException | None = None
    try:
        with store_lock(store, "sync", timeout=lock_timeout):
            killed = recovery.read_marker(store, recovery.RUNNING_MARKER)
            result.repaired = recovery.prepare(store, result.conflicts)
            flush_queued(store)  # session notes captured while memory/ could not be written go in now
            _mirror(store)  # mirrored sources (docs/import.md) go in before the commit; never fails the sync
            job = _Sync(store, result)
            result.head_before = job.head()
            base = _index_base(store, killed, result.head_before)
            recovery.write_marker(
                store, recovery.RUNNING_MARKER, {"started": result.started, "index_base": base or ""}
            )
            try:
                job.run(_select(store, peers), push)
            finally:
                job.merger.close()
                peers_mod.record(store, job.peer_updates)
                result.head_after = job.head()
                _refresh_index(store, result, base)
                recovery.clear_marker(store, recovery.RUNNING_MARKER)
    except BaseException as exc:
        error = exc
        raise
    finally:
        result.seconds = time.perf_counter() - started
        _log(store, result, error)
    return result


def _mirror(store: Store) -> None:
    """Import what changed in the mirrored sources (`anamnesis import ... --mirror`); logs, never raises."""
    try:
        # lazy: inside the try, so a broken importer never costs a sync
        from anamnesis.importers import mirror_all

        mirror_all(store)
    except Exception as exc:  # an importer's bug must never cost a sync
        logging.getLogger("anamnesis.importers").warning("mirroring failed: %s", exc)


def _index_base(store: Store, killed: dict[str, str] | None, head: str) -> str | None:
    """Where index updates must start from: here, or where a killed sync started (None: unknown)."""
    if killed is None:
        return head
    base = killed.get("index_base") or ""
    if base and run_git(store.memory, "cat-file", "-e", f"{base}^{{commit}}", check=False).returncode == 0:
        return base
    return None


def _refresh_index(store: Store, result: SyncResult, base: str | None) -> None:
    """Update the index from the paths that changed between `base` and the new HEAD.

    `base` is where this sync started, or, when the previous sync was killed
    before it could index, where that one started: its changes are indexed
    now, with whatever changed between there and where this sync started
    (writers index what they write, but a note one wrote meanwhile may have
    been moved or deleted by this sync). None (no record) falls back to a
    full size/mtime scan.
    """
    paths = changed_paths(store.memory, result.head_before, result.head_after)
    result.changed = [p for p in paths if p.endswith(".md")]
    todo: list[str] | None = None
    if base is not None:
        # Both legs, not base..after alone: a note written between the killed sync and this one
        # (by `new`, say) and gone again by now is in neither base nor after, but has a row.
        earlier = changed_paths(store.memory, base, result.head_before) if base != result.head_before else []
        todo = list(dict.fromkeys([*earlier, *paths, *result.committed]))
    started = time.perf_counter()
    with open_index(store) as index:
        if todo is not None:
            todo += _untracked_rows(store, index.paths())
        changed = index.refresh(todo).changed if todo is None or todo else 0
    result.index_seconds = time.perf_counter() - started
    if changed:
        start_background_update(store)  # vectors of what came in, without holding up the sync


def _untracked_rows(store: Store, indexed: list[str]) -> list[str]:
    """Indexed notes git does not track: a file a reader indexed before any commit had it (a
    note written by hand, a note moved by hand), and deleted or moved again since, is in no
    commit, so only this tells its row from a note's."""
    tracked = set(run_git_bytes(store.memory, "ls-files", "-z").stdout.decode("utf-8", "surrogateescape").split("\0"))
    return [p for p in indexed if p not in tracked]


def _log(store: Store, result: SyncResult, error: BaseException | None) -> None:
    entry: synclog.LogEntry = {
        "at": result.started,
        "machine": result.machine,
        "outcome": result.outcome if error is None else "failed",
        "exit_code": result.exit_code if error is None else getattr(error, "exit_code", 1),
        "committed": len(result.committed),
        "received": result.received,
        "sent": result.sent,
        "changed": len(result.changed),
        "conflicts": result.conflicts,
        "unreachable": [{"peer": p.name, "detail": p.detail} for p in result.unreachable],
        "repaired": result.repaired,
        "seconds": round(result.seconds, 3),
    }
    if error is not None:
        entry["error"] = str(error) or type(error).__name__
    try:
        synclog.append(store, entry)
    except OSError:
        pass  # a full disk must not turn a finished sync into a failure


# -- joining an existing memory ---------------------------------------------------------


def join(store: Store, url: str, name: str | None = None) -> SyncResult:
    """Make this store sync with `url`: a store with no notes takes the peer's history;
    one with notes merges them with the peer's, losing nothing. Then a normal sync.
    """
    store.require()
    name = name or name_from_url(url)
    try:
        previous: str | None = get_peer(store, name).url
    except PeerNotFound:
        previous = None
    peer, changed = add_peer(store, name, url)
    adopted: list[str] = []
    received = 0
    with store_lock(store, "join"):
        killed = recovery.read_marker(store, recovery.RUNNING_MARKER)
        recovery.prepare(store)
        result = SyncResult(machine=machine_id(store))
        job = _Sync(store, result)
        # Killed before its index update, the next sync indexes what this one moved.
        base = _index_base(store, killed, job.head())
        recovery.write_marker(store, recovery.RUNNING_MARKER, {"started": now_iso(), "index_base": base or ""})
        try:
            job.commit_local()
            try:
                tip = job.fetch(get_peer(store, peer.name), PeerReport(peer.name))
            except GitError as exc:
                if killed is None:
                    recovery.clear_marker(store, recovery.RUNNING_MARKER)  # nothing moved
                if changed:  # a mistyped URL must not stay behind as a peer every sync misses
                    if previous is None:
                        remove_peer(store, peer.name)
                    else:
                        add_peer(store, peer.name, previous)
                why = _why(exc)
                said = why.text if isinstance(why, Failure) else why
                raise AnamnesisError(f"cannot reach {url}: {said} (the peer was not saved)") from exc
            head = job.head()
            if tip and not job.is_ancestor(tip, head) and not _has_own_files(store, head):
                received = job.count(tip, f"^{head}")
                if not job.checkout(head, tip):
                    raise AnamnesisError("memory/ changed while joining; run the command again")
                adopted = [p for p in changed_paths(store.memory, head, tip) if p.endswith(".md")]
                with open_index(store) as index:
                    index.refresh()
            if killed is None:
                recovery.clear_marker(store, recovery.RUNNING_MARKER)  # else the sync below indexes from there
        finally:
            job.merger.close()
    result = sync(store)
    result.received += received
    result.changed = list(dict.fromkeys([*adopted, *result.changed]))
    return result


def _has_own_files(store: Store, head: str) -> bool:
    """Whether the store has anything besides the files `init` creates (.gitignore, .gitattributes)."""
    out = run_git_bytes(store.memory, "ls-tree", "-r", "-z", "--name-only", head).stdout.decode("utf-8", "replace")
    return any(p and p not in (".gitignore", ".gitattributes") for p in out.split("\0"))
