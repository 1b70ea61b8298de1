"""`anamnesis sync`: commit, integrate every peer (pull --rebase), push, update the index.

One plain function, `sync(store)`, used by the CLI, the MCP server, the web UI
and `watch`. Under the store lock it:

1. repairs what a killed sync left, or refuses a repo a person left
   mid-rebase/merge (`repair_or_refuse`);
2. commits local changes ("<machine>: sync: N notes changed"), except a note
   left half resolved (marker lines outside a complete block), which stays
   uncommitted in the working tree and is reported;
3. fetches every peer into refs/anamnesis/peers/<name>/*;
4. integrates each peer's main, and whatever other machines pushed into
   refs/anamnesis/incoming/*: when every peer is a hub and no machine pushes
   here, commits only this machine has and never gave away are replayed on
   top of the peer's (pull --rebase); otherwise, and for history already
   shared with someone, the two are merged, because a machine that has this
   one as its peer may already have taken our newest commits from our main,
   and rewriting them would duplicate them there. All of it is built with plumbing (`treemerge`), so
   a conflict becomes markers in the note, never a stopped rebase;
5. moves the branch and the working tree to the result in one step;
6. pushes, never forced: a bare hub gets our main (if the hub moved on
   meanwhile: fetch, integrate, push again); another machine's store, whose
   main is checked out, gets refs/anamnesis/incoming/<our machine>, which it
   integrates on its own next sync;
7. updates the index from the paths that changed between the old and new HEAD,
   and reports the notes among them that are in conflict now, wherever the
   conflict was recorded.

What was fetched from or pushed to anyone is "published" (every ref under
refs/anamnesis/ marks it; their names are in `refs`) and is never rewritten.

Fetching and pushing (steps 3 and 6) go through the peer's `Transport`
(`transport.py`: git for every URL today); this module decides what to
integrate, when to push again, and what a peer's answer means for the report.
"""

from __future__ import annotations

import errno
import itertools
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn

from anamnesis.base import refs
from anamnesis.base.errors import AnamnesisError, ExitCode, GitError, LocalFault
from anamnesis.base.fsutil import (
    NO_SPACE_WORDS,
    WriteProblem,
    atomic_write_bytes,
    folders_under,
    is_out_of_space,
    nearest_folder,
    no_space_error,
    unwritable_folders,
    unwritable_text,
    write_fix,
    write_problem,
)
from anamnesis.base.git import Failure, git_out, run_git, run_git_bytes
from anamnesis.base.lock import store_lock
from anamnesis.base.notes import front_matter_problem, id_in_name, is_note_path, now_iso, parse_note
from anamnesis.base.paths import Store
from anamnesis.base.repo import changed_paths
from anamnesis.base.settings import machine_id
from anamnesis.base.text import plural
from anamnesis.search import open_index, start_background_update
from anamnesis.store import (
    CHECKOUT_MARKER,
    RUNNING_MARKER,
    ConflictedNote,
    HeldNote,
    Side,
    SyncRefused,
    checkout_started,
    clear_marker,
    conflicted_at,
    finish_checkout,
    half_resolved,
    lay_over,
    read_marker,
    repair_or_refuse,
    start_checkout,
    write_marker,
)
from anamnesis.sync import peers as peers_mod
from anamnesis.sync import synclog
from anamnesis.sync.peers import (
    NoRepository,
    Peer,
    PeerKind,
    PeerNotFound,
    PeerState,
    add_peer,
    get_peer,
    list_peers,
    name_for,
    normalize_url,
    probe,
    remove_peer,
)
from anamnesis.sync.replaced import HeldAcrossCheckout, LateWrites
from anamnesis.sync.stamping import stamp_edits
from anamnesis.sync.transport import FetchFailed, transport_for
from anamnesis.sync.treemerge import TreeMerger, private_index, recorded_in, with_conflicts

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_MISCONFIGURED",
    "EXIT_REFUSED",
    "EXIT_SYNCED",
    "EXIT_UNREACHABLE",
    "IncomingReport",
    "PeerReport",
    "SyncRefused",
    "SyncResult",
    "join",
    "sync",
]

EXIT_SYNCED = ExitCode.OK
EXIT_CONFLICT = ExitCode.CONFLICT
EXIT_UNREACHABLE = ExitCode.UNREACHABLE
EXIT_REFUSED = ExitCode.REFUSED  # SyncRefused
EXIT_MISCONFIGURED = ExitCode.PEER_MISCONFIGURED
MAX_PUSH_ATTEMPTS = 5
LOCK_RETRIES = 3  # pushes tried against a locked ref before reporting the lock file

PeerStatus = Literal["synced", "up to date", "unreachable", "rejected", "misconfigured", "skipped"]
"""unreachable: not reached now, retried next sync; rejected: it refused the push (a lock, a peer that
kept moving on); misconfigured: its answer says it will never work as set up (git.FailureKind)."""
Outcome = Literal[
    "synced",
    "conflict recorded",
    "conflict received",
    "note held back",
    "some peers unreachable",
    "no peer reachable",
    "a peer is misconfigured",
]
HELD_MARKER = "sync-held-edits.json"  # a held-back edit set aside while the files move (see _Sync.checkout)

# What a fetch's git says when it could not write here (a fetch writes nothing at the peer).
# git's stderr is all it tells of that, so these words are read by necessity; our own errors
# are told apart by class and fields, never by their text.
_LOCAL_WRITE_WORDS = (
    "failed to write object",
    "insufficient permission for adding an object",
    "unable to create temporary",
    "Read-only file system",
    "unpack-objects failed",
    "index-pack failed",
    *NO_SPACE_WORDS,
)
# What a checkout's git says when the file system, not an edit in the way, stopped it.
_REFUSED_WORDS = ("Permission denied", "Read-only file system", "Operation not permitted")
# What was kept when a sync stopped for a fault of this machine, by the step it was in.
_KEPT = {
    "starting": "nothing was changed",
    "committing local changes": "your edits are still in memory/, not committed yet; nothing was lost",
    "fetching": "your notes are committed in memory/ and nothing was lost; nothing new was brought in",
    "integrating": "your notes are committed in memory/ and nothing was lost; nothing new was brought in",
    "pushing": "your notes are committed and what the peers sent was brought in; not every peer has "
    "your latest changes yet",
    "finishing": "memory/ is synced; the search index may be behind and catches up by itself once "
    "there is room",
}


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
class IncomingReport:
    """What one machine pushed into this store (refs/anamnesis/incoming/...) and this sync took in."""

    machine: str
    ref: str  # its short name: incoming/<machine>[-<commit>]
    received: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "ref": self.ref, "received": self.received}


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
    # The notes in conflict after this sync whose conflict it recorded or brought in (a commit it
    # received recorded it), with what their blocks hold (`_report_conflicts`); `recorded` are the
    # ones this machine's merges wrote blocks into during the run (maybe settled again since).
    conflicts: list[str] = field(default_factory=list)
    conflict_notes: list[ConflictedNote] = field(default_factory=list)
    recorded: list[str] = field(default_factory=list)
    held_back: list[HeldNote] = field(default_factory=list)  # half-resolved notes left uncommitted
    left_out: list[str] = field(default_factory=list)  # symbolic links in memory/: never committed
    # notes this sync committed whose front matter is broken (carried as written; `doctor` says how to fix)
    malformed: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # every note in conflict after it, old ones too
    peers: list[PeerReport] = field(default_factory=list)
    incoming: list[IncomingReport] = field(default_factory=list)  # what machines that push here sent
    repaired: list[str] = field(default_factory=list)
    imported: list[dict[str, Any]] = field(default_factory=list)  # what the mirrored sources brought in
    index_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def local_changes(self) -> int:
        """How many changes of this machine it committed, a note moved (its old path gone, its new
        one added) counted once."""
        return len({id_in_name(path) or path for path in self.committed})

    @property
    def unreachable(self) -> list[PeerReport]:
        """Every peer this sync could not sync with (unreachable, rejected or misconfigured)."""
        return [p for p in self.peers if p.status in ("unreachable", "rejected", "misconfigured")]

    @property
    def misconfigured(self) -> list[PeerReport]:
        """Peers whose answer says they will never work as set up: a person must act."""
        return [p for p in self.peers if p.status == "misconfigured"]

    @property
    def exit_code(self) -> ExitCode:
        """0 synced; 14 a peer is misconfigured (a failure for the timer at once); 10 a note is in
        conflict (recorded or brought in) or held back; 11 some peer was skipped for now. The first
        that applies wins."""
        if self.misconfigured:
            return EXIT_MISCONFIGURED
        if self.conflicts or self.held_back:
            return EXIT_CONFLICT
        if self.unreachable:
            return EXIT_UNREACHABLE
        return EXIT_SYNCED

    @property
    def outcome(self) -> Outcome:
        if self.misconfigured:
            return "a peer is misconfigured"
        if self.conflicts:
            return "conflict recorded" if set(self.recorded) & set(self.conflicts) else "conflict received"
        if self.held_back:
            return "note held back"
        if self.unreachable:
            return "no peer reachable" if len(self.unreachable) == len(self.peers) else "some peers unreachable"
        return "synced"

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
            "conflict_notes": [
                {**c.to_dict(), "recorded_here": c.path in self.recorded} for c in self.conflict_notes
            ],
            "held_back": [h.to_dict() for h in self.held_back],
            "left_out": self.left_out,
            "malformed": self.malformed,
            "unresolved": self.unresolved,
            "peers": [p.to_dict() for p in self.peers],
            "incoming": [i.to_dict() for i in self.incoming],
            "repaired": self.repaired,
            "imported": self.imported,
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
        self.stage = "committing local changes"  # a key of _KEPT: what a fault here leaves behind
        self.held: dict[str, HeldNote] = {}  # half-resolved notes left out of the commit
        self.unrecorded = set(result.recorded)  # blocks recovery wrote into files, not committed yet
        self.late = LateWrites([], [])  # what the last checkout laid back (`HeldAcrossCheckout`)
        # Whether our own new commits may be replayed (`integrate`): only when no machine takes from
        # this store, set in `run`.
        self.may_replay = False

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
        """Commit every change in the working tree, hand-edited notes stamped first; the paths committed.

        A file whose edit leaves conflict marker lines outside a complete block
        (a resolution done half way) is left out, in the working tree as it is,
        and reported, until it is whole again (`conflicts.half_resolved`).
        """
        status = run_git_bytes(self.repo, "status", "--porcelain", "-z", "--untracked-files=all").stdout
        if not status.strip(b"\0"):
            return []
        stamp_edits(self.repo, self.machine)  # hand edits say when and where they were made
        run_git(self.repo, "add", "-A")
        links = self._staged_links()
        if links:  # a symlink is no note (it may point anywhere): kept here, never carried to peers
            run_git(self.repo, "--literal-pathspecs", "reset", "-q", "--", *links)
            self.result.left_out.extend(p for p in links if p not in self.result.left_out)
        out = run_git_bytes(self.repo, "diff", "--cached", "--name-only", "-z", "--no-renames").stdout
        paths = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
        held = half_resolved(self.store, paths)
        if held:
            run_git(self.repo, "--literal-pathspecs", "reset", "-q", "--", *[h.path for h in held])
            self.held.update((h.path, h) for h in held)
            paths = [p for p in paths if p not in self.held]
        if not paths:
            return []
        notes = sum(1 for p in paths if is_note_path(p)) or len(paths)
        message = f"{self.machine}: sync: {plural(notes, 'note')} changed"
        blocks = [p for p in paths if p in self.unrecorded]
        if blocks:  # so that the machines this commit reaches announce the conflict too
            message = with_conflicts(message, blocks)
            self.unrecorded -= set(blocks)
        run_git(self.repo, "commit", "-q", "--no-verify", "-m", message)
        self._note_malformed(paths)
        return paths

    def _note_malformed(self, paths: list[str]) -> None:
        """Name the committed notes whose front matter is broken: a typo in a hand edit travels to
        every machine as written, and the person should hear of it from the sync that sent it."""
        for path in paths:
            if not is_note_path(path):
                continue
            try:
                text = (self.repo / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # deleted: nothing to read
            problem = front_matter_problem(parse_note(text, path))
            if problem is not None:
                self.result.malformed[path] = str(problem)

    def _staged_links(self) -> list[str]:
        """The paths `git add` staged as symbolic links (mode 120000)."""
        out = run_git_bytes(self.repo, "diff", "--cached", "--raw", "-z", "--no-renames").stdout
        fields = out.decode("utf-8", "surrogateescape").split("\0")
        # --raw -z: ":old-mode new-mode old-sha new-sha status" then the path, each ended by NUL
        return [path for meta, path in zip(fields[::2], fields[1::2], strict=False) if meta.split(" ")[1:2] == ["120000"]]

    # -- step 3: fetch ----------------------------------------------------------------

    def fetch(self, peer: Peer, report: PeerReport) -> str | None:
        """Fetch a peer's branches through its transport; its main, or None (empty peer).

        Raises FetchFailed if unreachable, with ssh's (or git's) own reason
        and what to do, which also go into `report`.
        """
        try:
            return transport_for(self.repo, peer).fetch(peer)
        except FetchFailed as exc:
            local = self.local_fault(f"fetching from {peer.name}", exc.said)
            if local is not None:  # our disk or our permissions: no fault of the peer's
                raise local from None
            report.reason, report.hint = exc.failure.reason, exc.failure.hint
            raise

    # -- faults of this machine, never blamed on a peer ---------------------------------------

    def local_fault(self, doing: str, said: str = "") -> AnamnesisError | None:
        """The error to stop with when this machine cannot write its store, else None.

        Found by writing where a fetch writes (access bits lie to root and
        know nothing of a read-only mount), and in `said`, what a fetch's git
        printed: a fetch writes nothing at the peer, so its words of a failed
        write or a full disk are about this machine.
        """
        kept = _KEPT[self.stage]
        wrote_here = any(words in said for words in _LOCAL_WRITE_WORDS)
        git_dir = self.repo / ".git"
        problems = [(f, p) for f in (git_dir / "objects", git_dir) if (p := write_problem(f))]
        # where a fetch records what it brought (a folder a `sudo` run left to root, say)
        problems += unwritable_folders(
            folder for top in (git_dir / "refs", git_dir / "logs") for folder in folders_under(top)
        )
        if any(problem.kind != "full" for _folder, problem in problems):
            return self._cannot_write([fp for fp in problems if fp[1].kind != "full"], doing)
        if problems or (wrote_here and is_out_of_space(GitError(said), self.store.home)):
            return no_space_error(self.store.home, doing, _said_line(said) or "a write failed", kept)
        if wrote_here:
            return LocalFault(
                f"this machine could not write its own store ({doing}: {_said_line(said)}); {kept}"
                f" — fix: check the owner and permissions of {self.repo / '.git'}, then run `anamnesis sync`"
            )
        return None

    def _cannot_write(self, problems: list[tuple[Path, WriteProblem]], doing: str) -> LocalFault:
        """The error for folders of the store that cannot be written; with one fix for every such
        folder in it, not only those this step needed, so one command puts it all right."""
        named = {folder for folder, _problem in problems}
        problems = problems + [fp for fp in unwritable_folders(folders_under(self.repo)) if fp[0] not in named]
        what, fix = unwritable_text(problems, self.repo)
        return LocalFault(
            f"this machine cannot write its own store: {what} ({doing}); {_KEPT[self.stage]}"
            f" — fix: {fix}, then run `anamnesis sync`"
        )

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
        local = self._unpublished(head, tip) if self.may_replay else None
        if local is None and self.merger.tree_of(head) == self.merger.tree_of(tip):
            return self.merger.join(head, tip), received  # the same notes: the same join commit everywhere
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
            if path not in self.result.recorded:
                self.result.recorded.append(path)
        for notice in notices:  # what the merge settled on its own (a note moved to two places)
            if notice not in self.result.repaired:
                self.result.repaired.append(notice)

    # -- step 5: move the branch and the working tree -------------------------------------

    def checkout(self, old: str, new: str) -> bool:
        """Move main and the working tree from `old` to `new`; False if an edit made meanwhile is in the way.

        The marker written first lets whoever takes the store next finish a
        move cut short by a kill (`finish_checkout`). One checkout
        worker, so git writes the files one at a time in path order, which
        recovery relies on to tell a file git had written from one it had
        not reached. A git that failed after it began writing (a full disk)
        is finished the same way at once, never committed as edits.
        """
        self.late = LateWrites([], [])
        if old == new:
            return True
        changed = changed_paths(self.repo, old, new)
        blocked = unwritable_folders(_folders_written(self.repo, changed))
        if blocked:  # found before a file is touched: main stays where it was, nothing to undo
            raise self._cannot_write(blocked, "bringing in the changes")
        moved = set(changed) & set(self.held) if self.held else set()
        if moved:
            set_aside(self.store, old, sorted(moved))  # a held-back edit of a note that changes here
        with HeldAcrossCheckout(self.repo, changed) as held:
            start_checkout(self.store, old, new)
            proc = run_git(self.repo, "-c", "checkout.workers=1", "reset", "-q", "--keep", new, check=False)
            if proc.returncode != 0 and self.head() == old and checkout_started(self.store):
                finish_checkout(self.store, self.result.recorded)  # raises (the marker stays) if still failing
                put_back(self.store)
                self.late = held.keep_late_writes(self.machine)
                return self.head() == new
            clear_marker(self.store, CHECKOUT_MARKER)
            put_back(self.store)
            self.late = held.keep_late_writes(self.machine)
        said = proc.stderr if proc.returncode != 0 else ""
        refused = next((line.strip() for line in said.splitlines() if any(w in line for w in _REFUSED_WORDS)), "")
        if refused:  # not an edit in the way (retrying would not help): say what git could not write
            raise LocalFault(
                f"this machine cannot write its own store (bringing in the changes: {refused}); "
                f"{_KEPT[self.stage]} — fix: check the owner and permissions of the folders in {self.repo}, "
                "then run `anamnesis sync`"
            )
        return proc.returncode == 0

    def integrate_all(self, sources: list[tuple[str, str, PeerReport | IncomingReport]]) -> None:
        """Integrate every source and move the working tree; commit edits that raced us and retry."""
        for _attempt in range(3):
            old = self.head()
            head = old
            received: dict[str, int] = {}
            for name, tip, _report in sources:
                head, got = self.integrate(head, name, tip)
                received[name] = got
            if self.checkout(old, head):
                if self.late.kept:  # writes that raced the checkout: sent on now, with any block they made
                    self._conflicts(self.late.blocks)
                    self.unrecorded.update(self.late.blocks)
                    self.result.committed.extend(self.commit_local())
                for name, _tip, report in sources:
                    report.received += received.get(name, 0)
                    self.result.received += received.get(name, 0)
                return
            self.result.committed.extend(self.commit_local())
        raise AnamnesisError("files in memory/ kept changing during sync; run `anamnesis sync` again")

    # -- step 6: push -------------------------------------------------------------------

    def push(self, peer: Peer, report: PeerReport) -> None:
        """Push main to the peer without force; re-integrate and retry when it moved on.

        A ref there that stays locked is not retried like a peer that moved
        on: the report names the file and what to do about it. (One a killed
        git left in a peer on a local path is removed by the transport.)
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
            if outcome.cleared:
                self.result.repaired.append(
                    f"removed {outcome.cleared}, a lock file a killed git had left in peer {peer.name}"
                )
            if status == "ok":
                self._pushed(peer, head, outcome.to_main, sent, report)
                return
            if status == "locked":
                locked += 1
                if locked < LOCK_RETRIES:  # another push holds it for a moment; a leftover stays
                    time.sleep(0.5 * locked)
                    continue
                hint = transport.lock_hint(peer, reason.lock)
                self._unreachable(peer, report, Failure(reason.reason, hint), "rejected")
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
        self.peer_updates.setdefault(peer.name, {})["last_push"] = now_iso()  # see peers.untaken_pushes
        if to_main:  # a hub: its main is ours now
            run_git(self.repo, "update-ref", refs.peer_main(peer.name), head)
            self.peer_updates.setdefault(peer.name, {}).setdefault("kind", "hub")
        report.sent += sent
        self.result.sent += sent

    def _unreachable(
        self, peer: Peer, report: PeerReport, detail: str | Failure, status: PeerStatus = "unreachable"
    ) -> None:
        """Mark the peer skipped: the reason and hint (a fetch already put them in `report`) in the
        report, the log and the peer's state; "misconfigured" when its answer says so."""
        if isinstance(detail, Failure):
            report.reason, report.hint = detail.reason, detail.hint
            if detail.kind == "misconfigured":
                status = "misconfigured"
        elif not report.reason or not detail.startswith(report.reason):
            report.reason, report.hint = detail, ""
        report.status = status
        report.detail = Failure(report.reason, report.hint).text
        self.peer_updates.setdefault(peer.name, {}).update(
            {
                "last_error": report.detail,
                "last_hint": report.hint,
                "last_error_at": now_iso(),
                "last_error_kind": "misconfigured" if status == "misconfigured" else "outage",
            }
        )

    # -- the whole run ------------------------------------------------------------------

    def run(self, peers: list[Peer], push: bool) -> None:
        result = self.result
        result.committed = self.commit_local()
        self.stage = "fetching"
        reachable: list[tuple[Peer, PeerReport]] = []
        sources: list[tuple[str, str, PeerReport | IncomingReport]] = []
        if peers:
            local = self.local_fault("before fetching")  # a read-only store: no peer is asked, none blamed
            if local is not None:
                raise local
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
        pushed_here = self._incoming()
        for ref, oid in pushed_here:  # what machines that have us as their peer pushed here
            incoming = IncomingReport(refs.incoming_machine(ref), refs.short(ref))
            result.incoming.append(incoming)
            sources.append((incoming.ref, oid, incoming))
        sources.sort(key=lambda s: s[0])
        # A machine that has this one as its peer fetches our main whenever it likes, our newest
        # commits with it: replayed, they would then exist twice (a mesh of watches got conflicts
        # of a machine with itself). Such a machine also pushes here (`incoming`). With only hubs
        # as peers and no one pushing here, no one sees a commit before our push: replay is safe.
        self.may_replay = bool(peers) and not pushed_here and all(self._kind(peer) == "hub" for peer in peers)
        self.stage = "integrating"
        self.integrate_all(sources)
        self.stage = "pushing"
        for _pass in range(MAX_PUSH_ATTEMPTS if push else 0):
            # A peer that moved on while we pushed to it is integrated before the push is tried
            # again (`push`), which moves our head: the peers pushed before it must get that too.
            before = self.head()
            for peer, report in reachable:
                if report.status == "skipped":  # not failed on an earlier pass
                    self.push(peer, report)
            if self.head() == before:
                break
        for peer, report in reachable:
            if report.status == "skipped":
                report.status = "synced" if (report.sent or report.received) else "up to date"
                self.peer_updates.setdefault(peer.name, {})["last_ok"] = now_iso()

    def _incoming(self) -> list[tuple[str, str]]:
        out = git_out(self.repo, "for-each-ref", "--format=%(refname) %(objectname)", refs.INCOMING)
        return [tuple(line.split(" ", 1)) for line in out.splitlines() if line]  # type: ignore[misc]


def _folders_written(repo: Path, paths: Iterable[str]) -> list[Path]:
    """The folders a checkout writes in to change `paths`: each one's folder, or the nearest
    folder above it that exists (where git makes the missing ones)."""
    return sorted({nearest_folder((repo / path).parent, repo) for path in paths})


def _said_line(said: str) -> str:
    """The line of git's output that says what failed here."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    return next((line for line in lines if any(w in line for w in _LOCAL_WRITE_WORDS)), lines[0] if lines else "")


def _local_error(store: Store, job: _Sync | None, exc: BaseException) -> AnamnesisError | None:
    """`exc` as the fault of this machine it is (a full disk, a store it cannot write), else None."""
    if isinstance(exc, AnamnesisError) and not isinstance(exc, GitError):
        return None  # already says what it is (a full disk caught by a writer, a lock, a refusal)
    if not isinstance(exc, (GitError, OSError, sqlite3.Error)):
        return None
    stage = job.stage if job is not None else "starting"
    doing = {"starting": "starting the sync", "finishing": "updating the search index"}.get(stage, stage)
    if is_out_of_space(exc, store.home):
        return no_space_error(store.home, doing, exc, _KEPT[stage])
    if job is not None:
        found = job.local_fault(doing, str(exc) if isinstance(exc, GitError) else "")
        if found is not None:
            return found
    if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        where = exc.filename or store.home
        return LocalFault(
            f"this machine cannot write its own store: {where}: {exc.strerror} ({doing}); {_KEPT[stage]}"
            f" — fix: {write_fix(Path(where), 'read-only' if exc.errno == errno.EROFS else 'denied')}, then run "
            "`anamnesis sync`"
        )
    return None


def _why(exc: GitError) -> Failure | str:
    """Why a peer could not be fetched: the transport's reason and hint, or, for another git
    failure, git's own last words."""
    if isinstance(exc, FetchFailed):
        return exc.failure
    return exc.reason


def _select(store: Store, only: list[str] | None) -> list[Peer]:
    if only:
        return [get_peer(store, name) for name in only]
    return list_peers(store)


Intake = Callable[[Store], list[dict[str, Any]]]
"""Work another part of the program has waiting to go into memory/ before a sync commits: session
notes captured while memory/ could not be written, sources mirrored into the store. It runs
under the store lock and writes through the store; what it returns (one dict a thing brought
in) is reported as `SyncResult.imported`. It must not raise for its own failures."""


def sync(
    store: Store,
    *,
    peers: list[str] | None = None,
    push: bool = True,
    lock_timeout: float = 120.0,
    intake: Sequence[Intake] = (),
) -> SyncResult:
    """Sync the store with its peers (or only `peers`); see the module docstring for the steps.

    `intake` is run in order under the sync's lock, after the repair and
    before anything is committed (see `Intake`); the program passes capture's
    queued notes and the mirrored sources (app.syncing), so the engine itself
    knows nothing of agents or importers.

    Raises SyncRefused (exit 12) for a repo a person left mid-rebase/merge,
    LockTimeout when another writer held the store too long, DiskFull (8) or
    LocalFault (9) when this machine cannot write its store (never blamed on a
    peer), GitError for other local git failures. Peers that cannot be synced
    with do not raise: they are in the result.
    """
    store.require()
    started = time.perf_counter()
    result = SyncResult(machine=machine_id(store), started=now_iso())
    error: BaseException | None = None
    job: _Sync | None = None
    try:
        with store_lock(store, "sync", timeout=lock_timeout):
            killed = read_marker(store, RUNNING_MARKER)
            result.repaired = repair_or_refuse(store, result.recorded)
            put_back(store)  # a held-back edit a killed sync had set aside
            for take_in in intake:  # what other parts of the program have waiting goes in first
                result.imported += take_in(store)
            job = _Sync(store, result)
            result.head_before = job.head()
            base = _index_base(store, killed, result.head_before)
            write_marker(
                store, RUNNING_MARKER, {"started": result.started, "index_base": base or ""}
            )
            try:
                job.run(_select(store, peers), push)
                job.stage = "finishing"
            finally:
                job.merger.close()
                peers_mod.record(store, job.peer_updates)
                result.head_after = job.head()
                # as the files are now: a held edit laid over an incoming change has its leftovers elsewhere
                result.held_back = half_resolved(store, sorted(job.held)) if job.held else []
                _refresh_index(store, result, base)
                _report_conflicts(store, result)
                clear_marker(store, RUNNING_MARKER)
    except BaseException as exc:
        local = _local_error(store, job, exc)  # a full disk or a store we cannot write: say so, blame no peer
        error = local or exc
        if local is not None:
            raise local from exc
        raise
    finally:
        result.seconds = time.perf_counter() - started
        _log(store, result, error)
    return result


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
    result.changed = [p for p in paths if is_note_path(p)]
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
            # a note in conflict the person made whole again by hand has nothing to commit when it is
            # now what HEAD holds: look at it again, so it is not called in conflict from then on
            todo = list(dict.fromkeys([*todo, *(hit.path for hit in index.conflicted())]))
        changed = index.refresh(todo).changed if todo is None or todo else 0
        result.unresolved = sorted(hit.path for hit in index.conflicted())
    result.index_seconds = time.perf_counter() - started
    if changed:
        start_background_update(store)  # vectors of what came in, without holding up the sync


def _report_conflicts(store: Store, result: SyncResult) -> None:
    """Fill `result.conflicts`: the notes in conflict at the new HEAD whose conflict this sync
    recorded, or a commit it brought in recorded (their messages name them: `recorded_in`).
    A conflict recorded on another machine is thus reported on every machine whose sync brings
    it in; one recorded and settled again within the same sync is not, nor is a note that only
    quotes conflict markers (a note about git), nor one that was in conflict already."""
    if not result.head_after:
        return
    touched = [*result.recorded, *_recorded_between(store, result.head_before, result.head_after)]
    result.conflict_notes = conflicted_at(store, result.head_after, touched)
    result.conflicts = [c.path for c in result.conflict_notes]


def _recorded_between(store: Store, old: str | None, new: str) -> list[str]:
    """The paths the commits of `new` that `old` lacks say they recorded conflicts in."""
    if old == new:
        return []
    revs = [new, "--not", old] if old else [new]
    messages = run_git_bytes(store.memory, "log", "-z", "--format=%B", *revs).stdout.decode("utf-8", "replace")
    return list(dict.fromkeys(p for m in messages.split("\0") for p in recorded_in(m)))


def set_aside(store: Store, old: str, paths: list[str]) -> None:
    """Before the files move: record each held-back edit of `paths` (as a git blob, with the
    committed version it was made on) and put that version back, so the move can go ahead;
    `put_back` then lays the edit over the incoming version. The record is written first, so a
    sync killed in between loses nothing: the next one puts the edits back."""
    record: dict[str, str] = {}
    for path in paths:
        edit = git_out(store.memory, "hash-object", "-w", "--no-filters", "--", path)
        base = run_git(store.memory, "rev-parse", "--verify", "-q", f"{old}:{path}", check=False).stdout.strip()
        record[path] = f"{base or '-'} {edit}"
    write_marker(store, HELD_MARKER, record)
    for path in paths:
        base, _edit = record[path].split(" ")
        target = store.memory / path
        if base == "-":
            target.unlink(missing_ok=True)
        else:
            atomic_write_bytes(target, run_git_bytes(store.memory, "cat-file", "blob", base).stdout)
    run_git(store.memory, "update-index", "-q", "--refresh", check=False)  # the files match HEAD again


def put_back(store: Store) -> None:
    """Lay the held-back edits `set_aside` recorded over what the files hold now (the incoming
    version): a three-way merge on the version the edit was made on. The edit stays uncommitted."""
    record = read_marker(store, HELD_MARKER)
    if record is None:
        return
    me = machine_id(store)
    for path, oids in sorted(record.items()):
        if path == "pid" or " " not in oids:
            continue
        base, edit = oids.split(" ", 1)
        edit_text = _blob_text(store, edit)
        target = store.memory / path
        try:
            now: str | None = target.read_text(encoding="utf-8", errors="surrogateescape")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            now = None
        base_text = None if base == "-" else _blob_text(store, base)
        if now is None or now == base_text:
            text = edit_text  # deleted elsewhere (an edit beats a deletion), or not moved after all
        else:
            text = lay_over(path, base_text, Side(f"{me} (not committed)", edit_text), Side("incoming", now))
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, text.encode("utf-8", "surrogateescape"))
    clear_marker(store, HELD_MARKER)


def _blob_text(store: Store, oid: str) -> str:
    return run_git_bytes(store.memory, "cat-file", "blob", oid).stdout.decode("utf-8", "surrogateescape")


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
        "held_back": [h.path for h in result.held_back],
        "unreachable": [{"peer": p.name, "detail": p.detail, "status": p.status} for p in result.unreachable],
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
    name = name or name_for(store, url)
    try:
        previous: str | None = get_peer(store, name).url
    except PeerNotFound:
        previous = None
    if previous is not None and previous != normalize_url(url):
        # Re-pointing a peer sets aside what sync knew of the old URL: only for a URL that answers,
        # so a typo leaves the peer that works as it was.
        failure = probe(url, repo=store.memory)
        if failure is not None:
            _cannot_join(url, failure, f"the peer was not changed: {name!r} still syncs with {previous}")
    peer, changed = add_peer(store, name, url)
    adopted: list[str] = []
    adopted_from: str | None = None
    received = 0
    with store_lock(store, "join"):
        killed = read_marker(store, RUNNING_MARKER)
        repair_or_refuse(store)
        result = SyncResult(machine=machine_id(store))
        job = _Sync(store, result)
        # Killed before its index update, the next sync indexes what this one moved.
        base = _index_base(store, killed, job.head())
        write_marker(store, RUNNING_MARKER, {"started": now_iso(), "index_base": base or ""})
        try:
            job.commit_local()
            try:
                tip = job.fetch(get_peer(store, peer.name), PeerReport(peer.name))
            except GitError as exc:
                if killed is None:
                    clear_marker(store, RUNNING_MARKER)  # nothing moved
                if changed:  # a mistyped URL must not stay behind as a peer every sync misses
                    if previous is None:
                        remove_peer(store, peer.name)
                    else:
                        add_peer(store, peer.name, previous)
                kept = "the peer was not saved" if previous is None else f"{name!r} still syncs with {previous}"
                _cannot_join(url, _why(exc), kept, cause=exc)
            head = job.head()
            if tip and not job.is_ancestor(tip, head) and not _has_own_files(store, head):
                received = job.count(tip, f"^{head}")
                if not job.checkout(head, tip):
                    raise AnamnesisError("memory/ changed while joining; run the command again")
                adopted = [p for p in changed_paths(store.memory, head, tip) if is_note_path(p)]
                adopted_from = head
                with open_index(store) as index:
                    index.refresh()
            if killed is None:
                clear_marker(store, RUNNING_MARKER)  # else the sync below indexes from there
        finally:
            job.merger.close()
    result = sync(store)
    result.received += received
    result.changed = list(dict.fromkeys([*adopted, *result.changed]))
    if adopted and result.head_after:  # a note in conflict among those taken as they were is news too
        taken = _recorded_between(store, adopted_from, result.head_after)
        found = {c.path: c for c in [*conflicted_at(store, result.head_after, taken), *result.conflict_notes]}
        result.conflict_notes = [found[p] for p in sorted(found)]
        result.conflicts = sorted(found)
    return result


def _cannot_join(url: str, why: Failure | str, kept: str, cause: BaseException | None = None) -> NoReturn:
    """Stop a join whose peer did not answer, with sync's exit code for the kind of failure."""
    said = why.text if isinstance(why, Failure) else why
    # an address that can never work (no repository there, not a URL): `init` asks for the right one
    wrong_address = isinstance(why, Failure) and (why.no_repository or why.bad_url)
    failed = (NoRepository if wrong_address else AnamnesisError)(f"cannot join {url}: {said} ({kept})")
    if isinstance(why, Failure):  # as sync would exit: 14 a setting that never works, 11 an outage
        failed.exit_code = EXIT_MISCONFIGURED if why.kind == "misconfigured" else EXIT_UNREACHABLE
    raise failed from cause


def _has_own_files(store: Store, head: str) -> bool:
    """Whether the store has anything besides the files `init` creates (.gitignore, .gitattributes)."""
    out = run_git_bytes(store.memory, "ls-tree", "-r", "-z", "--name-only", head).stdout.decode("utf-8", "replace")
    return any(p and p not in (".gitignore", ".gitattributes") for p in out.split("\0"))
